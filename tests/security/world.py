"""Two organizations for the security tests: A full of data (every kind of object, with
recognisable names), B the intruder with an owner session and an API key."""

import secrets
import uuid
from dataclasses import dataclass, field
from datetime import timedelta

from django.utils import timezone
from rest_framework.test import APIClient

from apps.accounts.models import AuditEvent, DataExport, Membership, User
from apps.executions.models import Attempt, Execution
from apps.jobs.models import Job
from apps.accounts.apikeys import create_api_key
from apps.api.accounts import invitations

SECRET_TOKEN = "tok-SECRET-bearer-0b9a"
SECRET_HEADER = "hdr-SECRET-apikey-77c1"
SECRET_MARKED = "hdr-SECRET-marked-5d2e"


@dataclass
class World:
    a: object
    b: object
    objects: dict = field(default_factory=dict)  # resource name -> A's object
    markers: list = field(default_factory=list)  # strings of A that must not reach B

    def session(self):
        client = APIClient(raise_request_exception=False)  # a 500 is reported, not raised
        client.force_login(self.b.owner)
        return client

    def sso_session(self):
        """B's owner, also an admin of A, in a session opened by B's single sign-on, asking
        for A (header and chosen organization): that session must reach nothing of A."""
        from apps.accounts.signin_scope import SCOPE_KEY

        Membership.objects.create(user=self.b.owner, organization=self.a.organization, role=Membership.Role.ADMIN)
        client = self.session()
        session = client.session
        session[SCOPE_KEY] = {"password": False, "sso": [str(self.b.organization.pk)]}
        session["organization_id"] = str(self.a.organization.pk)
        session.save()
        client.credentials(HTTP_X_ORGANIZATION=str(self.a.organization.pk))
        return client

    def key_client(self):
        _, full = create_api_key(self.b.organization, "intruder", scopes=("read", "write"))
        client = APIClient(raise_request_exception=False)
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {full}")
        return client


def _optional(objects, name, factory):
    """Objects of other apps (notifications, badges) when those apps are installed."""
    try:
        objects[name] = factory()
    except ImportError:
        pass


def build_world(make_tenant):
    tag = secrets.token_hex(4)
    a = make_tenant(plan="enterprise", name=f"Alpha Corp {tag}", email=f"alpha-owner-{tag}@example.com")
    b = make_tenant(plan="enterprise", name=f"Beta Corp {tag}", email=f"beta-owner-{tag}@example.com")
    now = timezone.now()
    org, project = a.organization, a.project
    project.name = f"Alpha project {tag}"
    project.save(update_fields=["name"])
    job = Job.objects.create(
        project=project, organization=org, name=f"Alpha nightly {tag}", cron_expression="0 3 * * *",
        url=f"https://alpha-{tag}.example.com/hook", auth={"type": "bearer", "token": SECRET_TOKEN},
        secret_headers={"X-Api-Key": SECRET_HEADER}, headers={"X-Plain": f"alpha-plain-{tag}"})
    execution = Execution.objects.create(
        job=job, organization=org, scheduled_for=now - timedelta(hours=1), status=Execution.Status.DEAD,
        attempt=1, finished_at=now, response_body=f"alpha-response-{tag}")
    Attempt.objects.create(execution=execution, number=1, started_at=now, request_method="GET",
                           request_url=job.url, outcome="failed", response_body=f"alpha-response-{tag}")
    member = User.objects.create_user(email=f"alpha-dev-{tag}@example.com")
    Membership.objects.create(user=member, organization=org, role=Membership.Role.DEVELOPER)
    api_key, _ = create_api_key(org, f"Alpha key {tag}")
    audit = AuditEvent.objects.create(organization=org, action="job.create", target_type="jobs.job",
                                      target_id=str(job.pk), data={"name": job.name})
    export = DataExport.objects.create(organization=org, status=DataExport.Status.READY, archive=b"x")
    invitation = invitations.invite(org, email=f"alpha-invitee-{tag}@example.com", role="viewer", project_ids=None,
                                    invited_by=a.owner)
    objects = {"organization": org, "project": project, "job": job, "execution": execution, "member": member,
               "invitation": invitation,
               "api_key": api_key, "audit_event": audit, "export": export, "owner": a.owner}
    _optional(objects, "channel", lambda: _channel(org, project, tag))
    _optional(objects, "notification", lambda: _notification(org, project, job, tag))
    _optional(objects, "event_subscription", lambda: _subscription(org, project, tag))
    _optional(objects, "badge", lambda: _badge(org, job))
    _optional(objects, "statement", lambda: _statement(org))
    _optional(objects, "monitor", lambda: _monitor(project, tag))
    _optional(objects, "archive", lambda: _archive(org, tag))
    markers = [org.name, org.slug, project.name, job.name, f"alpha-{tag}.example.com", f"alpha-plain-{tag}",
               f"alpha-response-{tag}", a.owner.email, member.email, invitation.email, f"Alpha key {tag}", api_key.lookup,
               f"alpha-channel-{tag}", f"alpha-notification-{tag}", f"alpha-subscription-{tag}",
               SECRET_TOKEN, SECRET_HEADER]
    markers += [str(o.pk) for o in objects.values() if isinstance(getattr(o, "pk", None), uuid.UUID)]
    return World(a=a, b=b, objects=objects, markers=markers)


def _channel(org, project, tag):
    from apps.notifications.models import Channel

    return Channel.objects.create(organization=org, project=project, kind="webhook", name=f"alpha-channel-{tag}",
                                  config={"url": f"https://alpha-{tag}.example.com/notify"})


def _notification(org, project, job, tag):
    from apps.notifications.models import Notification

    return Notification.objects.create(organization=org, project=project, job=job, event="failure",
                                       subject=f"alpha-notification-{tag}", text="x")


def _subscription(org, project, tag):
    from apps.notifications.models import EventSubscription

    return EventSubscription.objects.create(organization=org, project=project,
                                            url=f"https://alpha-subscription-{tag}.example.com/")


def _badge(org, job):
    from apps.badges.models import Badge

    return Badge.objects.create(organization=org, job=job)


def _monitor(project, tag):
    from apps.monitors.services import create_monitor

    return create_monitor(project=project, name=f"alpha-monitor-{tag}", schedule_type="interval",
                          interval_seconds=3600, grace_seconds=600)


def _archive(org, tag):
    import datetime

    from apps.archives.models import Archive

    return Archive.objects.create(organization=org, day=datetime.date(2026, 1, 1), key=f"alpha/{tag}.jsonl.gz",
                                  rows=1, bytes=10, sha256="0" * 64)


def _statement(org):
    import datetime

    from apps.billing.models import Statement

    return Statement.objects.create(organization=org, period=datetime.date(2026, 1, 1), plan=org.plan,
                                    plan_code=org.plan.code, plan_name=org.plan.name, runs=1, quota=10,
                                    base_cents=100, total_cents=100)
