"""The jobs a worker process sends for, kept between batches.

A job's request changes rarely and is read for every run: loading it with each claim (its
columns, JSON fields and the decryption of its auth, secret headers and script environment) was
a large share of a worker's CPU per delivery (bench/README.md, "Figures behind the code"). The
claim reads each run's job stamp instead — the job's ``version`` and ``updated_at`` — and this
cache hands back the job it holds for that stamp, loading only the jobs it does not hold as
they are now (one query for all of a batch's missing jobs).

Every change of a job's request bumps its stamp: the services, pages, admin, crontab
import and rollback write a new version, and any ``save()`` moves ``updated_at``, also one
limited to some fields (``Job.save`` adds it). The health counters and the due time, which
the workers and the scheduler write with ``.update()`` and SQL, are not part of the request
and leave the stamp alone, so they do not empty the cache. Code that changes a request
column with ``QuerySet.update()`` must bump ``version`` too.
"""

import threading
from collections import OrderedDict
from functools import cache

from apps.jobs.models import Job
from apps.sql.modes import on_postgresql
from apps.sql.rows import fetch_all, select_list

# Jobs kept per process; a million-job tenant set simply loads more often.
DEFAULT_SIZE = 10_000


class JobCache:
    def __init__(self, fields, size=DEFAULT_SIZE):
        self.fields = tuple(dict.fromkeys(("id", "version", "updated_at", *fields)))
        self.size = size
        self._jobs = OrderedDict()  # job id -> Job
        self._lock = threading.Lock()

    def current(self, stamps):
        """The jobs of ``stamps`` ({job id: (version, updated_at)}), each as of its stamp
        or newer: {job id: Job}."""
        found, missing = {}, []
        with self._lock:
            for job_id, stamp in stamps.items():
                job = self._jobs.get(job_id)
                if job is not None and (job.version, job.updated_at) == stamp:
                    self._jobs.move_to_end(job_id)
                    found[job_id] = job
                else:
                    missing.append(job_id)
        if missing:
            loaded = _load(missing, self.fields)
            found.update(loaded)
            self._keep(loaded.values())
        return found

    def _keep(self, jobs):
        with self._lock:
            for job in jobs:
                self._jobs[job.id] = job
                self._jobs.move_to_end(job.id)
            while len(self._jobs) > self.size:
                self._jobs.popitem(last=False)

    def clear(self):
        with self._lock:
            self._jobs.clear()


def _load(job_ids, fields):
    """{job id: Job} of those of ``job_ids`` that exist. On PostgreSQL every column, by one
    prepared statement of one array parameter: a whole row is built in one step
    (apps.sql.loading.QuickLoad), where the ORM's ``only(*fields)`` built a deferred
    instance field by field and compiled a query of a literal per id, costing the worker
    (and PostgreSQL, planning it) more per job loaded (bench/README.md, "Figures behind the
    code"). Elsewhere (the embedded mode's SQLite) the ORM reads ``fields``."""
    if not on_postgresql():
        return Job.objects.only(*fields).in_bulk(job_ids)
    return {job.id: job for (job,) in fetch_all(_jobs_sql(), [list(job_ids)], Job)}


@cache
def _jobs_sql():
    return f'SELECT {select_list(Job, "j")} FROM "{Job._meta.db_table}" j WHERE j.id = ANY(%s)'
