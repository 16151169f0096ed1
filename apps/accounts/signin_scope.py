"""Which organizations a browser session may act in, decided by how it was signed in.

A session records its *scope* at log-in: ``password`` when the person gave their password
(and their two-factor code when they have a device), and ``sso``, the organizations whose
identity provider signed them in. An organization's provider vouches for a person in that
organization only, so:

- a session opened by organization X's single sign-on acts in X alone; to reach their other
  organizations the person signs in with their password or through that organization's SSO
  (the scopes add up within one session);
- a password session acts in every organization of the person except those whose policy
  forbids it: an organization requiring SSO refuses a password session of a member who is
  not its owner (the owners' break-glass rule). That policy never stops the password log-in
  itself, nor the person's other organizations.

Every organization-scoped page (``apps.api.access.member_view``) and the API by session
(``apps.api.permissions``) ask ``refusal`` through ``apps.api.actor.membership_for``: one
rule, one place. API keys are not sessions: they act for their organization only anyway.
"""

from dataclasses import dataclass

from django.contrib.auth import login

from .models import Membership, OrganizationSSO

SCOPE_KEY = "signin_scope"  # session key: {"password": bool, "sso": [organization id, ...]}
BACKEND = "django.contrib.auth.backends.ModelBackend"


@dataclass(frozen=True)
class Refusal:
    code: str
    message: str


@dataclass(frozen=True)
class Scope:
    password: bool
    sso: frozenset = frozenset()

    @classmethod
    def of(cls, session):
        """The session's scope. A session without one was opened by a password log-in this
        module did not see (Django's admin log-in, sessions from before scopes existed)."""
        data = session.get(SCOPE_KEY) if session is not None else None
        if not isinstance(data, dict):
            return cls(password=True)
        return cls(password=bool(data.get("password")), sso=frozenset(str(pk) for pk in data.get("sso", ())))

    def as_session_value(self):
        return {"password": self.password, "sso": sorted(self.sso)}

    def refusal(self, membership):
        """None when this session may act in ``membership``'s organization, else why not."""
        organization = membership.organization
        if str(organization.pk) in self.sso:
            return None
        if not self.password:
            return Refusal("sign_in_scope", "This session was opened by another organization's single sign-on: to "
                                            "act in this organization, log in with your password or through its "
                                            "own single sign-on.")
        if requires_sso(organization) and membership.role != Membership.Role.OWNER:
            return Refusal("sso_required", "This organization requires single sign-on: use \"Sign in with SSO\" "
                                           "with your work account to act in it.")
        return None


def requires_sso(organization):
    try:
        config = organization.sso
    except OrganizationSSO.DoesNotExist:
        return False
    return config.enabled and config.required


def sign_in(request, user, *, by_password=False, organization=None):
    """Log ``user`` in and widen the session's scope by how they just proved who they are:
    their password, or ``organization``'s single sign-on. A session of another person (or
    none) starts from nothing."""
    same_person = request.user.is_authenticated and request.user.pk == user.pk
    before = Scope.of(request.session) if same_person else Scope(password=False)
    login(request, user, backend=BACKEND)
    sso = before.sso | ({str(organization.pk)} if organization is not None else set())
    request.session[SCOPE_KEY] = Scope(password=before.password or by_password, sso=sso).as_session_value()


def scope_of(request):
    return Scope.of(getattr(request, "session", None))
