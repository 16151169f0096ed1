"""Lateness: how long after it was due a run's first attempt started.

A scheduled run is due at its occurrence (``scheduled_for``) plus the jitter the scheduler
applied to it on purpose (``Execution.jitter_seconds``): jitter is never lateness. It is
measured at the first attempt, because a retry starts late on purpose: while no attempt is
recorded (``attempt`` 0) ``started_at`` is the first attempt's start, afterwards the first
Attempt row holds it. This module is the rule's one home: the history API and pages, the
late alerts (apps.notifications.watch), the statistics (stats.py) and the daily roll-ups
(apps.executions.usage.rollups) all read it from here.
"""

from datetime import timedelta

from django.db.models import Case, DurationField, F, Func, OuterRef, Subquery, When

from apps.jobs.scheduling import due_after

from .models import Attempt

_FIRST_ATTEMPT_START = Subquery(
    Attempt.objects.filter(execution_id=OuterRef("pk"), number=1).order_by("started_at").values("started_at")[:1])
#: Annotation of an Execution queryset: when its first attempt started (None: not started).
FIRST_STARTED = Case(When(attempt=0, then=F("started_at")), default=_FIRST_ATTEMPT_START)


def with_first_start(executions):
    """``executions`` annotated with ``first_started_at``."""
    return executions.annotate(first_started_at=FIRST_STARTED)


def due_at(execution):
    """When the run was due: its occurrence plus its jitter."""
    return due_after(execution.scheduled_for, timedelta(seconds=execution.jitter_seconds or 0))


def lateness(execution, first_started_at):
    """How late the run started (a timedelta), or None while it has not started."""
    return None if first_started_at is None else first_started_at - due_at(execution)


def first_start_of(execution):
    """When the run's first attempt started: the annotation of ``with_first_start`` when
    present, else read (one query for a run with recorded attempts)."""
    if hasattr(execution, "first_started_at"):
        return execution.first_started_at
    if not execution.attempt:
        return execution.started_at
    return (Attempt.objects.filter(execution_id=execution.pk, number=1).order_by("started_at")
            .values_list("started_at", flat=True).first())


def lateness_seconds(execution):
    """Seconds late (3 decimals), or None while the run has not started."""
    late = lateness(execution, first_start_of(execution))
    return None if late is None else round(late.total_seconds(), 3)


def lateness_ms(started_at, scheduled_for, jitter_seconds):
    """Milliseconds late (truncated, as lateness_ms_sql) of a first attempt that started at
    ``started_at``."""
    due = due_after(scheduled_for, timedelta(seconds=jitter_seconds or 0))
    return int((started_at - due).total_seconds() * 1000)


#: PostgreSQL: an Attempt (number 1) queryset's lateness, as an interval.
ATTEMPT_LATENESS_PG = (F("started_at") - F("execution__scheduled_for")
                       - Func(F("execution__jitter_seconds"), template="make_interval(secs => %(expressions)s)",
                              output_field=DurationField()))


def lateness_ms_sql(started, execution="e"):
    """SQL of the milliseconds late (bigint) of a first attempt started at ``started``, for
    hand-written statements (the roll-ups, apps.executions.usage), with ``execution`` the runs' alias."""
    return (f"(trunc(extract(epoch FROM {started} - {execution}.scheduled_for) * 1000)::bigint "
            f"- {execution}.jitter_seconds * 1000)")
