"""The statuses a run ends in, named once: the engine, the apps and their SQL read these
sets (a run's statuses are Execution.Status's values)."""

SUCCEEDED = "succeeded"
SKIPPED = "skipped"
#: A run stopped on purpose (by a user or an API key) before it finished: final, not a failure.
CANCELLED = "cancelled"
#: A run that went out and did not succeed: an error answer, a timeout, retries used up.
FAILED = frozenset({"failed", "timed_out", "dead"})
#: A run that went out and has its verdict.
RAN = FAILED | {SUCCEEDED}
#: A run that will not change again.
FINAL = RAN | {SKIPPED, CANCELLED}
