"""Two-factor authentication (TOTP, django-otp): turning it on and off, the log-in's second
step, and OPERATOR_2FA for the admin.

The log-in form checks the password (or an organization's single sign-on vouches for the
person); for a user with a confirmed device it does not log in but parks the user id and
that first step's sign-in scope in the session and asks for a code here. Tokens are throttled by
django-otp per device (each failure doubles the wait). Devices are EncryptedTOTPDevice: the
seed is encrypted at rest, verification is django-otp's TOTP code.
"""

from django.conf import settings
from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseForbidden
from django.shortcuts import redirect, render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods
from django_otp import devices_for_user, match_token
from django_otp import login as otp_login

from . import signin_scope
from .models import EncryptedTOTPDevice, Organization
from .audit import audit_by, audited

PENDING_USER = "otp_pending_user"
PENDING_NEXT = "otp_pending_next"
PENDING_SCOPE = "otp_pending_scope"  # how the first step signed in: {"password": bool, "organization": id}


def has_two_factor(user):
    return any(devices_for_user(user, confirmed=True))


def start_second_step(request, user, next_url, *, by_password=False, organization=None):
    """Called once the password is right (``by_password``) or ``organization``'s single
    sign-on vouched for the person: the code is asked next, and the session gets that
    sign-in's scope (apps.accounts.signin_scope) only once the code is right."""
    request.session[PENDING_USER] = str(user.pk)
    request.session[PENDING_NEXT] = next_url or ""
    request.session[PENDING_SCOPE] = {"password": by_password,
                                      "organization": str(organization.pk) if organization is not None else ""}
    return redirect("login_otp")


def _safe_next(request, url, default):
    if url and url_has_allowed_host_and_scheme(url, allowed_hosts={request.get_host()},
                                               require_https=request.is_secure()):
        return url
    return default


@sensitive_post_parameters("token")
@require_http_methods(["GET", "POST"])
def login_otp(request):
    """The second step: a logged-in-by-password user (pending) or a logged-in staff member
    whom OPERATOR_2FA sends here gives a code from their authenticator app."""
    pending = _pending_user(request)
    user = pending or (request.user if request.user.is_authenticated else None)
    if user is None:
        return redirect("web:login")
    error = None
    if request.method == "POST":
        device = match_token(user, request.POST.get("token", "").strip())
        if device is not None:
            next_url = request.session.pop(PENDING_NEXT, "") or request.GET.get("next", "")
            request.session.pop(PENDING_USER, None)
            scope = request.session.pop(PENDING_SCOPE, None) or {"password": True}  # parked before scopes
            if pending is not None:
                organization = Organization.objects.filter(pk=scope["organization"]).first() \
                    if scope.get("organization") else None
                signin_scope.sign_in(request, user, by_password=scope.get("password", False),
                                     organization=organization)
            otp_login(request, device)
            return redirect(_safe_next(request, next_url, reverse(settings.LOGIN_REDIRECT_URL)))
        error = "That code is not right (or came too fast after a wrong one); try the current one."
    return render(request, "accounts/login_otp.html", {"error": error}, status=400 if error else 200)


def _pending_user(request):
    pk = request.session.get(PENDING_USER)
    return get_user_model().objects.filter(pk=pk, is_active=True).first() if pk else None


@login_required
@sensitive_post_parameters("token")
@require_http_methods(["GET", "POST"])
def two_factor(request):
    """Set up (new secret, confirm with a code) or turn off two-factor authentication."""
    user = request.user
    action = request.POST.get("action")
    error = None
    if action == "start":
        EncryptedTOTPDevice.objects.filter(user=user, confirmed=False).delete()
        EncryptedTOTPDevice.objects.create(user=user, name="authenticator", confirmed=False)
    elif action == "confirm":
        device = EncryptedTOTPDevice.objects.filter(user=user, confirmed=False).first()
        if device is not None and device.verify_token(request.POST.get("token", "").strip()):
            _confirm(device, audit=_audit_everywhere(user))
            otp_login(request, device)
            messages.success(request, "Two-factor authentication is on.")
            return redirect("two_factor")
        error = "That code is not right; check the time on your phone and try the current one."
    elif action == "disable":
        if match_token(user, request.POST.get("token", "").strip()) is not None:
            _disable(user, audit=_audit_everywhere(user))
            messages.success(request, "Two-factor authentication is off.")
            return redirect("two_factor")
        error = "Give a current code to turn two-factor authentication off."
    pending = EncryptedTOTPDevice.objects.filter(user=user, confirmed=False).first()
    context = {"enabled": has_two_factor(user), "pending": pending,
               "secret": _base32(pending) if pending else "", "config_url": pending.config_url if pending else "",
               "error": error, "operator_required": settings.OPERATOR_2FA and user.is_staff}
    return render(request, "accounts/two_factor.html", context, status=400 if error else 200)


def _base32(device):
    from base64 import b32encode

    return b32encode(device.bin_key).decode()


def _audit_everywhere(user):
    """The ``audit`` of ``user`` changing their own sign-in: one event in each of their organizations."""
    audits = [audit_by(membership.organization, user=user)
              for membership in user.memberships.select_related("organization")]

    def audit(action, target=None, data=None):
        for each in audits:
            each(action, target, data)

    return audit


@audited
def _confirm(device, *, audit):
    device.confirmed = True
    device.save(update_fields=["confirmed"])
    audit("user.two_factor_enabled", device.user)


@audited
def _disable(user, *, audit):
    EncryptedTOTPDevice.objects.filter(user=user).delete()
    audit("user.two_factor_disabled", user)


class OperatorTwoFactorMiddleware:
    """Staff reach the admin only in a session signed in by password (never one opened by an
    organization's single sign-on); with OPERATOR_2FA=true only in a session verified by a
    code, and without a device they are sent to set one up first."""

    EXEMPT = ("/admin/login/", "/admin/logout/", "/admin/jsi18n/")

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if (request.path.startswith("/admin/") and not request.path.startswith(self.EXEMPT)
                and request.user.is_authenticated and request.user.is_staff
                and not signin_scope.scope_of(request).password):
            # The admin reaches every organization: an organization's single sign-on never opens it.
            return HttpResponseForbidden("The admin needs a log-in with your password (single sign-on reaches "
                                         "its organization only): log out and log in at /admin/login/.")
        if (settings.OPERATOR_2FA and request.path.startswith("/admin/")
                and not request.path.startswith(self.EXEMPT)
                and request.user.is_authenticated and request.user.is_staff
                and not request.user.is_verified()):
            target = "login_otp" if has_two_factor(request.user) else "two_factor"
            return redirect(f"{reverse(target)}?next={request.get_full_path()}")
        return self.get_response(request)
