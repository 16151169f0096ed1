"""The bridge between a Job row and the schedule engine in cronsvc.schedules."""

from datetime import timedelta

from cronsvc.schedules import CronSchedule, IntervalSchedule, OnceSchedule, jitter_offset, next_run

from .models import Job


def job_schedule(job):
    if job.schedule_type == Job.ScheduleType.CRON:
        return CronSchedule(expression=job.cron_expression, timezone=job.timezone)
    if job.schedule_type == Job.ScheduleType.INTERVAL:
        anchor = job.start_at or job.created_at
        return IntervalSchedule(seconds=job.interval_seconds, anchor=anchor, timezone=job.timezone)
    return OnceSchedule(at=job.run_at, timezone=job.timezone)


def job_jitter(job):
    """The job's stable offset: its runs are due this long after each occurrence."""
    if not job.jitter_seconds:
        return timedelta(0)
    return timedelta(seconds=jitter_offset(str(job.id), job.jitter_seconds))


def next_occurrence(job, after):
    """The job's first occurrence strictly after ``after`` (no jitter), or None."""
    if job.schedule_type == Job.ScheduleType.NONE:
        return None  # started only by its upstream jobs
    return next_run(job_schedule(job), after, start_at=job.start_at, end_at=job.end_at)


def due_after(occurrence, jitter):
    """The jitter rule: a run is due its jitter after its occurrence. The one place that
    says so: the scheduler's tick, which holds a batch's jitters, calls it directly."""
    return occurrence + jitter


def occurrence_before(due_at, jitter):
    """Inverse of due_after: the occurrence whose run is due at ``due_at``."""
    return due_at - jitter


def due_time(occurrence, job):
    """When an occurrence of the job becomes due (None: no occurrence, no due time)."""
    return None if occurrence is None else due_after(occurrence, job_jitter(job))


def occurrence_of(due_at, job):
    """Inverse of due_time."""
    return occurrence_before(due_at, job_jitter(job))
