"""Searching the history: ?q= (full-text over the error message and response body),
?status_code= (exact or a class) with the time range, on /api/v1/executions/,
/api/v1/jobs/{id}/executions/ and /api/v1/projects/{id}/executions/."""

from datetime import datetime, timedelta
from urllib.parse import urlencode

import pytest
from django.db import connection

from apps.executions.history import search
from apps.executions.models import Execution
from apps.projects.models import Project
from cronsvc.search_query import parse
from tests.api.conftest import error_of
from tests.conftest import utc

RUNS = {
    # name: (minute, status, response_status, error_message, response_body)
    "timeout": (0, "failed", None, "HTTPSConnectionPool(host='api.example.com', port=443): Read timed out.", ""),
    "refused": (1, "failed", None, "Connection refused", ""),
    "quota": (2, "failed", 429, "HTTP 429", '{"error": "quota_exceeded", "retry_after": 30}'),
    "bad_gateway": (3, "failed", 502, "HTTP 502", "<html><h1>502 Bad Gateway</h1> nginx</html>"),
    "unavailable": (4, "failed", 503, "HTTP 503", '{"status": "Service Unavailable", "order": "ORD-98765"}'),
    "ok_json": (5, "succeeded", 200, "", '{"ok": true, "processed": 12, "order": "ORD-12345"}'),
    "ok_german": (6, "succeeded", 200, "", "Größe überschritten, aber verarbeitet"),
    "queued": (7, "queued", None, "", ""),
}


@pytest.fixture
def runs(tenant, make_job):
    job = make_job(tenant)
    return {name: Execution.objects.create(
        job=job, organization=tenant.organization, scheduled_for=utc(2027, 3, 1, 12, minute), status=status,
        response_status=code, error_kind="http" if error else "", error_message=error, response_body=body)
        for name, (minute, status, code, error, body) in RUNS.items()}


def found(api, path="/api/v1/executions/", **params):
    response = api.get(f"{path}?{urlencode(params)}")
    assert response.status_code == 200, response.json()
    by_id = {str(pk): name for name, pk in _ids.items()}
    return {by_id.get(row["id"], row["id"]) for row in response.json()["results"]}


_ids = {}


@pytest.fixture(autouse=True)
def _names(request):
    _ids.clear()
    if "runs" in request.fixturenames:
        _ids.update({name: run.pk for name, run in request.getfixturevalue("runs").items()})


@pytest.mark.parametrize("q, expected", [
    ("timed out", {"timeout"}),  # words of the error, any order
    ("TIMED", {"timeout"}),  # any case
    ("api.example.com", {"timeout"}),  # a host name as typed
    ('"read timed out"', {"timeout"}),  # a phrase
    ('"out timed"', set()),  # ... in its order
    ("quota_exceeded", {"quota"}),  # a JSON value in the body
    ("retry_after", {"quota"}),  # a JSON key
    ("ORD-98765", {"unavailable"}),  # an id
    ("502 nginx", {"bad_gateway"}),  # words of the body (the markup is not a word)
    ("refused or nginx", {"refused", "bad_gateway"}),
    ("http -503", {"quota", "bad_gateway"}),  # -word excludes
    ("größe", {"ok_german"}),  # unicode, any case
    ("ÜBERSCHRITTEN", {"ok_german"}),
    ("time", set()),  # whole words: not a prefix of "timed"
    ("nothing-like-this", set()),
])
def test_search_finds_words_and_phrases_of_the_error_and_the_body(api, runs, q, expected):
    assert found(api, q=q) == expected


@pytest.mark.parametrize("q", [
    "'; DROP TABLE executions_execution; --", '"unterminated', "a & b | !c <-> d", "(((", "\\\\ %_ *",
    "or", "-- -", "a:* & b:A", "\u0000-free? \u2603 \U0001F600 emoji", "'\"'\"", "x " * 99,
])
def test_any_input_is_a_search_not_an_error(api, runs, q):
    response = api.get(f"/api/v1/executions/?{urlencode({'q': q})}")
    assert response.status_code in (200, 400), response.content
    if response.status_code == 400:
        assert error_of(response)["code"] in ("invalid_search", "search_too_long", "null_characters_not_allowed")


@pytest.mark.parametrize("q, code", [
    ("!!!", "invalid_search"),  # no word at all
    ("-timeout", "invalid_search"),  # only an exclusion: would read the whole history
    ("nginx or -timeout", "invalid_search"),
    ("x" * 201, "search_too_long"),
])
def test_searches_that_cannot_run_are_400(api, runs, q, code):
    response = api.get(f"/api/v1/executions/?{urlencode({'q': q})}")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == code and "q" in error["fields"]


def test_an_empty_search_is_no_filter(api, runs):
    assert found(api, q="") == set(RUNS)


@pytest.mark.parametrize("code, expected", [
    ("503", {"unavailable"}), ("5xx", {"bad_gateway", "unavailable"}), ("5XX", {"bad_gateway", "unavailable"}),
    ("4xx", {"quota"}), ("2xx", {"ok_json", "ok_german"}), ("404", set()),
])
def test_status_code_exact_or_class(api, runs, code, expected):
    assert found(api, status_code=code) == expected


@pytest.mark.parametrize("code", ["6xx", "50", "600", "abc", "5x", "xx5", "-500", "5 xx"])
def test_bad_status_codes_are_400(api, runs, code):
    response = api.get(f"/api/v1/executions/?{urlencode({'status_code': code})}")
    assert response.status_code == 400
    assert error_of(response)["code"] == "invalid_status_code"


def test_search_status_code_and_time_range_together(api, runs):
    window = {"scheduled_for_after": "2027-03-01T13:02:30+01:00", "scheduled_for_before": "2027-03-01T12:06:00Z"}
    assert found(api, status_code="5xx", **window) == {"bad_gateway", "unavailable"}
    assert found(api, q="http", status_code="5xx", **window) == {"bad_gateway", "unavailable"}
    assert found(api, q="order", **window) == {"unavailable", "ok_json"}
    assert found(api, q="order", status_code="503", **window) == {"unavailable"}


def test_search_results_page_with_the_cursor_newest_first(api, runs):
    first = api.get("/api/v1/executions/?q=http&page_size=2").json()
    assert [row["id"] for row in first["results"]] == [str(runs[n].pk) for n in ("unavailable", "bad_gateway")]
    rest = api.get(first["next"]).json()
    assert [row["id"] for row in rest["results"]] == [str(runs["quota"].pk)] and rest["next"] is None


def test_other_organizations_runs_are_never_found(api, other_api, runs, other_tenant, make_job):
    theirs = Execution.objects.create(job=make_job(other_tenant), organization=other_tenant.organization,
                                      scheduled_for=utc(2027, 3, 1), status="failed", error_message="Read timed out")
    assert found(api, q="timed") == {"timeout"}
    assert found(other_api, q="timed") == {str(theirs.pk)}


def test_a_jobs_history_searches_that_job_only(api, runs, tenant, make_job):
    other_job = make_job(tenant)
    Execution.objects.create(job=other_job, organization=tenant.organization, scheduled_for=utc(2027, 3, 2),
                             status="failed", error_message="Connection refused")
    job = runs["refused"].job
    assert found(api, f"/api/v1/jobs/{job.pk}/executions/", q="refused") == {"refused"}


def test_a_projects_history_and_its_tenancy(api, other_api, runs, tenant, other_tenant, make_job, make_key):
    second = Project.objects.create(organization=tenant.organization, name="Second", slug="second")
    elsewhere = Execution.objects.create(job=make_job(tenant, project=second), organization=tenant.organization,
                                         scheduled_for=utc(2027, 3, 2), status="failed", error_message="HTTP 503",
                                         response_status=503)
    assert found(api, f"/api/v1/projects/{tenant.project.pk}/executions/", q="http", status_code="503") \
        == {"unavailable"}
    assert found(api, f"/api/v1/projects/{second.pk}/executions/", q="http") == {str(elsewhere.pk)}
    # Another organization's project, or a project the key does not reach, is not there at all.
    assert other_api.get(f"/api/v1/projects/{tenant.project.pk}/executions/?q=http").status_code == 404
    key, limited = make_key(tenant)
    key.limited_to_projects = True
    key.save()
    key.projects.set([second])
    response = limited.get(f"/api/v1/projects/{tenant.project.pk}/executions/")
    assert response.status_code == 404 and error_of(response)["code"] == "not_found"
    assert found(limited, q="http") == {str(elsewhere.pk)}


def test_search_and_status_code_are_in_the_schema(api):
    schema = api.get("/api/v1/schema/?format=json").json()
    for path in ("/api/v1/executions/", "/api/v1/jobs/{id}/executions/", "/api/v1/projects/{id}/executions/"):
        names = {p["name"] for p in schema["paths"][path]["get"]["parameters"]}
        assert {"q", "status_code", "scheduled_for_after", "scheduled_for_before", "cursor"} <= names, path
    assert "404" in schema["paths"]["/api/v1/projects/{id}/executions/"]["get"]["responses"]


def test_the_search_reads_the_search_index(runs, tenant):
    """The query repeats the index's expression and predicate: PostgreSQL can use it. (With
    the plain index on the organization out of the way: on a few rows the planner likes it
    better. The drop is undone with the test's transaction.)"""
    executions = Execution.objects.for_organization(tenant.organization)
    with connection.cursor() as cursor:
        cursor.execute("DROP INDEX exec_org_latest")
        cursor.execute("SET LOCAL enable_seqscan = off")
        plan = search.full_text(executions, "timed out").explain()
    assert "exec_search" in plan, plan


@pytest.mark.parametrize("q", ["timed out", '"read timed out"', "refused or nginx", "refused or 503 -ORD-98765", "ORD-98765",
                               "quota_exceeded", "502 nginx"])
def test_the_substring_fallback_agrees_on_whole_words(runs, tenant, q):
    """What the embedded SQLite mode runs (icontains), here on PostgreSQL's rows."""
    executions = Execution.objects.for_organization(tenant.organization)
    fallback = set(search.substrings(executions, parse(q)).values_list("pk", flat=True))
    assert fallback == set(search.full_text(executions, q).values_list("pk", flat=True))


def _pages(api, url, direction="next"):
    """Every page's ids following the ``direction`` links from ``url``, and the last page."""
    pages = []
    while url:
        body = api.get(url).json()
        pages.append([row["id"] for row in body["results"]])
        last, url = body, body[direction]
    return pages, last


@pytest.mark.parametrize("params", [{"q": "refused"}, {"status_code": "5xx"},
                                    {"q": "refused", "scheduled_for_after": "2027-02-25T00:00:00Z",
                                     "scheduled_for_before": "2027-03-01T11:30:00Z"}])
def test_a_search_pages_through_widening_windows_completely_and_in_order(api, tenant, make_job, params):
    """A search reads the history one time window at a time (an hour, then four times as far:
    search.newest_window). Matches spread unevenly over days, runs that do not match
    newest, ties at a page boundary (three runs at one time): every page holds the next
    matches newest first, the cursors lose or repeat nothing, and the previous links walk
    back to the same pages."""
    jobs = [make_job(tenant) for _ in range(3)]
    newest = utc(2027, 3, 1, 12)
    match_hours = [0.25, 0.5, 0.75, 1.5, 3, 3, 3, 5, 9, 17, 33, 34, 65, 129, 130, 300]
    runs = []
    for n, hours in enumerate(match_hours):
        runs.append(Execution.objects.create(
            job=jobs[n % 3], organization=tenant.organization, scheduled_for=newest - timedelta(hours=hours),
            status="failed", response_status=503, error_message="Connection refused"))
    for minutes in range(0, 600, 7):  # successes in between and newest of all
        Execution.objects.create(job=jobs[0], organization=tenant.organization, status="succeeded",
                                 scheduled_for=newest - timedelta(minutes=minutes, seconds=30),
                                 response_status=200, response_body='{"ok": true}')
    low, high = params.get("scheduled_for_after"), params.get("scheduled_for_before")
    expected = [str(run.pk) for run in sorted(runs, key=lambda run: (run.scheduled_for, run.pk), reverse=True)
                if (low is None or run.scheduled_for >= datetime.fromisoformat(low))
                and (high is None or run.scheduled_for <= datetime.fromisoformat(high))]
    assert len(expected) > 6
    for page_size in (2, 3, 5):  # page boundaries inside the windows and inside the tie
        pages, last = _pages(api, f"/api/v1/executions/?{urlencode({**params, 'page_size': page_size})}")
        assert [pk for page in pages for pk in page] == expected, page_size
        assert all(len(page) == page_size for page in pages[:-1])
        back, _ = _pages(api, last["previous"], "previous")
        assert [pk for page in reversed(back) for pk in page] == expected[:len(expected) - len(pages[-1])]
