"""Execution windows, blackouts and priority through the REST API: saving them, their
400s with stable codes, the next-runs preview marking skipped and deferred runs."""

import pytest

from apps.jobs.models import Job
from tests.api.conftest import error_of, job_body

OFFICE = [{"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"}]


def test_windows_blackouts_and_priority_are_saved_and_shown(api, tenant):
    body = job_body(tenant, windows=[{"days": ["friday", "mon"], "start": "08:00", "end": "18:00"},
                                     {"days": ["sat"], "start": "22:00", "end": "06:00", "overnight": True}],
                    blackouts=[{"start": "2027-12-24", "end": "2027-12-26"}, {"start": "2027-12-31"}],
                    outside_window="defer", priority="high")
    response = api.post("/api/v1/jobs/", body, format="json")
    assert response.status_code == 201, response.json()
    data = response.json()
    assert data["windows"] == [{"days": ["mon", "fri"], "start": "08:00", "end": "18:00"},
                               {"days": ["sat"], "start": "22:00", "end": "06:00", "overnight": True}]
    assert data["blackouts"] == [{"start": "2027-12-24", "end": "2027-12-26"},
                                 {"start": "2027-12-31", "end": "2027-12-31"}]
    assert (data["outside_window"], data["priority"]) == ("defer", "high")
    job = Job.objects.get(pk=data["id"])
    assert (job.priority, job.outside_window, len(job.windows)) == ("high", "defer", 2)


def test_defaults_are_no_window_skip_and_normal(api, tenant):
    data = api.post("/api/v1/jobs/", job_body(tenant), format="json").json()
    assert (data["windows"], data["blackouts"], data["outside_window"], data["priority"]) == ([], [], "skip", "normal")


@pytest.mark.parametrize("field, value, code, path", [
    ("windows", [{"days": ["mon", "someday"], "start": "08:00", "end": "18:00"}], "invalid_weekday",
     "windows.0.days.1"),
    ("windows", [{"days": ["mon"], "start": "18:00", "end": "08:00"}], "window_end_before_start", "windows.0.end"),
    ("windows", [{"days": ["mon"], "start": "25:00", "end": "26:00"}], "invalid_window_time", "windows.0.start"),
    ("windows", OFFICE + [{"days": ["wed"], "start": "17:00", "end": "19:00"}], "overlapping_windows", "windows.1"),
    ("windows", [{"days": ["mon"], "start": f"{h:02d}:00", "end": f"{h:02d}:30"} for h in range(15)],
     "too_many_windows", "windows"),
    ("blackouts", [{"start": "2027-12-26", "end": "2027-12-24"}], "blackout_end_before_start", "blackouts.0.end"),
    ("blackouts", "christmas", "invalid_blackout", "blackouts"),
    ("outside_window", "later", "invalid_choice", "outside_window"),
    ("priority", "urgent", "invalid_choice", "priority"),
])
def test_bad_run_control_input_is_a_400_with_a_stable_code(api, tenant, field, value, code, path):
    response = api.post("/api/v1/jobs/", job_body(tenant, **{field: value}), format="json")
    assert response.status_code == 400
    error = error_of(response)
    assert error["code"] == code
    assert path in error["fields"]
    assert error["message"].startswith(path)


def test_patch_changes_windows_alone(api, tenant, make_job):
    job = make_job(tenant)
    response = api.patch(f"/api/v1/jobs/{job.pk}/", {"windows": OFFICE, "priority": "low"}, format="json")
    assert response.status_code == 200, response.json()
    job.refresh_from_db()
    assert job.windows == OFFICE and job.priority == "low"


def test_next_runs_mark_skipped_occurrences(api, tenant, make_job):
    job = make_job(tenant, cron_expression="0 */6 * * *", timezone="UTC", windows=OFFICE)
    # Friday 2027-06-11 06:00Z: 06:00 is before the window, 12:00 in it, 18:00 after.
    runs = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?count=3&after=2027-06-11T05:00:00Z").json()["runs"]
    assert [(r["at"], r["status"], r["reason"]) for r in runs] == [
        ("2027-06-11T06:00:00Z", "skipped", "outside_window"),
        ("2027-06-11T12:00:00Z", "run", ""),
        ("2027-06-11T18:00:00Z", "skipped", "outside_window"),
    ]


def test_next_runs_show_deferred_runs_at_their_real_time(api, tenant, make_job):
    job = make_job(tenant, cron_expression="0 */6 * * *", timezone="Europe/Berlin", windows=OFFICE,
                   blackouts=[{"start": "2027-06-14", "end": "2027-06-14"}], outside_window="defer")
    # Friday 18:00 Berlin is outside; Monday the 14th is blacked out: deferred to Tuesday 08:00.
    runs = api.get(f"/api/v1/jobs/{job.pk}/next-runs/?count=2&after=2027-06-11T13:00:00Z").json()["runs"]
    assert runs[0] == {"at": "2027-06-15T06:00:00Z", "local": "2027-06-15T08:00:00+02:00", "status": "deferred",
                       "reason": "outside_window", "occurrence": "2027-06-11T16:00:00Z"}
    # The weekend's occurrences fold into that run; the next one is Tuesday 12:00.
    assert (runs[1]["at"], runs[1]["status"]) == ("2027-06-15T10:00:00Z", "run")


def test_executions_say_why_they_were_deferred(api, tenant, make_job):
    from apps.executions.models import Execution
    from tests.conftest import utc

    job = make_job(tenant, windows=OFFICE, outside_window="defer")
    deferred = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=utc(2027, 6, 14, 8),
                                        defer_reason="outside_window", deferred_from=utc(2027, 6, 11, 19))
    data = api.get(f"/api/v1/executions/{deferred.pk}/").json()
    assert (data["defer_reason"], data["deferred_from"]) == ("outside_window", "2027-06-11T19:00:00Z")
    skipped = Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=utc(2027, 6, 12, 9),
                                       status="skipped", skip_reason="outside_window")
    listed = api.get(f"/api/v1/jobs/{job.pk}/executions/?status=skipped").json()["results"]
    assert [(e["id"], e["skip_reason"], e["defer_reason"]) for e in listed] == [(str(skipped.pk), "outside_window", "")]
