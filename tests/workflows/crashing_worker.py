"""A real Celery worker that is killed (SIGKILL) right after a downstream execution is
committed with its upstream's outcome, before it is published: the moment the workflow
guarantee is about. Run as ``python -m tests.workflows.crashing_worker <celery worker args>``."""

import os
import signal
import sys

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")
django.setup()

from apps.workflows import triggering  # noqa: E402
from config.celery import app  # noqa: E402


def _die_before_publishing(grouped):
    os.kill(os.getpid(), signal.SIGKILL)


triggering.publish = _die_before_publishing

if __name__ == "__main__":
    app.worker_main(["worker", *sys.argv[1:]])
