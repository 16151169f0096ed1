"""Seed the test provider: ``python -m tests.support.oidc_provider.seed SPEC.json`` with
{"users": [{"email", "password"}], "applications": [{"name", "client_id", "client_secret",
"redirect_uri"}]} (run with DJANGO_SETTINGS_MODULE=tests.support.oidc_provider.settings)."""

import json
import sys

import django


def main(path):
    django.setup()
    from django.contrib.auth.models import User
    from oauth2_provider.models import Application

    spec = json.loads(open(path).read())
    for person in spec["users"]:
        User.objects.create_user(username=person["email"], email=person["email"], password=person["password"],
                                 first_name=person.get("first_name", ""), last_name=person.get("last_name", ""))
    for app in spec["applications"]:
        Application.objects.create(
            name=app["name"], client_id=app["client_id"], client_secret=app["client_secret"],
            redirect_uris=app["redirect_uri"], client_type=Application.CLIENT_CONFIDENTIAL,
            authorization_grant_type=Application.GRANT_AUTHORIZATION_CODE, algorithm=Application.RS256_ALGORITHM,
            skip_authorization=True)


if __name__ == "__main__":
    main(sys.argv[1])
