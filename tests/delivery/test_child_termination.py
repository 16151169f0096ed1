"""The prefork child's SIGTERM guard (apps/executions/tasks.py), in this process: held
during a task, handed to the pool's own handler between tasks, and wrapped only once
however many tasks the child runs."""

import signal

import pytest

from apps.executions.tasks import _ChildTermination


@pytest.fixture
def pool_handler():
    calls = []
    previous = signal.signal(signal.SIGTERM, lambda signum, frame: calls.append(signum))
    yield calls
    signal.signal(signal.SIGTERM, previous)


def test_many_tasks_then_sigterm_reaches_the_pool_handler_once(pool_handler):
    guard = _ChildTermination()
    guard.enable()
    for _ in range(3):  # every task re-checks the installed handler
        guard.task_started()
        guard.task_finished()
    signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)  # between tasks
    assert pool_handler == [signal.SIGTERM]


def test_sigterm_during_a_task_is_held(pool_handler, monkeypatch):
    guard = _ChildTermination()
    guard.enable()
    resent = []
    monkeypatch.setattr(guard, "_resend", lambda: resent.append(True))
    guard.task_started()
    signal.getsignal(signal.SIGTERM)(signal.SIGTERM, None)
    assert pool_handler == [] and guard.held
    guard.task_finished()
    assert resent  # handed on once the task has returned
