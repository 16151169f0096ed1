"""Without a channel, a failing job's organization owners get the failure alert by e-mail
(when mail is configured), once per episode and within the owners' mail throttle; the
dashboard says who hears failures."""

import pytest
from django.core import mail
from django.utils import timezone

from apps.accounts.models import Membership
from apps.notifications.models import Notification
from apps.notifications.sending import deliver_notification

from .conftest import queued, run


@pytest.fixture
def mail_on(settings):
    settings.MAIL_CONFIGURED = True
    return settings


@pytest.fixture
def failing_job(tenant, make_job, target):
    return make_job(tenant, url=target.url("/status/500"), max_attempts=1)


def owner_alerts(job):
    return list(Notification.objects.filter(job=job, event="failure", channel__isnull=True).order_by("created_at"))


def test_owners_hear_a_failure_once_per_episode(tenant, failing_job, target, mail_on):
    run(queued(failing_job))
    run(queued(failing_job))  # the same episode: no second e-mail
    (row,) = owner_alerts(failing_job)
    assert row.recipients == [tenant.owner.email] and row.project_id == tenant.project.pk
    assert "no notification channel" in row.text
    failing_job.url = target.url("/ok")
    failing_job.save()
    run(queued(failing_job))  # recovered: the episode ends (the owners get no recovery e-mail)
    failing_job.url = target.url("/status/500")
    failing_job.save()
    run(queued(failing_job))
    assert len(owner_alerts(failing_job)) == 2
    assert Notification.objects.filter(job=failing_job).exclude(event="failure").count() == 0
    assert deliver_notification(row.id) == "sent"
    assert [message.to for message in mail.outbox] == [[tenant.owner.email]]


def test_only_owners_are_mailed(tenant, failing_job, mail_on, django_user_model):
    teammate = django_user_model.objects.create_user(email="dev@example.com", password="x" * 12)
    Membership.objects.create(organization=tenant.organization, user=teammate, role=Membership.Role.DEVELOPER)
    run(queued(failing_job))
    (row,) = owner_alerts(failing_job)
    assert row.recipients == [tenant.owner.email]


def test_with_a_channel_the_channel_hears_and_the_owners_are_not_mailed(tenant, make_channel, failing_job, mail_on):
    slack = make_channel(tenant, "slack")
    run(queued(failing_job))
    assert owner_alerts(failing_job) == []
    assert list(Notification.objects.filter(job=failing_job).values_list("channel_id", flat=True)) == [slack.id]


def test_without_mail_nobody_is_mailed(tenant, failing_job, settings):
    settings.MAIL_CONFIGURED = False
    run(queued(failing_job))
    assert Notification.objects.filter(job=failing_job).count() == 0


def test_owner_mail_is_throttled_per_organization(tenant, make_job, target, mail_on):
    mail_on.MAIL_PER_ORGANIZATION_PER_HOUR = 1
    jobs = [make_job(tenant, url=target.url("/status/500"), max_attempts=1) for _ in range(2)]
    run(*[queued(job, scheduled_for=timezone.now().replace(microsecond=i)) for i, job in enumerate(jobs)])
    first, second = [owner_alerts(job)[0] for job in jobs]
    assert deliver_notification(first.id) == "sent"
    assert deliver_notification(second.id) == "failed"
    second.refresh_from_db()
    assert "MAIL_PER_ORGANIZATION_PER_HOUR" in second.last_error and len(mail.outbox) == 1


def dashboard(tenant, client):
    client.force_login(tenant.owner)
    return client.get("/").content.decode()


def test_the_dashboard_says_only_owners_hear_failures(tenant, client, mail_on):
    page = dashboard(tenant, client)
    assert 'id="unheard-notice"' in page and "only the organization's owners hear about failing jobs" in page


def test_the_dashboard_says_nobody_hears_failures_without_mail(tenant, client, settings):
    settings.MAIL_CONFIGURED = False
    page = dashboard(tenant, client)
    assert "nobody hears about failing jobs" in page


def test_no_notice_once_every_project_has_a_channel(tenant, client, make_channel, mail_on):
    make_channel(tenant, "slack")
    assert 'id="unheard-notice"' not in dashboard(tenant, client)


def test_another_organizations_owners_and_channels_never_hear_it(tenant, make_tenant, make_job, make_channel,
                                                                 target, mail_on):
    """A second, hostile tenant: its owner (also a developer in the first organization) and
    its channel hear nothing of the first organization's failures, and it hears its own."""
    other = make_tenant(email="rival-owner@example.com")
    Membership.objects.create(organization=tenant.organization, user=other.owner, role=Membership.Role.DEVELOPER)
    rival_channel = make_channel(other, "slack")
    ours = make_job(tenant, url=target.url("/status/500"), max_attempts=1)
    theirs = make_job(other, url=target.url("/status/500"), max_attempts=1)
    run(queued(ours), queued(theirs))
    (row,) = owner_alerts(ours)
    assert row.recipients == [tenant.owner.email] and row.organization_id == tenant.organization.pk
    assert deliver_notification(row.id) == "sent"
    assert [message.to for message in mail.outbox] == [[tenant.owner.email]]
    heard_by_rival = Notification.objects.filter(channel=rival_channel)
    assert list(heard_by_rival.values_list("job_id", flat=True)) == [theirs.pk]
    assert owner_alerts(theirs) == []  # the rival's project has a channel: its owners are not mailed
