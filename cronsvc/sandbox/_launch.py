"""Started by the runner as `python -I -S _launch.py SPEC bwrap ...`: a fresh one-thread
process that enters the run's cgroups, sets the rlimits, drops to the run's host user when
started as root, and execs bwrap. Standard library only,
and nothing of cronsvc: it runs with -I -S, before any of the worker's code could.

Doing this here rather than in a preexec_fn keeps the worker's threads out of the forked
child (preexec_fn is unsafe in a threaded process)."""

import json
import os
import resource
import sys


def main(argv):
    spec = json.loads(argv[1])
    for procs in spec.get("cgroup_procs", ()):  # before bwrap exists, so all it starts is in
        with open(procs, "w") as cgroup:
            cgroup.write(str(os.getpid()))
    for name, (soft, hard) in spec["rlimits"].items():
        resource.setrlimit(getattr(resource, name), (soft, hard))
    if spec.get("uid") is not None:
        os.setgroups([])
        os.setgid(spec["gid"])
        os.setuid(spec["uid"])
    os.execv(argv[2], argv[2:])


if __name__ == "__main__":
    main(sys.argv)
