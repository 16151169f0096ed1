"""What a higher app deletes in billing's retention purge.

The hourly purge (apps.billing.tasks.purge_expired) deletes what each organization's plan no
longer keeps (Plan.retention_days). The apps above billing whose data follows the same
retention (monitors' pings) register their own purge from their ``AppConfig.ready()`` with
``on_retention_purge``, so billing imports none of them (docs/architecture.md, "Layers").
"""

from __future__ import annotations

_purges = []


def on_retention_purge(what, purge):
    """Register ``purge(now=...)``, which deletes in bounded batches whatever is past its
    organization's retention and returns how many rows; ``what`` names them in the log
    ("monitor pings"). Called in registration order after billing's own purge. Registering
    the same purge twice is a no-op."""
    if (what, purge) not in _purges:
        _purges.append((what, purge))
    return purge


def retention_purges():
    """[(what, purge)] as registered."""
    return list(_purges)
