"""Customer scripts (Python or shell) run under bubblewrap: new namespaces, a read-only
runtime, no network (or, with Network.HTTP, outbound HTTP(S) only through the run's egress
proxy and its address guard), rlimits, a wall-clock deadline that kills the whole tree,
capped output and a seccomp filter. See docs/script-jobs.md.

    from cronsvc.sandbox import Language, Limits, Script, run_script, sandbox_available

    if sandbox_available().ok:
        result = run_script(Script(Language.PYTHON, b"print(6 * 7)"), Limits(wall_seconds=5))
"""

from .egress import EgressRules
from .errors import SandboxError, SandboxFailed, SandboxUnavailable, ScriptRejected
from .limits import MAX_SCRIPT_BYTES, Language, Limits, Network, Reason, Result, Script
from .runner import Availability, Sandbox

_default = Sandbox()


def sandbox_available(refresh: bool = False) -> Availability:
    """Whether this host can run scripts, and if not, why (checked once, then cached)."""
    return _default.available(refresh)


def run_script(script: Script, limits: Limits = Limits(), egress: EgressRules | None = None) -> Result:
    """Run `script` in the sandbox; raises SandboxUnavailable rather than run it without.
    `egress`: the address policy and caps of a script that may reach the network."""
    return _default.run(script, limits, egress)


__all__ = [
    "MAX_SCRIPT_BYTES", "Availability", "EgressRules", "Language", "Limits", "Network", "Reason", "Result",
    "Sandbox", "SandboxError", "SandboxFailed", "SandboxUnavailable", "Script", "ScriptRejected",
    "run_script", "sandbox_available",
]
