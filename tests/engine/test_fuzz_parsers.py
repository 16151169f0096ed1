"""Input abuse at the edges of the engine: every parser a customer's text reaches, fed
random and near-valid input. Each must return a value or raise its documented validation
error (never anything else), in bounded time per input (hypothesis ``deadline``)."""

from datetime import datetime, timedelta, timezone

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cronsvc.delivery.errors import InvalidRequest
from cronsvc.delivery.guard import AddressPolicy, ForbiddenTarget, check_url
from cronsvc.delivery.outcome import parse_status_codes
from cronsvc.delivery.request import RequestSpec, validate_headers, validate_spec
from cronsvc.delivery.retry import parse_retry_after
from cronsvc.delivery.saferegex import compile_pattern
from cronsvc.delivery.template import check_template, render_body, template_variables
from cronsvc.schedules import ScheduleError, describe, next_run, parse_crontab, parse_schedule, validate_schedule

UTC = timezone.utc
NOW = datetime(2027, 3, 14, 6, 59, tzinfo=UTC)
FUZZ = settings(max_examples=200, deadline=timedelta(seconds=2),
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])

CRON_ATOMS = ["*", "*/", "-", ",", "/", "L", "W", "#", "?", "LW", "MON", "FRI", "JAN", "DEC", "SUN",
              "0", "1", "5", "7", "12", "15", "23", "31", "59", "60", "99", "4294967296", " ", "  ", "\t"]
cron_like = st.lists(st.sampled_from(CRON_ATOMS), max_size=24).map("".join)
macros = st.sampled_from(["@yearly", "@annually", "@monthly", "@weekly", "@daily", "@midnight", "@hourly",
                          "@reboot", "@", "@every 5m"])
expressions = st.one_of(cron_like, macros, st.text(max_size=60))
zones = st.one_of(st.sampled_from(["UTC", "Europe/Berlin", "America/New_York", "Australia/Lord_Howe",
                                   "Asia/Kathmandu", "Etc/GMT+12", "../../etc/passwd", "", "utc"]),
                  st.text(max_size=30))
json_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=True),
                         st.text(max_size=40))
json_values = st.recursive(json_scalars, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=10), inner, max_size=4)), max_leaves=12)


@FUZZ
@given(expression=expressions, zone=zones)
def test_cron_schedules_parse_and_run_or_refuse(expression, zone):
    try:
        schedule = parse_schedule({"type": "cron", "expression": expression, "timezone": zone})
    except ScheduleError as exc:
        assert exc.code in ScheduleError.CODES and exc.message
        return
    describe(schedule)
    after = next_run(schedule, NOW)
    assert after is None or after > NOW
    try:
        validate_schedule(schedule, now=NOW, min_interval_seconds=60)
    except ScheduleError as exc:
        assert exc.code in ScheduleError.CODES


@FUZZ
@given(data=st.one_of(json_values, st.fixed_dictionaries(
    {"type": st.sampled_from(["cron", "interval", "once", "CRON", ""])},
    optional={"seconds": json_scalars, "at": json_scalars, "anchor": json_scalars,
              "expression": json_scalars, "timezone": json_scalars, "extra": json_scalars})))
def test_any_json_schedule_parses_or_is_refused(data):
    try:
        schedule = parse_schedule(data)
    except ScheduleError as exc:
        assert exc.code in ScheduleError.CODES
        return
    next_run(schedule, NOW)


CRONTAB_LINES = st.one_of(
    st.builds(lambda e, cmd: f"{e} {cmd}", st.one_of(cron_like, macros),
              st.sampled_from(["curl -fsS https://example.com/a", "wget -q -O- http://x.test/b?c=d",
                               "curl -X POST -H 'A: b' -d '{\"k\":1}' https://h.test/",
                               "curl $URL", "/usr/bin/backup.sh", "curl -u user:pw 'https://h.test/\\''",
                               "curl --json @file https://h.test", "wget", "curl -H", "curl \"unterminated"])),
    st.sampled_from(["CRON_TZ=Europe/Berlin", "TZ=Nowhere/City", "URL=https://example.com", "# comment", "",
                     "MAILTO=", "A = 'b c'"]),
    st.text(max_size=80),
)


@FUZZ
@given(lines=st.lists(CRONTAB_LINES, max_size=15), zone=zones)
def test_crontab_import_explains_every_line(lines, zone):
    try:
        result = parse_crontab("\n".join(lines), default_timezone=zone or "UTC")
    except ScheduleError as exc:
        assert exc.code in ScheduleError.CODES
        return
    for job in result.jobs:
        assert job.request["url"]
    for error in result.errors:
        assert error.code and error.reason and error.line >= 1


@settings(max_examples=5, deadline=timedelta(seconds=5))
@given(st.just(None))
def test_an_oversized_crontab_is_refused_quickly(_):
    with pytest.raises(ScheduleError):
        parse_crontab("* * * * * curl https://example.com/\n" * 5000)


PLACEHOLDERS = st.sampled_from(["{{ job.id }}", "{{job.name}}", "{{ attempt }}", "{{ now }}", "{{", "}}",
                                "{{ }}", "{{ job.name | upper }}", "{{ upstream.a.json.0.x }}", "{{ a.b.c }}",
                                '"', "\\", "{", "}", "[", "]", ":", ","])
templates = st.lists(st.one_of(PLACEHOLDERS, st.text(max_size=10)), max_size=12).map("".join)
VARIABLES = {"job.id": "j1", "job.name": 'a "quoted" \\ name\n', "attempt": 2, "now": "2027-01-01T00:00:00Z",
             "execution.id": "e1", "scheduled_for": "2027-01-01T00:00:00Z"}


@FUZZ
@given(template=templates, body_format=st.sampled_from(["raw", "json", "form", "xml"]))
def test_templates_render_or_are_refused(template, body_format):
    try:
        template_variables(template)
        check_template(template, body_format, set(VARIABLES))
    except InvalidRequest as exc:
        assert exc.code and exc.field
        return
    if body_format in ("raw", "json", "form"):
        assert isinstance(render_body(template, VARIABLES, body_format), str)


header_names = st.one_of(st.text(max_size=20), st.sampled_from(
    ["X-Ok", "webhook-id", "X-Cronsvc-Attempt", "Host", "Content-Length", "bad name", "X\r\nInjected", ""]))
header_values = st.one_of(st.text(max_size=40), st.sampled_from(["v", " padded ", "a\r\nX-Evil: 1", "\x00", "é"]),
                          json_scalars)


@FUZZ
@given(headers=st.dictionaries(header_names, header_values, max_size=6))
def test_header_values_are_accepted_or_refused_with_a_code(headers):
    try:
        validate_headers(headers)
    except InvalidRequest as exc:
        assert exc.code in ("invalid_header", "reserved_header", "duplicate_header")
        return
    for name, value in headers.items():
        assert "\r" not in value and "\n" not in value and "\x00" not in value


@FUZZ
@given(body=templates, method=st.sampled_from(["GET", "POST", "PATCH", "TRACE", "get"]),
       body_format=st.sampled_from(["raw", "json", "form", "xml"]),
       auth=st.one_of(st.none(), st.dictionaries(st.sampled_from(["type", "token", "username", "password"]),
                                                 st.one_of(st.text(max_size=12), st.sampled_from(["basic", "bearer"])),
                                                 max_size=4)),
       timeout=st.floats(allow_nan=True, allow_infinity=True))
def test_request_specs_validate_or_refuse(body, method, body_format, auth, timeout):
    spec = RequestSpec(url="https://example.com/", method=method, body=body, body_format=body_format,
                       auth=auth, timeout=timeout)
    try:
        validate_spec(spec)
    except InvalidRequest as exc:
        assert exc.code and exc.field


URL_PARTS = st.sampled_from(["http://", "https://", "ftp://", "file:///", "//", "http:", "user:pw@", "@",
                             "127.0.0.1", "[::1]", "[::ffff:10.0.0.1]", "0x7f.1", "169.254.169.254",
                             "example.com", "xn--nxasmq6b.test", "localhost", ":", ":0", ":80", ":22", ":99999",
                             ":-1", "/path", "?q=1", "#frag", "\\", " ", "\t", "%00", "..", "."])
urls = st.one_of(st.lists(URL_PARTS, max_size=8).map("".join), st.text(max_size=60))


@FUZZ
@given(url=urls, allow_private=st.booleans())
def test_urls_are_checked_without_crashing(url, allow_private):
    try:
        target = check_url(url, AddressPolicy(allow_private=allow_private))
    except ForbiddenTarget as exc:
        assert str(exc)
        return
    assert target.scheme in ("http", "https") and target.host and 0 < target.port < 65536


@FUZZ
@given(text=st.one_of(st.text(max_size=30), st.lists(st.sampled_from(
    ["200", "-", ",", "299", "1000", "0", "2xx", " ", "999999999999", "300-200"]), max_size=8).map("".join)))
def test_status_code_lists_parse_or_are_refused(text):
    try:
        ranges = parse_status_codes(text)
    except InvalidRequest as exc:
        assert exc.code
        return
    assert all(isinstance(r, range) for r in ranges)


@FUZZ
@given(value=st.one_of(st.none(), st.text(max_size=40), st.sampled_from(
    ["7", "-1", "1e9", "99999999999999999999", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT"])))
def test_retry_after_values_never_crash(value):
    delay = parse_retry_after(value, NOW)
    assert delay is None or delay >= 0


REGEX_ATOMS = st.sampled_from(["a", "(", ")", "*", "+", "?", "{2,}", "{,99999}", "[", "]", "^", "$", "\\",
                               "\\d", "|", ".", "(?=", "(?P<n>", "\\1", "(a*)*", "(?i)"])


@FUZZ
@given(pattern=st.one_of(st.lists(REGEX_ATOMS, max_size=10).map("".join), st.text(max_size=20)),
       body=st.text(max_size=200))
def test_success_regexes_compile_and_match_in_bounded_time(pattern, body):
    try:
        compiled = compile_pattern(pattern)
    except InvalidRequest as exc:
        assert exc.code
        return
    compiled.search(body * 20)
