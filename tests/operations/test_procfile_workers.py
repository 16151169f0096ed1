"""Every Celery worker line of the Procfiles starts without Celery's mingle: its start-up
broadcast to the other workers (for revoked task ids; cronsvc revokes none) ended a worker
whose broker went away during it ("Unrecoverable error"), where at any other moment the
worker reconnects (the RabbitMQ chaos soak, docs/architecture.md)."""

import shlex
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def worker_lines():
    for procfile in ("Procfile", "Procfile.embedded"):
        for line in (ROOT / procfile).read_text().splitlines():
            name, _, command = line.partition(":")
            words = shlex.split(command)
            if "celery" in words and "worker" in words:
                yield pytest.param(words, id=f"{procfile}:{name}")


@pytest.mark.parametrize("words", list(worker_lines()))
def test_a_worker_line_starts_without_mingle(words):
    assert "--without-mingle" in words


def test_every_worker_line_is_checked():
    assert len(list(worker_lines())) == 6  # five in the Procfile, one embedded
