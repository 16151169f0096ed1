"""A scheduler process hides what it loaded at start-up from the garbage collector before
its loop starts, and a worker process when it starts (cronsvc.gc_tuning): full collections
walking Django's and Celery's objects again and again were a quarter of a scheduler's CPU
(bench/README.md, "Figures behind the code")."""

import gc

import pytest
from django.core.management import call_command

from apps.executions.scheduling.process import SchedulerLoop
from cronsvc.gc_tuning import YOUNG_THRESHOLD


@pytest.fixture
def restored_gc():
    threshold = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*threshold)


def test_the_scheduler_command_freezes_its_start_up_objects_before_its_loop(restored_gc, monkeypatch):
    seen = {}

    def run(loop, **kwargs):
        seen.update(frozen=gc.get_freeze_count(), young=gc.get_threshold()[0])

    monkeypatch.setattr(SchedulerLoop, "install_signal_handlers", lambda loop: None)
    monkeypatch.setattr(SchedulerLoop, "run", run)
    gc.unfreeze()
    call_command("run_scheduler")
    assert seen["frozen"] > 10_000  # Django and the apps at least
    assert seen["young"] == YOUNG_THRESHOLD


def test_a_worker_process_freezes_its_start_up_objects_when_it_starts(restored_gc):
    from apps.executions import tasks  # its hook runs on Celery's worker_process_init

    gc.unfreeze()
    tasks._freeze_startup_objects()
    assert gc.get_freeze_count() > 10_000
    assert gc.get_threshold()[0] == YOUNG_THRESHOLD
