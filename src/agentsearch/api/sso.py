"""Single sign-on for the console: OpenID Connect's authorization code flow with PKCE, through authlib.

``OidcClient`` speaks to the operator's provider: its discovery document (and key set) read once per process and
again on a key it does not know, an authorization URL with ``state``, ``nonce`` and an S256 code challenge, the
code exchanged at the token endpoint, and the ID token checked by authlib (signature against the provider's keys,
``iss``, ``aud`` and ``azp``, ``exp`` and ``iat`` within ``oidc_leeway_s``, ``nonce``, ``at_hash``). A sign-in
under way is ``PendingLogins``: its nonce and code verifier in Redis for ten minutes under the state, taken once,
so a state is good for one callback, and the state also sits in a short cookie of the browser that began the
sign-in, so a callback another browser was sent to does not sign that browser in.

Usage::

    client = OidcClient(settings)
    url = client.authorization_url(login)              # login: PendingLogin.new(redirect_uri), kept until the callback
    claims = client.sign_in(code, login)               # checked ID token claims; SignInError if not
    client.verify(id_token, nonce)                     # the checks alone, on a token from elsewhere
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any

import httpx

from agentsearch.pipeline.platform.kv import connect_redis
from agentsearch.pipeline.platform.settings import Settings
from agentsearch.pipeline.security.users import digest

if TYPE_CHECKING:
    from authlib.integrations.httpx_client import OAuth2Client

LOGIN_TTL_S = 600
METADATA_TTL_S = 300
_metadata: dict[str, tuple[float, dict[str, Any]]] = {}
_metadata_lock = threading.Lock()


class SignInError(Exception):
    """A sign-in refused, with what the person is told (never a token or a secret)."""

    def __init__(self, status: int, detail: str) -> None:
        super().__init__(detail)
        self.status, self.detail = status, detail


@dataclass(frozen=True)
class PendingLogin:
    state: str
    nonce: str
    verifier: str
    redirect_uri: str = ""  # the one the authorization named: the code is exchanged with exactly it
    next: str = "/"

    @classmethod
    def new(cls, redirect_uri: str = "", next_path: str = "/") -> PendingLogin:
        return cls(secrets.token_urlsafe(32), secrets.token_urlsafe(32), secrets.token_urlsafe(64), redirect_uri,
                   next_path)


class PendingLogins:
    """Sign-ins under way, in Redis (in process without a Redis URL), each taken at most once."""

    def __init__(self, settings: Settings) -> None:
        self.redis = connect_redis(settings.redis_url, settings.redis_timeout_s)

    @staticmethod
    def _key(state: str) -> str:
        return f"agentsearch:sso:login:{digest(state)}"

    def put(self, login: PendingLogin) -> None:
        self.redis.set(self._key(login.state), json.dumps(asdict(login)), ex=LOGIN_TTL_S)

    def take(self, state: str) -> PendingLogin | None:
        raw = self.redis.getdel(self._key(state))
        return PendingLogin(**json.loads(raw)) if raw else None


class OidcClient:
    def __init__(self, settings: Settings) -> None:
        if not settings.oidc_issuer or not settings.oidc_client_id:
            raise RuntimeError("single sign-on needs AGENTSEARCH_OIDC_ISSUER and AGENTSEARCH_OIDC_CLIENT_ID")
        self.issuer = settings.oidc_issuer.rstrip("/")
        self.client_id = settings.oidc_client_id
        self.secret = settings.oidc_client_secret.get_secret_value() if settings.oidc_client_secret else None
        self.scopes = settings.oidc_scopes
        self.leeway_s = settings.oidc_leeway_s

    def metadata(self, refresh: bool = False) -> dict[str, Any]:
        """The provider's discovery document with its key set under ``jwks``, kept ``METADATA_TTL_S``."""
        with _metadata_lock:
            cached = _metadata.get(self.issuer)
            if cached is not None and not refresh and time.monotonic() - cached[0] < METADATA_TTL_S:
                return cached[1]
        try:
            document = httpx.get(f"{self.issuer}/.well-known/openid-configuration", timeout=10).raise_for_status()
            metadata = document.json()
            metadata["jwks"] = httpx.get(metadata["jwks_uri"], timeout=10).raise_for_status().json()
        except (httpx.HTTPError, ValueError, KeyError) as exc:
            raise SignInError(502, f"the identity provider cannot be reached: {type(exc).__name__}") from None
        if metadata.get("issuer", "").rstrip("/") != self.issuer:
            raise SignInError(502, "the identity provider's discovery document names another issuer")
        with _metadata_lock:
            _metadata[self.issuer] = (time.monotonic(), metadata)
        return metadata

    def _client(self, redirect_uri: str) -> OAuth2Client:
        # authlib and joserfc load at the first sign-in, not with the API: about 0.15 CPU seconds of every
        # container's cold start, for a feature only some deployments turn on.
        from authlib.integrations.httpx_client import OAuth2Client

        # With a secret: a confidential client; without: a public one, which PKCE alone protects.
        method = "client_secret_basic" if self.secret else "none"
        return OAuth2Client(self.client_id, self.secret, token_endpoint_auth_method=method, scope=self.scopes,
                            redirect_uri=redirect_uri, code_challenge_method="S256", timeout=10)

    def authorization_url(self, login: PendingLogin) -> str:
        with self._client(login.redirect_uri) as client:
            url, _ = client.create_authorization_url(self.metadata()["authorization_endpoint"], state=login.state,
                                                     nonce=login.nonce, code_verifier=login.verifier)
        return url

    def sign_in(self, code: str, login: PendingLogin) -> dict[str, Any]:
        """The code exchanged for tokens, and the ID token's claims once checked."""
        token = self.exchange(code, login)
        return self.verify(token["id_token"], login.nonce, token.get("access_token"))

    def exchange(self, code: str, login: PendingLogin) -> dict[str, Any]:
        """The provider's tokens for the code (with the login's PKCE verifier), not yet checked."""
        from authlib.common.errors import AuthlibBaseError

        metadata = self.metadata()
        try:
            with self._client(login.redirect_uri) as client:
                token = client.fetch_token(metadata["token_endpoint"], grant_type="authorization_code", code=code,
                                           code_verifier=login.verifier)
        except (AuthlibBaseError, httpx.HTTPError, ValueError) as exc:
            # The provider's refusal (a used, expired or foreign code, a wrong verifier) names its error code.
            error = getattr(exc, "error", None) or type(exc).__name__
            raise SignInError(401, f"the identity provider refused the sign-in code ({error})") from None
        if "id_token" not in token:
            raise SignInError(401, "the identity provider sent no ID token (is the 'openid' scope asked for?)")
        return dict(token)

    def verify(self, id_token: str, nonce: str, access_token: str | None = None) -> dict[str, Any]:
        """The ID token's claims, checked as authlib checks them (see the module's docstring)."""
        from authlib.common.errors import AuthlibBaseError
        from authlib.oidc.core import CodeIDToken
        from joserfc import jwt
        from joserfc.errors import InvalidKeyIdError, JoseError
        from joserfc.jwk import KeySet
        from joserfc.jws import JWSRegistry

        metadata = self.metadata()
        registry = JWSRegistry(algorithms=metadata.get("id_token_signing_alg_values_supported"),
                               strict_check_header=False)
        try:
            try:
                decoded = jwt.decode(id_token, KeySet.import_key_set(metadata["jwks"]), registry=registry)
            except InvalidKeyIdError:  # the provider rotated its keys since they were read
                decoded = jwt.decode(id_token, KeySet.import_key_set(self.metadata(refresh=True)["jwks"]),
                                     registry=registry)
            params = {"nonce": nonce, "client_id": self.client_id}
            if access_token:
                params["access_token"] = access_token
            options = {"iss": {"essential": True, "values": [metadata["issuer"]]},
                       "aud": {"essential": True, "values": [self.client_id]}}
            claims = CodeIDToken(decoded.claims, decoded.header, options, params)
            claims.validate(leeway=self.leeway_s)
        except (AuthlibBaseError, JoseError, ValueError) as exc:
            reason = getattr(exc, "description", None) or getattr(exc, "error", None) or type(exc).__name__
            raise SignInError(401, f"the identity provider's ID token was refused: {reason}") from None
        return dict(claims)
