"""Sign-up, log-in, log-out and password reset (invitations: .invitations)."""

from django import forms
from django.contrib.auth import views as auth_views
from django.db import transaction
from django.http import HttpResponseRedirect
from django.shortcuts import redirect, render
from django.urls import reverse_lazy
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_GET, require_http_methods

from apps.accounts import otp_views, signin_scope, sso
from apps.api import ratelimit
from apps.api.audit import client_ip
from apps.accounts.audit import record_audit
from apps.accounts.models import Organization
from apps.plans.models import DEFAULT_PLAN_CODE, Plan
from apps.projects.models import Project
from apps.projects.provisioning import provision_tenant
from cronsvc.schedules.describe import format_duration

from apps.api.access import SESSION_KEY
from ..forms import RateLimitedAuthenticationForm, ResetForm, SignupForm, rate_limited_response


@sensitive_post_parameters("password1", "password2")
@require_http_methods(["GET", "POST"])
def signup(request):
    """A user, an organization on the free plan and its default project, at once."""
    if request.user.is_authenticated:
        return redirect("web:dashboard")
    form = SignupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        with transaction.atomic():
            tenant = provision_tenant(org_name=data["organization"], email=data["email"],
                                      password=data["password1"], plan_code=DEFAULT_PLAN_CODE)
            record_audit(tenant.organization, "organization.signup", target=tenant.organization,
                         actor_user=tenant.owner, ip=request.META.get("REMOTE_ADDR") or None)
        signin_scope.sign_in(request, tenant.owner, by_password=True)
        request.session[SESSION_KEY] = str(tenant.organization.pk)
        # Post/Redirect/Get: a reload of the welcome page re-posts nothing. The first API key
        # rides in the session (server-side) to that one GET, which takes it out: shown once.
        request.session[WELCOME_KEY] = tenant.full_api_key
        return redirect("web:welcome")
    return render(request, "web/auth/signup.html", {"form": form, **first_run_promise()},
                  status=400 if form.errors else 200)


WELCOME_KEY = "signup_first_api_key"


@require_GET
def welcome(request):
    """After sign-up: the organization, its plan and project, and the first API key, once."""
    if not request.user.is_authenticated:
        return redirect("web:login")
    organization = Organization.objects.filter(
        pk=request.session.get(SESSION_KEY), memberships__user=request.user).select_related("plan").first()
    if organization is None:
        return redirect("web:dashboard")
    context = {"organization": organization, "api_key": request.session.pop(WELCOME_KEY, None),
               "project": Project.objects.for_organization(organization).order_by("created_at").first(),
               **first_run_promise(organization.plan)}
    return render(request, "web/auth/welcome.html", context)


def first_run_promise(plan=None):
    """What sign-up promises of a first job, from the plan itself, so the two cannot disagree:
    "Run now" starts a run at once on every plan, and a schedule runs at most once every
    ``min_interval`` (the new-job form's suggested schedule, hourly, fits the free plan)."""
    plan = plan or Plan.objects.filter(code=DEFAULT_PLAN_CODE).first()
    return {"plan": plan, "min_interval": format_duration(plan.min_interval_seconds) if plan else ""}


class LoginView(auth_views.LoginView):
    template_name = "web/auth/login.html"
    authentication_form = RateLimitedAuthenticationForm
    redirect_authenticated_user = True

    def form_invalid(self, form):
        response = super().form_invalid(form)
        response.status_code = 400
        return rate_limited_response(response, form)

    def form_valid(self, form):
        user = form.get_user()
        refused = sso_required_response(self, form, user)
        if refused is not None:
            return refused
        if otp_views.has_two_factor(user):  # the password was right; a code comes next
            return otp_views.start_second_step(self.request, user, self.get_redirect_url(), by_password=True)
        signin_scope.sign_in(self.request, user, by_password=True)
        return HttpResponseRedirect(self.get_success_url())


def sso_required_response(view, form, user):
    """The 403 of a password log-in that would reach none of the person's organizations, each
    requiring single sign-on (one organization's policy never refuses the log-in to the
    others: apps.accounts.signin_scope); an owner's password log-in there is the audited
    break-glass way in."""
    organization = sso.password_login_refusal(user)
    ip = client_ip(view.request)
    if organization is None:
        for owned in sso.break_glass_organizations(user):
            record_audit(owned, "sso.break_glass_login", target=user, actor_user=user, ip=ip)
        return None
    record_audit(organization, "sso.password_login_refused", target=user, actor_user=user, ip=ip)
    message = (f"{organization.name} requires single sign-on: use \"Sign in with SSO\" with your work "
               "account. (code: sso_required)")
    context = view.get_context_data(form=form, sso_required=message)
    return view.render_to_response(context, status=403)


def admin_login(request, extra_context=None):
    """The operators' /admin/login/: Django's admin log-in under the same per-account and
    per-address limits as /login/ (429 with Retry-After once they are reached)."""
    from django.contrib import admin

    response = admin.site.login(request, extra_context)  # its login_form is set in config/urls.py
    form = (getattr(response, "context_data", None) or {}).get("form")
    return rate_limited_response(response, form)


class LogoutView(auth_views.LogoutView):
    next_page = reverse_lazy("web:login")


class PasswordResetView(auth_views.PasswordResetView):
    """Sends at most MAIL_PER_ADDRESS_PER_HOUR resets to one address (and answers a client
    asking too often with 429 and Retry-After), whether or not the address has an account."""

    template_name = "web/auth/password_reset.html"
    form_class = ResetForm
    email_template_name = "web/email/password_reset.txt"
    subject_template_name = "web/email/password_reset_subject.txt"
    success_url = reverse_lazy("web:password_reset_done")

    def form_valid(self, form):
        wait = ratelimit.send_wait(address=form.cleaned_data["email"], client=client_ip(self.request))
        if wait is not None:
            form.add_error(None, forms.ValidationError(
                "Too many password reset e-mails asked for this address: try again in %(minutes)s minutes.",
                code="rate_limited", params={"minutes": max(1, -(-wait // 60))}))
            response = self.render_to_response(self.get_context_data(form=form), status=429)
            response["Retry-After"] = str(wait)
            return response
        return super().form_valid(form)


password_reset = PasswordResetView.as_view()
password_reset_done = auth_views.PasswordResetDoneView.as_view(template_name="web/auth/password_reset_done.html")
password_reset_confirm = auth_views.PasswordResetConfirmView.as_view(
    template_name="web/auth/password_reset_confirm.html", success_url=reverse_lazy("web:password_reset_complete"))
password_reset_complete = auth_views.PasswordResetCompleteView.as_view(
    template_name="web/auth/password_reset_complete.html")
