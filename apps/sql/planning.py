"""Keeping a statement that is given its rows' keys on those keys (PostgreSQL).

Two ways PostgreSQL's planner left the keys, both found in a 100k burst's statements
(bench/README.md, "Figures behind the code"), and what keeps each statement on them.

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


#: For a transaction whose statements join a batch's keys (an array of up to a few thousand
#: ids) to their rows. PostgreSQL's default costs price a page read as if from disk (four
#: times a sequential one), so it hashed a whole table rather than look 2,000 keys up: a
#: scheduler's tick read all 100,000 jobs to advance the 2,000 it had claimed, 25-40 ms a
#: tick where the lookups take 5 ms, and more the larger the table. Only the key's index
#: serves such a join (a small table looked up key by key costs a few ms at most).
KEYED_JOINS = {"enable_hashjoin": "off", "enable_mergejoin": "off"}
