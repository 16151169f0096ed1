"""Why a script did not run. Each carries a stable machine-readable code."""

from __future__ import annotations


class SandboxError(Exception):
    code = "sandbox_error"

    def __init__(self, message: str):
        super().__init__(message)
        self.message = message


class SandboxUnavailable(SandboxError):
    """This host cannot sandbox (bwrap missing, user namespaces refused, no libseccomp):
    scripts are refused, never run without the sandbox."""

    code = "sandbox_unavailable"


class SandboxFailed(SandboxError):
    """The sandbox did not start this once (bwrap reported a set-up error): the platform's
    failure, not the script's; worth a retry."""

    code = "sandbox_failed"


class ScriptRejected(SandboxError):
    """The script itself cannot be run as given (too large, unknown language, bad env)."""

    def __init__(self, code: str, message: str):
        super().__init__(message)
        self.code = code
