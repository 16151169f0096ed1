"""The job's schedule in the API (also the pages' and the monitors'): the ``schedule``
object of each type, its execution windows and blackouts, and the schedule preview and
next-runs inputs. Views onto the job's flat schedule fields (``source="*"``)."""

from collections.abc import Mapping

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from apps.api.base import StrictSerializer
from cronsvc.schedules import ScheduleError, parse_schedule, schedule_to_dict
from cronsvc.schedules.window_parse import blackouts_to_list, parse_blackouts, parse_windows, windows_to_list

from . import validation
from .models import Job
from .scheduling import job_schedule

MAX_RUNS = 100


def schedule_error(exc):
    """A ScheduleError as a DRF error keyed by its path below ``schedule``."""
    detail = ErrorDetail(exc.message, code=exc.code)
    sub = exc.field.removeprefix("schedule").lstrip(".")
    return serializers.ValidationError({sub: [detail]} if sub else [detail])


# --- schedule -------------------------------------------------------------------------


class CronScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["cron"])
    expression = serializers.CharField(help_text="5 fields or an @macro, e.g. `0 3 * * 1-5`.")
    timezone = serializers.CharField(required=False, help_text="IANA name; default: the project's timezone.")


class IntervalScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["interval"])
    seconds = serializers.IntegerField(min_value=1, max_value=366 * 86400)
    timezone = serializers.CharField(required=False, help_text="For display only.")
    anchor = serializers.DateTimeField(
        required=False, write_only=True,
        help_text="Schedule preview only: runs fall on anchor + k·seconds. A job's runs count from its "
                  "start_at (or its creation); sending anchor for a job is an error.")


class OnceScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["once"])
    at = serializers.DateTimeField(help_text="An instant with an offset or Z.")
    timezone = serializers.CharField(required=False, help_text="For display only.")


class NoneScheduleSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["none"], help_text="No schedule: the job runs only when its "
                                                                "upstream jobs (dependencies) trigger it.")
    timezone = serializers.CharField(required=False, help_text="For display only.")


NO_SCHEDULE_DESCRIPTION = "Runs when its upstream jobs trigger it"

SCHEDULE_SCHEMA = PolymorphicProxySerializer(
    component_name="Schedule",
    serializers={"cron": CronScheduleSerializer, "interval": IntervalScheduleSerializer,
                 "once": OnceScheduleSerializer, "none": NoneScheduleSerializer},
    resource_type_field_name="type",
)


@extend_schema_field(SCHEDULE_SCHEMA)
class ScheduleField(serializers.Field):
    """The job's schedule <-> schedule_type, cron_expression, interval_seconds, run_at, timezone.

    Without a timezone, ``timezone`` comes back None: the serializer fills in the
    project's timezone once it knows the project.
    """

    allow_anchor = False

    def to_representation(self, job):
        if job.schedule_type == Job.ScheduleType.NONE:
            return {"type": "none", "timezone": job.timezone}
        data = schedule_to_dict(job_schedule(job))
        data.pop("anchor", None)  # a job's interval counts from start_at or creation
        return data

    def to_internal_value(self, data):
        if isinstance(data, Mapping) and "anchor" in data and not self.allow_anchor:
            raise serializers.ValidationError({"anchor": [ErrorDetail(
                "schedule.anchor: a job's interval counts from its start_at (or its creation); set start_at instead.",
                code="invalid_schedule")]})
        if isinstance(data, Mapping) and data.get("type") == "none" and not self.allow_anchor:
            return no_schedule_fields(data)
        try:
            schedule = parse_schedule(data)
        except ScheduleError as exc:
            raise schedule_error(exc) from None
        return to_model_fields(schedule, timezone_given=data.get("timezone") is not None)


def no_schedule_fields(data):
    unknown = sorted(set(data) - {"type", "timezone"})
    if unknown:
        raise serializers.ValidationError({key: [ErrorDetail("Unknown field.", code="unknown_field")]
                                           for key in unknown})
    zone = data.get("timezone")
    if zone is not None:  # the same check as the other schedules' timezones
        try:
            parse_schedule({"type": "interval", "seconds": 3600, "timezone": zone})
        except ScheduleError as exc:
            raise schedule_error(exc) from None
    return {"schedule_type": "none", "cron_expression": "", "interval_seconds": None, "run_at": None,
            "timezone": zone}


def to_model_fields(schedule, *, timezone_given=True):
    data = schedule_to_dict(schedule)
    kind = data["type"]
    return {
        "schedule_type": kind,
        "cron_expression": data.get("expression", ""),
        "interval_seconds": data.get("seconds"),
        "run_at": schedule.at if kind == "once" else None,
        "timezone": data["timezone"] if timezone_given else None,
    }


# --- execution windows ----------------------------------------------------------------


class WindowSerializer(serializers.Serializer):
    days = serializers.ListField(child=serializers.ChoiceField(choices=["mon", "tue", "wed", "thu", "fri", "sat",
                                                                        "sun"]))
    start = serializers.CharField(help_text="Local time HH:MM in the job's timezone.")
    end = serializers.CharField(help_text="Local time HH:MM; after start, or at/before it with overnight.")
    overnight = serializers.BooleanField(required=False, help_text="The window closes at `end` the next day.")


class BlackoutSerializer(serializers.Serializer):
    start = serializers.DateField(help_text="First local date (job's timezone) on which nothing runs.")
    end = serializers.DateField(required=False, help_text="Last such date, included; default: start.")


class _WindowListField(serializers.Field):
    """A list parsed and normalised by the engine (cronsvc.schedules.window_parse); its
    refusals keep their stable code, keyed by the path below the field."""

    parse = to_list = None

    def to_representation(self, value):
        return value or []

    def to_internal_value(self, data):
        try:
            return type(self).to_list(type(self).parse(data, self.field_name))
        except ScheduleError as exc:
            sub = exc.field.removeprefix(self.field_name).lstrip(".")
            detail = ErrorDetail(exc.message, code=exc.code)
            raise serializers.ValidationError({sub: [detail]} if sub else [detail]) from None


@extend_schema_field(WindowSerializer(many=True))
class WindowsField(_WindowListField):
    parse, to_list = staticmethod(parse_windows), staticmethod(windows_to_list)


@extend_schema_field(BlackoutSerializer(many=True))
class BlackoutsField(_WindowListField):
    parse, to_list = staticmethod(parse_blackouts), staticmethod(blackouts_to_list)


# --- schedule preview, next runs --------------- -------------------------------------


class CountField(serializers.IntegerField):
    """1..100, refused with the stable code ``invalid_count``."""

    def __init__(self, **kwargs):
        super().__init__(min_value=1, max_value=MAX_RUNS, default=5, help_text="How many runs, 1 to 100.", **kwargs)

    def to_internal_value(self, data):
        try:
            return super().to_internal_value(data)
        except serializers.ValidationError:
            raise serializers.ValidationError("Give a whole number from 1 to 100.", code="invalid_count") from None

    def run_validators(self, value):
        try:
            super().run_validators(value)
        except serializers.ValidationError:
            raise serializers.ValidationError("Give a whole number from 1 to 100.", code="invalid_count") from None


def refuse_out_of_range(**instants):
    problems = validation.instant_problems(**instants)
    if problems:
        raise serializers.ValidationError({p.field: [ErrorDetail(p.message, code=p.code)] for p in problems})


class NextRunsQuerySerializer(serializers.Serializer):
    count = CountField()
    after = serializers.DateTimeField(required=False, help_text="Default: now.")

    def validate(self, attrs):
        refuse_out_of_range(after=attrs.get("after"))
        return attrs


class PreviewScheduleField(ScheduleField):
    allow_anchor = True

    def to_internal_value(self, data):
        try:
            return parse_schedule(data)
        except ScheduleError as exc:
            raise schedule_error(exc) from None


class SchedulePreviewSerializer(StrictSerializer):
    schedule = PreviewScheduleField(help_text="Without timezone: UTC. Interval schedules may give an anchor.")
    count = CountField()
    after = serializers.DateTimeField(required=False, help_text="Default: now.")
    start_at = serializers.DateTimeField(required=False, allow_null=True)
    end_at = serializers.DateTimeField(required=False, allow_null=True)

    def validate(self, attrs):
        schedule = attrs["schedule"]
        refuse_out_of_range(**{
            "schedule.at": getattr(schedule, "at", None), "schedule.anchor": getattr(schedule, "anchor", None),
            "after": attrs.get("after"), "start_at": attrs.get("start_at"), "end_at": attrs.get("end_at")})
        return attrs


class RunSerializer(serializers.Serializer):
    at = serializers.CharField(help_text="UTC, ISO 8601 with Z.")
    local = serializers.CharField(help_text="The same instant in the schedule's timezone, with its offset.")
    status = serializers.ChoiceField(choices=["run", "skipped", "deferred"], required=False, help_text=(
        "A job's next runs only: what its execution windows do to the occurrence (`run` when it has none)."))
    reason = serializers.CharField(required=False, help_text="`outside_window` when skipped or deferred, else empty.")
    occurrence = serializers.CharField(required=False, help_text="The schedule's own time (UTC); differs from `at` "
                                                                  "when deferred.")


class RunsSerializer(serializers.Serializer):
    runs = RunSerializer(many=True)
    description = serializers.CharField()
