"""Usage counters and run statistics, written with the runs they count.

``metering`` counts every attempt into UsageMonth and UsageDay inside the transaction that
records it; ``quota`` is the worker's admission against the plan's monthly quota;
``rollups`` computes the daily JobDayStats the charts read after the retention purge.
Billing reads the counters (statements, the usage page) and is told when a run crosses a
quota warning threshold (``apps.executions.hooks.on_usage_metered``).
"""
