"""What the API, the pages and the admin do to monitors: one code path for each change."""

from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Organization
from apps.billing.limits import check_monitor_count

from .models import Monitor
from .schedule import deadline, next_expected

SCHEDULE_FIELDS = ("schedule_type", "cron_expression", "interval_seconds", "timezone", "grace_seconds")


@transaction.atomic
def create_monitor(*, project, **fields):
    """A new monitor (state ``new``: it waits for its first ping). Raises PlanLimit past
    the plan's max_monitors; the organization row is locked so two creates cannot both
    take the last place."""
    organization = Organization.objects.select_for_update().select_related("plan").get(pk=project.organization_id)
    check_monitor_count(organization.plan, Monitor.objects.filter(organization=organization).count())
    return Monitor.objects.create(project=project, organization=organization, **fields)


def reschedule(monitor, now):
    """After a schedule or grace change: an up or late monitor expects its next ping from
    its last one under the new schedule."""
    if monitor.state in (Monitor.State.UP, Monitor.State.LATE) and monitor.last_ping_at:
        expected = next_expected(monitor.schedule_type, monitor.cron_expression, monitor.interval_seconds,
                                 monitor.timezone, monitor.last_ping_at)
        monitor.next_expected_at, monitor.deadline_at = expected, deadline(expected, monitor.grace_seconds)
        if monitor.state == Monitor.State.LATE and expected and expected > now:
            monitor.state = Monitor.State.UP
    return monitor


@transaction.atomic
def update_monitor(monitor, *, now=None, **fields):
    now = now or timezone.now()
    locked = Monitor.objects.select_for_update().get(pk=monitor.pk)
    for name, value in fields.items():
        setattr(locked, name, value)
    if any(name in SCHEDULE_FIELDS for name in fields):
        reschedule(locked, now)
    locked.save()
    return locked


def pause_monitor(monitor, *, now=None):
    """Paused monitors are never late or down; a ping resumes them (as Healthchecks does)."""
    now = now or timezone.now()
    Monitor.objects.filter(pk=monitor.pk).update(state=Monitor.State.PAUSED, next_expected_at=None, deadline_at=None,
                                                 state_changed_at=now, updated_at=now)
    monitor.refresh_from_db()
    return monitor


def resume_monitor(monitor, *, now=None):
    """Back to ``new``: it waits for the next ping before it can be late again."""
    now = now or timezone.now()
    Monitor.objects.filter(pk=monitor.pk, state=Monitor.State.PAUSED).update(
        state=Monitor.State.NEW, state_changed_at=now, updated_at=now)
    monitor.refresh_from_db()
    return monitor


def ensure_badge(monitor):
    """The monitor's badge token, made on first use; returns (token, created)."""
    from apps.badges.models import new_token

    if monitor.badge_token:
        return monitor.badge_token, False
    token = new_token()
    updated = Monitor.objects.filter(pk=monitor.pk, badge_token__isnull=True).update(badge_token=token)
    monitor.refresh_from_db(fields=["badge_token"])
    return monitor.badge_token, bool(updated)
