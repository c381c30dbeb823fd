"""A Git repository's files at a branch, by commit: Markdown, text and code as text, PDFs through the parsers.

The branch's commit is asked for first (``git ls-remote``): the commit the last run read means nothing changed, and
nothing is fetched. Otherwise the branch's tip is fetched (``--depth 1``, no tags, no submodules) into a temporary
directory, and each file is versioned by its blob's id, so only files whose content changed are read. Symlinks and
submodules are listed by Git as what they are and never followed; a file past the size limit is a failed item.
Only ``https://``, ``http://`` and ``git://`` URLs are read, their host checked by the egress guard first; Git asks
for no password (``GIT_TERMINAL_PROMPT=0``) and follows no redirect. Over HTTP, ``username`` and ``token`` (a
credential: write-only) are sent as basic auth, given to Git in its environment.

Usage::

    Git().items(GitConfig(url="https://git.example.org/handbook.git", branch="main"), ctx)
"""

from __future__ import annotations

import base64
import os
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import PurePosixPath
from typing import ClassVar
from urllib.parse import urlsplit

from pydantic import Field, SecretStr, field_validator

from agentsearch.pipeline.platform.egress import EgressGuard, EgressRefused
from agentsearch.pipeline.sources.kinds.base import Content, Context, Item, ListingFailed, SourceConfig

TEXT_SUFFIXES = frozenset({
    ".md", ".markdown", ".rst", ".txt", ".adoc", ".org", ".py", ".js", ".ts", ".go", ".rs", ".java", ".c", ".h",
    ".cpp", ".hpp", ".cs", ".rb", ".php", ".sh", ".sql", ".yaml", ".yml", ".toml", ".json", ".css", ".kt", ".swift"})
FILE_SUFFIXES = frozenset({".pdf", ".html", ".htm", ".docx", ".pptx", ".xlsx", ".csv"})
SCHEMES = {"https": 443, "http": 80, "git": 9418}
# Only these transports, whatever the URL says (no file://, ssh, ext::), and no redirect to another host.
GIT_OPTIONS = ["-c", "protocol.allow=never", "-c", "protocol.https.allow=always", "-c", "protocol.http.allow=always",
               "-c", "protocol.git.allow=always", "-c", "http.followRedirects=false", "-c", "core.symlinks=false"]


class GitConfig(SourceConfig):
    url: str = Field(description="The repository (https://, http:// or git://).", max_length=2000)
    branch: str = Field("main", min_length=1, max_length=200, pattern=r"^[A-Za-z0-9._/-]+$")
    username: str | None = Field(None, max_length=200, description="The user an HTTP server asks for.")
    token: SecretStr | None = Field(None, description="Its password or access token (write-only).")

    @field_validator("url")
    @classmethod
    def _scheme(cls, value: str) -> str:
        parts = urlsplit(value)
        if parts.scheme not in SCHEMES or not parts.hostname:
            raise ValueError("url must be an https://, http:// or git:// URL with a host")
        return value


class Git:
    name: ClassVar[str] = "git"
    config_model: ClassVar[type[SourceConfig]] = GitConfig
    keeps_missing: ClassVar[bool] = False

    def items(self, config: GitConfig, ctx: Context) -> Iterator[Item]:
        parts = urlsplit(config.url)
        try:
            EgressGuard(ctx.fetcher.policy).addresses(parts.hostname or "", parts.port or SCHEMES[parts.scheme])
        except (EgressRefused, OSError) as exc:
            raise ListingFailed(str(exc)) from exc
        if config.token is not None and parts.scheme in ("http", "https"):
            # Given to Git in its environment, never on its command line (where any user's ps would read it).
            pair = f"{config.username or 'git'}:{config.token.get_secret_value()}".encode()
            ctx.credentials["git_env"] = {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "http.extraHeader",
                               "GIT_CONFIG_VALUE_0": f"Authorization: Basic {base64.b64encode(pair).decode()}"}
        commit = self._tip(config, ctx)
        if commit == ctx.cursor.get("commit"):
            for key, previous in ctx.previous.items():
                yield Item(key, previous["version"], url=previous.get("url", ""))
            return
        with tempfile.TemporaryDirectory(prefix="agentsearch-git-") as work:
            self._git(ctx, "init", "--quiet", "--bare", work)
            self._git(ctx, "--git-dir", work, "fetch", "--quiet", "--depth", "1", "--no-tags",
                      "--no-recurse-submodules", config.url, f"refs/heads/{config.branch}")
            listing = self._git(ctx, "--git-dir", work, "ls-tree", "-r", "-l", "-z", "FETCH_HEAD").split("\0")
            ctx.cursor["commit"] = commit
            for line in filter(None, listing):
                item = self._file(work, line, config, ctx)
                if item is not None:
                    yield item

    def _tip(self, config: GitConfig, ctx: Context) -> str:
        out = self._git(ctx, "ls-remote", "--heads", config.url, f"refs/heads/{config.branch}")
        if not out.strip():
            raise ListingFailed(f"{config.url}: no branch {config.branch}")
        return out.split()[0]

    def _file(self, work: str, line: str, config: GitConfig, ctx: Context) -> Item | None:
        meta, path = line.split("\t", 1)
        mode, kind, blob, size = meta.split()
        suffix = PurePosixPath(path).suffix.lower()
        # 120000: a symlink, 160000: a submodule; neither is a file of this repository to read.
        if kind != "blob" or mode in ("120000", "160000") or suffix not in TEXT_SUFFIXES | FILE_SUFFIXES:
            return None
        url = f"{config.url}#{config.branch}:{path}"
        previous = ctx.previous.get(path)
        if previous is not None and previous.get("version") == blob:
            return Item(path, blob, url=url)
        if int(size) > ctx.max_item_bytes:
            return Item(path, blob, url=url, error=f"{path}: {size} bytes, over the limit of {ctx.max_item_bytes}")
        data = subprocess.run(["git", "--git-dir", work, "cat-file", "blob", blob], capture_output=True,
                              timeout=ctx.timeout_s, check=True).stdout
        title = PurePosixPath(path).name
        return Item(path, blob, Content(PurePosixPath(path).name, data, title, as_text=suffix in TEXT_SUFFIXES),
                    url=url)

    def _git(self, ctx: Context, *args: str) -> str:
        env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false", "GIT_CONFIG_NOSYSTEM": "1",
               "GIT_CONFIG_GLOBAL": os.devnull, **ctx.credentials.get("git_env", {})}
        try:
            done = subprocess.run(["git", *GIT_OPTIONS, *args], capture_output=True, text=True, env=env,
                                  timeout=ctx.timeout_s * 6)
        except subprocess.TimeoutExpired:
            raise ListingFailed(f"git {args[0]}: no answer within {ctx.timeout_s * 6:g} s") from None
        if done.returncode != 0:
            what = args[2] if args[0] == "--git-dir" else args[0]
            if "could not read Username" in done.stderr or "Authentication failed" in done.stderr:
                # Git, refused, would ask for a user: there is none to ask.
                raise ListingFailed(f"git {what}: the server refused the credentials (HTTP 401): {done.stderr[-200:]}")
            raise ListingFailed(f"git {what}: {done.stderr.strip()[-400:] or f'exit status {done.returncode}'}")
        return done.stdout
