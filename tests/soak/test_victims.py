"""The chaos driver's choice of whom to kill: never a scheduler in the middle of its clock
jump (its restart could take the whole jump, so the jump's check would prove nothing),
nor a paused one when no other of its kind can go."""

import pytest

from soak import chaos
from soak.platform import PlatformProcess


@pytest.fixture
def schedulers(tmp_path):
    processes = [PlatformProcess(f"scheduler{n}", "sleep 60", {}, tmp_path) for n in (1, 2)]
    for process in processes:
        process.start()
    yield processes
    for process in processes:
        if process.alive():
            process.kill()


def driver(processes, said):
    return chaos.Driver(processes, postgres=None, redis=None, log=said.append)


def test_a_kill_skips_the_jumping_scheduler_when_the_other_is_paused(schedulers):
    first, second = schedulers
    said = []
    chaos_driver = driver(schedulers, said)
    chaos_driver.stopped.add(first.name)
    second.overrides = {"FAKETIME": "+0"}
    chaos_driver.jumping.add(second.name)

    chaos_driver._do(chaos.Event(1.0, "kill", second.name), started=0.0)
    chaos_driver._do(chaos.Event(1.0, "kill", first.name), started=0.0)

    assert first.alive() and second.alive()
    assert not chaos_driver.faults
    assert len(said) == 2 and all("this kill skipped" in line for line in said)


def test_a_kill_planned_for_the_jumping_scheduler_falls_on_the_other(schedulers):
    first, second = schedulers
    chaos_driver = driver(schedulers, [])
    second.overrides = {"FAKETIME": "+0"}
    chaos_driver.jumping.add(second.name)

    chaos_driver._do(chaos.Event(1.0, "kill", second.name), started=0.0)

    assert second.alive() and not first.alive()
    assert [fault["target"] for fault in chaos_driver.faults] == [first.name]
