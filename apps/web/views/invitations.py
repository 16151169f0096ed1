"""The invitation link's page: a membership exists only once the invited person accepts,
signed in as the invited address (apps.api.accounts.invitations).

- signed in as that address: a button to accept (a GET changes nothing: mail scanners
  open links);
- signed in as someone else: refused (403, code invitation_wrong_account);
- not signed in: log in first (back here afterwards), or, for an address without an
  account, choose a password: the account is made and the invitation accepted at once.
A used, revoked or expired link answers 410 with its code; an unknown one 404.
"""

from django.contrib import messages
from django.contrib.auth.forms import SetPasswordForm
from django.db import IntegrityError, transaction
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.debug import sensitive_post_parameters
from django.views.decorators.http import require_http_methods

from apps.accounts import invitations as links
from apps.accounts import signin_scope, sso
from apps.accounts.models import User
from apps.accounts.audit import record_audit
from apps.api.access import SESSION_KEY
from apps.api.accounts import invitations
from apps.api.audit import client_ip



@sensitive_post_parameters("new_password1", "new_password2")
@require_http_methods(["GET", "POST"])
def accept(request, token):
    invitation = links.find(token)
    refused = links.refusal(invitation)
    if refused is not None:
        return _refused(request, *refused)
    if request.user.is_authenticated:
        if invitations.normalize(request.user.email) != invitation.email:
            return _refused(request, "invitation_wrong_account", 403,
                            f"This invitation is for another e-mail address; you are signed in as "
                            f"{request.user.email}. Log out, then open the link again.")
        if request.method == "POST":
            return _accept(request, invitation, request.user)
        return render(request, "web/auth/invitation.html", {"invitation": invitation, "mode": "confirm"})
    account = User.objects.filter(email__iexact=invitation.email).first()
    if account is not None and not _may_choose_password(account):
        login_url = f"{reverse('web:login')}?next={request.path}"
        return render(request, "web/auth/invitation.html",
                      {"invitation": invitation, "mode": "login", "login_url": login_url})
    # No account yet (or one made by the old direct-add path that never had a password):
    # holding the link proves the mailbox, as a password reset would.
    form = SetPasswordForm(account or User(email=invitation.email), request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            with transaction.atomic():
                user = form.save()
        except IntegrityError:  # the same address signed up meanwhile: log in instead
            return redirect(f"{reverse('web:login')}?next={request.path}")
        return _accept(request, invitation, user, new_account=True)
    return render(request, "web/auth/invitation.html", {"invitation": invitation, "mode": "signup", "form": form},
                  status=400 if form.errors else 200)


def _may_choose_password(account):
    return not account.has_usable_password() and account.last_login is None and not account.sso_identities.exists()


def _accept(request, invitation, user, *, new_account=False):
    def record(action, target, data):
        record_audit(invitation.organization, action, target=target, actor_user=user,
                     data={**data, "new_account": new_account}, ip=client_ip(request))

    try:
        membership, created = invitations.accept(invitation, user, audit=record)
    except ValueError as exc:  # used, revoked or expired in the meantime
        code = str(exc)
        status, message = next(((s, m) for c, s, m in links.REFUSALS.values() if c == code),
                               (403, "This invitation is for another e-mail address."))
        return _refused(request, code, status, message)
    organization = membership.organization
    if new_account:
        required_by = sso.password_login_refusal(user)
        if required_by is not None:  # the password is set, but this organization signs in with SSO
            messages.info(request, f"{required_by.name} signs its members in with single sign-on: continue here.")
            return redirect(f"{reverse('web:sso_login')}?org={required_by.slug}")
        signin_scope.sign_in(request, user, by_password=True)  # the password just chosen
    request.session[SESSION_KEY] = str(organization.pk)
    messages.success(request, f"You joined {organization.name} as {membership.get_role_display().lower()}."
                     if created else f"You are a member of {organization.name} already.")
    return redirect("web:dashboard")


def _refused(request, code, status, message):
    return render(request, "web/auth/invitation_invalid.html", {"code": code, "message": message}, status=status)
