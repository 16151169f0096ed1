"""cronsvc.jobhealth: one computation of a group's effect on its job's health, for both
recording paths (the grouped PostgreSQL statement and the one-by-one ORM updates)."""

from cronsvc.jobhealth import HealthDelta, counts, disabled_reason, health_delta


def test_failures_before_the_first_success_add_to_the_stored_count():
    delta = health_delta(["failed", "timed_out"], threshold=5)
    assert delta == HealthDelta(reset=False, head=2, tail=0, disable=False)
    assert delta.failures(stored=3) == 5
    assert delta.disables(stored=3, threshold=5) and not delta.disables(stored=2, threshold=5)


def test_a_success_resets_the_count_to_the_failures_after_it():
    delta = health_delta(["failed", "succeeded", "dead", "failed"], threshold=5)
    assert (delta.reset, delta.head, delta.tail) == (True, 1, 2)
    assert delta.failures(stored=10) == 2


def test_a_streak_after_a_success_that_reaches_the_threshold_disables():
    delta = health_delta(["succeeded", "failed", "failed", "succeeded"], threshold=2)
    assert delta.disable and delta.failures(stored=0) == 0 and delta.disables(stored=0, threshold=2)


def test_threshold_zero_never_disables():
    for statuses in (["failed"], ["succeeded", "failed", "failed"]):
        assert not health_delta(statuses, threshold=0).disables(stored=100, threshold=0)


def test_only_successes_and_failures_count():
    assert counts("succeeded") and counts("failed") and counts("timed_out") and counts("dead")
    assert not any(counts(status) for status in ("skipped", "cancelled", "queued", "running"))
    assert health_delta(["skipped", "cancelled"], threshold=1) == HealthDelta(False, 0, 0, False)


def test_the_reason_names_the_threshold():
    assert disabled_reason(3) == "Disabled automatically after 3 consecutive failed runs."
