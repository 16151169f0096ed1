"""One timer a tick for the deliveries' total deadlines (cronsvc/delivery/deadlines.py): a
delivery expires no sooner than its deadline and at most a tick after it, and a withdrawn
one never expires."""

import asyncio

from cronsvc.delivery.deadlines import TickDeadlines


def run(coroutine):
    return asyncio.run(coroutine)


def test_an_entry_expires_after_its_deadline_and_within_a_tick():
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = TickDeadlines(loop, tick=0.05)
        expired = {}
        started = loop.time()
        for seconds in (0.1, 0.23, 0.3):
            deadlines.add(seconds, seconds, lambda s=seconds: expired.setdefault(s, loop.time() - started))
        await asyncio.sleep(0.5)
        return expired, len(deadlines)

    expired, left = run(main())
    assert sorted(expired) == [0.1, 0.23, 0.3] and left == 0
    for seconds, after in expired.items():
        assert seconds <= after < seconds + 0.05 + 0.03  # a tick, and the loop's own lateness


def test_a_withdrawn_entry_never_expires_and_the_timer_stops():
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = TickDeadlines(loop, tick=0.05)
        expired = []
        tick = deadlines.add("gone", 0.1, lambda: expired.append("gone"))
        deadlines.add("kept", 0.1, lambda: expired.append("kept"))
        deadlines.withdraw("gone", tick)
        await asyncio.sleep(0.3)
        return expired, deadlines._timer

    expired, timer = run(main())
    assert expired == ["kept"]
    assert timer is None  # nothing filed: no timer left running


def test_a_deadline_cancels_the_task_that_is_still_waiting():
    """What deliver_async does with it: the expiry cancels the waiting task, never one that
    has withdrawn (a task that returned keeps its result)."""
    async def main():
        loop = asyncio.get_running_loop()
        deadlines = TickDeadlines(loop, tick=0.05)

        async def waits(seconds):
            task = asyncio.current_task()
            tick = deadlines.add(task, 0.4, task.cancel)
            try:
                await asyncio.sleep(seconds)
                return "done"
            except asyncio.CancelledError:
                task.uncancel()
                return "expired"
            finally:
                deadlines.withdraw(task, tick)

        # the last returns 0.2 s before its deadline: a loaded machine's late wake-up stays clear of it
        return await asyncio.gather(waits(0.02), waits(1.5), waits(0.2))

    assert run(main()) == ["done", "expired", "done"]
