"""apps.jobs.forms: the job form <-> the API's job shape."""

from django.http import QueryDict

from apps.jobs import forms
from apps.jobs.models import Job
from apps.jobs.serializers import MASK
from tests.conftest import utc


def as_post(values):
    """A saved job's form values, posted back unchanged."""
    post = QueryDict(mutable=True)
    for name, value in values.items():
        if name == "headers":
            for header, header_value in value:
                post.appendlist("header_name", header)
                post.appendlist("header_value", header_value)
        elif isinstance(value, bool):
            if value:
                post[name] = "on"
        else:
            post[name] = value
    return post


def test_an_unchanged_form_gives_back_the_same_job():
    job = Job(name="x", schedule_type="once", run_at=utc(2031, 5, 6, 7, 8, 9), timezone="Asia/Kolkata",
              url="https://example.com/", method="POST", headers={"X-A": "1", "X-B": "2"}, body="{}",
              body_format="json", auth={"type": "basic", "username": "u", "password": "p"}, tags=["a", "b"],
              start_at=utc(2030, 1, 1, 0, 0), retry_multiplier=1.5, follow_redirects=True)
    values = forms.form_values(job)
    assert values["once_at"] == "2031-05-06T12:38:09"  # in the job's timezone, seconds kept
    assert values["auth_password"] == "" and values["auth_stored"]
    data = forms.job_data(as_post(values), stored_auth=job.auth)
    assert data["schedule"] == {"type": "once", "at": "2031-05-06T12:38:09+05:30", "timezone": "Asia/Kolkata"}
    assert data["start_at"] == "2030-01-01T05:30:00+05:30"
    assert data["request"]["headers"] == {"X-A": "1", "X-B": "2"}
    assert data["request"]["auth"] == {"type": "basic", "username": "u", "password": MASK}
    assert data["request"]["follow_redirects"] is True and data["retry"]["multiplier"] == 1.5
    assert data["tags"] == ["a", "b"]


def test_every_n_units():
    job = Job(schedule_type="interval", interval_seconds=7200)
    assert (forms.form_values(job)["every_n"], forms.form_values(job)["every_unit"]) == ("2", "hours")
    job.interval_seconds = 90
    assert (forms.form_values(job)["every_n"], forms.form_values(job)["every_unit"]) == ("90", "seconds")
    post = QueryDict("schedule_mode=every&every_n=15&every_unit=minutes&timezone=UTC")
    assert forms.job_data(post)["schedule"] == {"type": "interval", "seconds": 900, "timezone": "UTC"}
    post = QueryDict("schedule_mode=every&every_n=abc&every_unit=minutes")
    assert forms.job_data(post)["schedule"]["seconds"] == "abc"  # refused by the serializer, with its message


def test_errors_land_on_the_fields():
    errors = forms.form_errors({
        "schedule": {"expression": ["schedule.expression: bad cron"]},
        "request.url": ["request.url: private address; give a public http(s) address."],
        "request": {"headers": {"X-Cronsvc-Job-Id": ["reserved"]}, "auth": {"token": ["invalid token"]}},
        "retry.max_delay_seconds": ["retry.max_delay_seconds: give at least retry.initial_delay_seconds."],
        "non_field_errors": ["something about the whole job"],
        "surprise": ["an unknown path"],
    })
    assert errors["cron_expression"] == ["bad cron"]
    assert errors["url"] == ["private address; give a public http(s) address."]
    assert errors["headers"] == ["reserved"] and errors["auth_token"] == ["invalid token"]
    assert errors["retry_max_delay_seconds"] == ["give at least retry.initial_delay_seconds."]
    assert errors["__all__"] == ["something about the whole job", "an unknown path"]
