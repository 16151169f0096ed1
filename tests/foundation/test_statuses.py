"""The run statuses named once in the engine (cronsvc.statuses) are the model's."""

from apps.executions.models import Execution
from cronsvc import statuses


def test_the_engines_status_sets_are_the_models_statuses():
    assert statuses.FINAL == set(Execution.FINAL_STATUSES)
    assert statuses.FINAL <= set(Execution.Status.values)
    assert statuses.FAILED == {Execution.Status.FAILED, Execution.Status.TIMED_OUT, Execution.Status.DEAD}
    assert statuses.RAN == statuses.FAILED | {Execution.Status.SUCCEEDED}
    assert statuses.CANCELLED == Execution.Status.CANCELLED
    assert statuses.CANCELLED in statuses.FINAL and statuses.CANCELLED not in statuses.FAILED
