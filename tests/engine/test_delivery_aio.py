"""The asyncio engine (cronsvc.delivery.aio.deliver_async) passes the blocking client's own
tests: test_delivery_client.py and test_delivery_cancel.py are loaded a second time with
``deliver`` and ``make_session`` bound to the asyncio engine (run on a loop thread, as a
worker process runs it), so every outcome class, the guard at connect time on every hop,
the deadlines and the cancel are checked on both engines by the same assertions."""

import importlib.util
import sys
from pathlib import Path

import pytest

from cronsvc.delivery.aio import AsyncSession, deliver_async, loop_thread

HERE = Path(__file__).parent


_sessions = []


def make_session(policy, *, ca_bundle=None, **_pool_sizes):
    session = loop_thread().call(lambda: AsyncSession(policy, ca_bundle=ca_bundle))
    _sessions.append(session)
    return session


@pytest.fixture(scope="module", autouse=True)
def _close_sessions_on_their_loop():
    """The module's sessions are closed on the loop's thread at its end. Dropped on the test's thread
    instead, their open connections' uvloop transports would be freed there — libuv handles
    closed from a thread other than the loop's, while the loop runs: a crash inside
    uvloop's run_forever (the segfault of an earlier full run, like MagicStack/uvloop#706)."""
    yield
    while _sessions:
        loop_thread().submit(_sessions.pop().close()).result(30)


def deliver(prepared, *, session, policy, **kwargs):
    return loop_thread().submit(deliver_async(prepared, session=session, policy=policy, **kwargs)).result(120)


def _on_the_asyncio_engine(filename):
    name = f"{__name__}__{Path(filename).stem}"
    spec = importlib.util.spec_from_file_location(name, HERE / filename)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    module.deliver, module.make_session = deliver, make_session
    return {key: value for key, value in vars(module).items() if key.startswith("test_") or hasattr(value, "_pytestfixturefunction") or getattr(value, "_fixture_function_marker", None)}


for _filename in ("test_delivery_client.py", "test_delivery_cancel.py"):
    _tests = _on_the_asyncio_engine(_filename)
    globals().update({(f"{key}__asyncio" if key.startswith("test_") else key): value for key, value in _tests.items()})
