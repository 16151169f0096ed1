"""Quota warnings: at 80% and 100% of the monthly quota, once per threshold per month.

The QuotaWarning row (unique organization + month + threshold) is written in the
recording transaction, so whichever worker crosses a threshold, the warning exists once;
the message itself goes through the notifications app, which sends after commit.
"""

from __future__ import annotations

import logging
import math

from django.core.mail import send_mail
from django.db import IntegrityError, transaction

from apps.accounts.hooks import notify_organization
from apps.accounts.models import Membership, Organization

from .models import QuotaWarning

log = logging.getLogger(__name__)

THRESHOLDS = (80, 100)


def crossed_thresholds(before, after, quota):
    """Thresholds (percent) whose run count lies in (before, after]."""
    if quota <= 0:
        return []
    return [t for t in THRESHOLDS if before < math.ceil(quota * t / 100) <= after]


def warn_crossed(counts):
    """What the metering tells billing (apps.executions.hooks.on_usage_metered): each
    [(organization id, month, runs before, runs after, quota)]; warns once per threshold
    crossed."""
    for organization_id, month, before, after, quota in counts:
        for threshold in crossed_thresholds(before, after, quota):
            warn_quota(organization_id, month, threshold, runs=after, quota=quota)


def warn_quota(organization_id, month, threshold, *, runs, quota):
    """Record the warning once and hand it to the notifications; False if already sent."""
    try:
        with transaction.atomic():
            warning = QuotaWarning.objects.create(organization_id=organization_id, month=month,
                                                  threshold=threshold, runs=runs, quota=quota)
    except IntegrityError:
        return False
    send_quota_warning(warning)
    return True


def send_quota_warning(warning):
    """The one place a quota warning leaves billing: through the organization notice hook
    notifications registers (apps/accounts/hooks.py), else an e-mail to the owners."""
    subject, text = _message(warning)
    data = {"month": warning.month.isoformat(), "threshold": warning.threshold,
            "runs": warning.runs, "quota": warning.quota}
    if not notify_organization(warning.organization_id, "quota", subject, text, data):
        transaction.on_commit(lambda: _mail_owners(warning.organization_id, subject, text))


def _message(warning):
    org = Organization.objects.select_related("plan").get(pk=warning.organization_id)
    month = f"{warning.month:%B %Y}"
    if warning.threshold >= 100:
        after = ("further runs are skipped (quota_exceeded) until next month or an upgrade"
                 if org.plan.over_quota == "block" else
                 f"further runs are billed as overage ({org.plan.overage_cents_per_1000 / 100:.2f} per 1,000)")
        subject = f"{org.name}: monthly run quota reached"
    else:
        after = "plan an upgrade if you expect to go past it"
        subject = f"{org.name}: {warning.threshold}% of the monthly run quota used"
    text = (f"{org.name} has used {warning.runs:,} of its {warning.quota:,} runs for {month} "
            f"on the {org.plan.name} plan; {after}.")
    return subject, text


def _mail_owners(organization_id, subject, text):
    owners = list(Membership.objects.filter(organization_id=organization_id, role=Membership.Role.OWNER)
                  .values_list("user__email", flat=True))
    if owners:
        send_mail(subject, text, None, owners, fail_silently=True)
