"""GET /api/v1/usage/: this month's usage, quota, projection, cost and daily history."""

from django.utils import timezone
from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.response import Response
from rest_framework.views import APIView

from apps.api.actor import Role
from apps.api.base import ApiViewMixin

from .plan_change import paused_by_plan
from .usage import HISTORY_DAYS, usage_for


class UsageDaySerializer(serializers.Serializer):
    day = serializers.DateField()
    runs = serializers.IntegerField(help_text="Attempts made that day (UTC).")
    succeeded = serializers.IntegerField()
    failed = serializers.IntegerField(help_text="Attempts that did not succeed (retries included).")


class UsagePlanSerializer(serializers.Serializer):
    code = serializers.CharField()
    name = serializers.CharField()
    monthly_executions = serializers.IntegerField()
    over_quota = serializers.ChoiceField(choices=["block", "overage"],
                                         help_text="block: runs past the quota are skipped (quota_exceeded); "
                                                   "overage: they run and are billed per 1,000.")
    overage_cents_per_1000 = serializers.IntegerField()
    monthly_price_cents = serializers.IntegerField()
    retention_days = serializers.IntegerField()


class PausedJobSerializer(serializers.Serializer):
    id = serializers.UUIDField()
    name = serializers.CharField()
    paused_reason = serializers.CharField()


class UsageSerializer(serializers.Serializer):
    month = serializers.DateField(help_text="First day of the current month (UTC).")
    plan = UsagePlanSerializer()
    runs = serializers.IntegerField(help_text="Attempts this month: every request made counts, retries included.")
    quota = serializers.IntegerField()
    percent_of_quota = serializers.FloatField(source="percent")
    projected_runs = serializers.IntegerField(help_text="Month-end attempts at this month's rate so far.")
    base_cents = serializers.IntegerField(help_text="The plan's monthly price.")
    overage_runs = serializers.IntegerField()
    overage_cents = serializers.IntegerField()
    cost_cents = serializers.IntegerField(help_text="Cost so far: plan price plus overage.")
    projected_cost_cents = serializers.IntegerField()
    currency = serializers.CharField(default="USD")
    days = UsageDaySerializer(many=True, help_text=f"The last {HISTORY_DAYS} days, oldest first.")
    paused_by_plan = PausedJobSerializer(many=True, help_text="Jobs a plan downgrade paused; they resume "
                                                              "once the plan allows them again.")


class UsageView(ApiViewMixin, APIView):
    """The organization's usage (owners and admins)."""

    action = "usage"  # the name RolePermission looks up in required_roles
    required_roles = {"usage": Role.ADMIN}

    @extend_schema(
        responses=UsageSerializer, tags=["usage"],
        description="This month's attempts against the plan's quota, the projected month-end figure, "
                    f"the cost so far (plan price plus overage) and the daily history of the last {HISTORY_DAYS} "
                    "days. Owners and admins only (403 `permission_denied` otherwise).",
    )
    def get(self, request):
        organization = self.actor.organization
        usage = usage_for(organization, now=timezone.now())
        usage.paused_by_plan = list(paused_by_plan(organization).order_by("name"))
        return Response(UsageSerializer(usage).data)
