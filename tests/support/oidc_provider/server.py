"""``OidcProvider``: the test OpenID provider as a process of its own (see the package's docstring), and
``consent``: a person signing in at it through its real login form and consent page.

Usage::

    callback_url = consent(provider, http, authorize_url)   # ...?code=...&state=...
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import asdict, dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urljoin

import httpx

from agentsearch.devstack.processes import REPO, LocalServer


@dataclass(frozen=True)
class Client:
    """A relying party registered at the provider; no secret makes it a public client (PKCE alone)."""

    client_id: str
    secret: str | None
    redirect_uris: list[str] = field(default_factory=list)


class OidcProvider(LocalServer):
    name = "oidc-provider"
    start_timeout_s = 60.0

    def __init__(self, workdir: Path, clients: list[Client], user: str = "ada", password: str = "correct-horse-9",
                 groups: tuple[str, ...] = ("staff", "hr"), id_token_expire_s: int = 600) -> None:
        super().__init__(workdir)
        self.clients, self.user, self.password, self.groups = clients, user, password, list(groups)
        self.id_token_expire_s = id_token_expire_s
        self.issuer = f"{self.root}/openid"

    def environment(self) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(REPO),
                "DJANGO_SETTINGS_MODULE": "tests.support.oidc_provider.settings",
                "OIDC_PROVIDER_DATA_DIR": str(self.workdir), "OIDC_PROVIDER_SITE_URL": self.root,
                "OIDC_PROVIDER_IDTOKEN_EXPIRE_S": str(self.id_token_expire_s)}

    def command(self) -> list[str]:
        self.workdir.mkdir(parents=True, exist_ok=True)
        spec = self.workdir / "spec.json"
        spec.write_text(json.dumps({"user": self.user, "password": self.password, "groups": self.groups,
                                    "clients": [asdict(client) for client in self.clients]}))
        subprocess.run([sys.executable, "-m", "tests.support.oidc_provider.seed", str(spec)], cwd=REPO,
                       env=self.environment(), check=True, capture_output=True, timeout=120)
        return [sys.executable, "-m", "django", "runserver", f"127.0.0.1:{self.port}", "--noreload"]

    @property
    def ready_url(self) -> str:
        return f"{self.root}/health"


class _Forms(HTMLParser):
    """The inputs of each form of a page: ``forms[i]`` is ``(action, {name: value})``."""

    def __init__(self) -> None:
        super().__init__()
        self.forms: list[tuple[str, dict[str, str]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {name: value or "" for name, value in attrs}
        if tag == "form":
            self.forms.append((found.get("action", ""), {}))
        elif tag == "input" and self.forms and found.get("name") and found.get("type") != "submit":
            self.forms[-1][1][found["name"]] = found.get("value", "")


def _form(page: httpx.Response) -> tuple[str, dict[str, str]]:
    parser = _Forms()
    parser.feed(page.text)
    assert parser.forms, f"no form on {page.url}: {page.text[:300]}"
    action, fields = parser.forms[0]
    return urljoin(str(page.url), action or str(page.url)), fields


def consent(provider: OidcProvider, http: httpx.Client, authorize_url: str) -> str:
    """A person at the provider: its login form filled in and posted, the consent given; returns the URL the
    provider sends the browser back to (the client's redirect URI with code and state), not yet followed."""
    page = http.get(authorize_url)
    if page.status_code in (301, 302, 303):
        page = http.get(urljoin(str(page.url), page.headers["location"]))  # to the login form
        action, fields = _form(page)
        page = http.post(action, data={**fields, "username": provider.user, "password": provider.password})
        assert page.status_code == 302, f"the provider's login failed: {page.status_code} {page.text[:300]}"
        page = http.get(urljoin(str(page.url), page.headers["location"]))  # back to the authorization
    assert page.status_code == 200 and str(page.url).startswith(provider.root), f"{page.status_code} {page.url}"
    action, fields = _form(page)  # the consent page
    answer = http.post(action, data={**fields, "allow": "Authorize"})
    assert answer.status_code == 302, f"no redirect after consent: {answer.status_code} {answer.text[:300]}"
    return answer.headers["location"]
