"""The API side of script jobs (docs/script-jobs.md): the ``script`` block of a job, its
validation with the sandbox's own codes, and the refusal where no worker can sandbox."""

from rest_framework import serializers
from rest_framework.exceptions import ErrorDetail

from functools import lru_cache

import redis
from django.conf import settings

from cronsvc import secrets
from cronsvc.delivery.masking import MASK
from cronsvc.sandbox import MAX_SCRIPT_BYTES, Language, Script, ScriptRejected, sandbox_available
from cronsvc.sandbox.runner import validate

from .models import Job

MAX_ENV_VARS = 50


class ScriptEnvField(serializers.DictField):
    """Names and values in; names with masked values out (all are stored encrypted)."""

    def __init__(self, **kwargs):
        super().__init__(child=serializers.CharField(max_length=4096, allow_blank=True), **kwargs)

    def get_attribute(self, instance):
        # {} for a job stored without variables: DRF answers null for a None attribute
        # without asking to_representation, and the schema says an object
        return super().get_attribute(instance) or {}

    def to_representation(self, value):
        return secrets.find("jobs.Job", "script_env").masked(value or {})

    def to_internal_value(self, data):
        value = super().to_internal_value(data)
        if len(value) > MAX_ENV_VARS:
            raise serializers.ValidationError(f"at most {MAX_ENV_VARS} variables.", code="script_env")
        return value


class ScriptSpecSerializer(serializers.Serializer):
    language = serializers.ChoiceField(source="script_language", choices=Job.ScriptLanguage.choices)
    source = serializers.CharField(source="script_source", trim_whitespace=False, max_length=MAX_SCRIPT_BYTES,
                                   help_text=f"The script, at most {MAX_SCRIPT_BYTES} bytes (UTF-8).")
    env = ScriptEnvField(source="script_env", required=False, help_text=(
        "Environment variables, stored encrypted and shown back as '••••'; '••••' as a value keeps the stored one."))
    allow_network = serializers.BooleanField(source="script_allow_network", required=False, help_text=(
        "Outbound HTTP(S) from the script (default false: no network at all). Only through the platform's "
        "egress proxy (HTTP_PROXY/HTTPS_PROXY are set), which refuses private, loopback and metadata "
        "addresses like any delivery; docs/script-jobs.md."))

    def to_representation(self, job):
        """null for an http job (and null given back is taken as no script)."""
        if job.kind != Job.Kind.SCRIPT:
            return None
        return super().to_representation(job)

    def run_validation(self, data=serializers.empty):
        if data is None:
            return {}
        return super().run_validation(data)


def validate_kind(attrs, instance):
    """Check a job's kind and script together; fill in what a script job does not use.
    Raises ValidationError with the sandbox's codes (script_too_large, script_env, ...)."""
    kind = attrs.get("kind", instance.kind if instance else Job.Kind.HTTP)
    if kind != Job.Kind.SCRIPT:
        if not attrs.get("url", instance.url if instance else ""):
            raise _error("request.url", "required", "request.url: an http job needs a URL.")
        return
    language = attrs.get("script_language", instance.script_language if instance else "")
    source = attrs.get("script_source", instance.script_source if instance else "")
    if not language or not source:
        raise _error("script", "required", "script: a script job needs script.language and script.source.")
    env = _keep_masked(attrs.get("script_env"), (instance.script_env if instance else None) or {})
    if "script_env" in attrs:
        attrs["script_env"] = env or None
    try:
        validate(Script(Language(language), source.encode(),
                        env=env if env is not None else dict((instance.script_env if instance else None) or {})))
    except ScriptRejected as exc:
        raise _error(f"script.{_FIELDS.get(exc.code, 'source')}", exc.code, exc.message) from None
    if "url" not in attrs and not (instance and instance.url):
        attrs["url"] = ""
    if (instance is None or instance.kind != Job.Kind.SCRIPT) and not cluster_can_sandbox():
        raise _error("kind", "sandbox_unavailable",
                     "No worker can run scripts in a sandbox right now, so script jobs cannot be created; "
                     "try again later or ask the operator (docs/script-jobs.md, Operations).")


def cluster_can_sandbox():
    """Whether some worker said lately that it can sandbox (apps/executions/worker/scripts.py
    reports it); this host's own check where there is no Redis (the embedded mode)."""
    if not settings.REDIS_URL:
        return sandbox_available().ok
    return bool(_redis(settings.REDIS_URL).exists(settings.SANDBOX_REPORT_KEY))


@lru_cache(maxsize=4)
def _redis(url):
    return redis.Redis.from_url(url, **settings.REDIS_CLIENT_OPTIONS)


_FIELDS = {"script_too_large": "source", "script_env": "env", "script_language": "language"}


def _keep_masked(given, stored):
    if given is None:
        return None
    env = {}
    for name, value in given.items():
        if value == MASK:
            if name not in stored:
                raise _error(f"script.env.{name}", "script_env",
                             f"Give the value of {name}; '{MASK}' only stands for a stored one.")
            value = stored[name]
        env[name] = value
    return env


def _error(field, code, message):
    return serializers.ValidationError({field: [ErrorDetail(message, code=code)]})
