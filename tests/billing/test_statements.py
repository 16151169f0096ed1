"""Monthly statements: totals (plan price + overage per started 1,000), idempotent per
organization and month, handed to the payment provider once."""

from datetime import date

import pytest

from apps.billing import payments
from apps.billing.models import Statement
from apps.billing.pricing import month_cost
from apps.billing.statements import generate_statements, previous_month
from apps.executions.models import UsageMonth
from apps.plans.models import Plan
from tests.conftest import utc

NOW = utc(2030, 2, 1, 0, 30)
JANUARY = date(2030, 1, 1)


class RecordingProvider(payments.PaymentProvider):
    seen = []

    def statement_created(self, statement):
        self.seen.append(statement.pk)
        return f"inv_{statement.pk}"


@pytest.fixture
def provider(settings):
    RecordingProvider.seen = []
    settings.BILLING_PAYMENT_PROVIDER = "tests.billing.test_statements.RecordingProvider"
    return RecordingProvider


def test_cost_is_price_plus_started_thousands_past_the_quota(db):
    from tests.conftest import ensure_seeded_plans

    ensure_seeded_plans()
    pro, free = Plan.objects.get(code="pro"), Plan.objects.get(code="free")
    assert month_cost(pro, 500_000).total_cents == 1_900
    assert month_cost(pro, 500_001).total_cents == 1_900 + 50
    assert month_cost(pro, 501_000).total_cents == 1_900 + 50
    assert month_cost(pro, 501_001).total_cents == 1_900 + 100
    assert month_cost(free, 9_999).total_cents == 0  # block: never overage


def test_statements_total_and_lines(tenant, make_tenant, provider, django_capture_on_commit_callbacks):
    free = make_tenant(plan="free")
    UsageMonth.objects.create(organization=tenant.organization, month=JANUARY, runs=512_345)
    UsageMonth.objects.create(organization=tenant.organization, month=date(2030, 2, 1), runs=9)  # not January
    with django_capture_on_commit_callbacks(execute=True):
        made = generate_statements(JANUARY, now=NOW)
    assert len(made) == 2
    pro = Statement.objects.get(organization=tenant.organization, period=JANUARY)
    assert (pro.runs, pro.quota, pro.overage_runs) == (512_345, 500_000, 12_345)
    assert (pro.base_cents, pro.overage_cents, pro.total_cents) == (1_900, 13 * 50, 1_900 + 650)
    assert [line["amount_cents"] for line in pro.lines] == [1_900, 650]
    assert sum(line["amount_cents"] for line in pro.lines) == pro.total_cents
    assert pro.plan_code == "pro" and pro.provider_reference == f"inv_{pro.pk}"
    nothing = Statement.objects.get(organization=free.organization)
    assert (nothing.runs, nothing.total_cents, len(nothing.lines)) == (0, 0, 1)
    assert sorted(provider.seen) == sorted([pro.pk, nothing.pk])


def test_statements_are_made_once(tenant, provider, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        assert len(generate_statements(JANUARY, now=NOW)) == 1
        assert generate_statements(JANUARY, now=NOW) == []
    assert Statement.objects.filter(organization=tenant.organization).count() == 1
    assert len(provider.seen) == 1


def test_a_month_not_over_gets_no_statement(tenant):
    with pytest.raises(ValueError):
        generate_statements(date(2030, 2, 1), now=NOW)
    assert previous_month(NOW) == JANUARY
    assert previous_month(utc(2030, 1, 15)) == date(2029, 12, 1)


def test_the_default_provider_does_nothing():
    assert isinstance(payments.payment_provider(), payments.NoopPaymentProvider)
    assert payments.NoopPaymentProvider().statement_created(None) == ""
