"""One alert per state change (pure decisions)."""

from datetime import datetime, timedelta, timezone

from cronsvc.notify.decide import AlertFlags, JobHealth, Rule, decide, muted, reminder_due

NOW = datetime(2026, 1, 1, tzinfo=timezone.utc)


def health(failures, enabled=True, auto_disabled=False):
    return JobHealth(consecutive_failures=failures, enabled=enabled, auto_disabled=auto_disabled)


def test_a_burst_of_failures_alerts_once():
    flags, sent = AlertFlags(), []
    for n in range(1, 61):
        flags, events = decide(flags, ["failed"], health(n), Rule(), NOW)
        sent += events
    assert sent == [("failure", 0)]


def test_threshold_counts_consecutive_failures():
    flags, events = decide(AlertFlags(), ["failed", "failed"], health(2), Rule(failure_threshold=3), NOW)
    assert events == [] and not flags.failure_notified
    flags, events = decide(flags, ["timed_out"], health(3), Rule(failure_threshold=3), NOW)
    assert events == [("failure", 0)] and flags.failure_notified and flags.notified_at == NOW


def test_recovery_only_after_a_notified_failure():
    flags, events = decide(AlertFlags(), ["succeeded"], health(0), Rule(), NOW)
    assert events == []
    flags, _ = decide(flags, ["failed"], health(1), Rule(), NOW)
    flags, events = decide(flags, ["succeeded"], health(0), Rule(), NOW)
    assert events == [("recovery", 0)] and not flags.failure_notified


def test_fail_then_recover_then_fail_in_one_group():
    flags, _ = decide(AlertFlags(), ["failed"], health(1), Rule(), NOW)
    flags, events = decide(flags, ["succeeded", "failed"], health(1), Rule(), NOW)
    assert events == [("recovery", 0), ("failure", 1)]


def test_auto_disable_alerts_once_and_again_after_re_enabling():
    flags, events = decide(AlertFlags(), ["failed"], health(5, enabled=False, auto_disabled=True),
                           Rule(failure_threshold=10), NOW)
    assert events == [("disabled", 0)]
    flags, events = decide(flags, ["failed"], health(6, enabled=False, auto_disabled=True),
                           Rule(failure_threshold=10), NOW)
    assert events == []
    flags, _ = decide(flags, ["succeeded"], health(0), Rule(), NOW)
    assert not flags.disabled_notified


def test_muted_events():
    assert muted("recovery", Rule(notify_recovery=False)) and not muted("recovery", Rule())
    assert muted("disabled", Rule(notify_disabled=False)) and not muted("failure", Rule(notify_disabled=False))


def test_reminders_every_h_hours_while_failing():
    flags = AlertFlags(failure_notified=True, notified_at=NOW, last_reminder_at=NOW)
    assert not reminder_due(flags, 2, NOW + timedelta(hours=1, minutes=59))
    assert reminder_due(flags, 2, NOW + timedelta(hours=2))
    assert not reminder_due(flags, None, NOW + timedelta(days=3))
    assert not reminder_due(AlertFlags(), 1, NOW + timedelta(days=3))
