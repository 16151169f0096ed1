#!/usr/bin/env python3
"""Prints podman's default seccomp profile with sethostname and setdomainname allowed: the one
call the script sandbox's bubblewrap (--unshare-uts --hostname sandbox) needs that the
default refuses to a container without CAP_SYS_ADMIN. Everything else stays refused.

    deploy/podman/seccomp-for-bwrap.py > /etc/cronsvc/seccomp.json
    podman run --security-opt seccomp=/etc/cronsvc/seccomp.json --security-opt unmask=/proc/* ...

docs/deploy.md (script jobs in a container)."""

import json
import sys

DEFAULT = "/usr/share/containers/seccomp.json"  # Debian's containers-common (podman's default)
HOSTNAME_CALLS = {"sethostname", "setdomainname"}


def allow_hostname(profile):
    for rule in profile["syscalls"]:
        if rule["action"] != "SCMP_ACT_ALLOW":  # a refusal naming them would win over the allow
            rule["names"] = [name for name in rule["names"] if name not in HOSTNAME_CALLS]
    profile["syscalls"] = [rule for rule in profile["syscalls"] if rule["names"]]
    profile["syscalls"].append({"names": sorted(HOSTNAME_CALLS), "action": "SCMP_ACT_ALLOW", "args": [],
                                "includes": {}, "excludes": {}})
    return profile


if __name__ == "__main__":
    with open(sys.argv[1] if len(sys.argv) > 1 else DEFAULT) as source:
        json.dump(allow_hostname(json.load(source)), sys.stdout, indent=1)
