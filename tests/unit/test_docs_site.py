"""The documentation: ``docs/`` built as a site by mkdocs (``mkdocs.yml``, the Material theme) in strict mode, and
the README's links into it.

A broken link, an anchor no heading makes, or a page missing from ``nav`` fails the strict build; the second test
shows the configuration keeps it that way (a copy of the docs with one of each must fail, naming both). The README
is no page of the site (it links into ``docs/`` as a code host shows them), so its links are checked here.

Usage::

    .venv/bin/python -m pytest -q tests/unit/test_docs_site.py
    make docs                                      # the site into site/
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# A Markdown link or image: [text](target) / ![alt](target), the target up to a space or the closing parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def build(config: Path, site: Path) -> subprocess.CompletedProcess[str]:
    """``mkdocs build --strict`` of ``config`` into ``site``, run from the config's folder (the snippets' base)."""
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    return subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--config-file", str(config),
                           "--site-dir", str(site)], cwd=config.parent, env=env, capture_output=True, text=True,
                          timeout=300)


def test_the_site_builds_strict_with_every_page_in_nav(tmp_path):
    result = build(REPO / "mkdocs.yml", tmp_path / "site")
    assert result.returncode == 0, result.stdout + result.stderr
    built = {p.relative_to(tmp_path / "site").as_posix() for p in (tmp_path / "site").rglob("index.html")}
    pages = {p.relative_to(REPO / "docs").with_suffix("").as_posix() for p in (REPO / "docs").rglob("*.md")}
    assert {f"{p}/index.html" for p in pages if p != "index"} | {"index.html"} <= built


def test_a_broken_link_or_a_page_left_out_of_nav_fails_the_build(tmp_path):
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "docs", copy / "docs")
    shutil.copy(REPO / "mkdocs.yml", copy / "mkdocs.yml")
    shutil.copy(REPO / "BENCHMARKS.md", copy / "BENCHMARKS.md")
    (copy / "docs" / "orphan.md").write_text("# Orphan\n\nNo line of nav names this page.\n")
    getting_started = copy / "docs" / "getting-started.md"
    getting_started.write_text(getting_started.read_text() + "\nSee [the missing page](no-such-page.md).\n")

    result = build(copy / "mkdocs.yml", tmp_path / "site")
    output = result.stdout + result.stderr
    assert result.returncode != 0, output
    assert "orphan.md" in output and "no-such-page.md" in output, output


def test_the_readme_links_only_to_files_that_exist():
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    targets = [t for t in LINK.findall(readme) if not re.match(r"[a-z]+:", t) and not t.startswith("#")]
    assert any(t.startswith("docs/") for t in targets)  # the README points into docs/
    missing = [t for t in targets if not (REPO / t.split("#")[0]).exists()]
    assert missing == []
