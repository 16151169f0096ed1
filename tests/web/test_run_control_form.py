"""Execution windows and priority on the job pages: the form's fields round trip, the API's
messages beside them, the job page's next runs marking skipped and deferred ones."""

import pytest

from apps.jobs.forms import blackouts_from_text, windows_from_text, windows_text
from apps.jobs.models import Job
from tests.web.conftest import job_form


def html(response):
    return response.content.decode()


def test_windows_blackouts_and_priority_from_the_form(tenant, owner):
    response = owner.post("/jobs/new/", job_form(
        tenant, windows="mon-fri 08:00-18:00\nsat,sun 22:00-06:00", blackouts="2027-12-24..2027-12-26\n2027-12-31",
        outside_window="defer", priority="high"))
    assert response.status_code == 302, html(response)[:3000]
    job = Job.objects.get(name="Nightly report")
    assert job.windows == [
        {"days": ["mon", "tue", "wed", "thu", "fri"], "start": "08:00", "end": "18:00"},
        {"days": ["sat", "sun"], "start": "22:00", "end": "06:00", "overnight": True}]
    assert job.blackouts == [{"start": "2027-12-24", "end": "2027-12-26"}, {"start": "2027-12-31", "end": "2027-12-31"}]
    assert (job.outside_window, job.priority) == ("defer", "high")
    # The edit form shows them back as typed.
    page = html(owner.get(f"/jobs/{job.pk}/edit/"))
    assert "mon-fri 08:00-18:00" in page and "2027-12-24..2027-12-26" in page


@pytest.mark.parametrize("windows, message", [
    ("someday 08:00-18:00", "is not a day"),
    ("mon 8-18", "give a local time as HH:MM"),
    ("mon 08:00-12:00\nmon 11:00-13:00", "overlaps windows.0"),
])
def test_bad_windows_get_the_apis_message_beside_the_field(tenant, owner, windows, message):
    response = owner.post("/jobs/new/", job_form(tenant, windows=windows))
    assert response.status_code == 400
    page = html(response)
    assert 'id="id_windows-error"' in page and message in page
    assert Job.objects.count() == 0


def test_the_job_page_marks_skipped_and_deferred_runs(tenant, owner, make_job):
    skipping = make_job(tenant, cron_expression="0 * * * *", windows=[
        {"days": ["mon"], "start": "00:00", "end": "00:01"}])
    assert "skipped: outside the execution windows" in html(owner.get(f"/jobs/{skipping.pk}/"))
    deferring = make_job(tenant, cron_expression="0 * * * *", outside_window="defer",
                         windows=[{"days": ["mon"], "start": "00:00", "end": "00:01"}])
    assert "deferred from" in html(owner.get(f"/jobs/{deferring.pk}/"))


def test_form_text_translation():
    assert windows_from_text("fri-mon 22:00-02:00") == [
        {"days": ["fri", "sat", "sun", "mon"], "start": "22:00", "end": "02:00", "overnight": True}]
    assert windows_text([{"days": ["mon", "wed"], "start": "08:00", "end": "09:00"}]) == "mon,wed 08:00-09:00"
    assert blackouts_from_text(" 2027-01-01 \n\n") == [{"start": "2027-01-01", "end": "2027-01-01"}]


def test_history_shows_deferred_and_held_runs(tenant, owner, make_job):
    from apps.executions.models import Execution
    from tests.conftest import utc

    job = make_job(tenant)
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=utc(2027, 6, 14, 8),
                             defer_reason="outside_window", deferred_from=utc(2027, 6, 11, 19))
    Execution.objects.create(job=job, organization=tenant.organization, scheduled_for=utc(2027, 6, 14, 9),
                             defer_reason="overload")
    page = html(owner.get(f"/jobs/{job.pk}/"))
    assert "deferred from Fri 19:00 (outside the windows)" in page and "held: overload" in page
