"""A real OpenID provider for the single sign-on tests: a small Django project on django-oidc-provider.

``OidcProvider`` (``server.py``) runs it as a process of its own on a free port, with SQLite in its work directory:
migrations, an RS256 key (``creatersakey``), a user with a password and groups, and the clients (the relying
parties) with their redirect URIs (``seed.py``), then Django's server. People sign in through its real login form
and consent page; the ID tokens it signs expire after ``id_token_expire_s``.

Usage::

    with OidcProvider(workdir, clients=[Client("agentsearch", "secret", [callback_url])]) as provider:
        provider.issuer            # http://127.0.0.1:PORT/openid
        provider.user, provider.password
"""

from tests.support.oidc_provider.server import Client, OidcProvider, consent

__all__ = ["Client", "OidcProvider", "consent"]
