"""Tenants and jobs for the soak (Django must be set up): enterprise tenants, interval
jobs of a few seconds aimed at the target, staggered so their runs spread evenly."""

import random
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

JOBS_PER_TENANT = 500


def load(*, seed, jobs, interval, target_url, start, burst=None):
    from apps.billing.models import Plan
    from apps.jobs.models import Job
    from apps.projects.provisioning import provision_tenant

    rng = random.Random(seed)
    # The soak's own database: let its enterprise plan run jobs every second.
    Plan.objects.filter(code="enterprise").update(min_interval_seconds=1)
    tenants = [provision_tenant(org_name=f"Soak {n}", email=f"soak{n}@example.com", plan_code="enterprise")
               for n in range(max(1, -(-jobs // JOBS_PER_TENANT)))]
    specs = []  # (name, path, interval, anchor)
    for n in range(jobs):
        seconds = rng.randint(*interval)
        specs.append((f"soak job {n}", f"/hook/{n}", seconds, start + timedelta(seconds=rng.uniform(0, seconds))))
    if burst is not None:  # (due at, how many, interval): every one due at that very second
        at, count, every = burst
        specs += [(f"soak burst job {n}", f"/hook/burst-{n}", every, at) for n in range(count)]
    rows = []
    for n, (name, path, seconds, anchor) in enumerate(specs):
        tenant = tenants[n % len(tenants)]
        rows.append(Job(
            project=tenant.project, organization=tenant.organization, name=name,
            schedule_type=Job.ScheduleType.INTERVAL, interval_seconds=seconds, start_at=anchor,
            url=f"{target_url}{path}", method=Job.Method.GET, timeout_seconds=5,
            max_attempts=3, retry_initial_delay_seconds=1, retry_max_delay_seconds=2,
            next_run_at=anchor, created_at=timezone.now(),
        ))
    with transaction.atomic():
        Job.objects.bulk_create(rows, batch_size=1000)
    return [t.organization.id for t in tenants]


def disable_all():
    """Stop every job; returns {job id: (start_at, interval, next_run_at)} as of the moment
    it stopped. Locking the due times waits for any claim holding one, so each returned
    ``next_run_at`` is the one after the last occurrence a scheduler handled."""
    from django.db import connection, transaction

    from apps.jobs.models import Job, JobDue

    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(f"SELECT job_id, next_run_at FROM {JobDue._meta.db_table} FOR UPDATE")
        due = dict(cursor.fetchall())
        cursor.execute(f"UPDATE {Job._meta.db_table} SET enabled = false RETURNING id, start_at, interval_seconds")
        return {job_id: (start_at, interval, due.get(job_id)) for job_id, start_at, interval in cursor.fetchall()}
