"""The worker: a Celery worker process's side of a run (claim, send, record)."""
