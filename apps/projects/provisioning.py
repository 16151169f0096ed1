"""Creating a tenant: organization, owner, default project and first API key, together."""

from dataclasses import dataclass

from django.db import transaction
from django.utils.text import slugify

from apps.accounts.apikeys import create_api_key
from apps.accounts.models import ApiKey, Membership, Organization, User
from apps.plans.models import DEFAULT_PLAN_CODE, Plan

from .models import Project


@dataclass
class Tenant:
    organization: Organization
    owner: User
    project: Project
    api_key: ApiKey
    full_api_key: str


def unique_org_slug(name):
    base = slugify(name)[:60] or "org"
    slug, n = base, 1
    while Organization.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


@transaction.atomic
def provision_tenant(*, org_name, email, plan_code=DEFAULT_PLAN_CODE, password=None, timezone="UTC"):
    plan = Plan.objects.get(code=plan_code)
    owner = User.objects.filter(email__iexact=email).first()
    if owner is None:
        owner = User.objects.create_user(email=email, password=password)
    organization = Organization.objects.create(name=org_name, slug=unique_org_slug(org_name), plan=plan)
    Membership.objects.create(user=owner, organization=organization, role=Membership.Role.OWNER)
    project = Project.objects.create(organization=organization, name="Default", slug="default", timezone=timezone)
    api_key, full_key = create_api_key(organization, "Default key", created_by=owner)
    return Tenant(organization, owner, project, api_key, full_key)
