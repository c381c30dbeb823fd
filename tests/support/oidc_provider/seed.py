"""The test provider's data, made before it serves: migrations, an RS256 key, a user and the clients.

Run by ``OidcProvider`` as ``python -m tests.support.oidc_provider.seed SPEC.json`` with the provider's
environment; SPEC is ``{"user", "password", "groups", "clients": [{"client_id", "secret", "redirect_uris"}]}``.
"""

import json
import os
import sys

import django
from django.core.management import call_command

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tests.support.oidc_provider.settings")


def seed(spec: dict) -> None:
    django.setup()
    from django.contrib.auth.models import Group, User
    from oidc_provider.models import Client, ResponseType

    call_command("migrate", verbosity=0)
    call_command("creatersakey")
    user = User.objects.create_user(spec["user"], f"{spec['user']}@example.org", spec["password"])
    for name in spec["groups"]:
        user.groups.add(Group.objects.get_or_create(name=name)[0])
    code = ResponseType.objects.get(value="code")
    for entry in spec["clients"]:
        client = Client.objects.create(
            name=entry["client_id"], client_id=entry["client_id"], client_secret=entry["secret"] or "",
            client_type="confidential" if entry["secret"] else "public", jwt_alg="RS256",
            require_consent=True, reuse_consent=False, redirect_uris=entry["redirect_uris"])
        client.response_types.add(code)


if __name__ == "__main__":
    with open(sys.argv[1]) as spec_file:
        seed(json.load(spec_file))
