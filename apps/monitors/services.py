"""What the API, the pages and the admin do to monitors: one code path for each change, made
with its audit event in one transaction when a person asks for it (apps.accounts.audit.audited)."""

from django.db import transaction
from django.utils import timezone

from apps.accounts.models import Organization
from apps.accounts.audit import audited
from apps.plans.limits import check_monitor_count

from .changes import StateChange, record_state_changes
from .models import Monitor
from .schedule import deadline, next_expected

SCHEDULE_FIELDS = ("schedule_type", "cron_expression", "interval_seconds", "timezone", "grace_seconds")


@audited
def create_monitor(*, project, audit, **fields):
    """A new monitor (state ``new``: it waits for its first ping). Raises PlanLimit past
    the plan's max_monitors; the organization row is locked so two creates cannot both
    take the last place."""
    organization = Organization.objects.select_for_update().select_related("plan").get(pk=project.organization_id)
    check_monitor_count(organization.plan, Monitor.objects.filter(organization=organization).count())
    monitor = Monitor.objects.create(project=project, organization=organization, **fields)
    audit("monitor.create", monitor, {"name": monitor.name})
    return monitor


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


@audited
def update_monitor(monitor, *, sent, now=None, audit, **fields):
    """Change ``monitor``'s ``fields``; the audit event names the fields ``sent``."""
    now = now or timezone.now()
    locked = Monitor.objects.select_for_update().get(pk=monitor.pk)
    old_state = locked.state
    for name, value in fields.items():
        setattr(locked, name, value)
    if any(name in SCHEDULE_FIELDS for name in fields):
        reschedule(locked, now)
    if locked.state != old_state:
        locked.state_changed_at = now
    locked.save()
    _changed(locked.pk, old_state, locked.state, now)
    audit("monitor.update", locked, {"fields": sorted(sent)})
    return locked


@audited
def delete_monitor(monitor, *, audit):
    audit("monitor.delete", monitor, {"name": monitor.name})
    monitor.delete()


def _set_state(monitor, state, now, *, only_from=None, **fields):
    """Move ``monitor`` (locked) to ``state`` and record the change; returns it refreshed."""
    with transaction.atomic():
        locked = Monitor.objects.select_for_update().get(pk=monitor.pk)
        if locked.state != state and (only_from is None or locked.state == only_from):
            Monitor.objects.filter(pk=locked.pk).update(state=state, state_changed_at=now, updated_at=now, **fields)
            _changed(locked.pk, locked.state, state, now)
    monitor.refresh_from_db()
    return monitor


def _changed(monitor_id, old_state, new_state, now):
    if old_state != new_state:
        record_state_changes([StateChange(monitor_id, old_state, new_state)], now)


@audited
def pause_monitor(monitor, *, now=None, audit):
    """Paused monitors are never late or down; a ping resumes them (as Healthchecks does)."""
    _set_state(monitor, Monitor.State.PAUSED, now or timezone.now(), next_expected_at=None, deadline_at=None)
    audit("monitor.pause", monitor)
    return monitor


@audited
def resume_monitor(monitor, *, now=None, audit):
    """Back to ``new``: it waits for the next ping before it can be late again."""
    # (a /start while paused left a deadline: a new monitor would go down by it)
    _set_state(monitor, Monitor.State.NEW, now or timezone.now(), only_from=Monitor.State.PAUSED, deadline_at=None)
    audit("monitor.resume", monitor)
    return monitor


@audited
def ensure_badge(monitor, *, audit):
    """The monitor's badge token, made on first use; returns (token, created)."""
    from apps.badges.models import new_token

    if monitor.badge_token:
        return monitor.badge_token, False
    token = new_token()
    updated = Monitor.objects.filter(pk=monitor.pk, badge_token__isnull=True).update(badge_token=token)
    monitor.refresh_from_db(fields=["badge_token"])
    if updated:
        audit("monitor.badge", monitor)
    return monitor.badge_token, bool(updated)
