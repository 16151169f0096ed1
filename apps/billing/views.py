"""Billing's pages: the usage part of Settings › Plan & usage, and the monthly statements
(owners only: admins manage everything but billing)."""

from django.shortcuts import get_object_or_404, render
from django.utils import timezone

from apps.api.access import Role, member_view, require_role

from .models import Statement
from .plan_change import paused_by_plan
from .usage import usage_for


def usage_context(request, *, now=None):
    """What the plan page shows about usage (the cost only to owners)."""
    organization = request.actor.organization
    usage = usage_for(organization, now=now or timezone.now())
    is_owner = request.actor.has_role(Role.OWNER)
    return {
        "usage": usage,
        "used": usage.runs,
        "used_percent": min(100, round(usage.percent)),
        "peak_day": max((day["runs"] for day in usage.days), default=0),
        "paused_by_plan": list(paused_by_plan(organization).order_by("name")[:100]),
        "show_cost": is_owner,
        "statements": list(Statement.objects.filter(organization=organization)[:24]) if is_owner else [],
    }


@member_view
def statement(request, pk):
    item = get_object_or_404(Statement.objects.filter(organization=request.actor.organization), pk=pk)
    require_role(request, Role.OWNER)
    return render(request, "web/billing/statement.html", {"statement": item})
