"""Single sign-on pages: "Sign in with SSO", the provider's callback, and the owner's
settings page. The flow itself is apps.accounts.sso; every refusal is a 4xx page with a
stable code, written to the audit log when its organization is known."""

import logging
from functools import partial

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import logout
from django.core.exceptions import ValidationError
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts import otp_views, signin_scope, sso
from apps.api.audit import audit, client_ip
from apps.accounts.models import OrganizationSSO
from apps.accounts.audit import record_audit
from cronsvc.oidc import parse_domains

from apps.api import ratelimit
from apps.api.access import SESSION_KEY, Role, member_view

log = logging.getLogger(__name__)

# Refusals that are about who signs in rather than about a broken configuration.
SSO_STARTS_PER_IP = 60  # per LOGIN_RATE_WINDOW
FORBIDDEN = {"sso_domain_not_allowed", "sso_email_unverified", "sso_user_inactive", "sso_organization_suspended",
             "sso_provider_denied", "sso_account_exists"}


def refusal(request, error, status=None):
    """The error page of a refused sign-in; audited when the organization is known."""
    organization = getattr(error, "organization", None)
    if organization is not None:
        record_audit(organization, "sso.refused", data={"code": error.code, "reason": error.message},
                     ip=client_ip(request))
    log.info("sso refused: %s %s", error.code, error.message)
    status = status or (403 if error.code in FORBIDDEN else 400)
    return render(request, "web/auth/sso_error.html", {"code": error.code, "message": error.message}, status=status)


@require_http_methods(["GET", "POST"])
def sso_login(request):
    """Find the organization by e-mail domain or slug, then go to its provider."""
    identifier = (request.POST.get("identifier") or request.GET.get("org") or "").strip()
    if request.method == "GET" and not identifier:
        return render(request, "web/auth/sso_login.html", {"next": request.GET.get("next", "")})
    # Each start fetches the provider's discovery document: bounded per address.
    if ratelimit.hit("sso-start", client_ip(request) or "unknown", window=settings.LOGIN_RATE_WINDOW) > SSO_STARTS_PER_IP:
        return render(request, "web/auth/sso_error.html", {"code": "sso_rate_limited", "message": (
            "Too many single sign-on attempts from this address: try again in a few minutes.")}, status=429)
    try:
        config = sso.find_configuration(identifier)
        url = sso.begin(request, config, login_hint=identifier)
    except sso.SSOError as error:
        if error.code in ("sso_not_configured", "sso_ambiguous_domain"):
            return render(request, "web/auth/sso_login.html",
                          {"error": error, "identifier": identifier, "next": request.POST.get("next", "")}, status=400)
        return refusal(request, error)
    return redirect(url)


@require_GET
def sso_callback(request):
    try:
        sign_in, next_url = sso.complete(request)
    except sso.SSOError as error:
        return refusal(request, error)
    user, organization = sign_in.user, sign_in.membership.organization
    code_needed = _two_factor_code_needed(request, user, organization)
    record_audit(organization, "sso.login", target=user, actor_user=user, ip=client_ip(request),
                 data={"new_member": sign_in.created_membership, "two_factor_code_asked": code_needed})
    if sign_in.created_membership:
        messages.success(request, f"Welcome to {organization.name}: you joined as "
                                  f"{sign_in.membership.get_role_display().lower()}.")
    safe = next_url and url_has_allowed_host_and_scheme(next_url, allowed_hosts={request.get_host()},
                                                         require_https=request.is_secure())
    next_url = next_url if safe else reverse("web:dashboard")
    if code_needed:
        if request.user.is_authenticated and request.user.pk != user.pk:
            logout(request)  # another person's session: nobody is signed in until the code is right
        request.session[SESSION_KEY] = str(organization.pk)
        return otp_views.start_second_step(request, user, next_url, organization=organization)
    # This organization's provider vouched for the person: the session reaches it alone.
    signin_scope.sign_in(request, user, organization=organization)
    request.session[SESSION_KEY] = str(organization.pk)
    return redirect(next_url)


def _two_factor_code_needed(request, user, organization):
    """A person with a confirmed device gives their code after the provider, unless the
    organization says its provider enforces multi-factor authentication, or they gave it
    already in this session."""
    if organization.sso.idp_enforces_mfa or not otp_views.has_two_factor(user):
        return False
    same_verified = (request.user.is_authenticated and request.user.pk == user.pk
                     and getattr(request.user, "is_verified", lambda: False)())
    return not same_verified


# --- the owner's settings page

FIELDS = ("issuer", "client_id", "allowed_domains", "default_role")


@member_view(role=Role.OWNER)
@require_http_methods(["GET", "POST"])
def sso_settings(request):
    organization = request.actor.organization
    config = OrganizationSSO.objects.filter(organization=organization).first()
    errors = {}
    if request.method == "POST" and request.POST.get("action") == "delete" and config is not None:
        sso.delete_configuration(config, audit=partial(audit, request))
        messages.success(request, "Single sign-on is off; members log in with their passwords.")
        return redirect("web:sso_settings")
    if request.method == "POST":
        config, errors = _save(request, organization, config)
        if not errors:
            messages.success(request, "Single sign-on settings saved.")
            return redirect("web:sso_settings")
    values = {name: request.POST.get(name, getattr(config, name, "")) for name in FIELDS} if request.method == "POST" \
        else {name: getattr(config, name, "") for name in FIELDS}
    values.setdefault("default_role", OrganizationSSO.DefaultRole.VIEWER)
    context = {"config": config, "errors": errors, "values": values, "redirect_uri": sso.redirect_uri(request),
               "roles": OrganizationSSO.DefaultRole.choices,
               "enabled": request.POST.get("enabled") == "on" if request.method == "POST" else getattr(config, "enabled", True),
               "required": request.POST.get("required") == "on" if request.method == "POST" else getattr(config, "required", False),
               "idp_enforces_mfa": request.POST.get("idp_enforces_mfa") == "on" if request.method == "POST"
               else getattr(config, "idp_enforces_mfa", False)}
    return render(request, "web/settings/sso.html", context, status=400 if errors else 200)


def _save(request, organization, config):
    """Validate and save the form; the secret is kept when the field is left empty."""
    post = request.POST
    config = config or OrganizationSSO(organization=organization)
    config.issuer = post.get("issuer", "").strip().rstrip("/")
    config.client_id = post.get("client_id", "").strip()
    config.allowed_domains = ", ".join(parse_domains(post.get("allowed_domains", "")))
    config.default_role = post.get("default_role", "")
    config.enabled = post.get("enabled") == "on"
    config.required = post.get("required") == "on"
    config.idp_enforces_mfa = post.get("idp_enforces_mfa") == "on"
    secret = post.get("client_secret", "")
    if secret:
        config.client_secret = secret
    errors = {}
    try:
        config.full_clean(exclude=["organization", "client_secret"])
    except ValidationError as exc:
        errors = exc.message_dict
    if not config.client_secret:
        errors["client_secret"] = ["Give the client secret the provider showed when you registered cronsvc."]
    if not config.domains:
        errors["allowed_domains"] = ["Give at least one e-mail domain, e.g. example.com."]
    if errors:
        return config, errors
    sso.save_configuration(config, audit=partial(audit, request), reported={
        "issuer": config.issuer, "client_id": config.client_id, "domains": config.domains,
        "default_role": config.default_role, "enabled": config.enabled, "required": config.required,
        "idp_enforces_mfa": config.idp_enforces_mfa, "secret_changed": bool(secret)})
    return config, {}
