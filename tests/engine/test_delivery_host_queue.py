"""The asyncio engine's per-host queue (HostQueue) and its hosts-file resolver.

A host gets at most ``max_per_host`` of a loop's requests at once; the rest wait in order,
and a delivery's timeout runs from its turn, not from when it started waiting."""

import asyncio


from cronsvc.delivery.aio import AsyncSession, HostQueue, StaticResolver, deliver_async, hosts_file, loop_thread
# The engine tests' servers on 127.0.0.1 and 127.0.0.2 (module-scoped fixtures, one pair per module).
from tests.engine.test_delivery_aio import LOOPBACK, ONLY_127_0_0_2, prepared, server, server_two  # noqa: F401


def deliver_all(session, policy, deliveries):
    """Send ``deliveries`` at once, then close the session on its loop's thread (see
    test_delivery_aio.py: a uvloop transport must not be freed on another thread)."""
    async def all_of_them():
        try:
            return await asyncio.gather(*(deliver_async(d, session=session, policy=policy, max_body_bytes=16384)
                                          for d in deliveries))
        finally:
            await session.close()
    return loop_thread().submit(all_of_them()).result(60)


def test_waiters_get_their_turn_in_order_and_a_cancelled_one_passes_it_on():
    async def scenario():
        queue, order = HostQueue(2), []

        async def use(name):
            await queue.acquire("h:80")
            order.append(name)
            await asyncio.sleep(0.01)
            queue.release("h:80")

        await queue.acquire("h:80")
        await queue.acquire("h:80")  # both places taken
        waiters = {name: asyncio.create_task(use(name)) for name in "abcd"}
        await asyncio.sleep(0)
        assert queue.waiting("h:80") == 4 and queue.in_flight("h:80") == 2
        waiters["b"].cancel()
        queue.release("h:80")
        queue.release("h:80")
        await asyncio.gather(*waiters.values(), return_exceptions=True)
        assert queue.in_flight("h:80") == 0 and queue.waiting("h:80") == 0
        await queue.acquire("other:80")  # another host never waited
        return order

    assert asyncio.run(scenario()) == ["a", "c", "d"]


def test_one_place_per_host_serialises_its_requests_and_the_wait_is_not_timed(server):
    session = loop_thread().call(lambda: AsyncSession(LOOPBACK, max_per_host=1))
    # Three 1 s answers in a row take 3 s; each has 1.8 s once its turn comes.
    results = deliver_all(session, LOOPBACK, [prepared(server.url("/sleep/1"), timeout=1.8) for _ in range(3)])
    assert [r.status_code for r in results] == [200, 200, 200]
    assert [r.error_kind for r in results] == [None, None, None]
    assert all(r.duration_ms < 1800 for r in results)  # the queue's wait is not the host's time


def test_the_hosts_file_names_hosts_and_the_guard_still_checks_them(tmp_path, server_two):
    path = tmp_path / "hosts"
    path.write_text("# bench hosts\n127.0.0.2 alias-2.bench.test\n10.1.2.3 internal.bench.test\n")
    mapping = hosts_file(str(path))
    assert mapping == {"alias-2.bench.test": "127.0.0.2", "internal.bench.test": "10.1.2.3"}
    session = loop_thread().call(lambda: AsyncSession(ONLY_127_0_0_2, resolver=StaticResolver(mapping)))
    named, private, other = deliver_all(session, ONLY_127_0_0_2, [
        prepared(server_two.url("/ok", host="alias-2.bench.test")),
        prepared(server_two.url("/ok", host="internal.bench.test")),
        prepared(server_two.url("/ok", host="localhost")),  # not in the file: the system's answer, 127.0.0.1
    ])
    assert named.status_code == 200 and named.remote_addr == "127.0.0.2"
    assert private.error_kind == "forbidden_target"
    assert other.error_kind == "forbidden_target"
