"""Members added directly before invitations existed, who never consented and never could sign
in (the old path made a passwordless account and sent no working link), become expired
invitations: their organization's owners and admins see them under Invitations and may
resend them, and the person joins by accepting. A membership of an account that has a
password, has signed in, or is linked to an identity provider is left alone, as is every
owner."""

import hashlib
import secrets

from django.db import migrations
from django.utils import timezone

UNUSABLE_PASSWORD_PREFIX = "!"  # django.contrib.auth.hashers


def convert(apps, schema_editor):
    Membership = apps.get_model("accounts", "Membership")
    Invitation = apps.get_model("accounts", "Invitation")
    AuditEvent = apps.get_model("accounts", "AuditEvent")
    SSOIdentity = apps.get_model("accounts", "SSOIdentity")
    Project = apps.get_model("projects", "Project")
    ContentType = apps.get_model("contenttypes", "ContentType")
    UserObjectPermission = apps.get_model("guardian", "UserObjectPermission")
    now = timezone.now()
    project_type = ContentType.objects.filter(app_label="projects", model="project").first()
    linked = SSOIdentity.objects.values("user_id")
    legacy = (Membership.objects.select_related("user")
              .filter(user__password__startswith=UNUSABLE_PASSWORD_PREFIX, user__last_login__isnull=True)
              .exclude(role="owner").exclude(user_id__in=linked))
    for membership in legacy:
        user, organization_id = membership.user, membership.organization_id
        email = user.email.strip().lower()
        grants = UserObjectPermission.objects.none()
        if project_type is not None:
            org_projects = [str(pk) for pk in Project.objects.filter(organization_id=organization_id)
                            .values_list("pk", flat=True)]
            grants = UserObjectPermission.objects.filter(user_id=user.pk, content_type=project_type,
                                                         object_pk__in=org_projects)
        open_ = Invitation.objects.filter(organization_id=organization_id, email=email, accepted_at__isnull=True,
                                          revoked_at__isnull=True)
        if not open_.exists():
            invitation = Invitation.objects.create(
                organization_id=organization_id, email=email, role=membership.role,
                limited_to_projects=membership.limited_to_projects,
                token_hash=hashlib.sha256(secrets.token_bytes(32)).hexdigest(),  # no link: resend makes one
                created_at=membership.created_at, expires_at=now, last_sent_at=membership.created_at)
            if membership.limited_to_projects:
                invitation.projects.set(list({grant.object_pk for grant in grants}))
            AuditEvent.objects.create(
                organization_id=organization_id, action="invitation.from_direct_add", target_type="accounts.invitation",
                target_id=str(invitation.pk), data={"email": email, "role": membership.role}, created_at=now)
        grants.delete()
        membership.delete()


class Migration(migrations.Migration):

    dependencies = [
        ("accounts", "0009_invitations_by_consent"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("guardian", "__latest__"),
        ("projects", "0002_project_access_permission"),
    ]

    operations = [migrations.RunPython(convert, migrations.RunPython.noop)]
