"""The job page's charts: computed in apps.executions.history.stats, shared with the stats API."""

from apps.executions.history.stats import MAX_ROWS, RANGES, job_stats, percentile  # noqa: F401
