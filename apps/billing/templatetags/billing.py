from django import template

from apps.billing.pricing import format_cents

register = template.Library()


@register.filter
def money(cents, currency="USD"):
    """Integer cents as 'USD 19.00'."""
    return format_cents(int(cents or 0), currency or "USD")


@register.filter
def bar_percent(value, peak):
    """A bar's height (0-100) against the tallest bar; a day with runs is never drawn flat
    (one run beside a peak of thousands still shows)."""
    if not peak or not value:
        return 0
    return max(4, round(100 * value / peak))
