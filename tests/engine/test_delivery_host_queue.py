"""The asyncio engine's per-host queue (HostQueue) and its hosts-file resolver.

A host gets at most ``max_per_host`` of a loop's requests at once; the rest wait in order,
and a delivery's timeout runs from its turn, not from when it started waiting."""

import asyncio

import pytest

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


@pytest.fixture
def blackhole():
    """A host that never answers a connection: a listener on 127.0.0.3 that accepts nothing,
    its one-place backlog filled first, so the kernel drops every later SYN (as a firewall
    that drops packets does)."""
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.3", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    for _ in range(3):  # the accept queue holds backlog + 1: fill it whatever the kernel allows
        filler = socket.socket()
        filler.setblocking(False)
        filler.connect_ex(("127.0.0.3", port))
        fillers.append(filler)
    yield f"http://127.0.0.3:{port}"
    for sock in (*fillers, listener):
        sock.close()


def test_a_blackholed_host_holds_only_its_own_places_and_each_connect_is_timed_from_its_turn(server, blackhole):
    """Deliveries to a host that drops every packet wait for their connect timeout within the
    host's places; another host's deliveries, sent at the same time, never queue behind them."""
    session = loop_thread().call(lambda: AsyncSession(LOOPBACK, max_per_host=2))
    dropped = [prepared(f"{blackhole}/hook", timeout=3.0, connect_timeout=0.5) for _ in range(6)]
    fast = [prepared(server.url("/ok"), timeout=3.0) for _ in range(4)]
    results = deliver_all(session, LOOPBACK, dropped + fast)
    lost, answered = results[:6], results[6:]
    assert [r.status_code for r in answered] == [200] * 4
    assert all(r.duration_ms < 1000 for r in answered)  # not behind the blackhole's rounds (1.5 s)
    assert [r.error_kind for r in lost] == ["connect_error"] * 6
    assert {r.error_message for r in lost} == {"timed out while connecting"}
    # Six behind two places: three rounds of the 0.5 s connect timeout, each timed from its
    # turn (none ran out of time while it waited).
    assert all(r.duration_ms < 1000 for r in lost)  # each about 0.5 s; the last round began at 1 s


# --- a busy host's connections: reused before new ones are opened (GuardedConnector.reuse_wait) ----

@pytest.fixture
def fresh_server(server):
    server.received.clear()  # the module's server: count this test's connections only
    return server


def deliver_second_once_first_holds_its_connection(session, first, second):
    """Send ``first``; once it holds a connection (and none is idle), send ``second``:
    [both results]. The session is closed on its loop's thread at the end."""
    async def scenario():
        try:
            one = asyncio.ensure_future(deliver_async(first, session=session, policy=LOOPBACK, max_body_bytes=16384))
            while not session.connector._in_use:
                await asyncio.sleep(0.005)
            two = await deliver_async(second, session=session, policy=LOOPBACK, max_body_bytes=16384)
            return [await one, two]
        finally:
            await session.close()
    return loop_thread().submit(scenario()).result(60)


def test_a_request_takes_its_hosts_connection_when_it_comes_back_instead_of_opening_another(fresh_server):
    session = loop_thread().call(lambda: AsyncSession(LOOPBACK, reuse_wait=30.0))
    results = deliver_second_once_first_holds_its_connection(
        session, prepared(fresh_server.url("/sleep/0.2")), prepared(fresh_server.url("/ok")))
    assert [r.status_code for r in results] == [200, 200]
    assert len({r["client_port"] for r in fresh_server.received}) == 1  # one connection, no second handshake


def test_without_the_wait_a_busy_host_gets_a_second_connection(fresh_server):
    """The same sends with ``reuse_wait=0`` (the slow path): two connections. So the test
    above shows the wait, not an accident of timing."""
    session = loop_thread().call(lambda: AsyncSession(LOOPBACK, reuse_wait=0))
    results = deliver_second_once_first_holds_its_connection(
        session, prepared(fresh_server.url("/sleep/0.2")), prepared(fresh_server.url("/ok")))
    assert [r.status_code for r in results] == [200, 200]
    assert len({r["client_port"] for r in fresh_server.received}) == 2


def test_the_wait_for_a_connection_is_not_the_hosts_time(fresh_server):
    """The second delivery waits longer for the first's connection than its own timeout
    allows: it still succeeds, as the wait is our queue, not the host's time."""
    session = loop_thread().call(lambda: AsyncSession(LOOPBACK, reuse_wait=30.0))
    results = deliver_second_once_first_holds_its_connection(
        session, prepared(fresh_server.url("/sleep/1")), prepared(fresh_server.url("/ok"), timeout=0.5))
    assert [r.status_code for r in results] == [200, 200]
    assert results[1].error_kind is None and results[1].duration_ms < 500
    assert len({r["client_port"] for r in fresh_server.received}) == 1


def test_a_slow_host_still_gets_a_connection_per_request_once_the_wait_is_over(fresh_server):
    """Four deliveries at once to a host answering in 1 s: none comes back within the
    (default) wait, so each opens its own and they run side by side, not one after another."""
    session = loop_thread().call(lambda: AsyncSession(LOOPBACK))
    results = deliver_all(session, LOOPBACK, [prepared(fresh_server.url("/sleep/1"), timeout=10) for _ in range(4)])
    assert [r.status_code for r in results] == [200] * 4
    assert len({r["client_port"] for r in fresh_server.received}) == 4


def test_a_cancelled_wait_leaves_no_waiter_behind(fresh_server):
    async def scenario():
        session = AsyncSession(LOOPBACK, reuse_wait=30.0)
        try:
            one = asyncio.ensure_future(deliver_async(prepared(fresh_server.url("/sleep/0.3")), session=session,
                                                      policy=LOOPBACK, max_body_bytes=16384))
            while not session.connector._in_use:
                await asyncio.sleep(0.005)
            two = asyncio.ensure_future(deliver_async(prepared(fresh_server.url("/ok")), session=session,
                                                      policy=LOOPBACK, max_body_bytes=16384))
            while not session.connector._reuse_waiters:
                await asyncio.sleep(0.005)
            two.cancel()
            await asyncio.gather(two, return_exceptions=True)
            first = await one
            return first, dict(session.connector._reuse_waiters), dict(session.connector._in_use)
        finally:
            await session.close()

    first, waiters, in_use = loop_thread().submit(scenario()).result(60)
    assert first.status_code == 200
    assert waiters == {} and in_use == {}


def test_a_loop_running_late_waits_longer_for_a_busy_hosts_connection(fresh_server):
    """On a loop whose timers fire late, requests hold their connections longer: the wait
    stretches (here 50 ms + 4 x 0.3 s), so the second request still takes the first's
    connection, freed after 0.6 s, where a punctual loop's 50 ms would have opened another
    (test_without_the_wait_...)."""
    def late_session():
        session = AsyncSession(LOOPBACK, reuse_wait=0.05)
        session.connector._lag = 0.3  # as measured by a wait whose timer fired late
        return session

    session = loop_thread().call(late_session)
    results = deliver_second_once_first_holds_its_connection(
        session, prepared(fresh_server.url("/sleep/0.6")), prepared(fresh_server.url("/ok")))
    assert [r.status_code for r in results] == [200, 200]
    assert len({r["client_port"] for r in fresh_server.received}) == 1


def test_a_wait_whose_timer_fires_late_measures_how_late_the_loop_runs():
    async def scenario():
        session = AsyncSession(LOOPBACK)
        try:
            connector, loop = session.connector, asyncio.get_running_loop()
            turn = loop.create_future()
            connector._wait_over(turn, loop.time() - 0.5)  # fired half a second after it was due
            first = connector._lag
            connector._wait_over(loop.create_future(), loop.time() + 1.0)  # on time: the lag decays
            return turn.done(), first, connector._lag
        finally:
            await session.close()

    settled, first, then = loop_thread().submit(scenario()).result(30)
    assert settled
    assert 0.09 < first < 0.11  # 0.2 x 0.5 s
    assert then < first
