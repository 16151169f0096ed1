"""The boundary to a payment processor. cronsvc bills nothing itself: a Statement is what
a payment integration consumes. An integration implements PaymentProvider and is named in
BILLING_PAYMENT_PROVIDER (a dotted path); the default does nothing."""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string


class PaymentProvider:
    """Called once per new statement, after it is committed."""

    def statement_created(self, statement) -> str:
        """Charge or invoice the statement; return the provider's reference ('' if none)."""
        raise NotImplementedError


class NoopPaymentProvider(PaymentProvider):
    def statement_created(self, statement) -> str:
        return ""


def payment_provider() -> PaymentProvider:
    path = getattr(settings, "BILLING_PAYMENT_PROVIDER", "") or "apps.billing.payments.NoopPaymentProvider"
    return import_string(path)()
