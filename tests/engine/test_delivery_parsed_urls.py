"""The engine parses a job's URL once (``aio._parsed``) and hands aiohttp the parsed URL:
what goes on the wire must be what aiohttp sends for the URL as a string (the slow path)."""

import pytest
import yarl

from cronsvc.delivery import aio
from tests.engine.test_delivery_aio import LOOPBACK, make_session, send, server  # noqa: F401

URLS = [
    "https://example.com/hook",
    "https://Example.COM:8443/a/b/../c?x=1&y=%20two&y=3#frag",
    "http://example.com/path%2Fwith%2Fslashes?q=caf%C3%A9",
    "http://example.com/café/ü?name=straße",
    "http://[2001:db8::1]:8080/v6?a",
    "http://127.0.0.1:9/?",
    "https://xn--caf-dma.example/x;params?",
]


@pytest.mark.parametrize("url", URLS)
def test_the_kept_parse_is_the_parse_aiohttp_makes(url):
    aio._parsed.cache_clear()
    first, again = aio._parsed(url), aio._parsed(url)
    assert again is first  # kept
    fresh = yarl.URL(url)  # what aiohttp's ClientSession._build_url makes of the string
    assert str(first) == str(fresh)
    assert (first.scheme, first.raw_host, first.port, first.raw_path_qs) == \
        (fresh.scheme, fresh.raw_host, fresh.port, fresh.raw_path_qs)


def test_a_url_yarl_refuses_stays_a_string_for_aiohttp_to_refuse():
    assert aio._parsed("http://exa mple.com:99999999/") == "http://exa mple.com:99999999/"


def test_the_request_line_is_the_one_the_string_gives(server):  # noqa: F811 - the module's fixture
    """The same URLs sent through the kept parse and as plain strings reach the server with
    the same request line."""
    import aiohttp

    from cronsvc.delivery.aio import loop_thread

    path = "/ok/caf%C3%A9/x%2Fy/ü?q=a%20b&r=straße&s="
    send(server.url(path), make_session(LOOPBACK))
    ours = server.received[-1]["request_target"], server.received[-1]["headers"].get("Host")

    async def plain():
        async with aiohttp.ClientSession() as session, session.get(server.url(path)) as response:
            await response.read()

    loop_thread().submit(plain()).result(30)
    assert (server.received[-1]["request_target"], server.received[-1]["headers"].get("Host")) == ours
