"""Create (once) the demo operator and demo tenant for `make run`, then print how to log in.

The credentials are kept in VAR_DIR/demo.json (mode 600) so a second `make run` prints
the same ones: the API key is stored hashed and could not be shown again otherwise.
"""

import json
import secrets

from django.conf import settings
from django.core.management.base import BaseCommand

from apps.accounts.models import Organization, User
from apps.projects.provisioning import provision_tenant

OPERATOR_EMAIL = "operator@example.com"
TENANT_EMAIL = "demo@example.com"
TENANT_NAME = "Demo"


class Command(BaseCommand):
    help = "Create the demo operator and tenant if missing; print the URL and credentials."

    def add_arguments(self, parser):
        parser.add_argument("--url", default=None, help="The address to print (default: SITE_URL).")

    def handle(self, *args, url, **options):
        url = url or settings.SITE_URL
        path = settings.VAR_DIR / "demo.json"
        credentials = json.loads(path.read_text()) if path.exists() else {}
        if not credentials or not User.objects.filter(email=OPERATOR_EMAIL).exists():
            credentials = self._create()
            path.parent.mkdir(parents=True, exist_ok=True)  # server mode makes no VAR_DIR of its own
            path.write_text(json.dumps(credentials))
            path.chmod(0o600)
        self._print(url, credentials)

    def _create(self):
        operator_password = secrets.token_urlsafe(12)
        operator = User.objects.filter(email=OPERATOR_EMAIL).first()
        if operator is None:
            operator = User.objects.create_superuser(OPERATOR_EMAIL, operator_password)
        else:
            operator.set_password(operator_password)
            operator.save()
        tenant_password = secrets.token_urlsafe(12)
        Organization.objects.filter(slug="demo").delete()
        User.objects.filter(email=TENANT_EMAIL).delete()
        tenant = provision_tenant(org_name=TENANT_NAME, email=TENANT_EMAIL, plan_code="pro",
                                  password=tenant_password)
        return {
            "operator": {"email": OPERATOR_EMAIL, "password": operator_password},
            "tenant": {"email": TENANT_EMAIL, "password": tenant_password,
                       "organization": tenant.organization.slug, "api_key": tenant.full_api_key},
        }

    def _print(self, url, credentials):
        url = url.rstrip("/")
        operator, tenant = credentials["operator"], credentials["tenant"]
        lines = [
            "",
            "cronsvc is starting (embedded mode: SQLite + filesystem broker).",
            f"  Open:            {url}/",
            f"  Operator admin:  {url}/admin/  login {operator['email']} / {operator['password']}",
            f"  Demo tenant:     login {tenant['email']} / {tenant['password']}",
            f"  Demo API key:    {tenant['api_key']}",
            f"  API docs:        {url}/api/docs/",
            f"  First job:       CRONSVC_URL={url} CRONSVC_API_KEY={tenant['api_key']} sh docs/first-api-call.sh",
            "  Stop with Ctrl-C.",
            "",
        ]
        self.stdout.write("\n".join(lines))
