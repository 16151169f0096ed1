"""The run statuses named once in the engine (cronsvc.statuses) are the model's."""

from apps.executions.models import Execution
from cronsvc import statuses


def test_the_engines_status_sets_are_the_models_statuses():
    assert Execution.FINAL_STATUSES is statuses.FINAL  # one set, not a second copy on the model
    # every status a run can have is final but the two a run passes through
    assert statuses.FINAL == set(Execution.Status.values) - {Execution.Status.QUEUED, Execution.Status.RUNNING}
    assert statuses.FAILED == {Execution.Status.FAILED, Execution.Status.TIMED_OUT, Execution.Status.DEAD}
    assert statuses.RAN == statuses.FAILED | {Execution.Status.SUCCEEDED}
    assert statuses.CANCELLED == Execution.Status.CANCELLED
    assert statuses.CANCELLED in statuses.FINAL and statuses.CANCELLED not in statuses.FAILED
