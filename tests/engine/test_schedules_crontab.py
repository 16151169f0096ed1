"""parse_crontab: curl/wget lines become jobs, everything else is explained by line number."""

import pytest

from cronsvc.schedules import CrontabImport, CrontabLineError, ImportedJob, ScheduleError, parse_crontab


def only_job(command, *, variables=""):
    result = parse_crontab(f"{variables}0 3 * * * {command}\n")
    assert result.errors == []
    (job,) = result.jobs
    return job.request


def only_error(line):
    result = parse_crontab(line + "\n")
    assert result.jobs == []
    (error,) = result.errors
    return error


def request(url, method="GET", headers=None, body="", body_format="raw"):
    return {"url": url, "method": method, "headers": headers or {}, "body": body, "body_format": body_format}


def test_a_realistic_crontab():
    text = (
        "# m h dom mon dow command\n"
        "MAILTO=ops@example.com\n"
        "\n"
        "*/5 * * * * curl -fsS https://api.example.com/v1/ping?src=cron > /dev/null 2>&1\n"
        "CRON_TZ=Europe/Berlin\n"
        "   # an indented comment\n"
        "30 2 * * 1-5 curl -X POST -H 'Content-Type: application/json' -d '{\"full\": true}' https://api.example.com/backup\n"
        "@reboot curl https://api.example.com/boot\n"
        "0 4 * * * /usr/local/bin/cleanup.sh\n"
        'CRON_TZ="America/New_York"\n'
        "@weekly wget -q -O- https://example.org/\n"
    )
    result = parse_crontab(text, default_timezone="Asia/Tokyo")
    assert isinstance(result, CrontabImport)
    assert result.jobs == [
        ImportedJob(
            4,
            "api.example.com/v1/ping",
            {"type": "cron", "expression": "*/5 * * * *", "timezone": "Asia/Tokyo"},
            request("https://api.example.com/v1/ping?src=cron"),
        ),
        ImportedJob(
            7,
            "api.example.com/backup",
            {"type": "cron", "expression": "30 2 * * 1-5", "timezone": "Europe/Berlin"},
            request(
                "https://api.example.com/backup",
                "POST",
                {"Content-Type": "application/json"},
                '{"full": true}',
                "json",
            ),
        ),
        ImportedJob(
            11,
            "example.org",
            {"type": "cron", "expression": "@weekly", "timezone": "America/New_York"},
            request("https://example.org/"),
        ),
    ]
    assert [(e.line, e.code) for e in result.errors] == [(8, "invalid_cron"), (9, "not_http")]
    assert "boot" in result.errors[0].reason
    assert result.errors[0].text == "@reboot curl https://api.example.com/boot"


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("curl https://a.example/x", request("https://a.example/x")),
        ("/usr/bin/curl -s https://a.example/x", request("https://a.example/x")),
        ("curl a.example/ping", request("http://a.example/ping")),
        (
            "curl -XPUT -d 'a=1' https://a.example/x",
            request("https://a.example/x", "PUT", body="a=1", body_format="form"),
        ),
        (
            "curl -sX POST --data-binary 'x y' -H 'Content-Type: text/plain' https://a.example/x",
            request("https://a.example/x", "POST", {"Content-Type": "text/plain"}, "x y", "raw"),
        ),
        (
            "curl --data-raw '@literal' https://a.example/x",
            request("https://a.example/x", "POST", body="@literal", body_format="form"),
        ),
        (
            "curl -d a=1 -d b=2 https://a.example/x",
            request("https://a.example/x", "POST", body="a=1&b=2", body_format="form"),
        ),
        (
            "curl --data-urlencode 'msg=hello world' https://a.example/x",
            request("https://a.example/x", "POST", body="msg=hello%20world", body_format="form"),
        ),
        (
            "curl --json '{\"a\": 1}' https://a.example/x",
            request("https://a.example/x", "POST", {"Accept": "application/json"}, '{"a": 1}', "json"),
        ),
        (
            "curl -u bob:secret https://a.example/x",
            request("https://a.example/x", headers={"Authorization": "Basic Ym9iOnNlY3JldA=="}),
        ),
        ("curl -G -d a=1 -d b=2 'https://a.example/x?z=0'", request("https://a.example/x?z=0&a=1&b=2")),
        ("curl -I https://a.example/x", request("https://a.example/x", "HEAD")),
        (
            "curl -sS -o /dev/null -w '\\%{http_code}' --max-time 30 --retry 3 -L https://a.example/x",
            request("https://a.example/x"),
        ),
        (
            "curl -A 'cron/1.0' https://a.example/x",
            request("https://a.example/x", headers={"User-Agent": "cron/1.0"}),
        ),
        ("curl -HX-Team:ops https://a.example/x", request("https://a.example/x", headers={"X-Team": "ops"})),
        ("curl https://a.example/x | logger -t cron", request("https://a.example/x")),
        ("curl https://a.example/x >> /var/log/cron.log 2>&1 || true", request("https://a.example/x")),
        ("curl --url https://a.example/x -s", request("https://a.example/x")),
        ("root curl -s https://a.example/x", request("https://a.example/x")),  # /etc/crontab user field
        (
            "curl -d 'a=1' https://a.example/x %stdin for the command",
            request("https://a.example/x", "POST", body="a=1", body_format="form"),
        ),
    ],
)
def test_curl_commands(command, expected):
    assert only_job(command) == expected


def test_crontab_variables_are_expanded_in_commands():
    got = only_job(
        'curl -H "Authorization: Bearer $TOKEN" https://${HOST}/x', variables="TOKEN=abc\nHOST='a.example'\n"
    )
    assert got == request("https://a.example/x", headers={"Authorization": "Bearer abc"})


@pytest.mark.parametrize(
    ("command", "expected"),
    [
        ("wget -q -O- https://a.example/x", request("https://a.example/x")),
        ("wget -qO /dev/null https://a.example/x", request("https://a.example/x")),
        ("wget -qO- --timeout=10 --tries=1 https://a.example/x", request("https://a.example/x")),
        (
            "wget --method=DELETE --header='X-A: 1' https://a.example/x",
            request("https://a.example/x", "DELETE", {"X-A": "1"}),
        ),
        (
            "wget --post-data='a=1&b=2' https://a.example/x",
            request("https://a.example/x", "POST", body="a=1&b=2", body_format="form"),
        ),
        (
            "wget --method PATCH --body-data '{\"a\":1}' --header 'Content-Type: application/json' https://a.example/x",
            request("https://a.example/x", "PATCH", {"Content-Type": "application/json"}, '{"a":1}', "json"),
        ),
        (
            "wget --user=bob --password=secret -q https://a.example/x",
            request("https://a.example/x", headers={"Authorization": "Basic Ym9iOnNlY3JldA=="}),
        ),
        ("wget --spider https://a.example/x", request("https://a.example/x", "HEAD")),
    ],
)
def test_wget_commands(command, expected):
    assert only_job(command) == expected


@pytest.mark.parametrize(
    ("line", "code", "fragment"),
    [
        ("0 3 * * * /usr/local/bin/backup.sh", "not_http", "backup.sh"),
        ("0 3 * * * php /var/www/cron.php", "not_http", "runs 'php',"),
        # A system crontab's user field is not the command (it said "runs 'root'").
        ("0 3 * * * root /usr/local/bin/backup.sh", "not_http", "runs '/usr/local/bin/backup.sh' as root,"),
        ("17 * * * * root cd / && run-parts /etc/cron.hourly", "not_http", "runs 'cd' as root,"),
        # curl -G: the data goes into the query as written (curl encodes nothing but --data-urlencode).
        ("0 3 * * * curl -G -d 'q=a b' https://a.example/x", "invalid_url", "--data-urlencode"),
        ("0 3 * * * curl -G --json '{\"a\": 1}' https://a.example/x", "conflicting_options", "drop -G"),
        ("0 3 * * * curl -G -d @query.txt https://a.example/x", "unparseable_command", "data is read from a file"),
        ("0 3 * * * curl ftp://a.example/file", "not_http", "http"),
        ("0 3 * * * sleep 10; curl https://a.example/x", "unparseable_command", "not the first command"),
        ("0 3 * * * cd /tmp && wget https://a.example/x", "unparseable_command", "not the first command"),
        ("0 3 * * * curl -F file=@x.txt https://a.example/x", "unparseable_command", "-F"),
        ("0 3 * * * curl --frobnicate https://a.example/x", "unparseable_command", "--frobnicate"),
        ("0 3 * * * curl -d @body.json https://a.example/x", "unparseable_command", "file"),
        (
            "0 3 * * * curl https://a.example/x https://b.example/y",
            "unparseable_command",
            "more than one URL",
        ),
        ("0 3 * * * curl -u bob https://a.example/x", "unparseable_command", "password"),
        ("0 3 * * * curl $(cat /etc/url)", "unparseable_command", "substitution"),
        ('0 3 * * * curl -H "X-Key: $UNSET" https://a.example/x', "unparseable_command", "$UNSET"),
        ("0 3 * * * curl 'https://a.example/x", "unparseable_command", "words"),
        ("0 3 * * * curl -s", "unparseable_command", "no URL"),
        ("0 3 * * * curl -H", "unparseable_command", "missing its value"),
        ("0 3 * * * curl -H 'no colon' https://a.example/x", "unparseable_command", "Name: value"),
        ("0 3 * * * wget --user=bob https://a.example/x", "unparseable_command", "--password"),
        ("0 3 * * * wget --post-file=body https://a.example/x", "unparseable_command", "--post-file"),
        ("@reboot curl https://a.example/x", "invalid_cron", "boot"),
        ("@often curl https://a.example/x", "invalid_cron", "unknown macro"),
        ("61 * * * * curl https://a.example/x", "invalid_cron", "out of range"),
        ("0 */5 * * * * curl https://a.example/x", "invalid_cron", "6 schedule fields"),
        ("* * * curl https://a.example/x", "invalid_cron", "5 schedule fields"),
        ("@daily", "invalid_cron", "no command"),
        ("CRON_TZ=Mars/Olympus", "unknown_timezone", "Mars/Olympus"),
    ],
)
def test_lines_that_cannot_be_imported(line, code, fragment):
    error = only_error(line)
    assert isinstance(error, CrontabLineError)
    assert (error.line, error.text, error.code) == (1, line, code)
    assert fragment in error.reason


def test_one_user_field_makes_the_whole_crontab_a_system_one():
    """/etc/crontab and /etc/cron.d/* put a user on every line: the line with www-data then
    curl says so, and 'deploy' on the next line is a user, not the command."""
    text = "5 * * * * www-data curl -fsS https://a.example/x\n0 3 * * * deploy /opt/app/bin/nightly\n"
    result = parse_crontab(text)
    assert [j.request["url"] for j in result.jobs] == ["https://a.example/x"]
    (error,) = result.errors
    assert error.code == "not_http" and "runs '/opt/app/bin/nightly' as deploy," in error.reason


def test_curl_g_appends_to_an_empty_query_without_an_extra_separator():
    assert only_job("curl -G -d a=1 'https://a.example/x?'") == request("https://a.example/x?a=1")


def test_unknown_cron_tz_refuses_following_jobs_until_a_valid_one():
    text = "CRON_TZ=Nowhere/Land\n0 1 * * * curl https://a.example/1\nCRON_TZ=UTC\n0 2 * * * curl https://a.example/2\n"
    result = parse_crontab(text)
    assert [(e.line, e.code) for e in result.errors] == [(1, "unknown_timezone"), (2, "unknown_timezone")]
    assert "Nowhere/Land" in result.errors[1].reason
    assert [(j.line, j.schedule["timezone"]) for j in result.jobs] == [(4, "UTC")]


def test_tz_also_sets_the_timezone_and_crlf_lines_are_fine():
    result = parse_crontab("TZ=Asia/Kolkata\r\n\r\n0 1 * * * curl https://a.example/1\r\n")
    assert [(j.line, j.schedule["timezone"]) for j in result.jobs] == [(3, "Asia/Kolkata")]


def test_job_names_come_from_host_and_path():
    result = parse_crontab(
        "0 1 * * * curl https://a.example/\n0 2 * * * curl 'https://a.example:8443/v1/jobs/run/?x=1'\n"
    )
    assert [j.name for j in result.jobs] == ["a.example", "a.example/v1/jobs/run"]


def test_empty_crontab():
    assert parse_crontab("") == CrontabImport([], [])


def test_size_caps():
    line = "0 1 * * * curl https://a.example/x\n"
    assert len(parse_crontab(line * 1000).jobs) == 1000
    with pytest.raises(ScheduleError) as caught:
        parse_crontab(line * 1001)
    assert (caught.value.code, caught.value.field) == ("crontab_too_large", "crontab")
    with pytest.raises(ScheduleError) as caught:
        parse_crontab("#" * (64 * 1024 + 1))
    assert caught.value.code == "crontab_too_large"
