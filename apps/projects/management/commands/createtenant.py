import json

from django.core.management.base import BaseCommand, CommandError

from apps.plans.models import DEFAULT_PLAN_CODE, Plan
from apps.projects.provisioning import provision_tenant


class Command(BaseCommand):
    help = "Create an organization with its owner, default project and an API key; print JSON."

    def add_arguments(self, parser):
        parser.add_argument("--org", required=True, help="Organization name.")
        parser.add_argument("--email", required=True, help="Owner's e-mail (created if new).")
        parser.add_argument("--plan", default=DEFAULT_PLAN_CODE, help="Plan code (default: free).")
        parser.add_argument("--password", default=None, help="Owner's password (new users only).")

    def handle(self, *args, org, email, plan, password, **options):
        plans = Plan.objects
        if not plans.filter(code=plan).exists():
            codes = ", ".join(plans.values_list("code", flat=True))
            raise CommandError(f"Unknown plan {plan!r}; choose one of: {codes}.")
        tenant = provision_tenant(org_name=org, email=email, plan_code=plan, password=password)
        self.stdout.write(json.dumps(tenant_json(tenant)))


def tenant_json(tenant):
    org, project, user = tenant.organization, tenant.project, tenant.owner
    return {
        "organization": {"id": str(org.id), "name": org.name, "slug": org.slug, "plan": org.plan.code},
        "project": {"id": str(project.id), "name": project.name, "slug": project.slug,
                    "timezone": project.timezone},
        "user": {"id": str(user.pk), "email": user.email},
        "api_key": tenant.full_api_key,
    }
