"""The web console's files as the API serves them, and the rules its code keeps (docs/console.md)."""

from __future__ import annotations

import re

from fastapi import FastAPI
from fastapi.testclient import TestClient

from agentsearch.api.route_rules import ROUTE_RULES
from agentsearch.api.routes import console
from agentsearch.pipeline.security.roles import RANK

FILES = sorted(p for p in console.CONSOLE_DIR.iterdir() if p.is_file())


def _client() -> TestClient:
    app = FastAPI()
    app.include_router(console.router)
    return TestClient(app)


def test_the_page_and_its_files_carry_a_strict_policy_and_nothing_else_is_served():
    client = _client()
    page = client.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    policy = page.headers["content-security-policy"]
    assert "default-src 'self'" in policy and "script-src 'self'" in policy and "style-src 'self'" in policy
    assert "unsafe-inline" not in policy and "unsafe-eval" not in policy and "frame-ancestors 'none'" in policy
    assert page.headers["x-content-type-options"] == "nosniff"
    assert client.get("/console/app.js").headers["content-type"].startswith("text/javascript")
    assert client.get("/console/app.css").headers["content-type"].startswith("text/css")
    for path in ("/console/missing.js", "/console/..%2Froutes%2Fconsole.py", "/console/.%2E/app.py"):
        assert client.get(path).status_code == 404, path


def test_every_module_a_module_imports_is_there():
    for path in FILES:
        if path.suffix != ".js":
            continue
        for name in re.findall(r"from '\./([\w.]+)'", path.read_text()):
            assert (console.CONSOLE_DIR / name).is_file(), f"{path.name} imports {name}"
    html = (console.CONSOLE_DIR / "index.html").read_text()
    for name in re.findall(r'(?:src|href)="/console/([\w.]+)"', html):
        assert (console.CONSOLE_DIR / name).is_file(), name


def test_no_markup_is_built_from_strings_and_nothing_inline():
    # User content reaches the page only as text (dom.js `h`): no API that parses a string as HTML or code.
    forbidden = re.compile(r"innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function|"
                           r"\.style\.|setAttribute\('style'|setAttribute\(\"on")
    for path in FILES:
        if path.suffix == ".js":
            code = re.sub(r"/\*.*?\*/|^\s*//.*?$", "", path.read_text(), flags=re.S | re.M)  # comments may name them
            assert not forbidden.search(code), path.name
    html = (console.CONSOLE_DIR / "index.html").read_text()
    assert not re.search(r"<script(?![^>]*\bsrc=)", html) and "<style" not in html and " style=" not in html
    assert not re.search(r"\son\w+=", html)
    # The key is kept for the tab only, never in localStorage.
    assert "localStorage" not in (console.CONSOLE_DIR / "api.js").read_text()


def test_the_roles_the_console_offers_each_action_to_are_the_ones_its_route_needs():
    """The console hides what a role may not do (roles.js); each action names its route and role as
    src/agentsearch/api/route_rules.py declares them, and the roles rank as src/agentsearch/pipeline/security/roles.py
    ranks them."""
    code = (console.CONSOLE_DIR / "roles.js").read_text()
    actions = re.findall(r"(\w+): \{ method: '(\w+)', route: '([^']+)', role: '(\w+)' \}", code)
    assert {name for name, *_ in actions} == {"upload", "deleteDocument", "editAgents", "runQuality",
                                            "manageSources"}
    for name, method, route, role in actions:
        assert ROUTE_RULES[(method, route)].role == role, name
    rank = re.search(r"const RANK = \{([^}]*)\}", code)
    assert rank and dict(re.findall(r"(\w+): (\d+)", rank.group(1))) == {k: str(v) for k, v in RANK.items()}
    used = set()
    for path in FILES:
        if path.suffix == ".js":
            used |= set(re.findall(r"may\(\w+, '(\w+)'\)", path.read_text()))
    assert used == {name for name, *_ in actions}
