"""Single sign-on on the real stack, against a real OpenID provider (django-oidc-provider) in a process of its own.

An API of the suite's stack configured for the provider as a confidential client (``agentsearch``); a second
client (``other-app``, public) is registered for the same callback. Every sign-in goes through the provider's real
login form and consent page; every token the API or a test checks is one the provider signed.
"""

from __future__ import annotations

import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from http.cookies import SimpleCookie
from urllib.parse import parse_qs, urlencode, urlsplit, urlunsplit

import httpx
import pytest
from sqlalchemy import create_engine, text

from agentsearch.api.sso import OidcClient, PendingLogin, SignInError
from agentsearch.pipeline.platform.settings import Settings
from tests.integration.conftest import REPO, extra_api
from tests.support.oidc_provider import Client, OidcProvider, consent

SECRET = "agentsearch-client-secret"
# Short, so the expired-token test waits little; every sign-in checks its token within a second of it being made.
ID_TOKEN_EXPIRE_S = 6
COOKIE = "agentsearch_session"
SHOTS = REPO / ".agentsearch" / "screenshots"  # beside test_console.py's


@dataclass
class Sso:
    api: str
    provider: OidcProvider
    database_url: str

    @property
    def callback(self) -> str:
        return f"{self.api}/v1/auth/callback"

    def browser(self) -> httpx.Client:
        # One cookie jar for the API and the provider, as a browser has; redirects followed by hand.
        return httpx.Client(timeout=30)

    def start(self, http: httpx.Client) -> str:
        """The API's login: the provider's authorization URL it redirects to."""
        response = http.get(f"{self.api}/v1/auth/login")
        assert response.status_code == 303, response.text
        return response.headers["location"]

    def callback_url(self, http: httpx.Client) -> str:
        return consent(self.provider, http, self.start(http))

    def sign_in(self, http: httpx.Client) -> httpx.Response:
        done = http.get(self.callback_url(http))
        assert done.status_code == 303, done.text
        return done


def _with_query(url: str, **changes: str) -> str:
    parts = urlsplit(url)
    query = {k: v[0] for k, v in parse_qs(parts.query).items()}
    return urlunsplit(parts._replace(query=urlencode({**query, **changes})))


def _query(url: str) -> dict[str, str]:
    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}


def _set_cookie(response: httpx.Response, name: str) -> SimpleCookie | None:
    for header in response.headers.get_list("set-cookie"):
        if header.startswith(f"{name}="):
            cookie = SimpleCookie()
            cookie.load(header)
            return cookie
    return None


@pytest.fixture(scope="module")
def sso(stack, tmp_path_factory) -> Iterator[Sso]:
    workdir = tmp_path_factory.mktemp("sso")
    provider = OidcProvider(workdir / "provider", clients=[], id_token_expire_s=ID_TOKEN_EXPIRE_S)
    env = {**stack.env, "AGENTSEARCH_OIDC_ISSUER": provider.issuer, "AGENTSEARCH_OIDC_CLIENT_ID": "agentsearch",
           "AGENTSEARCH_OIDC_CLIENT_SECRET": SECRET, "AGENTSEARCH_OIDC_GROUPS_CLAIM": "groups",
           "AGENTSEARCH_OIDC_LEEWAY_S": "0"}
    with extra_api(env, workdir / "api.log") as api:
        callback = f"{api}/v1/auth/callback"
        provider.clients = [Client("agentsearch", SECRET, [callback]), Client("other-app", None, [callback])]
        with provider:
            yield Sso(api, provider, stack.database_url)


def test_first_sign_in_provisions_the_user_and_the_session_cookie_opens_v1_me(sso):
    with httpx.Client() as anonymous:
        assert anonymous.get(f"{sso.api}/v1/auth/config").json() == {"sso": True, "login_url": "/v1/auth/login"}
    with sso.browser() as http:
        authorize = sso.start(http)
        asked = _query(authorize)
        assert asked["code_challenge_method"] == "S256" and len(asked["code_challenge"]) == 43
        assert asked["state"] and asked["nonce"] and asked["client_id"] == "agentsearch"
        done = http.get(consent(sso.provider, http, authorize))
        assert done.status_code == 303 and done.headers["location"] == "/"
        cookie = _set_cookie(done, COOKIE)[COOKIE]
        assert cookie["httponly"] and cookie["samesite"].lower() == "lax" and cookie["path"] == "/"
        assert not cookie["secure"]  # plain http here; over https below
        assert int(cookie["max-age"]) == 8 * 3600
        me = http.get(f"{sso.api}/v1/me")
        assert me.status_code == 200, me.text
        body = me.json()
        assert body["user"]["name"] == "ada" and body["key"]["label"] == "console session (single sign-on)"
        assert body["key"]["scopes"] is None and len(body["csrf_token"]) == 64
        user_id = body["user"]["id"]
    engine = create_engine(sso.database_url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT issuer, subject, groups FROM user_identities WHERE user_id = :u"),
                            {"u": user_id}).all()
    engine.dispose()
    assert [(r.issuer, r.groups) for r in rows] == [(sso.provider.issuer, ["hr", "staff"])]
    # A second sign-in (another browser) is the same user, not a new one; behind a TLS proxy the cookie is Secure.
    with sso.browser() as http:
        done = http.get(sso.callback_url(http), headers={"X-Forwarded-Proto": "https"})
        assert done.status_code == 303, done.text
        assert _set_cookie(done, COOKIE)[COOKIE]["secure"]
        session = done.cookies.get(COOKIE) or _set_cookie(done, COOKIE)[COOKIE].value
        again = httpx.get(f"{sso.api}/v1/me", cookies={COOKIE: session}).json()
        assert again["user"]["id"] == user_id


def test_changes_by_cookie_need_the_csrf_token_and_keys_stay_out_of_reach(sso, stack):
    with sso.browser() as http:
        sso.sign_in(http)
        token = http.get(f"{sso.api}/v1/me").json()["csrf_token"]
        refused = http.post(f"{sso.api}/v1/collections", json={"name": "sso-no-csrf"})
        assert refused.status_code == 403 and "X-CSRF-Token" in refused.json()["detail"]
        wrong = http.post(f"{sso.api}/v1/collections", json={"name": "sso-no-csrf"},
                          headers={"X-CSRF-Token": "0" * 64})
        assert wrong.status_code == 403
        listed = http.get(f"{sso.api}/v1/collections").json()
        assert "sso-no-csrf" not in {c["name"] for c in listed}
        made = http.post(f"{sso.api}/v1/collections", json={"name": "sso-with-csrf"},
                         headers={"X-CSRF-Token": token})
        assert made.status_code == 201, made.text
        keys = http.get(f"{sso.api}/v1/keys")
        assert keys.status_code == 403 and "not a console session" in keys.json()["detail"]
    # A key is never asked for a CSRF token.
    with httpx.Client(base_url=sso.api, headers={"Authorization": f"Bearer {stack.api_key}"}) as keyed:
        assert keyed.post("/v1/collections", json={"name": "sso-by-key"}).status_code == 201


def test_sign_out_ends_the_session_server_side(sso):
    with sso.browser() as http:
        sso.sign_in(http)
        session = http.cookies.get(COOKIE)
        token = http.get(f"{sso.api}/v1/me").json()["csrf_token"]
        assert http.post(f"{sso.api}/v1/auth/logout").status_code == 403  # a cross-site form cannot sign one out
        out = http.post(f"{sso.api}/v1/auth/logout", headers={"X-CSRF-Token": token})
        assert out.status_code == 204
        assert _set_cookie(out, COOKIE) is not None and http.cookies.get(COOKIE) is None
    # The old cookie, kept by whoever copied it, opens nothing.
    after = httpx.get(f"{sso.api}/v1/me", cookies={COOKIE: session})
    assert after.status_code == 401 and "ended or expired" in after.json()["detail"]


def test_a_tampered_state_signs_nobody_in(sso):
    with sso.browser() as http:
        back = sso.callback_url(http)
        state = _query(back)["state"]
        tampered = http.get(_with_query(back, state=state[:-2] + ("AA" if not state.endswith("AA") else "BB")))
        assert tampered.status_code == 400 and "state does not match" in tampered.json()["detail"]
        assert _set_cookie(tampered, COOKIE) is None
        assert http.get(f"{sso.api}/v1/me").status_code == 401
    # The genuine callback opened in another browser (no login cookie of its own) signs that browser in neither.
    with httpx.Client() as other:
        elsewhere = other.get(back)
        assert elsewhere.status_code == 400 and _set_cookie(elsewhere, COOKIE) is None


def test_a_replayed_code_is_refused(sso):
    with sso.browser() as http:
        back = sso.callback_url(http)
        assert http.get(back).status_code == 303
        http.cookies.delete(COOKIE)
        # The same callback again, with the login cookie the first one cleared put back: its state was taken.
        http.cookies.set("agentsearch_login", _query(back)["state"], domain="127.0.0.1", path="/v1/auth/callback")
        replayed = http.get(back)
        assert replayed.status_code == 400 and "unknown, used or expired" in replayed.json()["detail"]
        # The used code under a fresh state of this browser: the provider refuses it.
        fresh = _query(sso.start(http))["state"]
        again = http.get(_with_query(back, state=fresh))
        assert again.status_code == 401 and "refused the sign-in code (invalid_grant)" in again.json()["detail"]
        assert _set_cookie(again, COOKIE) is None and http.get(f"{sso.api}/v1/me").status_code == 401


def test_a_code_or_an_id_token_for_another_client_is_refused(sso):
    with sso.browser() as http:
        # The API's own sign-in, the authorization asked for as another client: that client's code.
        authorize = _with_query(sso.start(http), client_id="other-app")
        back = consent(sso.provider, http, authorize)
        foreign = http.get(back)
        assert foreign.status_code == 401 and "invalid_grant" in foreign.json()["detail"]
        assert http.get(f"{sso.api}/v1/me").status_code == 401
        # A real ID token the provider signed for the other client, checked as the API checks its own.
        other = OidcClient(Settings(oidc_issuer=sso.provider.issuer, oidc_client_id="other-app"))
        login = PendingLogin.new(sso.callback)
        code = _query(consent(sso.provider, http, other.authorization_url(login)))["code"]
        tokens = other.exchange(code, login)
    assert other.verify(tokens["id_token"], login.nonce, tokens["access_token"])["aud"] == "other-app"
    ours = OidcClient(Settings(oidc_issuer=sso.provider.issuer, oidc_client_id="agentsearch", oidc_leeway_s=0))
    with pytest.raises(SignInError) as refused:
        ours.verify(tokens["id_token"], login.nonce, tokens["access_token"])
    assert refused.value.status == 401 and ("aud" in refused.value.detail or "azp" in refused.value.detail)


def test_an_expired_id_token_is_refused(sso):
    ours = OidcClient(Settings(oidc_issuer=sso.provider.issuer, oidc_client_id="agentsearch",
                               oidc_client_secret=SECRET, oidc_leeway_s=0))
    login = PendingLogin.new(sso.callback)
    with sso.browser() as http:
        code = _query(consent(sso.provider, http, ours.authorization_url(login)))["code"]
    tokens = ours.exchange(code, login)
    claims = ours.verify(tokens["id_token"], login.nonce, tokens["access_token"])  # fresh: accepted
    assert claims["exp"] - claims["iat"] == ID_TOKEN_EXPIRE_S
    # With the nonce of another sign-in, the fresh token is refused.
    with pytest.raises(SignInError, match="nonce"):
        ours.verify(tokens["id_token"], "another-nonce", tokens["access_token"])
    time.sleep(max(0.0, claims["exp"] - time.time()) + 1.5)
    with pytest.raises(SignInError) as refused:
        ours.verify(tokens["id_token"], login.nonce, tokens["access_token"])
    assert "expired" in refused.value.detail


def test_a_groups_claim_naming_hr_gives_the_teams_hr_group(sso, stack):
    """The provider's user is in its groups ``hr`` and ``staff``: in a team with groups ``hr`` and ``payroll``, it
    holds ``hr`` from its sign-in, put in it by nobody; a claim names only groups the team has."""
    with sso.browser() as http:
        sso.sign_in(http)
        ada = http.get(f"{sso.api}/v1/me").json()["user"]["id"]
        with httpx.Client(base_url=sso.api, headers={"Authorization": f"Bearer {stack.api_key}"}) as admin:
            me = admin.get("/v1/me").json()["user"]["id"]
            made = admin.post("/v1/teams", json={"name": f"sso-groups-{uuid.uuid4().hex[:6]}"})
            assert made.status_code == 201, made.text
            groups = f"/v1/teams/{made.json()['id']}/groups"
            assert admin.put(f"/v1/teams/{made.json()['id']}/members/{ada}", json={"role": "viewer"}).status_code == 200
            assert http.get(f"{sso.api}{groups}").json() == []  # no group hr in the team yet
            for group in ("hr", "payroll"):  # the admin makes both, being their first member
                assert admin.put(f"{groups}/{group}/members/{me}").status_code == 200
            # The admin's list names who was put in a group; the claim's holders are not among them.
            assert {g["name"]: [m["user_id"] for m in g["members"]] for g in admin.get(groups).json()} == {
                "hr": [me], "payroll": [me]}
        assert http.get(f"{sso.api}{groups}").json() == [{"name": "hr", "held": True}]
    # The sign-in is in the audit trail, as the session's, with the groups the claim listed.
    signed_in = stack.sql("SELECT key_prefix, details FROM audit_events WHERE action = 'session.sign_in' "
                          "AND actor_id = %s", ada)
    assert signed_in and all(prefix == "session" for prefix, _ in signed_in), signed_in
    assert sorted(signed_in[-1][1]["groups"]) == ["hr", "staff"], signed_in


def test_the_console_signs_in_with_sso_makes_a_change_and_signs_out(sso):
    chromium = shutil.which("chromium")
    assert chromium, "Debian's chromium is missing: `make services` installs it"
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page()
        page.set_default_timeout(60_000)  # a 2-core machine shared with other work
        page.goto(f"{sso.api}/")
        page.wait_for_selector("#sso-sign-in")
        SHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SHOTS / "sign-in-sso-laptop.png"))
        page.click("#sso-sign-in")
        page.fill("#id_username", sso.provider.user)
        page.fill("#id_password", sso.provider.password)
        page.click("#provider-sign-in")
        page.click("input[name=allow]")  # the provider's consent page
        page.wait_for_selector(".view-search")
        assert page.locator("#who-name").inner_text() == sso.provider.user
        # No key anywhere the page can read: the session is an HttpOnly cookie (the provider's own cookies share
        # the host, 127.0.0.1, whatever the port).
        stored = page.evaluate("() => [sessionStorage.length, localStorage.length, document.cookie]")
        assert stored[:2] == [0, 0] and COOKIE not in stored[2]
        session = next(c for c in page.context.cookies() if c["name"] == COOKIE)
        assert session["httpOnly"] and session["sameSite"] == "Lax"
        # A change from the console: it carries the CSRF token.
        page.goto(f"{sso.api}/#/collections")
        page.fill("form.stack input[name=name]", "made in the console by sso")
        page.click("form.stack button[type=submit]")
        page.wait_for_selector(".card-title:text-is('made in the console by sso')")
        page.click("#sign-out")
        page.wait_for_selector("#sso-sign-in")
        browser.close()
    assert httpx.get(f"{sso.api}/v1/me", cookies={COOKIE: session["value"]}).status_code == 401
