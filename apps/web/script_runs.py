"""A script job's attempt as the run page shows it.

A script run records what it did in the attempt's response columns (apps/executions/worker/scripts.py,
docs/script-jobs.md): stdout as the body, and the exit code, stderr, the limit hit and the
truncation flags as headers. ``script_run`` reads them back under their own names.
"""

# The sandbox's reasons (cronsvc.sandbox.Reason values), for a person.
LIMITS = {
    "timeout": "wall-clock time limit (the run was killed)",
    "cpu": "CPU time limit",
    "memory": "memory limit",
    "pids": "process limit",
    "output": "output limit (the rest of the output was dropped)",
}


def script_run(attempt, job):
    """The script side of an attempt (AttemptSerializer's data), or None for an HTTP attempt.

    An attempt that sent a request is HTTP whatever the job is now (it may have changed kind);
    one with an ``exit-code`` header is a script run; a script job's attempt with neither never
    started (``ran`` false: the sandbox was unavailable or the script was refused)."""
    response = attempt["response"]
    headers = response["headers"] or {}
    if attempt["request"]["method"] or response["status"] is not None:
        return None
    if "exit-code" not in headers:
        return {"ran": False} if job.kind == job.Kind.SCRIPT else None
    reason = headers.get("reason", "")
    return {
        "ran": True,
        "exit_code": headers["exit-code"],  # empty after a timeout
        "signal": headers.get("signal", ""),
        "reason": reason,
        "limit": LIMITS.get(reason, reason),
        "stdout": response["body"],
        "stderr": headers.get("stderr", ""),
        "stdout_truncated": headers.get("stdout-truncated") == "true",
        "stderr_truncated": headers.get("stderr-truncated") == "true",
        "cpu_seconds": headers.get("cpu-seconds", ""),
    }
