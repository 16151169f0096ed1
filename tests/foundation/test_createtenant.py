import io
import json

import pytest
from django.core.management import CommandError, call_command

from apps.accounts.models import ApiKey, Membership, Organization, User
from cronsvc.apikeys import secret_matches, split_key


def run_createtenant(*args):
    out = io.StringIO()
    call_command("createtenant", *args, stdout=out)
    return json.loads(out.getvalue())


def test_createtenant_prints_one_json_object_with_a_working_key(db):
    data = run_createtenant("--org", "Acme Corp", "--email", "Ops@Acme.test", "--plan", "business")

    assert set(data) == {"organization", "project", "user", "api_key"}
    assert data["organization"]["name"] == "Acme Corp"
    assert data["organization"]["slug"] == "acme-corp"
    assert data["organization"]["plan"] == "business"
    assert data["project"]["slug"] == "default"
    assert data["user"]["email"] == "ops@acme.test"

    org = Organization.objects.get(id=data["organization"]["id"])
    owner = User.objects.get(id=data["user"]["id"])
    assert Membership.objects.get(user=owner, organization=org).role == "owner"
    lookup, secret = split_key(data["api_key"])
    key = ApiKey.objects.get(lookup=lookup, organization=org)
    assert secret_matches(secret, key.salt, key.secret_hash)
    assert data["api_key"] not in key.secret_hash  # stored hashed only


def test_createtenant_defaults_to_free_and_makes_unique_slugs(db):
    first = run_createtenant("--org", "Acme", "--email", "a@acme.test")
    second = run_createtenant("--org", "Acme", "--email", "b@acme.test")
    assert first["organization"]["plan"] == "free"
    assert second["organization"]["slug"] == "acme-2"


def test_createtenant_refuses_an_unknown_plan(db):
    with pytest.raises(CommandError, match="Unknown plan 'gold'"):
        run_createtenant("--org", "Acme", "--email", "a@acme.test", "--plan", "gold")
