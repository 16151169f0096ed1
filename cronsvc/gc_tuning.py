"""Python's garbage collector in a long-lived process (web, worker, scheduler).

Once a process has loaded what it lives with (Django, DRF, Celery, its modules and
settings: 100,000 objects and more), ``freeze_startup_objects`` moves all of it out of the
collector's sight. Otherwise every full collection walks those objects again: a stall of
tens of milliseconds, several times a minute on a busy process, paid on its hot path (a
scheduler spent a quarter of its CPU there; bench/README.md, "Figures behind the code").

Young collections then run every ``YOUNG_THRESHOLD`` allocations (Python's default is 700):
a unit of work that allocates more than that (a page of 50 jobs, a tick of 500 claimed jobs,
a batch of 250 runs) otherwise has its objects promoted to the older generations while they
are still in use, and collected there, at a higher cost, once the work is done.
"""

import gc

YOUNG_THRESHOLD = 10_000


def freeze_startup_objects():
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, *gc.get_threshold()[1:])
