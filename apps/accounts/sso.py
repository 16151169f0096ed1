"""Single sign-on through an organization's OpenID Connect provider.

``begin`` sends the browser to the provider with a state, nonce and PKCE verifier kept in
the session; ``complete`` takes the provider's answer, validates the ID token (cronsvc.oidc),
checks the e-mail domain and returns the member, provisioned on first sign-in with the
configuration's default role; the link is re-checked at every sign-in. The session it opens
reaches that organization only (apps.accounts.signin_scope). ``password_login_refusal``
is what remains of the "SSO required" rule at the password log-in (docs/sso.md).
"""

import time
from dataclasses import dataclass
from functools import lru_cache

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from cronsvc import oidc
from cronsvc.delivery.guard import outbound_policy

from .models import Membership, Organization, OrganizationSSO, SSOIdentity, User
from .audit import audit_by, audited
from .signin_scope import Scope, scope_of

PENDING = "sso_pending"  # session key: {state: {...}} of the sign-ins under way
PENDING_TTL_SECONDS = 600
MAX_PENDING = 5


@dataclass(frozen=True)
class SignIn:
    user: User
    membership: Membership
    created_user: bool
    created_membership: bool


class SSOError(oidc.OIDCError):
    """A refusal that knows its organization (when one was found), for the audit log."""

    def __init__(self, code, message, organization=None):
        super().__init__(code, message)
        self.organization = organization


def http():
    """Outbound HTTP to identity providers, behind the outbound-address guard: the issuer URL
    is customer input. The platform's one outbound policy (guard.outbound_policy), which
    SSO_ALLOWED_NETWORKS widens for identity providers only (a self-hosted provider on a
    private network)."""
    return _http(outbound_policy(settings, also_allowed_networks=settings.SSO_ALLOWED_NETWORKS))


@lru_cache(maxsize=4)
def _http(policy):
    return oidc.GuardedHTTP(policy, num_pools=20, maxsize=4)


def redirect_uri(request):
    """SITE_URL's callback, not the request's host: the provider matches the URI registered
    there exactly, and a Host header must not choose where codes are sent."""
    from django.urls import reverse

    return settings.SITE_URL + reverse("web:sso_callback")


# --- which organization


def find_configuration(identifier):
    """The enabled configuration for an organization slug or an e-mail address (its domain)."""
    identifier = (identifier or "").strip().lower()
    if not identifier:
        raise SSOError("sso_not_configured", "Give your work e-mail address or your organization's short name.")
    configs = OrganizationSSO.objects.filter(enabled=True).select_related("organization")
    if "@" not in identifier:
        config = configs.filter(organization__slug=identifier).first()
        if config is None:
            raise SSOError("sso_not_configured", f"No organization {identifier!r} signs in with single sign-on.")
        return config
    domain = oidc.email_domain(identifier)
    matches = [c for c in configs.filter(allowed_domains__icontains=domain) if domain in c.domains]
    if not matches:
        raise SSOError("sso_not_configured", f"No organization signs in with single sign-on for {domain}: "
                       "log in with your password, or ask your administrator for your organization's short name.")
    if len(matches) > 1:
        raise SSOError("sso_ambiguous_domain", f"Several organizations use {domain}: give your organization's "
                       "short name (its slug) instead of your e-mail address.")
    return matches[0]


# --- the two legs of the flow


def begin(request, config, login_hint=""):
    """The provider's authorization URL for ``config``; the state is kept in the session."""
    metadata = _discover(config)
    auth = oidc.authorization_request(metadata, client_id=config.client_id, redirect_uri=redirect_uri(request),
                                      login_hint=login_hint if "@" in login_hint else "")
    pending = {state: data for state, data in request.session.get(PENDING, {}).items()
               if data["started"] > time.time() - PENDING_TTL_SECONDS}
    while len(pending) >= MAX_PENDING:  # a few tabs at once; never an unbounded session
        pending.pop(min(pending, key=lambda s: pending[s]["started"]))
    pending[auth.state] = {"config": config.pk, "nonce": auth.nonce, "verifier": auth.code_verifier,
                           "next": request.GET.get("next") or request.POST.get("next") or "",
                           "started": time.time()}
    request.session[PENDING] = pending
    return auth.url


def complete(request, *, now=None):
    """The callback: the pending sign-in named by ``state``, the code exchanged, the ID token
    validated, the domain checked, the member found or provisioned. Raises SSOError."""
    params = request.GET
    pending = request.session.get(PENDING, {})
    data = pending.pop(params.get("state", ""), None)
    request.session[PENDING] = pending
    if data is None or data["started"] <= time.time() - PENDING_TTL_SECONDS:
        raise SSOError("sso_state_mismatch", "This sign-in answer does not match a sign-in started in this "
                       "browser (or it is older than 10 minutes): start again from the sign-in page.")
    config = OrganizationSSO.objects.filter(pk=data["config"], enabled=True).select_related("organization").first()
    if config is None:
        raise SSOError("sso_not_configured", "Single sign-on was turned off for this organization meanwhile.")
    organization = config.organization
    try:
        if params.get("error"):
            raise oidc.OIDCError("sso_provider_denied", "The identity provider did not sign you in: "
                                 f"{params.get('error_description') or params['error']}.")
        if not params.get("code"):
            raise oidc.OIDCError("sso_provider_error", "The identity provider sent no authorization code.")
        claims = _validated_claims(request, config, params["code"], data, now=now)
        email = oidc.verified_email(claims)
        if oidc.email_domain(email) not in config.domains:
            raise oidc.OIDCError("sso_domain_not_allowed", f"{email} may not sign in to {organization.name}: "
                                 f"only addresses at {', '.join(config.domains)} may. Sign in at the provider "
                                 "with your work account.")
        if organization.suspended:
            raise oidc.OIDCError("sso_organization_suspended", f"{organization.name} is suspended.")
    except SSOError:
        raise
    except oidc.OIDCError as exc:
        raise SSOError(exc.code, exc.message, organization) from exc
    # Connecting an account needs its owner logged in by password: another organization's
    # provider (a session it opened) does not vouch for the person here.
    signed_in = request.user if request.user.is_authenticated and scope_of(request).password else None
    return provision(config, email, claims, signed_in_user=signed_in, now=now), data["next"]


def _discover(config):
    try:
        return oidc.discover(http(), config.issuer)
    except oidc.OIDCError as exc:
        raise SSOError(exc.code, exc.message, config.organization) from exc


def _validated_claims(request, config, code, data, *, now=None):
    metadata = _discover(config)
    id_token = oidc.exchange_code(http(), metadata, code=code, client_id=config.client_id,
                                  client_secret=config.client_secret, redirect_uri=redirect_uri(request),
                                  code_verifier=data["verifier"])
    keys = oidc.fetch_keys(http(), metadata)
    instant = int((now.timestamp() if now is not None else time.time()))
    return oidc.validate_id_token(id_token, keys, issuer=config.issuer, client_id=config.client_id,
                                  nonce=data["nonce"], now=instant)


@transaction.atomic
def provision(config, email, claims, *, signed_in_user=None, now=None):
    """The user this provider's subject is linked to, else the account to link (see
    ``_may_link``) or a new one without a password; made a member of the configuration's
    organization with the default role when not yet one."""
    organization, issuer = config.organization, oidc.normalize_issuer(config.issuer)
    identity = SSOIdentity.objects.select_related("user").filter(issuer=issuer, subject=claims["sub"]).first()
    created_user = False
    if identity is not None:
        _recheck_link(identity.user, config, signed_in_user)
    else:
        user = User.objects.filter(email__iexact=email).first()
        if user is None:
            created_user = True
            user = User.objects.create_user(email=email, first_name=str(claims.get("given_name", ""))[:150],
                                            last_name=str(claims.get("family_name", ""))[:150])
        elif not _may_link(user, organization, signed_in_user):
            raise SSOError("sso_account_exists", f"An account with {email} already exists and reaches other "
                           "organizations too: log in to it with your password first, then choose \"Sign in with "
                           "SSO\" to connect it.", organization)
        identity = _link(user, organization, issuer, claims["sub"], email=email, new_user=created_user,
                         audit=audit_by(organization, user=user))
    user = identity.user
    if not user.is_active:
        raise SSOError("sso_user_inactive", f"The account {user.email} is deactivated.", organization)
    SSOIdentity.objects.filter(pk=identity.pk).update(last_login_at=now or timezone.now())
    membership, created_membership = _membership(user, config, new_user=created_user,
                                                 audit=audit_by(organization, user=user))
    return SignIn(user, membership, created_user, created_membership)


@audited
def _link(user, organization, issuer, subject, *, email, new_user, audit):
    identity = SSOIdentity.objects.create(user=user, organization=organization, issuer=issuer, subject=subject)
    audit("sso.identity_linked", user, {"email": email, "issuer": issuer, "new_user": new_user})
    return identity


@audited
def _membership(user, config, *, new_user, audit):
    """(membership, created): a member with the configuration's default role when not yet one."""
    membership, created = Membership.objects.get_or_create(
        user=user, organization=config.organization, defaults={"role": config.default_role})
    if created:
        audit("sso.member_provisioned", user, {"email": user.email, "role": membership.role, "new_user": new_user})
    return membership, created


@audited
def save_configuration(config, *, reported, audit):
    """Save an organization's SSO configuration; its event's data is ``reported`` (the page
    names the settings, the admin the fields changed)."""
    config.save()
    audit("sso.configuration_saved", config.organization, reported)


@audited
def delete_configuration(config, *, audit):
    config.delete()
    audit("sso.configuration_deleted", config.organization)


def _recheck_link(user, config, signed_in_user):
    """The linking rule again, at every sign-in through an existing link: the provider may
    sign in an account that is still this organization's member, or that it could link
    today (see ``_may_link``), and whose address is still at one of its domains. Without
    this, a person removed from the organization who joined another would stay reachable by
    the first organization's provider."""
    organization = config.organization
    if oidc.email_domain(user.email) not in config.domains:
        raise SSOError("sso_domain_not_allowed", f"The account linked to this identity ({user.email}) is not at "
                       f"{', '.join(config.domains)} any more: {organization.name}'s provider may not sign it in.",
                       organization)
    if Membership.objects.filter(user=user, organization=organization).exists():
        return
    if not _may_link(user, organization, signed_in_user):
        raise SSOError("sso_account_exists", f"The account linked to this identity is no longer a member of "
                       f"{organization.name} and reaches other organizations: log in to it with your password "
                       "first, then choose \"Sign in with SSO\" to connect it again.", organization)


def _may_link(user, organization, signed_in_user):
    """An organization's provider can assert any e-mail address: it may take over an existing
    account only when the person is logged in to it right now (connecting it), or when the
    account reaches nothing but this organization. Operators' accounts are never linked."""
    if signed_in_user is not None and signed_in_user.pk == user.pk:
        return True
    if user.is_staff or user.is_superuser:
        return False
    return not Membership.objects.filter(user=user).exclude(organization=organization).exists()


# --- password log-ins under "SSO required"


def password_login_refusal(user):
    """The organization whose required SSO leaves a password log-in of ``user`` nothing to
    act in, else None.

    An organization's policy governs that organization only (apps.accounts.signin_scope): a
    password session reaches every other organization of the person, so the log-in itself
    is refused only when *each* of their organizations refuses it. Break-glass: an owner of
    an organization requiring SSO still acts there after a password log-in (and their
    two-factor code), so a broken provider configuration never locks an organization out.
    """
    scope = Scope(password=True)
    memberships = list(Membership.objects.filter(user=user).select_related("organization__sso")
                       .order_by("created_at", "pk"))
    refused = [m.organization for m in memberships if scope.refusal(m) is not None]
    return refused[0] if memberships and len(refused) == len(memberships) else None


def break_glass_organizations(user):
    """The organizations requiring SSO in which ``user`` logs in with a password as an owner."""
    return Organization.objects.filter(Q(memberships__user=user, memberships__role=Membership.Role.OWNER),
                                       sso__required=True, sso__enabled=True)
