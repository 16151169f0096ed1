"""A run's state changes as event-stream entries (apps.eventstream), written in the
change's transaction. The batch paths write theirs in SQL, in the statement of the change
(scheduler.py, recording.py); the others call ``changed``. Nothing happens while the
stream is off (EVENT_STREAM)."""

from apps.eventstream import outbox


def changed(executions, status, previous, now, *, reason="", attempt=None, **detail):
    """One entry per execution moved from ``previous`` to ``status`` at ``now``. The
    executions need their job (the event names its project), ``scheduled_for`` and
    ``trigger`` loaded; ``status``, ``reason`` and ``attempt`` may be functions of the
    execution (``attempt`` None: the execution's own)."""
    if not outbox.enabled():
        return
    outbox.add(
        outbox.execution_entry(
            e, _of(status, e), previous, now, reason=_of(reason, e), attempt=_of(attempt, e),
            detail={"scheduled_for": e.scheduled_for, "trigger": e.trigger, **detail},
        )
        for e in executions
    )


def _of(value, execution):
    return value(execution) if callable(value) else value
