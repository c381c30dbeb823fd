"""What the test provider adds to each ID token: the user's name, e-mail and groups (the groups claim)."""


def add_claims(id_token, user, **_):
    id_token["preferred_username"] = user.username
    id_token["email"] = user.email
    id_token["groups"] = sorted(group.name for group in user.groups.all())
    return id_token
