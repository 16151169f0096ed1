from django.contrib.auth.base_user import BaseUserManager
from django.contrib.auth.models import AbstractUser
from django.core.serializers.json import DjangoJSONEncoder
from django.core.validators import MaxLengthValidator
from django.db import models
from django.utils import timezone
from django_otp.models import Device, ThrottlingMixin, TimestampMixin
from django_otp.plugins.otp_totp.models import TOTPDevice, default_key, key_validator

from apps.plans.models import Plan
from apps.sql.loading import QuickLoad
from cronsvc.ids import uuid7

from .encryption import EncryptedTextField
from .tenancy import tenant_manager


class UserManager(BaseUserManager):
    use_in_migrations = True

    def _create_user(self, email, password, **extra):
        if not email:
            raise ValueError("An e-mail address is required.")
        user = self.model(email=self.normalize_email(email).lower(), **extra)
        user.set_password(password)
        user.save(using=self._db)
        return user

    def create_user(self, email, password=None, **extra):
        extra.setdefault("is_staff", False)
        extra.setdefault("is_superuser", False)
        return self._create_user(email, password, **extra)

    def create_superuser(self, email, password=None, **extra):
        extra.update(is_staff=True, is_superuser=True)
        return self._create_user(email, password, **extra)


class User(AbstractUser):
    """A person; logs in with an e-mail address."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    username = None
    email = models.EmailField("e-mail address", unique=True)

    USERNAME_FIELD = "email"
    REQUIRED_FIELDS = []
    objects = UserManager()

    def __str__(self):
        return self.email


def project_model():
    """projects.Project, the model ``ApiKey.projects`` points to (per-project grants of keys
    and members): accounts and apps.api reach projects through it, never by importing them."""
    return ApiKey._meta.get_field("projects").related_model


class Organization(QuickLoad, models.Model):
    """A tenant: everything a customer owns hangs off one of these."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    name = models.CharField(max_length=120)
    slug = models.SlugField(max_length=80, unique=True)
    plan = models.ForeignKey(Plan, on_delete=models.PROTECT, related_name="organizations")
    suspended = models.BooleanField(default=False)
    suspended_reason = models.CharField(max_length=200, blank=True)
    suspended_at = models.DateTimeField(null=True, blank=True)
    # An owner asked to delete the organization: its jobs stopped then, and its data is
    # erased at this time by housekeeping (apps.accounts.gdpr) unless the owner cancels.
    erase_after = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Membership(models.Model):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        ADMIN = "admin", "Admin"
        DEVELOPER = "developer", "Developer"
        VIEWER = "viewer", "Viewer"

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="memberships")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=20, choices=Role.choices, default=Role.DEVELOPER)
    # True: the member sees only the projects granted to them (django-guardian
    # "projects.access_project"); an explicit flag, so revoking the last grant never
    # widens a member to every project.
    limited_to_projects = models.BooleanField(default=False)
    created_at = models.DateTimeField(default=timezone.now)

    objects = tenant_manager("organization")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "organization"], name="membership_unique_user_org"),
        ]

    def __str__(self):
        return f"{self.user} in {self.organization} ({self.role})"


class Invitation(models.Model):
    """An offer of membership sent to an e-mail address (apps.accounts.invitations).

    No membership exists until the person signed in as that address accepts it: an
    organization can never make someone's account a member on its own. The link's token
    is stored only as its SHA-256; a resend mints a new token (the old link stops working)."""

    class Status(models.TextChoices):
        PENDING = "pending", "Pending"
        ACCEPTED = "accepted", "Accepted"
        REVOKED = "revoked", "Revoked"
        EXPIRED = "expired", "Expired"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField("e-mail address", max_length=254)
    role = models.CharField(max_length=20, choices=Membership.Role.choices, default=Membership.Role.DEVELOPER)
    # As on Membership: True limits the future member to ``projects`` (developers and viewers).
    limited_to_projects = models.BooleanField(default=False)
    projects = models.ManyToManyField("projects.Project", blank=True, related_name="+")
    invited_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the link's token.")
    created_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField()
    last_sent_at = models.DateTimeField(default=timezone.now)
    send_count = models.PositiveIntegerField(default=1)
    accepted_at = models.DateTimeField(null=True, blank=True)
    accepted_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    revoked_at = models.DateTimeField(null=True, blank=True)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            # One open (neither accepted nor revoked) invitation per address and organization.
            models.UniqueConstraint(fields=["organization", "email"],
                                    condition=models.Q(accepted_at__isnull=True, revoked_at__isnull=True),
                                    name="invitation_one_open_per_address"),
        ]

    def __str__(self):
        return f"{self.email} to {self.organization} ({self.role})"

    def status(self, now=None):
        if self.accepted_at is not None:
            return self.Status.ACCEPTED
        if self.revoked_at is not None:
            return self.Status.REVOKED
        if self.expires_at <= (now or timezone.now()):
            return self.Status.EXPIRED
        return self.Status.PENDING


class ApiKey(models.Model):
    """A hashed API key; the full key is shown once, at creation."""

    class Scope(models.TextChoices):
        READ = "read", "Read"
        WRITE = "write", "Write"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="api_keys")
    name = models.CharField(max_length=120)
    lookup = models.CharField(max_length=16, unique=True, help_text="Visible part of the key.")
    salt = models.CharField(max_length=32)
    secret_hash = models.CharField(max_length=128)
    scopes = models.JSONField(default=list)
    created_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    created_at = models.DateTimeField(default=timezone.now)
    last_used_at = models.DateTimeField(null=True, blank=True)
    expires_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)
    # True: the key reaches only ``projects``; explicit so that deleting the last of
    # them never widens the key to every project.
    limited_to_projects = models.BooleanField(default=False)
    projects = models.ManyToManyField("projects.Project", blank=True, related_name="+")

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.prefix}…)"

    @property
    def prefix(self):
        from cronsvc.apikeys import KEY_PREFIX

        return KEY_PREFIX + self.lookup

    def is_usable(self, now=None):
        now = now or timezone.now()
        if self.revoked_at is not None:
            return False
        if self.expires_at is not None and self.expires_at <= now:
            return False
        return not self.organization.suspended


class AuditEvent(models.Model):
    """Who did what to which object, from where. Append-only."""

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="audit_events")
    actor_user = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    actor_api_key = models.ForeignKey(ApiKey, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    action = models.CharField(max_length=80)
    target_type = models.CharField(max_length=80, blank=True)
    target_id = models.CharField(max_length=64, blank=True)
    data = models.JSONField(default=dict, blank=True)
    ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["organization", "-created_at"], name="audit_org_created")]

    def __str__(self):
        return f"{self.action} {self.target_type}:{self.target_id}"


class IdempotencyKey(models.Model):
    """The first result of a POST sent with an Idempotency-Key, replayed to retries for 24 h."""

    id = models.BigAutoField(primary_key=True)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+")
    # "key:<api key id>" or "user:<user id>": two clients choosing the same key never collide.
    principal = models.CharField(max_length=64)
    scope = models.CharField(max_length=40, help_text="Which operation, e.g. jobs.create.")
    key = models.CharField(max_length=255)
    request_hash = models.CharField(max_length=64)
    response_status = models.PositiveSmallIntegerField()
    response_body = models.JSONField(encoder=DjangoJSONEncoder)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["organization", "principal", "scope", "key"], name="idempotency_unique_key"
            ),
        ]
        indexes = [models.Index(fields=["created_at"], name="idempotency_created")]

    def __str__(self):
        return f"{self.scope} {self.key}"


class DataExport(models.Model):
    """An owner's download of all the organization's data (GDPR), built by a background task."""

    class Status(models.TextChoices):
        PENDING = "pending"
        READY = "ready"
        FAILED = "failed"

    id = models.UUIDField(primary_key=True, default=uuid7, editable=False)
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="exports")
    requested_by = models.ForeignKey(User, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    status = models.CharField(max_length=8, choices=Status.choices, default=Status.PENDING)
    archive = models.BinaryField(null=True, blank=True, help_text="gzip-compressed JSON.")
    size_bytes = models.PositiveBigIntegerField(default=0)
    error = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = tenant_manager("organization")

    class Meta:
        ordering = ["-created_at"]


class ErasedOrganization(models.Model):
    """The fact that an organization was deleted, kept after its data is erased: no name,
    no e-mail, no foreign key (nothing personal, nothing pointing at erased rows)."""

    organization_id = models.UUIDField(primary_key=True)
    deletion_requested_at = models.DateTimeField(null=True, blank=True)
    erased_at = models.DateTimeField()
    plan_code = models.CharField(max_length=40, blank=True)


def _same_as_django_otp(name):
    """A field defined exactly as on django-otp's TOTPDevice."""
    return TOTPDevice._meta.get_field(name).clone()


class EncryptedTOTPDevice(TimestampMixin, ThrottlingMixin, Device):
    """An authenticator app (TOTP) whose seed is encrypted at rest under ENCRYPTION_KEYS.

    django-otp's own TOTPDevice keeps its seed in clear in a varchar(80) column, too short
    for a Fernet token, and django-otp 1.7.5 has no abstract TOTP model to subclass: this
    model repeats its fields with ``key`` encrypted and borrows its methods, so tokens are
    verified (drift, throttling, replay guard) by django-otp's own code.
    """

    key = EncryptedTextField(default=default_key, validators=[key_validator, MaxLengthValidator(80)],
                             help_text="A hex-encoded secret key of up to 40 bytes (encrypted).")
    step = _same_as_django_otp("step")
    t0 = _same_as_django_otp("t0")
    digits = _same_as_django_otp("digits")
    tolerance = _same_as_django_otp("tolerance")
    drift = _same_as_django_otp("drift")
    last_t = _same_as_django_otp("last_t")

    bin_key = TOTPDevice.bin_key
    verify_token = TOTPDevice.verify_token
    get_throttle_factor = TOTPDevice.get_throttle_factor
    config_url = TOTPDevice.config_url
    _read_str_from_settings = TOTPDevice._read_str_from_settings

    class Meta(Device.Meta):
        verbose_name = "TOTP device"


class OrganizationSSO(models.Model):
    """Sign-in through the organization's OpenID Connect provider (apps.accounts.sso).

    Anyone the provider vouches for with an e-mail address of ``allowed_domains`` may sign
    in and is made a member with ``default_role``. With ``required``, members sign in only
    this way; owners keep their password as the break-glass way in (docs/sso.md).
    """

    class DefaultRole(models.TextChoices):  # never owner: an identity provider cannot mint owners
        ADMIN = "admin", "Admin"
        DEVELOPER = "developer", "Developer"
        VIEWER = "viewer", "Viewer"

    organization = models.OneToOneField(Organization, on_delete=models.CASCADE, related_name="sso")
    enabled = models.BooleanField(default=True)
    issuer = models.URLField("issuer URL", max_length=500,
                             help_text="The provider's issuer, e.g. https://example.okta.com (its "
                                       "/.well-known/openid-configuration is read from there).")
    client_id = models.CharField(max_length=255)
    client_secret = EncryptedTextField(help_text="Encrypted at rest.")
    allowed_domains = models.CharField(max_length=500, help_text="E-mail domains allowed to sign in, "
                                                                 "separated by commas, e.g. example.com, example.org.")
    default_role = models.CharField(max_length=20, choices=DefaultRole.choices, default=DefaultRole.VIEWER,
                                    help_text="The role of a person who joins by signing in.")
    required = models.BooleanField(default=False, help_text="Members may not log in with a password "
                                                            "(owners still may: the break-glass rule).")
    idp_enforces_mfa = models.BooleanField(
        "the provider enforces multi-factor authentication", default=False,
        help_text="On: a sign-in through this provider is not asked for the person's cronsvc two-factor code. "
                  "Off (the default): people who turned two-factor on give their code after the provider.")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    objects = tenant_manager("organization")

    class Meta:
        verbose_name = "organization single sign-on"
        verbose_name_plural = "organization single sign-on"

    def __str__(self):
        return f"SSO for {self.organization} ({self.issuer})"

    @property
    def domains(self):
        from cronsvc.oidc import parse_domains

        return parse_domains(self.allowed_domains)


class SSOIdentity(models.Model):
    """A person at an identity provider (issuer + subject) bound to a cronsvc user.

    Sign-ins find the user by this link, not by e-mail address: an organization's provider
    can assert any address, so it may bind only a new account, an account that belongs to
    that organization alone, or the account of the person signed in while they connect it
    (apps.accounts.sso.provision)."""

    id = models.BigAutoField(primary_key=True)
    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="sso_identities")
    organization = models.ForeignKey(Organization, on_delete=models.CASCADE, related_name="+",
                                     help_text="The organization whose provider linked it.")
    issuer = models.CharField(max_length=500)
    subject = models.CharField(max_length=255)
    created_at = models.DateTimeField(default=timezone.now)
    last_login_at = models.DateTimeField(null=True, blank=True)

    objects = tenant_manager("organization")

    class Meta:
        verbose_name = "SSO identity"
        verbose_name_plural = "SSO identities"
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="sso_identity_unique_subject")]

    def __str__(self):
        return f"{self.subject} at {self.issuer}"
