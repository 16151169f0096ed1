"""Tenant isolation, proven over the whole URL configuration.

Every URL pattern is enumerated (``get_resolver()``, recursively: API, pages, badges,
admin, health). For each pattern with parameters, organization A's ids are filled in and
every method is tried as organization B (an owner's session, and an API key); the answer
must be a refusal (403/404/405, 401, or a redirect to a log-in page) and must carry none
of A's names, URLs, e-mails, ids or secrets. Patterns without parameters are read (GET) as
B and must not carry A's data either.

A parameter this module does not know FAILS it (test_every_parameter_is_known): a URL added
later gets its tenancy test by adding one line to RESOURCES or PARAMETERS below.
"""

import re
import uuid

import pytest
from django.contrib.contenttypes.models import ContentType
from django.urls import URLPattern, URLResolver, get_resolver
from django.utils.encoding import force_bytes
from django.utils.http import urlsafe_base64_encode

from apps.accounts.gdpr import organization_tables
from apps.accounts.models import Organization

from .world import build_world

pytestmark = pytest.mark.django_db

# Id parameters (pk, id, user_id, project_pk, ...) are filled by the path segment before
# them: "jobs/<pk>/" -> A's job. One line per resource.
RESOURCES = {
    "projects": "project",
    "jobs": "job",
    "executions": "execution",
    "dead-letter": "execution",
    "workflow-runs": "execution",  # a workflow run is read through its executions
    "api-keys": "api_key",
    "members": "member",
    "invitations": "invitation",
    "audit-events": "audit_event",
    "exports": "export",
    "badges": "badge",
    "channels": "channel",
    "notifications": "notification",
    "event-subscriptions": "event_subscription",
    "statements": "statement",
    "monitors": "monitor",
    "archives": "archive",
}
ID_PARAMETERS = {"pk", "id", "user_id", "project_pk", "job_pk", "execution_pk", "channel_pk"}
# Other parameters: name -> function(world, template) giving the value to try.
PARAMETERS = {
    "uidb64": lambda w, t: urlsafe_base64_encode(force_bytes(w.objects["owner"].pk)),
    "token": lambda w, t: "set-password" if "password-reset" in t else "bogus-token-1",
    "app_label": lambda w, t: "accounts",
    "content_type_id": lambda w, t: str(ContentType.objects.get_for_model(Organization).pk),
    "url": lambda w, t: "accounts/organization/",
    "format": lambda w, t: "json",
    "number": lambda w, t: "1",  # a job version: the job before it is A's
}
# Reachable without belonging to the organization, on purpose (capability URLs).
PUBLIC_BY_DESIGN = {
    "badge": "a status badge is public to whoever holds its unguessable token",
    "monitor-ping": "a ping URL is the monitor's credential (an unguessable id), as Healthchecks does",
}
# Pages that answer a wrong or foreign token with a page of their own (still without A's data).
# (The SSO callback answers a state that no sign-in in this session started with its own 400.)
TOKEN_PAGES = {"web:password_reset_confirm", "web:invitation", "web:sso_callback"}
METHODS = ("get", "post", "put", "patch", "delete")
REFUSED = {401, 403, 404, 405}
LOGIN_PAGES = ("/login/", "/admin/login/")


# --- the URL configuration as templates


def _regex_to_template(text):
    """'^jobs/(?P<pk>[^/.]+)/$' -> 'jobs/{pk}/' (named groups may nest parentheses)."""
    out, i = [], 0
    while i < len(text):
        if text.startswith("(?P<", i):
            end = text.index(">", i)
            name, depth, j = text[i + 4:end], 1, end + 1
            while depth:
                depth += {"(": 1, ")": -1}.get(text[j], 0) if text[j - 1] != "\\" else 0
                j += 1
            out.append("{" + name + "}")
            i = j
        else:
            out.append(text[i])
            i += 1
    return "".join(out).replace("^", "").replace("$", "").replace("\\.", ".").replace("\\", "")


def _route_to_template(text):
    return re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", text)


def url_patterns(resolver=None, prefix="", namespace=""):
    """[(template, name, pattern)] for every endpoint."""
    resolver = resolver or get_resolver()
    found = []
    for entry in resolver.url_patterns:
        text = str(entry.pattern)
        part = _regex_to_template(text) if "(?P<" in text or text.startswith("^") else _route_to_template(text)
        if isinstance(entry, URLResolver):
            ns = ":".join(filter(None, [namespace, entry.namespace]))
            found += url_patterns(entry, prefix + part, ns)
        elif isinstance(entry, URLPattern):
            name = ":".join(filter(None, [namespace, entry.name or ""])) or "?"
            found.append(("/" + prefix + part, name, entry))
    return found


def parameters(template):
    return re.findall(r"\{(\w+)\}", template)


def _admin_object(world, template):
    """admin/<app>/<model>/{object_id}/...: A's row of that model, or an id of nothing."""
    match = re.match(r"/admin/(\w+)/(\w+)/\{\w+\}", template)
    if not match:
        return None
    from django.apps import apps

    model = apps.get_model(match.group(1), match.group(2))
    if model is Organization:
        return str(world.a.organization.pk)
    lookup = dict(organization_tables()).get(model)
    row = model._base_manager.filter(**{lookup: world.a.organization}).first() if lookup else None
    return str(row.pk) if row is not None else "999999"


def fill(world, template):
    """The template with A's values, or raise KeyError naming what is unknown."""
    values = {}
    for name in parameters(template):
        if template.startswith("/admin/") and name != "url":
            values[name] = _admin_object(world, template) or "999999"
        elif name in ID_PARAMETERS:
            before = template.split("{" + name + "}")[0].rstrip("/").rsplit("/", 1)[-1]
            if before not in RESOURCES:
                raise KeyError(f"resource '{before}' (parameter {name})")
            obj = world.objects.get(RESOURCES[before])
            values[name] = str(obj.pk) if obj is not None else str(uuid.uuid4())
        elif name in PARAMETERS:
            values[name] = PARAMETERS[name](world, template)
        else:
            raise KeyError(f"parameter '{name}'")
    return template.format(**values)


# --- the checks


def test_every_parameter_is_known(make_tenant):
    world = build_world(make_tenant)
    unknown = []
    for template, name, _ in url_patterns():
        if name in PUBLIC_BY_DESIGN:
            continue
        try:
            fill(world, template)
        except KeyError as exc:
            unknown.append(f"{name} {template}: {exc.args[0]}")
    assert not unknown, (
        "URL patterns this tenancy test cannot fill. Add the resource to RESOURCES (or the parameter to "
        "PARAMETERS) in tests/security/test_isolation.py so the new URL is tried with another tenant's ids:\n"
        + "\n".join(unknown))


def _problem(world, method, url, response, allowed):
    body = b"".join(response.streaming_content) if response.streaming else response.content
    text = body.decode("utf-8", errors="replace")
    leaked = [m for m in world.markers if m and m in text]
    if leaked:
        return f"{method.upper()} {url} -> {response.status_code} shows A's {leaked[:3]}"
    location = response.get("Location", "")
    if response.status_code in allowed or (response.status_code == 302 and location.startswith(LOGIN_PAGES)):
        return None
    return f"{method.upper()} {url} -> {response.status_code} {location}"


def _tries(world, client, *, methods):
    problems, tried = [], 0
    for template, name, _ in url_patterns():
        if name in PUBLIC_BY_DESIGN:
            continue
        try:
            url = fill(world, template)
        except KeyError:
            continue  # reported by test_every_parameter_is_known
        has_ids = bool(parameters(template))
        # Without ids only the content matters (a list, a form, a redirect).
        allowed = REFUSED | ({200, 400} if name in TOKEN_PAGES else set()) | (
            set() if has_ids else {200, 301, 302})
        for method in (methods if has_ids else ("get",)):
            response = getattr(client, method)(url, {} if method == "get" else None, format="json") \
                if method != "get" else client.get(url)
            tried += 1
            problem = _problem(world, method, url, response, allowed)
            if problem:
                problems.append(problem)
    return problems, tried


@pytest.mark.parametrize("as_", ["session", "api_key", "sso_session"])
def test_b_cannot_reach_a(make_tenant, as_, settings):
    settings.OUTBOUND_ALLOW_PRIVATE = False
    world = build_world(make_tenant)
    client = {"session": world.session, "api_key": world.key_client, "sso_session": world.sso_session}[as_]()
    problems, tried = _tries(world, client, methods=METHODS)
    assert tried > 200
    assert not problems, "\n".join(problems)


def test_the_checks_can_fail(make_tenant):
    """A's owner reaching A's job is not refused: the same checks report it."""
    world = build_world(make_tenant)
    client = world.session()
    client.force_login(world.a.owner)
    response = client.get(f"/api/v1/jobs/{world.objects['job'].pk}/", HTTP_X_ORGANIZATION=str(world.a.organization.pk))
    assert _problem(world, "get", "/api/v1/jobs/", response, REFUSED) is not None
