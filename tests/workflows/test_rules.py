"""The decision table of a downstream job, without a database."""

import pytest

from apps.workflows.rules import RUN, SKIP, WAIT, decide, reachable

A, B = "a", "b"


@pytest.mark.parametrize("on, status, expected", [
    ("success", "succeeded", RUN), ("success", "failed", SKIP), ("success", "timed_out", SKIP),
    ("success", "dead", SKIP), ("success", "skipped", SKIP),
    ("failure", "failed", RUN), ("failure", "timed_out", RUN), ("failure", "dead", RUN),
    ("failure", "succeeded", SKIP), ("failure", "skipped", SKIP),
    ("any", "succeeded", RUN), ("any", "failed", RUN), ("any", "dead", RUN), ("any", "skipped", SKIP),
    ("success", None, WAIT), ("any", "running", WAIT), ("success", "queued", WAIT),
])
def test_every_on_condition(on, status, expected):
    statuses = {A: status} if status else {}
    assert decide("all", [(A, on)], statuses, {A}) == expected
    assert decide("any", [(A, on)], statuses, {A}) == expected


def test_all_waits_for_every_upstream_and_gives_up_on_the_first_miss():
    links = [(A, "success"), (B, "success")]
    assert decide("all", links, {A: "succeeded"}, {A, B}) == WAIT
    assert decide("all", links, {A: "succeeded", B: "succeeded"}, {A, B}) == RUN
    assert decide("all", links, {A: "failed"}, {A, B}) == SKIP


def test_any_runs_on_the_first_and_skips_when_every_taking_part_upstream_missed():
    links = [(A, "success"), (B, "success")]
    assert decide("any", links, {A: "succeeded"}, {A, B}) == RUN
    assert decide("any", links, {A: "failed"}, {A, B}) == WAIT
    assert decide("any", links, {A: "failed", B: "failed"}, {A, B}) == SKIP
    # B cannot run in this workflow run (not downstream of its first job): A decides alone
    assert decide("any", links, {A: "failed"}, {A}) == SKIP


def test_reachable():
    assert reachable("r", {"r": ["x", "y"], "x": ["z"], "y": ["z"], "q": ["z"]}) == {"r", "x", "y", "z"}
