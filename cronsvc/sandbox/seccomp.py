"""The seccomp filter every sandboxed script runs under, compiled to the BPF program bwrap's
``--seccomp FD`` loads just before it starts the script.

A deny list over an allow-everything default: the namespaces, rlimits and read-only mounts
are the walls; this filter removes the kernel interfaces a script has no business with and
that have carried container escapes (keyring, BPF, perf, io_uring, userfaultfd, module and
kexec loading, new namespaces, mount APIs, tracing other processes). Denied calls fail with
EPERM (ENOSYS for clone3, so libc falls back to clone, whose flags this filter can see).
Syscalls of another ABI (i386, x32) kill the process: libseccomp's "bad arch" default.
"""

from __future__ import annotations

import errno
import functools
import os

DENIED = (
    # tracing or reading other processes
    "ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
    # namespaces and mounts
    "unshare", "setns", "mount", "umount2", "pivot_root", "chroot", "mount_setattr",
    "move_mount", "open_tree", "fsopen", "fsconfig", "fsmount", "fspick",
    # kernel facilities with a record of escapes
    "bpf", "perf_event_open", "userfaultfd", "keyctl", "add_key", "request_key",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "open_by_handle_at", "name_to_handle_at", "lookup_dcookie", "fanotify_init",
    # the machine itself
    "kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "syslog", "vhangup",
    "settimeofday", "clock_settime", "clock_adjtime", "adjtimex", "iopl", "ioperm",
    "personality", "uselib", "nfsservctl",
)

# clone flags that would make a new namespace (CLONE_NEWTIME, NEWNS, NEWCGROUP, NEWUTS,
# NEWIPC, NEWUSER, NEWPID, NEWNET).
_NAMESPACE_FLAGS = (0x80, 0x20000, 0x02000000, 0x04000000, 0x08000000, 0x10000000,
                    0x20000000, 0x40000000)
_TIOCSTI = 0x5412  # push characters into a terminal's input


class SeccompUnavailable(RuntimeError):
    pass


@functools.lru_cache(maxsize=1)
def filter_program() -> bytes:
    """The compiled BPF program (built once per process: it never changes at run time)."""
    try:
        import pyseccomp as seccomp
    except (ImportError, OSError, RuntimeError) as exc:  # Runtime/OSError: no libseccomp.so.2
        raise SeccompUnavailable(f"libseccomp is not usable: {exc}") from exc
    rules = seccomp.SyscallFilter(seccomp.ALLOW)
    eperm = seccomp.ERRNO(errno.EPERM)
    for name in DENIED:
        rules.add_rule(eperm, name)
    rules.add_rule(seccomp.ERRNO(errno.ENOSYS), "clone3")
    for flag in _NAMESPACE_FLAGS:
        rules.add_rule(eperm, "clone", seccomp.Arg(0, seccomp.MASKED_EQ, flag, flag))
    rules.add_rule(eperm, "ioctl", seccomp.Arg(1, seccomp.MASKED_EQ, 0xFFFFFFFF, _TIOCSTI))
    return _export(rules)


def _export(rules) -> bytes:
    fd = os.memfd_create("cronsvc-seccomp", os.MFD_CLOEXEC)
    with os.fdopen(fd, "w+b") as program:
        rules.export_bpf(program)
        program.seek(0)
        return program.read()
