"""Keeping statements that are given their rows' keys on those keys (PostgreSQL).

A worker's claim, recording and heartbeat and a scheduler's advance name the rows they touch
by key (a batch's ids in an array, up to a few thousand) and check each row's state.
PostgreSQL chooses how to reach the rows from its statistics, which are never right for such a table: they describe a
history whose runs are nearly all finished while a burst waits, or a table far smaller than
it has grown since the last ANALYZE. How they misled it, found in the benchmarks'
statements (bench/README.md, "Figures behind the code"):

- the unfinished-runs index ANDed with the time index, then the batch's ids filtered out of
  every queued run of a burst: a claim's work grew with the burst (16.9 s of a 100k burst's
  PostgreSQL time in 523 claims);
- a scan of a whole table it took for a few rows (a freshly filled one);
- a hash of the whole jobs table to advance the 2,000 jobs a tick claimed, where its default
  costs (a page read priced as if from disk) made 2,000 key lookups look dearer.

So the rule has two halves. A state check is written with ``checked_per_row``, a filter no
index can serve, beside a condition on the key (``id = ANY(...)``, ``j.id = v.id``); and the
transaction runs ``reach_rows_by_key`` first, which leaves it no sequential scan and no hash
or merge join. What remains is the key's index: a statement's cost follows its batch, not
the table. A statement that joins its rows to their new values by key (a recording's finish)
names the keys as an array too (``e.id = ANY(...)``): with the join's condition alone and a
table grown since its statistics, PostgreSQL walked the whole key index once a group
(bench/README.md); with the array, however it joins, it reaches only the batch's rows.
"""

from django.db import connection

#: The planner's settings for the rest of a transaction that reaches its rows by key.
BY_KEY = {"enable_seqscan": "off", "enable_hashjoin": "off", "enable_mergejoin": "off"}


def checked_per_row(condition):
    """``condition`` (SQL) as a filter checked on each row, never an index's; as in a WHERE
    clause, a row for which it is NULL is left out."""
    return f"({condition}) IS TRUE"


def reach_rows_by_key(**also):
    """For the rest of this transaction, BY_KEY (and the settings ``also``, e.g. a session
    timeout), in one round trip."""
    settings = {**also, **BY_KEY}
    with connection.cursor() as cursor:
        cursor.execute("SELECT " + ", ".join(["set_config(%s, %s, true)"] * len(settings)),
                       [str(part) for setting in settings.items() for part in setting])
