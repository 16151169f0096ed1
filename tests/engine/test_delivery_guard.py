"""The outbound address guard: refused addresses, URL checks, save-time and connect-time."""

from __future__ import annotations

import ipaddress
import socket

import pytest
from hypothesis import given
from hypothesis import strategies as st

from types import SimpleNamespace

from cronsvc.delivery import guard
from cronsvc.delivery.guard import (
    AddressPolicy,
    ForbiddenTarget,
    InvalidHost,
    check_url,
    check_url_at_save,
    forbidden_reason,
    is_forbidden_address,
    open_connection,
    outbound_policy,
    parse_networks,
    parse_ports,
)

DEFAULT = AddressPolicy()
LOOPBACK = AddressPolicy(allowed_networks=(ipaddress.ip_network("127.0.0.0/8"),))


@pytest.mark.parametrize("address, reason", [
    ("127.0.0.1", "loopback"),
    ("127.255.0.9", "loopback"),
    ("::1", "loopback"),
    ("10.0.0.1", "private"),
    ("172.16.0.1", "private"),
    ("172.31.255.255", "private"),
    ("192.168.1.1", "private"),
    ("fc00::1", "private"),
    ("fd12:3456::1", "private"),
    ("169.254.169.254", "link-local"),  # cloud metadata
    ("fe80::1", "link-local"),
    ("fe80::1%eth0", "link-local"),
    ("100.64.0.1", "carrier-grade-nat"),
    ("0.0.0.0", "this-network"),
    ("0.1.2.3", "this-network"),
    ("::", "unspecified"),
    ("255.255.255.255", "reserved"),
    ("240.0.0.1", "reserved"),
    ("224.0.0.1", "multicast"),
    ("ff02::1", "multicast"),
    ("192.0.2.1", "documentation"),
    ("198.18.0.1", "benchmarking"),
    ("::ffff:127.0.0.1", "loopback"),  # IPv4-mapped
    ("::ffff:10.0.0.1", "private"),
    ("::ffff:169.254.169.254", "link-local"),
    ("64:ff9b::a00:1", "private"),  # NAT64 of 10.0.0.1
    ("2002:a00:1::", "private"),  # 6to4 of 10.0.0.1
    ("::127.0.0.1", "reserved"),  # deprecated IPv4-compatible form
    ("2001::1", "reserved"),  # Teredo
])
def test_forbidden_addresses(address, reason):
    assert forbidden_reason(address, DEFAULT) == reason
    assert is_forbidden_address(address, DEFAULT)
    assert not is_forbidden_address(address, AddressPolicy(allow_private=True))


@pytest.mark.parametrize("address", [
    "8.8.8.8", "1.1.1.1", "93.184.216.34", "2606:4700:4700::1111", "::ffff:8.8.8.8",
    "2002:808:808::", "64:ff9b::808:808", "172.32.0.1", "100.128.0.1",
])
def test_public_addresses_are_allowed(address):
    assert forbidden_reason(address, DEFAULT) is None


def test_allowed_networks_lift_only_their_range():
    policy = AddressPolicy(allowed_networks=(ipaddress.ip_network("10.1.0.0/16"),))
    assert not is_forbidden_address("10.1.2.3", policy)
    assert not is_forbidden_address("::ffff:10.1.2.3", policy)
    assert is_forbidden_address("10.2.0.1", policy)
    assert is_forbidden_address("127.0.0.1", policy)


def test_the_policy_accepts_network_strings_and_stays_hashable():
    policy = AddressPolicy(allowed_networks=["127.0.0.0/8"], allowed_ports=[443])
    assert hash(policy) == hash(AddressPolicy(allowed_networks=("127.0.0.0/8",), allowed_ports={443}))
    assert not is_forbidden_address("127.0.0.1", policy)


@given(st.integers(0, 2**24 - 1))
def test_all_of_10_slash_8_is_private_also_when_ipv4_mapped(offset):
    v4 = ipaddress.IPv4Address(int(ipaddress.IPv4Address("10.0.0.0")) + offset)
    assert forbidden_reason(v4, DEFAULT) == "private"
    assert forbidden_reason(f"::ffff:{v4}", DEFAULT) == "private"


@given(st.ip_addresses(v=4))
def test_ipv4_mapped_addresses_are_judged_like_their_ipv4(v4):
    assert forbidden_reason(f"::ffff:{v4}", DEFAULT) == forbidden_reason(v4, DEFAULT)


# --- URLs -------------------------------------------------------------------------------------

@pytest.mark.parametrize("url", [
    "ftp://example.com/", "file:///etc/passwd", "gopher://example.com/", "javascript:alert(1)",
    "//example.com/", "example.com", "",
])
def test_only_http_and_https(url):
    with pytest.raises(ForbiddenTarget):
        check_url(url, DEFAULT)


@pytest.mark.parametrize("url", [
    "http://user:pass@example.com/", "http://example.com@127.0.0.1/", "http://a@b@example.com/",
    "http://example.com\\@127.0.0.1/", "http://exa mple.com/", "http://example.com/\r\nX: y",
    "http://example.com:notaport/", "http:///path",
])
def test_userinfo_tricks_and_malformed_urls_are_refused(url):
    with pytest.raises(ForbiddenTarget):
        check_url(url, DEFAULT)


@pytest.mark.parametrize("url", [
    "http://127.0.0.1/", "http://[::1]/", "http://10.0.0.1/", "http://169.254.169.254/latest/meta-data/",
    "http://[::ffff:127.0.0.1]/", "http://100.64.0.1/", "http://0.0.0.0/",
    # Spellings getaddrinfo reads as 127.0.0.1:
    "http://2130706433/", "http://0x7f.1/", "http://127.1/", "http://0177.0.0.1/", "http://127.0.0.1./",
])
def test_forbidden_ip_literals_are_refused_from_the_url(url):
    with pytest.raises(ForbiddenTarget):
        check_url(url, DEFAULT)


@pytest.mark.parametrize("port, allowed", [
    (80, True), (443, True), (1024, True), (8080, True), (65535, True),
    (22, False), (25, False), (1023, False), (0, False),
])
def test_default_ports(port, allowed):
    url = f"http://example.com:{port}/"
    if allowed:
        assert check_url(url, DEFAULT).port == port
    else:
        with pytest.raises(ForbiddenTarget, match="port"):
            check_url(url, DEFAULT)


def test_operators_choose_the_ports():
    policy = AddressPolicy(allowed_ports=parse_ports("443, 8000-8999"))
    assert check_url("https://example.com/", policy).port == 443
    assert check_url("http://example.com:8443/", policy).port == 8443
    with pytest.raises(ForbiddenTarget):
        check_url("http://example.com/", policy)  # 80 not listed


def test_check_url_returns_the_target_without_any_dns():
    target = check_url("HTTPS://Example.COM./path?q=1", DEFAULT)
    assert (target.scheme, target.host, target.port, target.literal_ip) == ("https", "example.com", 443, None)
    assert check_url("http://no-such-host.invalid/", DEFAULT).host == "no-such-host.invalid"


def test_save_time_check_resolves_the_host():
    with pytest.raises(ForbiddenTarget, match="localhost"):
        check_url_at_save("http://localhost:8080/", DEFAULT)
    assert check_url_at_save("http://localhost:8080/", LOOPBACK).host == "localhost"


def test_save_time_check_accepts_a_host_that_does_not_resolve_yet():
    assert check_url_at_save("https://no-such-host.invalid/", DEFAULT).port == 443


def test_save_time_check_refuses_only_when_no_address_is_allowed():
    def resolve(host, port, type):  # noqa: A002 - getaddrinfo's keyword
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (ip, port)) for ip in ips]

    ips = ["10.0.0.1", "93.184.216.34"]
    assert check_url_at_save("http://mixed.example/", DEFAULT, resolve=resolve)
    ips = ["10.0.0.1", "192.168.0.1"]
    with pytest.raises(ForbiddenTarget, match="private"):
        check_url_at_save("http://private.example/", DEFAULT, resolve=resolve)


def test_save_time_look_up_is_remembered_for_a_while(monkeypatch):
    """Saving jobs to one host again asks the resolver once a minute, not per save; the
    policy still applies to the remembered addresses, and they are asked again later."""
    asked = []

    def getaddrinfo(host, port, type):  # noqa: A002 - getaddrinfo's keyword
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("10.0.0.7", port))]

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    for _ in range(3):
        with pytest.raises(ForbiddenTarget, match="private"):
            check_url_at_save("https://remembered.example/hook", DEFAULT)
    assert check_url_at_save("https://remembered.example/other", AddressPolicy(allow_private=True)).host == "remembered.example"
    assert asked == ["remembered.example"]
    monkeypatch.setattr(guard, "SAVE_LOOKUP_SECONDS", 0.0)
    with pytest.raises(ForbiddenTarget):
        check_url_at_save("https://remembered.example/hook", DEFAULT)
    assert asked == ["remembered.example"] * 2


# --- connect time -----------------------------------------------------------------------------

@pytest.fixture
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()
    yield sock.getsockname()[1]
    sock.close()


def test_open_connection_refuses_a_name_that_resolves_to_loopback(listener):
    with pytest.raises(ForbiddenTarget, match="loopback"):
        open_connection("localhost", listener, DEFAULT, timeout=1)


def test_open_connection_connects_to_an_allowed_address_and_reports_it(listener):
    sock, address = open_connection("localhost", listener, LOOPBACK, timeout=1)
    try:
        assert address == "127.0.0.1"
        assert sock.getpeername() == ("127.0.0.1", listener)
    finally:
        sock.close()


def test_open_connection_checks_the_port():
    with pytest.raises(ForbiddenTarget, match="port 22"):
        open_connection("127.0.0.1", 22, LOOPBACK, timeout=1)


def test_settings_parsers():
    assert parse_ports("80,443, 8000-8002") == frozenset({80, 443, 8000, 8001, 8002})
    with pytest.raises(ValueError):
        parse_ports("0-10")
    assert parse_networks("10.0.0.0/8, fd00::/8") == (
        ipaddress.ip_network("10.0.0.0/8"), ipaddress.ip_network("fd00::/8"))


# --- host names -------------------------------------------------------------------------------

@pytest.mark.parametrize("url, hint", [
    ("http://héllo.com/", "xn--hllo-bpa.com"),  # the form to give instead, in the message
    ("https://faß.de/", "xn--fa-hia.de"),  # IDNA 2008 (UTS 46), not 2003's fass.de: another domain
    ("http://ex\u3002com/", None),  # an ideographic full stop: a separator to some parsers only
    ("http://a\u200b.com/", None),  # a zero-width space
    ("http://\u2488.com/", None),  # no IDNA form at all
    ("http://xn--/", None),  # an xn-- label that is no punycode (encoders raise UnicodeError)
    ("http://xn--zz-zz.com/", None),
    ("http://" + "a" * 64 + ".com/", None),  # a label over 63 (the resolver's encoder raises)
    ("http://a..b/", None),
    ("http://%31%32%37.0.0.1/", None),  # percent-encoded: 127.0.0.1 to a WHATWG parser
    ("http://exa_mple!.com/", None),
])
def test_a_host_that_is_not_an_ascii_host_name_is_invalid(url, hint):
    with pytest.raises(InvalidHost) as refused:
        check_url(url, DEFAULT)
    assert refused.value.code == "invalid_host" and isinstance(refused.value, ForbiddenTarget)
    if hint:
        assert hint in refused.value.reason
    with pytest.raises(InvalidHost):  # the cached verdict keeps its kind
        check_url(url, DEFAULT)


@pytest.mark.parametrize("url", [
    "http://xn--hllo-bpa.com/", "https://my_host.example.com:8443/", "http://a-b.c-d.example/",
    "http://" + "a" * 63 + ".com/",
])
def test_ascii_host_names_pass(url):
    assert check_url(url, DEFAULT).host == url.split("/")[2].split(":")[0]


def test_a_refused_address_keeps_its_code():
    with pytest.raises(ForbiddenTarget) as refused:
        check_url("http://127.1/", DEFAULT)
    assert refused.value.code == "forbidden_target" and not isinstance(refused.value, InvalidHost)


def test_open_connection_refuses_a_name_the_resolver_cannot_encode():
    with pytest.raises(InvalidHost):
        open_connection("a" * 64 + ".com", 443, DEFAULT, timeout=1)


# --- the one policy from settings (docs/security.md, "One outbound policy") -------------------

def settings_of(private=False, networks=(), ports="80,443,1024-65535"):
    return SimpleNamespace(OUTBOUND_ALLOW_PRIVATE=private, OUTBOUND_ALLOWED_NETWORKS=networks,
                           OUTBOUND_ALLOWED_PORTS=ports)


@pytest.mark.parametrize("ports", ["", " ", None, "80,443,1024-65535"])
def test_empty_allowed_ports_mean_the_default_list(ports):
    policy = outbound_policy(settings_of(ports=ports))
    assert [p for p in (22, 25, 80, 443, 1023, 1024, 8080, 65535) if policy.port_allowed(p)] == \
        [80, 443, 1024, 8080, 65535]


def test_listed_ports_are_the_only_ones():
    policy = outbound_policy(settings_of(ports="443,8000-8001"))
    assert [p for p in (80, 443, 8000, 8001, 8002) if policy.port_allowed(p)] == [443, 8000, 8001]


@pytest.mark.parametrize("ports", [",", "0", "http", "443,70000"])
def test_ports_that_name_no_port_or_a_wrong_one_are_an_error(ports):
    with pytest.raises(ValueError):
        outbound_policy(settings_of(ports=ports))


def test_networks_are_read_from_a_list_or_a_comma_separated_text():
    as_list = outbound_policy(settings_of(networks=["127.0.0.0/8", "::1/128"]))
    assert as_list == outbound_policy(settings_of(networks="127.0.0.0/8, ::1/128"))
    assert forbidden_reason("127.0.0.2", as_list) is None and forbidden_reason("::1", as_list) is None
    assert forbidden_reason("10.0.0.1", as_list) == "private"


def test_a_purpose_may_widen_the_networks_but_keeps_the_rest():
    sso = outbound_policy(settings_of(networks=["127.0.0.0/8"], ports="443"), also_allowed_networks=["10.20.0.0/16"])
    assert forbidden_reason("10.20.0.1", sso) is None and forbidden_reason("127.0.0.1", sso) is None
    assert forbidden_reason("10.21.0.1", sso) == "private" and not sso.port_allowed(80)


def test_allow_private_lifts_the_address_check_not_the_ports():
    policy = outbound_policy(settings_of(private=True))
    assert forbidden_reason("169.254.169.254", policy) is None and not policy.port_allowed(22)


@pytest.mark.parametrize("host, address", [
    ("127.1", "127.0.0.1"), ("2130706433", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("0177.0.0.1", "127.0.0.1"),
    ("0x7f.1", "127.0.0.1"), ("134744072", "8.8.8.8"),
])
def test_an_unusual_spelling_of_an_address_is_refused_even_where_the_address_is_allowed(host, address):
    """getaddrinfo reads these as the address; the asyncio engine's URL parser refuses some
    (127.1) and resolves others as names (0x7f000001): only the canonical spelling is sent."""
    with pytest.raises(InvalidHost, match=f"write {address}"):
        check_url(f"http://{host}:8080/", LOOPBACK)
    if address.startswith("127."):  # where the address is refused, that is the reason given
        with pytest.raises(ForbiddenTarget, match="loopback") as refused:
            check_url(f"http://{host}:8080/", DEFAULT)
        assert not isinstance(refused.value, InvalidHost)
    assert check_url(f"http://{address}:8080/", LOOPBACK).literal_ip == ipaddress.ip_address(address)


@pytest.mark.parametrize("allowed, refused", [
    # the origin's verdict is kept (per scheme and netloc): a URL of an allowed origin whose
    # own string is bad is still refused, and a refused origin stays refused for every path
    ("https://hooks.example.com/a", "https://hooks.example.com/a b"),
    ("https://hooks.example.com/a", "https://hooks.example.com/a\\..\\b"),
    ("https://hooks.example.com/a", "https://hooks.example.com/" + "x" * guard.MAX_URL_LENGTH),
    ("https://hooks.example.com/a", "https://hooks.example.com/a\x00"),
    ("http://8.8.8.8:8080/ok", "http://8.8.8.8:8080/ok\t"),
])
def test_a_kept_origin_verdict_never_lets_a_bad_url_through(allowed, refused):
    assert check_url(allowed, DEFAULT)
    with pytest.raises(ForbiddenTarget):
        check_url(refused, DEFAULT)


def test_a_refused_origin_is_refused_on_every_path_and_under_its_own_policy_only():
    for path in ("/", "/a", "/b?c=d", "/#x"):
        with pytest.raises(ForbiddenTarget, match="loopback"):
            check_url(f"http://127.0.0.1:8080{path}", DEFAULT)
        assert check_url(f"http://127.0.0.1:8080{path}", LOOPBACK).host == "127.0.0.1"
    # the same netloc under another scheme is judged again (its default port differs)
    assert check_url("http://hooks.example.com/x", DEFAULT).port == 80
    assert check_url("https://hooks.example.com/x", DEFAULT).port == 443
    with pytest.raises(ForbiddenTarget, match="scheme"):
        check_url("ftp://hooks.example.com/x", DEFAULT)


def test_equal_policies_hash_alike_and_unequal_ones_apart():
    one = AddressPolicy(allowed_networks=("10.1.0.0/16",), allowed_ports={80, 8080})
    other = AddressPolicy(allowed_networks=(ipaddress.ip_network("10.1.0.0/16"),), allowed_ports=frozenset({8080, 80}))
    assert one == other and hash(one) == hash(other)
    assert hash(one) != hash(AddressPolicy(allowed_networks=("10.2.0.0/16",), allowed_ports={80, 8080}))
