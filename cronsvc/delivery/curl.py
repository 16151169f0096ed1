"""A request as a curl command a person can paste in a terminal, its secrets masked.

Credential headers are masked by the one rule (cronsvc.delivery.masking, from the registry
of secrets): the command shows ``••••`` where a secret was, never its value.
"""

import shlex

from .masking import MASK, masked

__all__ = ["MASK", "curl_command"]


def curl_command(method, url, headers=None, body=""):
    """``curl -X METHOD 'url' -H 'Name: value' … --data-raw 'body'``, one option a line."""
    parts = ["curl", "-X", method.upper(), shlex.quote(url)]
    lines = [" ".join(parts)]
    for name, value in masked(headers).items():
        lines.append("-H " + shlex.quote(f"{name}: {value}"))
    if body:
        lines.append("--data-raw " + shlex.quote(body))
    return " \\\n  ".join(lines)
