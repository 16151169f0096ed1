"""What a higher app does when jobs are deleted.

A job's history (executions, attempts) belongs to apps.executions, which deletes a deleted
job's runs in batches after it (apps.executions.purging), never inside the request that
deletes the job or its project. Projects and jobs sit below executions and import none of
it: executions registers the deletion from its ``AppConfig.ready()`` with
``on_delete_jobs`` (docs/architecture.md, "Layers").
"""

from __future__ import annotations

_delete_jobs = []


def on_delete_jobs(hook):
    """Register ``hook(jobs)``, which deletes ``jobs`` (an iterable of Job) inside the
    caller's transaction and their history after it. One hook: registering another replaces
    it. Usable as a decorator."""
    _delete_jobs[:] = [hook]
    return hook


def delete_jobs(jobs):
    if not _delete_jobs:
        raise RuntimeError("No job-deletion hook registered: apps.executions must be installed")
    return _delete_jobs[0](jobs)
