"""Forms of the account pages (sign-up, log-in). Job, project, member and API-key forms
go through the REST API's serializers instead (see views/)."""

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model, password_validation
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm, PasswordResetForm

from apps.api import ratelimit
from apps.api.audit import client_ip

User = get_user_model()


class SignupForm(forms.Form):
    organization = forms.CharField(label="Organization name", max_length=120,
                                   help_text="Your company or team; you can rename it later.")
    email = forms.EmailField(label="E-mail address", max_length=254)
    password1 = forms.CharField(label="Password", strip=False, widget=forms.PasswordInput(
        attrs={"autocomplete": "new-password"}), help_text=password_validation.password_validators_help_text_html())
    password2 = forms.CharField(label="Password again", strip=False,
                                widget=forms.PasswordInput(attrs={"autocomplete": "new-password"}))

    def clean_email(self):
        email = self.cleaned_data["email"].lower()
        if User.objects.filter(email__iexact=email).exists():
            raise forms.ValidationError(
                "An account with this e-mail address exists: log in, or reset its password.", code="taken")
        return email

    def clean(self):
        data = super().clean()
        one, two = data.get("password1"), data.get("password2")
        if one and two and one != two:
            self.add_error("password2", forms.ValidationError("The two passwords differ.", code="mismatch"))
        elif one:
            try:
                password_validation.validate_password(one, User(email=data.get("email", "")))
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


class LoginRateLimit:
    """The limits of every password log-in form (the pages' /login/ and the admin's
    /admin/login/): refused once an IP or an account had too many failures. A refused form
    has ``rate_limited`` and ``retry_after`` (seconds) for the view's 429."""

    rate_limited = False
    retry_after = None
    rate_limited_message = "Too many failed log-in attempts. Try again in %(minutes)s minutes."

    def clean(self):
        window = settings.LOGIN_RATE_WINDOW
        email = (self.cleaned_data.get("username") or "").strip().lower()
        ip = client_ip(self.request) if self.request else None
        limits = [("login-ip", ip or "unknown", settings.LOGIN_FAILURES_PER_IP)]
        if email:
            # The strict count is per account *and* address, so an attacker elsewhere cannot
            # lock the owner out; the looser per-account count (any address) bounds a
            # distributed guesser. Both end with their window: no lockout lasts for ever.
            limits.append(("login-account", f"{email}|{ip or 'unknown'}", settings.LOGIN_FAILURES_PER_ACCOUNT))
            limits.append(("login-account-any", email, settings.LOGIN_FAILURES_PER_ACCOUNT_ANY_IP))
        for name, ident, limit in limits:
            failures, seconds_left = ratelimit.count(name, ident, window=window)
            if failures >= limit:
                self.rate_limited, self.retry_after = True, seconds_left
                raise forms.ValidationError(self.rate_limited_message, code="rate_limited",
                                            params={"minutes": max(1, -(-seconds_left // 60))})
        try:
            return super().clean()
        except forms.ValidationError:
            for name, ident, _ in limits:
                ratelimit.hit(name, ident, window=window)
            raise


def rate_limited_response(response, form):
    """The log-in page answered for a form the limits refused: 429 with Retry-After."""
    if form is not None and getattr(form, "rate_limited", False):
        response.status_code = 429
        response["Retry-After"] = str(form.retry_after)
    return response


class RateLimitedAuthenticationForm(LoginRateLimit, AuthenticationForm):
    """Django's log-in form under the log-in limits."""


class RateLimitedAdminAuthenticationForm(LoginRateLimit, AdminAuthenticationForm):
    """The admin's log-in form (staff only) under the same limits, counted in the same counters."""


class ResetForm(PasswordResetForm):
    email = forms.EmailField(label="E-mail address", max_length=254,
                             widget=forms.EmailInput(attrs={"autocomplete": "email"}))
