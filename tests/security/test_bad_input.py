"""Bad input never reaches a 500: each of these was a server error (found by schemathesis
and by hand) and now answers a 4xx with a stable code a person can act on."""

import pytest
from django.test import Client

from apps.accounts.apikeys import create_api_key
from apps.monitors.services import create_monitor
from apps.projects.models import Project
from cronsvc.schedules.errors import ScheduleError
from cronsvc.schedules.localtime import load_zone
from cronsvc.schedules.parse import parse_schedule
from tests.api.conftest import error_of, job_body, key_client

SHAPELESS_TYPES = [{}, [], 3, None, True]


@pytest.mark.parametrize("kind", SHAPELESS_TYPES)
def test_a_schedule_type_that_is_no_name_is_invalid_schedule(kind):
    with pytest.raises(ScheduleError) as caught:
        parse_schedule({"type": kind, "expression": "0 3 * * *"})
    assert caught.value.code == "invalid_schedule" and caught.value.field == "schedule.type"


@pytest.mark.parametrize("kind", [{}, []])
def test_shapeless_schedule_type_answers_400_on_every_endpoint(api, tenant, kind):
    schedule = {"type": kind, "expression": "0 3 * * *"}
    answers = [
        api.post("/api/v1/schedules/preview/", {"schedule": schedule}, format="json"),
        api.post("/api/v1/jobs/", job_body(tenant, schedule=schedule), format="json"),
        api.post("/api/v1/monitors/", {"name": "m", "schedule": schedule, "grace_seconds": 60}, format="json"),
    ]
    for response in answers:
        assert response.status_code == 400, response.content
        assert error_of(response)["code"] == "invalid_schedule"


@pytest.mark.parametrize("expression", [
    "٣ * * * *",          # ARABIC-INDIC DIGIT THREE passes str.isdigit()
    "１ * * * *",          # FULLWIDTH DIGIT ONE
    "0\u00a03 * * *",     # NO-BREAK SPACE between fields
    "0 3 * * *\u2003",    # EM SPACE at the end
    "0 3 * * MON\u3000",  # IDEOGRAPHIC SPACE
])
def test_cron_refuses_non_ascii_digits_and_spaces(api, tenant, expression):
    with pytest.raises(ScheduleError) as caught:
        parse_schedule({"type": "cron", "expression": expression})
    assert caught.value.code == "invalid_cron" and "ASCII" in caught.value.message
    response = api.post("/api/v1/jobs/", job_body(tenant, schedule={"type": "cron", "expression": expression}),
                        format="json")
    assert response.status_code == 400 and error_of(response)["code"] == "invalid_cron"


@pytest.mark.parametrize("name", ["localtime", "Factory", "posixrules", "right/UTC", "right/Europe/Berlin",
                                  " Europe/Berlin", "Europe/Berlin ", "posix/Europe/Berlin", ""])
def test_timezones_that_are_no_zone_a_person_means_are_refused(name):
    with pytest.raises(ScheduleError) as caught:
        load_zone(name)
    assert caught.value.code == "unknown_timezone"


def test_a_zone_in_the_wrong_case_gets_a_suggestion(api, tenant):
    with pytest.raises(ScheduleError) as caught:
        load_zone("europe/berlin")
    assert "did you mean 'Europe/Berlin'?" in caught.value.message
    schedule = {"type": "cron", "expression": "0 3 * * *", "timezone": "AMERICA/NEW_YORK"}
    response = api.post("/api/v1/jobs/", job_body(tenant, schedule=schedule), format="json")
    assert response.status_code == 400
    assert error_of(response)["code"] == "unknown_timezone" and "America/New_York" in error_of(response)["message"]


def test_real_zones_still_load():
    for name in ("UTC", "Etc/UTC", "Europe/Berlin", "America/Argentina/Buenos_Aires", "US/Pacific", "GMT"):
        assert load_zone(name).key == name


@pytest.mark.parametrize("rid", ["a\x00b", "\x01", "line\nbreak", "tab\there", "\x7f", "bell\x07"])
def test_control_characters_in_a_ping_rid_answer_400_invalid_rid(tenant, rid):
    monitor = create_monitor(project=tenant.project, name="backup", schedule_type="interval",
                             interval_seconds=3600, grace_seconds=600)
    response = Client().get(f"/ping/{monitor.ping_id}/start", {"rid": rid})
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "invalid_rid"
    assert monitor.pings.count() == 0


def test_a_printable_rid_is_still_taken(tenant):
    monitor = create_monitor(project=tenant.project, name="backup", schedule_type="interval",
                             interval_seconds=3600, grace_seconds=600)
    assert Client().get(f"/ping/{monitor.ping_id}/start", {"rid": "run 42 ünïcode"}).status_code == 200


def test_a_project_limited_key_learns_nothing_of_a_job_in_another_project(api, tenant, make_job):
    """Naming another project's job as an upstream answers exactly as an id that does not
    exist: the job's name never appears."""
    other = Project.objects.create(organization=tenant.organization, name="Other")
    hidden = make_job(tenant, name="Payroll run with a secret-sounding name", project=other)
    key, full = create_api_key(tenant.organization, "first project only")
    key.limited_to_projects = True
    key.save()
    key.projects.set([tenant.project])
    client = key_client(full)

    hidden_answer = client.post("/api/v1/jobs/", job_body(
        tenant, dependencies=[{"job": str(hidden.pk)}]), format="json")
    unknown_answer = client.post("/api/v1/jobs/", job_body(
        tenant, dependencies=[{"job": "00000000-0000-7000-8000-000000000000"}]), format="json")

    assert hidden_answer.status_code == unknown_answer.status_code == 400
    assert error_of(hidden_answer)["code"] == error_of(unknown_answer)["code"] == "does_not_exist"
    assert hidden.name not in hidden_answer.content.decode()
    # and the organization-wide key still sees the cross-project rule, which may name it
    whole = api.post("/api/v1/jobs/", job_body(tenant, dependencies=[{"job": str(hidden.pk)}]), format="json")
    assert whole.status_code == 400 and error_of(whole)["code"] == "cross_project_dependency"
