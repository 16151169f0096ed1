"""apps.api.representation: the fast path writes exactly what DRF's serializer
writes, for every kind of job and field (compared as the JSON a client receives)."""

from datetime import datetime, timedelta, timezone as dt_timezone
from zoneinfo import ZoneInfo

import pytest
from django.utils import timezone
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer

from apps.api.representation import represent, represent_many
from apps.jobs.models import Job, JobDependency
from apps.jobs.links import load_links
from apps.jobs.serializers import JobSerializer

pytestmark = pytest.mark.django_db

LATER = datetime(2030, 3, 31, 0, 30, 15, 123456, tzinfo=dt_timezone.utc)


def as_json(document):
    return JSONRenderer().render(document)


def drf(serializer_class, instance, context=None):
    return as_json(serializer_class(instance, context=context or {}).data)


@pytest.fixture
def varied_jobs(tenant, make_job):
    """One job of each shape whose fields the representation treats differently."""
    cron = make_job(tenant, name="cron", cron_expression="0 3 * * 1-5", timezone="Europe/Berlin",
                    tags=["nightly", "ünïcode"], description="Nightly report", start_at=LATER,
                    end_at=LATER + timedelta(days=30), jitter_seconds=30)
    interval = make_job(tenant, name="interval", schedule_type=Job.ScheduleType.INTERVAL, cron_expression="",
                        interval_seconds=300, method="POST", body='{"a": 1}', body_format="json",
                        headers={"X-Team": "data"}, secret_headers={"X-Api-Token": "s3cr3t"},
                        auth={"type": "basic", "username": "bob", "password": "pw"}, follow_redirects=True,
                        max_attempts=5, retry_multiplier=1.5, success_status_codes="200-299, 304",
                        success_body_contains="ok", last_status="failed", consecutive_failures=3,
                        last_run_at=LATER - timedelta(minutes=5))
    once = make_job(tenant, name="once", schedule_type=Job.ScheduleType.ONCE, cron_expression="", run_at=LATER,
                    auth={"type": "bearer", "token": "t0k3n"}, enabled=False, paused_reason="paused through the API")
    downstream = make_job(tenant, name="downstream", schedule_type=Job.ScheduleType.NONE, cron_expression="",
                          dependency_mode="any")
    JobDependency.objects.create(upstream=cron, downstream=downstream, on="success")
    JobDependency.objects.create(upstream=interval, downstream=downstream, on="failure")
    return load_links(list(Job.objects.filter(pk__in=[cron.pk, interval.pk, once.pk, downstream.pk])
                           .order_by("name")))


def test_every_kind_of_job_is_written_as_drf_writes_it(varied_jobs):
    for job in varied_jobs:
        assert as_json(represent(JobSerializer, job, {})) == drf(JobSerializer, job), job.name


def test_a_page_is_written_as_drf_writes_each_job(varied_jobs):
    assert as_json(represent_many(JobSerializer, varied_jobs, {})) == \
        as_json([JobSerializer(job, context={}).data for job in varied_jobs])


def test_datetimes_follow_the_current_timezone_and_any_offset(varied_jobs):
    job = varied_jobs[0]
    job.start_at = LATER.astimezone(ZoneInfo("Asia/Kolkata"))  # an offset as given, not yet reloaded
    job.next_run_at = LATER.astimezone(ZoneInfo("America/St_Johns"))
    assert as_json(represent(JobSerializer, job, {})) == drf(JobSerializer, job)
    with timezone.override(ZoneInfo("Europe/Berlin")):
        berlin = represent(JobSerializer, job, {})
        assert as_json(berlin) == drf(JobSerializer, job)
    assert berlin["start_at"] == "2030-03-31T01:30:15.123456+01:00"  # half an hour before DST begins


def test_a_new_unsaved_shape_is_written_as_drf_writes_it(tenant):
    job = Job(project=tenant.project, organization=tenant.organization, name="draft",
              schedule_type=Job.ScheduleType.CRON, cron_expression="@daily", url="https://example.com/")
    job.loaded_links = {"upstream_links": [], "downstream_links": []}
    assert as_json(represent(JobSerializer, job, {})) == drf(JobSerializer, job)


class Thing:
    def __init__(self, **values):
        self.__dict__.update(values)


class OddSerializer(serializers.Serializer):
    """Fields the fast path must hand to DRF: no model, a default, a skipped optional field,
    a dotted source, a method."""

    name = serializers.CharField()
    missing = serializers.CharField(required=False)
    fallback = serializers.CharField(default="fallback")
    owner_name = serializers.CharField(source="owner.name")
    shout = serializers.SerializerMethodField()

    def get_shout(self, thing):
        return thing.name.upper() + self.context.get("suffix", "")


def test_fields_without_a_model_column_are_asked_as_drf_asks_them():
    thing = Thing(name="a", owner=Thing(name="b"))
    context = {"suffix": "!"}
    assert represent(OddSerializer, thing, context) == OddSerializer(thing, context=context).data
    assert represent(OddSerializer, thing, context) == {"name": "a", "fallback": "fallback", "owner_name": "b",
                                                        "shout": "A!"}
    assert represent(OddSerializer, thing, {})["shout"] == "A"  # the context of this call, not the first


def functions_called(function):
    """The code objects of the Python functions ``function()`` calls, in order."""
    import sys

    called = []

    def record(frame, event, arg):
        if event == "call":
            called.append(frame.f_code)

    sys.setprofile(record)
    try:
        function()
    finally:
        sys.setprofile(None)
    return called[1:]  # function itself


def test_plain_columns_are_written_without_a_call_per_field(varied_jobs):
    """The plan is compiled into one function: a text, number, UUID or foreign-key column is
    read and converted inline, with no call (it cost three per field as a list of steps)."""
    from apps.api import representation

    represent_many(JobSerializer, varied_jobs, {})  # the thread's plan
    called = functions_called(lambda: represent_many(JobSerializer, varied_jobs, {}))
    plain = {representation._ColumnStep.__call__.__code__, representation._ByField.__call__.__code__,
             representation._as_text.__code__,
             representation._as_int.__code__, representation._as_is.__code__}
    assert not plain & set(called)
    fields = len(list(JobSerializer(context={})._readable_fields))
    assert len(called) / len(varied_jobs) < 2.5 * fields  # about 2 per field now, 3.9 as a list of steps


def test_choice_columns_are_written_as_drf_writes_them_without_its_call(varied_jobs):
    """A ChoiceField's plain text value is looked up inline; an enum member, an unknown
    value or an empty one give DRF's answer."""
    from rest_framework.fields import ChoiceField

    job = varied_jobs[0]
    job.overlap_policy = str(Job.OverlapPolicy.values[0])  # plain text, as loaded
    job.misfire_policy = "not-a-choice"
    job.dependency_mode = ""
    assert as_json(represent(JobSerializer, job, {})) == drf(JobSerializer, job)
    assert ChoiceField.to_representation.__code__ not in functions_called(lambda: represent(JobSerializer, job, {}))
    job.overlap_policy = list(Job.OverlapPolicy)[-1]  # a member, not its text: DRF's own method
    assert as_json(represent(JobSerializer, job, {})) == drf(JobSerializer, job)
