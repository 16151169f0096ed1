"""Keeping a statement that is given its rows' keys on those keys (PostgreSQL).

A worker's statements name the runs they touch by id (a batch's ids in an array) and check
each row's state: queued and due, or running under this worker's lease. PostgreSQL plans
such a check as an index condition wherever an index matches it, and judges its cost by
statistics of a table whose runs are nearly all finished: it read the runs through the
unfinished-runs index (ANDed with the time index for the claim) and filtered the batch's
ids out of everything there, every queued run of a burst and every entry not vacuumed
yet. That made each statement's work grow with the burst: 16.9 s of a 100k burst's
PostgreSQL time went to 523 claims (bench/README.md, "Figures behind the code").

A condition wrapped by ``checked_per_row`` is one no index can serve, so the only way to
the rows is their key, and the condition is checked on each row found.
"""


def checked_per_row(condition):
    """``condition`` (SQL) as a filter checked on each row, never an index's; as in a WHERE
    clause, a row for which it is NULL is left out."""
    return f"({condition}) IS TRUE"
