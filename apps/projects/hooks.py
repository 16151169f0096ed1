"""What a higher app does when jobs are deleted.

A job's history (executions, attempts) belongs to apps.executions, which deletes a deleted
job's runs in batches after it (apps.executions.purging), never inside the request that
deletes the job or its project. Projects and jobs sit below executions and import none of
it: executions registers the deletion from its ``AppConfig.ready()`` with
``on_delete_jobs`` (docs/architecture.md, "Layers").
"""

from __future__ import annotations

from cronsvc.slot import Slot

_delete_jobs = Slot("job-deletion hook", "apps.executions")


def on_delete_jobs(hook):
    """Register ``hook(jobs)``, which deletes ``jobs`` (an iterable of Job) inside the
    caller's transaction and their history after it. One hook: registering another replaces
    it. Usable as a decorator."""
    return _delete_jobs.fill(hook)


def delete_jobs(jobs):
    return _delete_jobs.get()(jobs)
