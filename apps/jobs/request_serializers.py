"""The job's ``request`` in the API (also the pages'): method, URL, headers (secret ones
kept masked), body, auth, timeout, and the ``retry`` and ``success`` blocks. Views onto the
job's flat fields (``source="*"``)."""

from collections.abc import Mapping

from drf_spectacular.utils import PolymorphicProxySerializer, extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from apps.api.base import StrictSerializer
from cronsvc import secrets
from cronsvc.delivery.masking import MASK

from .models import Job

SECRET_KEYS = {"basic": ("username", "password"), "bearer": ("token",)}


# --- request --------------------------------------------------------------------------


class BasicAuthSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["basic"])
    username = serializers.CharField()
    password = serializers.CharField(help_text=f"Write-only: responses show `{MASK}`.")


class BearerAuthSerializer(serializers.Serializer):
    type = serializers.ChoiceField(choices=["bearer"])
    token = serializers.CharField(help_text=f"Write-only: responses show `{MASK}`.")


@extend_schema_field(PolymorphicProxySerializer(
    component_name="RequestAuth", serializers={"basic": BasicAuthSerializer, "bearer": BearerAuthSerializer},
    resource_type_field_name="type"))
class AuthField(serializers.Field):
    """Credentials, never shown back: secrets read as ``••••``. Sending ``••••`` again
    (a read-modify-write round trip) keeps the stored secret; null removes the auth."""

    def to_representation(self, auth):
        return secrets.find("jobs.Job", "auth").masked(auth) or None

    def to_internal_value(self, data):
        if not isinstance(data, Mapping) or data.get("type") not in SECRET_KEYS:
            raise serializers.ValidationError({"type": [ErrorDetail(
                'Give {"type": "basic", "username", "password"} or {"type": "bearer", "token"}.',
                code="invalid_auth")]})
        allowed = {"type", *SECRET_KEYS[data["type"]]}
        unknown = sorted(set(data) - allowed)
        if unknown:
            raise serializers.ValidationError({k: [ErrorDetail("Unknown field.", code="unknown_field")]
                                               for k in unknown})
        return {key: data.get(key) for key in sorted(allowed)}


class HeadersField(serializers.DictField):
    """All the request's headers; secret ones (stored encrypted) read ``••••``. Sending
    ``••••`` back keeps the stored value."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=8192),
                         source="*", **kwargs)

    def to_representation(self, job):
        return {**(job.headers or {}), **secrets.find("jobs.Job", "secret_headers").masked(job.secret_headers or {})}

    def to_internal_value(self, data):
        return {"headers": super().to_internal_value(data)}


@extend_schema_field({"type": "array", "items": {"type": "string"}})
class SecretHeaderNamesField(serializers.Field):
    """Names of headers stored encrypted and masked, beyond the always-secret Authorization,
    Proxy-Authorization, Cookie, X-API-Key and Api-Key. Omit to keep the current marks."""

    def __init__(self, **kwargs):
        super().__init__(source="*", **kwargs)

    def to_representation(self, job):
        return sorted(job.secret_headers or {})

    def to_internal_value(self, data):
        if not isinstance(data, list) or not all(isinstance(n, str) and 0 < len(n) <= 256 for n in data):
            raise serializers.ValidationError("Give a list of header names.", code="invalid_header")
        return {"_secret_marks": data}


class RequestSpecSerializer(StrictSerializer):
    url = serializers.CharField(max_length=2048, help_text="http(s) URL; private addresses are refused.")
    method = serializers.ChoiceField(choices=Job.Method.choices, required=False, help_text="Default GET.")
    headers = HeadersField(
        required=False, help_text="Custom headers; cronsvc's own (X-Cronsvc-*, webhook-*) are reserved. "
                                  f"Secret ones read `{MASK}`; sending `{MASK}` back keeps the stored value.")
    secret_headers = SecretHeaderNamesField(required=False)
    body = serializers.CharField(allow_blank=True, trim_whitespace=False, max_length=65536, required=False,
                                 help_text="May use {{ job.id }}, {{ execution.id }}, {{ scheduled_for }}, ...")
    body_format = serializers.ChoiceField(choices=Job.BodyFormat.choices, required=False, help_text="Default raw.")
    timeout_seconds = serializers.IntegerField(min_value=1, max_value=300, required=False,
                                               help_text="Default 30; at most the plan's max_timeout_seconds.")
    connect_timeout_seconds = serializers.FloatField(
        min_value=0.1, max_value=60, allow_null=True, required=False,
        help_text="Seconds to connect to the endpoint, at most timeout_seconds; null (default): the platform's "
                  "DELIVERY_CONNECT_TIMEOUT (5 s unless the operator changed it).")
    follow_redirects = serializers.BooleanField(required=False, help_text="Default false.")
    auth = AuthField(required=False, allow_null=True,
                     help_text=f"Basic or bearer credentials; secrets are write-only (shown as `{MASK}`); "
                               "omit to keep, null to remove.")


class JobRetrySerializer(StrictSerializer):
    max_attempts = serializers.IntegerField(min_value=1, max_value=100, required=False,
                                            help_text="Including the first; at most the plan's max_attempts.")
    initial_delay_seconds = serializers.IntegerField(source="retry_initial_delay_seconds", min_value=1,
                                                     max_value=86400, required=False)
    max_delay_seconds = serializers.IntegerField(source="retry_max_delay_seconds", min_value=1,
                                                 max_value=7 * 86400, required=False)
    multiplier = serializers.FloatField(source="retry_multiplier", min_value=1.0, max_value=10.0, required=False)
    retry_on_timeout = serializers.BooleanField(required=False)


class JobSuccessSerializer(StrictSerializer):
    status_codes = serializers.CharField(source="success_status_codes", max_length=200, required=False,
                                         help_text='Codes and ranges, e.g. "200-299, 304". Default 200-299.')
    body_contains = serializers.CharField(source="success_body_contains", max_length=500, allow_blank=True,
                                          required=False)
    body_regex = serializers.CharField(source="success_body_regex", max_length=500, allow_blank=True,
                                       required=False)
