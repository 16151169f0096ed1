"""cronsvc settings: every value comes from the environment (see the README's table).

Two modes:
- embedded (no DATABASE_URL): SQLite in WAL mode and a filesystem Celery broker under
  ``VAR_DIR``, so ``make run`` needs no database or broker server;
- server (DATABASE_URL, normally with REDIS_URL): PostgreSQL and Redis. SECRET_KEY is
  then required.
"""

import os
import secrets
from pathlib import Path

import dj_database_url
from django.core.exceptions import ImproperlyConfigured
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from cronsvc.brokers import AMQP_TRANSPORT_OPTIONS, broker_kind

from .env import env_bool, env_float, env_int, env_int_map, env_list, env_str
from .secret_key import check_secret_key
from .staticfiles import manifest_missing

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))

DATABASE_URL = env_str("DATABASE_URL")
EMBEDDED = not DATABASE_URL
DEBUG = env_bool("DEBUG", False)


def _embedded_secret_key():
    """A random key kept under VAR_DIR so sessions survive restarts of `make run`."""
    VAR_DIR.mkdir(parents=True, exist_ok=True)
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = env_str("SECRET_KEY")
if not SECRET_KEY:
    if not EMBEDDED:
        raise ImproperlyConfigured(
            "SECRET_KEY is not set. Set SECRET_KEY (or SECRET_KEY_FILE) to a long random "
            "string; only the embedded SQLite mode (no DATABASE_URL) makes one up."
        )
    SECRET_KEY = _embedded_secret_key()

def _encryption_keys():
    """Fernet keys, newest first. Embedded mode makes one and keeps it under VAR_DIR;
    server mode without ENCRYPTION_KEYS derives one from SECRET_KEY."""
    from cronsvc.crypto import derive_key, new_key

    keys = env_list("ENCRYPTION_KEYS", [])
    if keys:
        return keys
    if EMBEDDED:
        path = VAR_DIR / "encryption_key"
        if not path.exists():
            path.write_text(new_key())
            path.chmod(0o600)
        return [path.read_text().strip()]
    return [derive_key(SECRET_KEY)]


ENCRYPTION_KEYS = _encryption_keys()

ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["localhost", "127.0.0.1", "[::1]"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])
# One source of truth for the links sent to customers (ping, badge, notification, invitation,
# SSO callback URLs). Unset, it follows PORT (`make run PORT=18000` sets it for every process:
# honcho gives each Procfile line its own PORT). Server mode warns when it is unset or names a
# host ALLOWED_HOSTS refuses (apps/observability/health.py: the log at start-up and /readyz).
PORT = env_int("PORT", 8000)
SITE_URL_SET = bool(env_str("SITE_URL"))
SITE_URL = (env_str("SITE_URL") or f"http://127.0.0.1:{PORT}").rstrip("/")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "whitenoise.runserver_nostatic",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",  # Swagger UI's files, served by us (no CDN)
    "guardian",
    "django_celery_beat",
    "django_otp",
    "django_otp.plugins.otp_totp",
    "apps.api",
    "apps.accounts",
    "apps.plans",
    "apps.billing",
    "apps.projects",
    "apps.jobs",
    "apps.executions",
    "apps.workflows",
    "apps.observability",
    "apps.web",
    "apps.badges",
    "apps.notifications",
    "apps.monitors",
    "apps.eventstream",
    "apps.archives",
]

MIDDLEWARE = [
    # Outermost: latency by route and status for every request; then the request id.
    "apps.observability.middleware.RequestMetricsMiddleware",
    "apps.observability.middleware.RequestIdMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "apps.api.middleware.RequestLimitsMiddleware",
    "apps.api.middleware.ContentSecurityPolicyMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    # Sessions, the session user, OTP and messages: Django's and django-otp's, passed by
    # for API requests made with a key (apps.api.middleware.BrowserOnly).
    "apps.api.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",  # by name: check --deploy looks for it
    "apps.api.middleware.AuthenticationMiddleware",
    "apps.api.middleware.OTPMiddleware",
    "apps.accounts.otp_views.OperatorTwoFactorMiddleware",
    "apps.api.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "config.urls"
WSGI_APPLICATION = "config.wsgi.application"
TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# Long-running processes (scheduler, workers) keep their connection; they also call
# close_old_connections() each loop so a broken one is replaced.
CONN_MAX_AGE = env_int("CONN_MAX_AGE", 60)
# Behind a transaction-mode pooler (PgBouncer pool_mode=transaction; docs/operations.md,
# "Behind PgBouncer") each transaction of a connection may run on another server session,
# shared with other clients, so nothing may be left on a session. On, it turns off what
# would be: prepared statements, the startup `options` (PgBouncer refuses them), and
# server-side cursors (Django's WITH HOLD ones outlive their transaction). The rest of the
# code keeps to transaction-scoped state either way (SET LOCAL, pg_advisory_xact_lock).
DATABASE_TRANSACTION_POOLING = env_bool("DATABASE_TRANSACTION_POOLING", False)
# The API's hot hand-written queries as prepared statements (apps/sql/backend/base.py).
DATABASE_PREPARED_STATEMENTS = env_bool("DATABASE_PREPARED_STATEMENTS", not DATABASE_TRANSACTION_POOLING)


# Timeouts everywhere (docs/configuration.md, "Timeouts"): a PostgreSQL server that vanished
# without closing (a cut, a blackhole) must fail a statement in seconds, not hang a process.
DATABASE_CONNECT_TIMEOUT = env_int("DATABASE_CONNECT_TIMEOUT", 5)
DATABASE_KEEPALIVES_IDLE = env_int("DATABASE_KEEPALIVES_IDLE", 10)
DATABASE_KEEPALIVES_INTERVAL = env_int("DATABASE_KEEPALIVES_INTERVAL", 5)
DATABASE_KEEPALIVES_COUNT = env_int("DATABASE_KEEPALIVES_COUNT", 3)
DATABASE_TCP_USER_TIMEOUT_MS = env_int("DATABASE_TCP_USER_TIMEOUT_MS", 30_000)
DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS = env_int("DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS", 60_000)


def _database_options(parsed):
    """libpq's connection options: connect timeout, TCP keepalives and user timeout (a dead
    peer is noticed while idle and while a write waits), and the server ending a session
    left idle inside a transaction (its locks released). Options in DATABASE_URL's query
    string win; a 0 leaves a setting out. Behind a transaction pooler the server sets the
    idle timeout itself (docs/operations.md): PgBouncer refuses a startup ``options``."""
    options = {key: value for key, value in {
        "connect_timeout": DATABASE_CONNECT_TIMEOUT,
        "keepalives": 1,
        "keepalives_idle": DATABASE_KEEPALIVES_IDLE,
        "keepalives_interval": DATABASE_KEEPALIVES_INTERVAL,
        "keepalives_count": DATABASE_KEEPALIVES_COUNT,
        "tcp_user_timeout": DATABASE_TCP_USER_TIMEOUT_MS,
    }.items() if value}
    if DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS and not DATABASE_TRANSACTION_POOLING:
        options["options"] = f"-c idle_in_transaction_session_timeout={DATABASE_IDLE_IN_TRANSACTION_TIMEOUT_MS}"
    given = dict(parsed.get("OPTIONS") or {})
    if "options" in given and "options" in options:
        given["options"] = f"{options['options']} {given['options']}"
    return {**options, **given}


def _database():
    if EMBEDDED:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        return {
            "ENGINE": "django.db.backends.sqlite3",
            "NAME": VAR_DIR / "cronsvc.sqlite3",
            "OPTIONS": {
                # WAL lets the web process read while the scheduler writes; IMMEDIATE
                # transactions take the write lock up front instead of failing late.
                "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
                "transaction_mode": "IMMEDIATE",
                "timeout": 20,
            },
        }
    config = dj_database_url.parse(DATABASE_URL, conn_max_age=CONN_MAX_AGE, conn_health_checks=True)
    if config["ENGINE"] == "django.db.backends.postgresql":
        config["ENGINE"] = "apps.sql.backend"  # a health check without SELECT 1 (apps/sql/backend/base.py)
        config["OPTIONS"] = _database_options(config)
        config["DISABLE_SERVER_SIDE_CURSORS"] = DATABASE_TRANSACTION_POOLING
    return config


DATABASES = {"default": _database()}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = [
    "django.contrib.auth.backends.ModelBackend",
    "guardian.backends.ObjectPermissionBackend",
]
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]
# The customers' pages (apps.web); the operators' admin has its own login page.
LOGIN_URL = "web:login"
LOGIN_REDIRECT_URL = "web:dashboard"
LOGOUT_REDIRECT_URL = "web:login"
# Failed logins allowed per client IP and per account in LOGIN_RATE_WINDOW seconds; past
# either, the login form refuses until the window ends (counted in the "web" cache).
LOGIN_FAILURES_PER_IP = env_int("LOGIN_FAILURES_PER_IP", 20)
LOGIN_FAILURES_PER_ACCOUNT = env_int("LOGIN_FAILURES_PER_ACCOUNT", 5)  # per account and client IP
LOGIN_FAILURES_PER_ACCOUNT_ANY_IP = env_int("LOGIN_FAILURES_PER_ACCOUNT_ANY_IP", 50)
LOGIN_RATE_WINDOW = env_int("LOGIN_RATE_WINDOW", 900)
# Two-factor authentication (TOTP, django-otp): optional for users; with OPERATOR_2FA=true
# staff reach the admin only after giving a code.
OPERATOR_2FA = env_bool("OPERATOR_2FA", False)
OTP_TOTP_ISSUER = env_str("OTP_TOTP_ISSUER", "cronsvc")
# Messages that actions send on request (password reset, invitations, channel tests), per
# hour: to one recipient address, for one organization, and asked by one client address.
MAIL_PER_ADDRESS_PER_HOUR = env_int("MAIL_PER_ADDRESS_PER_HOUR", 5)
MAIL_PER_ORGANIZATION_PER_HOUR = env_int("MAIL_PER_ORGANIZATION_PER_HOUR", 50)
MAIL_PER_CLIENT_PER_HOUR = env_int("MAIL_PER_CLIENT_PER_HOUR", 20)
# "Test run now" requests one user may send per minute from the job form.
TEST_RUNS_PER_MINUTE = env_int("TEST_RUNS_PER_MINUTE", 10)

# --- E-mail (password reset, invitations). Embedded mode prints mails on the console;
EMAIL_BACKEND = env_str(
    "EMAIL_BACKEND",
    "django.core.mail.backends.console.EmailBackend" if EMBEDDED else "django.core.mail.backends.smtp.EmailBackend",
)
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25)
# EMAIL_URL, when set, overrides the above: smtp://user:pass@host:587?tls=1, smtps://...,
# console://, locmem://, file:///path (cronsvc/notify/email_url.py).
EMAIL_URL = env_str("EMAIL_URL")
if EMAIL_URL:
    from cronsvc.notify.email_url import parse_email_url

    try:
        globals().update(parse_email_url(EMAIL_URL))
    except ValueError as exc:
        raise ImproperlyConfigured(str(exc)) from exc

# Whether e-mail leaves this server: EMAIL_URL, EMAIL_HOST or EMAIL_BACKEND set, to a backend
# that sends (not console:// or dummy://). The one rule: only then are a job's failures e-mailed
# to its organization's owners when its project has no channel (docs/notifications.md), and in
# server mode its absence is a start-up and /readyz warning (password resets, invitations and
# alerts would otherwise fail unseen).
MAIL_CONFIGURED = bool(EMAIL_URL or env_str("EMAIL_HOST") or env_str("EMAIL_BACKEND")) and not EMAIL_BACKEND.endswith(
    ("console.EmailBackend", "dummy.EmailBackend"))

# --- Billing (apps.billing): the retention purge's batch size (runs per short transaction)
# and the payment integration statements are handed to (a dotted path; default: none).
RETENTION_BATCH_SIZE = env_int("RETENTION_BATCH_SIZE", 1000)
BILLING_PAYMENT_PROVIDER = env_str("BILLING_PAYMENT_PROVIDER", "apps.billing.payments.NoopPaymentProvider")

# --- Archives before the purge (apps.archives, docs/archives.md): with a bucket set, the
# retention purge writes each batch to S3-compatible storage first and deletes only what
# was written. No bucket: archiving is off (make run needs no S3).
ARCHIVE_S3_BUCKET = env_str("ARCHIVE_S3_BUCKET", "")
ARCHIVE_S3_PREFIX = env_str("ARCHIVE_S3_PREFIX", "executions")
ARCHIVE_S3_ENDPOINT_URL = env_str("ARCHIVE_S3_ENDPOINT_URL", "")
ARCHIVE_S3_REGION = env_str("ARCHIVE_S3_REGION", "us-east-1")
ARCHIVE_S3_ACCESS_KEY_ID = env_str("ARCHIVE_S3_ACCESS_KEY_ID", "")
ARCHIVE_S3_SECRET_ACCESS_KEY = env_str("ARCHIVE_S3_SECRET_ACCESS_KEY", "")
# MinIO and moto behind an IP address need path-style URLs; AWS takes either.
ARCHIVE_S3_ADDRESSING_STYLE = env_str("ARCHIVE_S3_ADDRESSING_STYLE", "path" if ARCHIVE_S3_ENDPOINT_URL else "auto")
if ARCHIVE_S3_ADDRESSING_STYLE not in ("auto", "path", "virtual"):
    raise ImproperlyConfigured(f"ARCHIVE_S3_ADDRESSING_STYLE={ARCHIVE_S3_ADDRESSING_STYLE!r}: use auto, path or virtual.")
ARCHIVE_S3_TIMEOUT_SECONDS = env_float("ARCHIVE_S3_TIMEOUT_SECONDS", 30.0)
# Downloads stream through the web process, or (true) redirect to a presigned URL valid this long.
ARCHIVE_PRESIGNED_DOWNLOADS = env_bool("ARCHIVE_PRESIGNED_DOWNLOADS", False)
ARCHIVE_PRESIGNED_URL_SECONDS = env_int("ARCHIVE_PRESIGNED_URL_SECONDS", 300)

# --- Customers' notifications (apps.notifications): bounded retries with doubling backoff.
NOTIFICATION_MAX_ATTEMPTS = env_int("NOTIFICATION_MAX_ATTEMPTS", 5)
NOTIFICATION_RETRY_SECONDS = env_int("NOTIFICATION_RETRY_SECONDS", 30)
NOTIFICATION_TIMEOUT_SECONDS = env_float("NOTIFICATION_TIMEOUT_SECONDS", 10.0)
NOTIFICATION_QUEUE = env_str("NOTIFICATION_QUEUE", "default")  # consumed by the worker_default process
TELEGRAM_API_URL = env_str("TELEGRAM_API_URL", "https://api.telegram.org")
DEFAULT_FROM_EMAIL = env_str("DEFAULT_FROM_EMAIL", "cronsvc <noreply@localhost>")

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = Path(env_str("STATIC_ROOT", str(BASE_DIR / "staticfiles")))
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "config.staticfiles.StaticFilesStorage"},
}
# Without collectstatic's manifest, pages link plain names and whitenoise serves them from
# the apps' folders (config/staticfiles.py) instead of every page answering 500.
WHITENOISE_USE_FINDERS = manifest_missing(STATIC_ROOT)

# --- Security headers (production defaults; SECURE_SSL_REDIRECT when behind TLS) ---
# A server install served over https (SITE_URL https://...) gets secure cookies and HSTS by
# default; the embedded mode and plain-http installs (make run, tests) do not, since a
# browser would drop secure cookies there. INSECURE_COOKIES=true forces them off.
SERVED_OVER_HTTPS = not EMBEDDED and not DEBUG and SITE_URL.startswith("https://")
SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", False)
SESSION_COOKIE_SECURE = env_bool("SESSION_COOKIE_SECURE", SERVED_OVER_HTTPS or SECURE_SSL_REDIRECT) and not env_bool(
    "INSECURE_COOKIES", False)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_SAMESITE = "Lax"
SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000 if SERVED_OVER_HTTPS else 0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", False)
SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", False)
# Probes from inside the network (load balancer, container health checks) speak plain
# http to the web process: they are answered, not redirected to https.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
# The example's placeholder refused always; a weak key refused when served over https.
check_secret_key(SECRET_KEY, production=SERVED_OVER_HTTPS)
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
# Content-Security-Policy on our HTML pages (apps/api/middleware.py).
CSP_ENABLED = env_bool("CSP_ENABLED", True)
# Abuse limits on every request (413/414/431 with a code) and on JSON bodies (400 json_too_deep).
MAX_REQUEST_BODY_BYTES = env_int("MAX_REQUEST_BODY_BYTES", 1024 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = MAX_REQUEST_BODY_BYTES
MAX_URL_LENGTH = env_int("MAX_URL_LENGTH", 4096)
MAX_REQUEST_HEADER_BYTES = env_int("MAX_REQUEST_HEADER_BYTES", 32 * 1024)
MAX_JSON_DEPTH = env_int("MAX_JSON_DEPTH", 32)
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
X_FRAME_OPTIONS = "DENY"
if env_bool("SECURE_PROXY_SSL_HEADER", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# --- Customer data rights (apps/accounts/gdpr.py) ---
# Days between an owner deleting the organization (its jobs stop at once) and its data
# being erased; the owner may cancel meanwhile.
ORG_DELETION_GRACE_DAYS = env_int("ORG_DELETION_GRACE_DAYS", 7)
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 365)

# --- Celery ---
REDIS_URL = env_str("REDIS_URL")
# Every Redis client (broker, limits and cancel flags, event stream, caches, sandbox report)
# connects, reads and writes with these timeouts, checks a connection idle longer than the
# interval before using it, and retries a failed or timed-out command once (redis-py 8's
# default is 10 retries, each nesting the health check's own: over a minute per call to a
# blackholed Redis). A Redis that never answers fails a call within about 4 socket timeouts
# (docs/configuration.md, "Timeouts").
REDIS_SOCKET_CONNECT_TIMEOUT = env_float("REDIS_SOCKET_CONNECT_TIMEOUT", 2.0)
REDIS_SOCKET_TIMEOUT = env_float("REDIS_SOCKET_TIMEOUT", 3.0)
REDIS_HEALTH_CHECK_INTERVAL = env_int("REDIS_HEALTH_CHECK_INTERVAL", 15)
REDIS_TIMEOUT_OPTIONS = {
    "socket_connect_timeout": REDIS_SOCKET_CONNECT_TIMEOUT,
    "socket_timeout": REDIS_SOCKET_TIMEOUT,
    "socket_keepalive": True,
    "health_check_interval": REDIS_HEALTH_CHECK_INTERVAL,
}
REDIS_CLIENT_OPTIONS = {**REDIS_TIMEOUT_OPTIONS, "retry": Retry(ExponentialBackoff(cap=0.25, base=0.05), 1)}


def _filesystem_broker_options():
    folder = VAR_DIR / "broker"
    for sub in ("queue", "processed", "control"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    return {
        "control_folder": str(folder / "control"),
        "data_folder_in": str(folder / "queue"),
        "data_folder_out": str(folder / "queue"),
        "processed_folder": str(folder / "processed"),
        "store_processed": False,
    }


# Redis or RabbitMQ (amqp://...) in server mode; REDIS_URL stays the limits' store either way.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL or "filesystem://")
try:
    BROKER_KIND = broker_kind(CELERY_BROKER_URL)  # "filesystem", "redis" or "amqp" (cronsvc/brokers.py)
except ValueError as exc:  # a start-up error naming the variable, as every other bad value gets
    raise ImproperlyConfigured(f"CELERY_BROKER_URL: {exc}") from exc
if BROKER_KIND == "filesystem":
    CELERY_BROKER_TRANSPORT_OPTIONS = _filesystem_broker_options()
elif BROKER_KIND == "amqp":
    # Publisher confirms; Celery's queues are durable and its messages persistent, so
    # what RabbitMQ confirmed survives its restart. An unacknowledged message comes back
    # when its worker's connection closes: RabbitMQ has no visibility timeout.
    CELERY_BROKER_TRANSPORT_OPTIONS = dict(AMQP_TRANSPORT_OPTIONS)
    CELERY_TASK_DEFAULT_DELIVERY_MODE = "persistent"  # Celery's default, relied on: said here
else:
    # Longer than the longest run (max timeout + retries are scheduled via the DB), so
    # an unacknowledged message is redelivered only when its worker really died.
    # kombu's connections retry nothing themselves (Celery's publish retry policy does).
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        **REDIS_TIMEOUT_OPTIONS,
        "visibility_timeout": env_int("CELERY_VISIBILITY_TIMEOUT", 3600),
        # A worker polls its queues in the order given (Procfile: <plan>--high, <plan>,
        # <plan>--low), not round robin: high-priority runs are taken first (routing.py).
        "queue_order_strategy": "priority",
    }
if CELERY_BROKER_URL.startswith("redis://"):
    # kombu's Redis transport, surviving a broker restart (see config/redis_transport.py).
    CELERY_BROKER_TRANSPORT = "config.redis_transport:Transport"
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# Messages a worker thread reserves ahead: with up to 250 runs a message (PUBLISH_CHUNK,
# apps/executions/scheduling/publishing.py), one is enough to keep
# a process busy, and a deeper reserve would only park runs on a busy worker while another
# one idles.
CELERY_WORKER_PREFETCH_MULTIPLIER = env_int("CELERY_WORKER_PREFETCH_MULTIPLIER", 1)
# Without it Celery's Django fix-up closes a worker thread's database connection before and
# after every task (a new PostgreSQL connection per task); with it, once in N tasks. Broken
# and CONN_MAX_AGE-expired connections are closed before each task (apps/executions/tasks.py).
CELERY_DB_REUSE_MAX = env_int("CELERY_DB_REUSE_MAX", 1000)
CELERY_TASK_DEFAULT_QUEUE = "default"
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Publishing must fail fast when the broker is down: the sweeper re-publishes later.
CELERY_TASK_PUBLISH_RETRY_POLICY = {"max_retries": 2, "interval_start": 0, "interval_step": 0.2, "interval_max": 0.5}
CELERY_BROKER_CONNECTION_TIMEOUT = env_float("CELERY_BROKER_CONNECTION_TIMEOUT", 2.0)
# The longest a publish holds its caller (a scheduler tick, a "run now"); what is not sent
# by then stays queued in the database for the sweeper (apps/executions/scheduling/publishing.py).
PUBLISH_TIMEOUT = env_float("PUBLISH_TIMEOUT", 3.0)
CELERY_TIMEZONE = "UTC"
CELERY_BEAT_SCHEDULER = "django_celery_beat.schedulers:DatabaseScheduler"
CELERY_WORKER_HIJACK_ROOT_LOGGER = False

# --- Event stream (apps/eventstream, docs/event-stream.md) ---
# Every execution and monitor state change written to an outbox in the change's own
# transaction and published by the schedulers to Redis Streams; off: no outbox rows at all.
EVENT_STREAM = env_bool("EVENT_STREAM", False)
EVENT_STREAM_REDIS_URL = env_str("EVENT_STREAM_REDIS_URL", REDIS_URL)
EVENT_STREAM_PREFIX = env_str("EVENT_STREAM_PREFIX", "cronsvc:events")
EVENT_STREAM_MAXLEN = env_int("EVENT_STREAM_MAXLEN", 100_000)
EVENT_STREAM_DEPLOYMENT = env_bool("EVENT_STREAM_DEPLOYMENT", False)
if EVENT_STREAM and not EVENT_STREAM_REDIS_URL:
    raise ImproperlyConfigured("EVENT_STREAM=on needs EVENT_STREAM_REDIS_URL or REDIS_URL (the Redis it publishes to).")
if EVENT_STREAM_MAXLEN < 1:
    raise ImproperlyConfigured(f"EVENT_STREAM_MAXLEN={EVENT_STREAM_MAXLEN}: expected a whole number of at least 1.")

# --- Scheduler and runs ---
SCHEDULER_BATCH_SIZE = env_int("SCHEDULER_BATCH_SIZE", 500)
SCHEDULER_BACKLOG_BATCH_SIZE = env_int("SCHEDULER_BACKLOG_BATCH_SIZE", 2000)
SCHEDULER_MAX_SLEEP = env_float("SCHEDULER_MAX_SLEEP", 1.0)
SWEEPER_REPUBLISH_AFTER = env_int("SWEEPER_REPUBLISH_AFTER", 60)
# A queued run whose queue holds no waiting message is published again sooner: its message
# cannot be in line (a scheduler killed between its commit and its publish, a broker restart).
SWEEPER_REPUBLISH_IDLE_AFTER = env_int("SWEEPER_REPUBLISH_IDLE_AFTER", 10)
SWEEPER_INTERVAL = env_float("SWEEPER_INTERVAL", 5.0)
MISFIRE_ON_TIME_SECONDS = env_int("MISFIRE_ON_TIME_SECONDS", 60)
# Priority under overload (docs/run-control.md): past this many messages waiting in a plan's
# queue (its priority sub-queues together; a message carries up to 250 runs, a low-priority
# one 10) low-priority runs are held in the database until it drains; 0 turns the holding off.
OVERLOAD_QUEUE_DEPTH = env_int("OVERLOAD_QUEUE_DEPTH", 1000)
OVERLOAD_CHECK_INTERVAL = env_float("OVERLOAD_CHECK_INTERVAL", 1.0)
REGIONS = env_list("REGIONS", [])
# Embedded mode is for trying cronsvc on a laptop against local endpoints; a server
# install refuses private targets unless an operator allows them.
OUTBOUND_ALLOW_PRIVATE = env_bool("OUTBOUND_ALLOW_PRIVATE", EMBEDDED)
OUTBOUND_ALLOWED_NETWORKS = env_list("OUTBOUND_ALLOWED_NETWORKS", [])
# Empty means the default list (80, 443, 1024-65535), never "no port" nor "every port".
OUTBOUND_ALLOWED_PORTS = env_str("OUTBOUND_ALLOWED_PORTS", "80,443,1024-65535")
# Single sign-on reaches identity providers through the same policy; a self-hosted provider
# on a private network is admitted by its network here, without opening it to jobs.
SSO_ALLOWED_NETWORKS = env_list("SSO_ALLOWED_NETWORKS", [])


def _check_outbound_settings():
    """Refuse to start on settings the one outbound policy (cronsvc.delivery.guard.outbound_policy,
    built from them at call time by every surface) cannot read."""
    from types import SimpleNamespace

    from cronsvc.delivery.guard import outbound_policy

    given = SimpleNamespace(OUTBOUND_ALLOW_PRIVATE=OUTBOUND_ALLOW_PRIVATE, OUTBOUND_ALLOWED_PORTS=OUTBOUND_ALLOWED_PORTS,
                            OUTBOUND_ALLOWED_NETWORKS=OUTBOUND_ALLOWED_NETWORKS)
    for names, also in (("OUTBOUND_ALLOWED_NETWORKS or OUTBOUND_ALLOWED_PORTS", ()),
                        ("SSO_ALLOWED_NETWORKS", SSO_ALLOWED_NETWORKS)):
        try:
            outbound_policy(given, also_allowed_networks=also)
        except ValueError as exc:
            raise ImproperlyConfigured(f"{names}: {exc} (expected CIDR networks such as 10.20.0.0/16, "
                                       "ports such as 80,443,8000-8999)") from exc


_check_outbound_settings()
RESPONSE_BODY_MAX_BYTES = env_int("RESPONSE_BODY_MAX_BYTES", 16 * 1024)

# --- Delivery (workers) ---
# A process sends its requests on one event loop thread with aiohttp
# (cronsvc/delivery/aio.py: thousands in flight for little CPU); its event loop: uvloop (C,
# less CPU a request) or asyncio's own (the way out should uvloop misbehave;
# bench/bench_delivery.py measures both bare loops).
DELIVERY_EVENT_LOOP = env_str("DELIVERY_EVENT_LOOP", "uvloop")
if DELIVERY_EVENT_LOOP not in ("uvloop", "asyncio"):
    raise ImproperlyConfigured(f"DELIVERY_EVENT_LOOP must be uvloop or asyncio, not {DELIVERY_EVENT_LOOP!r}")
# Deliveries one worker pool process (a prefork child) keeps in flight (requests on its
# loop); a task waits for free slots before it claims its runs.
DELIVERY_MAX_INFLIGHT = env_int("DELIVERY_MAX_INFLIGHT", 1000)
# Variables a deployment may still set that nothing reads any more: each is a start-up and a
# /readyz warning (apps.observability.health), not a silent no-op.
REMOVED_VARIABLES = {
    "DELIVERY_ENGINE": "every worker sends with the asyncio engine; the threads engine is gone",
}
REMOVED_VARIABLES_SET = sorted(name for name in REMOVED_VARIABLES if name in os.environ)
# Script jobs (apps/executions/worker/scripts.py): sandboxed runs one worker pool process keeps
# going at once, on threads of their own (each blocks up to the plan's script wall time).
SCRIPT_WORKERS = env_int("SCRIPT_WORKERS", 2)
# The Redis key through which workers that can sandbox say so (with a TTL); the web refuses
# script jobs with sandbox_unavailable while it is absent.
SANDBOX_REPORT_KEY = env_str("SANDBOX_REPORT_KEY", "cronsvc:sandbox:available")
# How long a task waits for its slowest runs before the process's late recorder takes
# them over and the task moves on (a hanging endpoint must not hold a worker thread). A
# prefork child runs one task at a time, so this also sets how soon it takes its next
# message: against endpoints that take 1 s, 0.1 s delivered several times more a second
# than 5 s, so the Procfile's worker lines set 0.1 (bench/README.md, "Figures behind the
# code"). The late recorder keeps its database connection, so runs recorded
# there cost no more than in the task.
DELIVERY_HANDOFF_SECONDS = env_float("DELIVERY_HANDOFF_SECONDS", 5.0)
DELIVERY_CONNECT_TIMEOUT = env_float("DELIVERY_CONNECT_TIMEOUT", 5.0)
# Requests one worker pool process has in flight to one host (host:port), asyncio engine;
# its other runs for that host wait their turn, and their timeout starts when it comes.
DELIVERY_MAX_CONNECTIONS_PER_HOST = env_int("DELIVERY_MAX_CONNECTIONS_PER_HOST", 1000)
# CA certificates (a PEM file) workers trust for HTTPS endpoints instead of certifi's.
DELIVERY_CA_BUNDLE = env_str("DELIVERY_CA_BUNDLE", "")
# A hosts file (/etc/hosts' format) the asyncio engine resolves names from before DNS
# (benchmarks on one machine); the outbound policy still checks the addresses.
DELIVERY_HOSTS_FILE = env_str("DELIVERY_HOSTS_FILE", "")
# Seconds past a run's timeout that its Redis-held concurrency slot and overlap lock last.
DELIVERY_LEASE_MARGIN = env_int("DELIVERY_LEASE_MARGIN", 60)
# Fenced leases (docs/architecture.md): a claimed run's lease on the database's clock,
# renewed by its worker's heartbeat every third of it; a run whose lease ran out (its worker
# died or stopped) is taken back by the sweeper and sent again, at most LEASE_MAX_RECLAIMS
# times, then it fails with error_kind lease_lost.
LEASE_SECONDS = env_float("LEASE_SECONDS", 10.0)
if LEASE_SECONDS < 1:
    raise ImproperlyConfigured(f"LEASE_SECONDS={LEASE_SECONDS}: expected at least 1 second.")
LEASE_MAX_RECLAIMS = env_int("LEASE_MAX_RECLAIMS", 5)
DELIVERY_DEFER_SECONDS = env_float("DELIVERY_DEFER_SECONDS", 2.0)
# How often a worker process with runs in flight asks whether any was cancelled (one Redis
# MGET for all of them): a cancelled run's request is closed within about this long.
DELIVERY_CANCEL_CHECK_SECONDS = env_float("DELIVERY_CANCEL_CHECK_SECONDS", 0.25)
# Requests a minute one organization may have sent to one host (all its jobs together), by
# plan code ("*" for any other plan; 0 turns the limit off for that plan). A minute's worth
# may go at once.
HOST_RATE_PER_MINUTE = env_int_map("HOST_RATE_PER_MINUTE",
                                   {"free": 60, "pro": 600, "business": 6000, "enterprise": 0, "*": 600})
BREAKER_FAILURE_THRESHOLD = env_int("BREAKER_FAILURE_THRESHOLD", 5)
BREAKER_COOLDOWN_SECONDS = env_float("BREAKER_COOLDOWN_SECONDS", 60.0)

# --- REST API ---
REST_FRAMEWORK = {
    "DEFAULT_SCHEMA_CLASS": "apps.api.schema.ApiAutoSchema",
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "apps.api.authentication.ApiKeyAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["apps.api.permissions.RolePermission"],
    "DEFAULT_THROTTLE_CLASSES": ["apps.api.throttling.PlanRateThrottle"],
    "DEFAULT_FILTER_BACKENDS": [
        "apps.api.filters.FilterBackend",
        "rest_framework.filters.OrderingFilter",
    ],
    "DEFAULT_PAGINATION_CLASS": "apps.api.pagination.PagePagination",
    "DEFAULT_PARSER_CLASSES": ["apps.api.parsers.BoundedJSONParser"],
    "DEFAULT_RENDERER_CLASSES": ["apps.api.renderers.FastJSONRenderer"],  # DRF's JSON, by orjson
    "EXCEPTION_HANDLER": "apps.api.errors.exception_handler",
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
    "PAGE_SIZE": 50,
    "TEST_REQUEST_DEFAULT_FORMAT": "json",
    # Proxies in front of the web process whose X-Forwarded-For is trusted for the client
    # address (per-IP quotas, audit log); 0 reads REMOTE_ADDR, which clients cannot forge.
    "NUM_PROXIES": env_int("API_TRUSTED_PROXIES", 0),
}
SPECTACULAR_SETTINGS = {
    "TITLE": "cronsvc API",
    "DESCRIPTION": (
        "Schedule HTTP jobs, read their history.\n\n"
        "Authenticate with `Authorization: Bearer <API key>`. Errors always read "
        '`{"error": {"code", "message", "fields"}}` (see the Error schema for the codes). '
        "Requests are rate limited per API key by plan (X-RateLimit-Limit/Remaining/Reset; "
        "429 with Retry-After). Ids are opaque strings."
    ),
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    # Swagger UI from the pinned drf-spectacular-sidecar package, as static files: the docs
    # page renders on an install that reaches no CDN.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    "ENUM_NAME_OVERRIDES": {"NotificationStatusEnum": "apps.notifications.models.Outgoing.Status",
                            "ExecutionStatusEnum": "apps.executions.models.Execution.Status",
                            "JobVersionSourceEnum": "apps.jobs.models.JobVersion.Source",
                            "RuleSourceEnum": ["job", "project", "default"]},
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "apps.api.schema.add_error_component",
        "apps.api.schema.nullable_references",
    ],
}
# API keys one client IP may create per hour (on top of the per-key request quota).
API_KEY_CREATE_PER_IP_PER_HOUR = env_int("API_KEY_CREATE_PER_IP_PER_HOUR", 20)
# Invitation e-mails (new and resent) an organization sends per hour, and per address
# within one organization (apps.api.accounts.invitations).
INVITATIONS_PER_ORGANIZATION_PER_HOUR = env_int("INVITATIONS_PER_ORGANIZATION_PER_HOUR", 30)
INVITATIONS_PER_ADDRESS_PER_HOUR = env_int("INVITATIONS_PER_ADDRESS_PER_HOUR", 3)
# Failed API-key authentications one client IP may make in API_KEY_FAILURE_WINDOW seconds;
# past it the API answers 429 (Retry-After) until the window ends.
API_KEY_FAILURES_PER_IP = env_int("API_KEY_FAILURES_PER_IP", 30)
API_KEY_FAILURE_WINDOW = env_int("API_KEY_FAILURE_WINDOW", 300)
# Request quotas are counted in Redis so every web process shares them; embedded mode
# (no REDIS_URL) counts per process.
CACHES = {
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    "api": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
         "KEY_PREFIX": "cronsvc-api", "OPTIONS": REDIS_CLIENT_OPTIONS}
        if REDIS_URL else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "api"}
    ),
    # The web pages' counters (login attempts, test runs): Redis shared by every web
    # process; embedded mode runs one web process, so its memory is enough.
    "web": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL,
         "KEY_PREFIX": "cronsvc-web", "OPTIONS": REDIS_CLIENT_OPTIONS}
        if REDIS_URL else {"BACKEND": "django.core.cache.backends.locmem.LocMemCache", "LOCATION": "web"}
    ),
}

# --- Sentry (only with SENTRY_DSN) ---
# Django, Celery and Redis integrations; events scrubbed of customer secrets
# (apps/observability/sentry.py).
SENTRY_DSN = env_str("SENTRY_DSN")
if SENTRY_DSN:
    from apps.observability import sentry as _sentry

    _sentry.init(
        SENTRY_DSN,
        traces_sample_rate=env_float("SENTRY_TRACES_SAMPLE_RATE", 0.0),
        environment=env_str("SENTRY_ENVIRONMENT", "production"),
    )

# --- Operators' observability (apps/observability; README "Operations: monitoring") ---
# /metrics answers a Bearer METRICS_TOKEN or a client in METRICS_ALLOWED_IPS (CIDRs);
# with neither set it is 404. Embedded mode allows the local machine.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
METRICS_ALLOWED_IPS = env_list("METRICS_ALLOWED_IPS", ["127.0.0.1/32", "::1/128"] if EMBEDDED else [])
# Where every process writes its metrics so that /metrics adds them all up. It must be
# set in the environment of every process (prometheus-client reads it at import) and be
# emptied when the platform starts.
PROMETHEUS_MULTIPROC_DIR = env_str("PROMETHEUS_MULTIPROC_DIR", "")
if PROMETHEUS_MULTIPROC_DIR:
    Path(PROMETHEUS_MULTIPROC_DIR).mkdir(parents=True, exist_ok=True)
# Schedulers and workers write a heartbeat row at most this often (seconds); one silent
# for three intervals is shown as dead.
HEARTBEAT_INTERVAL = env_float("HEARTBEAT_INTERVAL", 5.0)
# One clock (docs/architecture.md): the database's decides what is due. A process whose own
# clock is off the database's by more than this many seconds says so (a log warning, the
# gauge cronsvc_clock_skew_seconds, a /readyz warning); it cannot fire early either way.
CLOCK_SKEW_WARN_SECONDS = env_float("CLOCK_SKEW_WARN_SECONDS", 2.0)

LOG_LEVEL = env_str("LOG_LEVEL", "INFO")
# json: one JSON object per line with request_id / execution_id (server default);
# console: readable lines (embedded default).
LOG_FORMAT = env_str("LOG_FORMAT", "console" if EMBEDDED else "json")
from apps.observability.logconfig import logging_config  # noqa: E402 - needs LOG_* above

LOGGING = logging_config(LOG_FORMAT, LOG_LEVEL)
