"""CPU time of processes from Linux's /proc, for the benchmarks that ask where a machine's
CPU goes under load (bench_api.py --mode cpu): utime + stime of each process (all its
threads) and of each of its threads, and context switches. Figures divided by the requests
served are the same on a busy machine as on a quiet one, give or take the slowdown that a
busy machine's shared caches cause (tens of %, not multiples)."""

import os

TICK = os.sysconf("SC_CLK_TCK")


def _stat_fields(path):
    with open(path) as f:
        text = f.read()
    name = text[text.index("(") + 1:text.rindex(")")]
    return name, text[text.rindex(")") + 2:].split()


def processes():
    """{pid: (command line, user + system CPU in clock ticks, parent pid)} of every process
    (kernel threads have an empty command line; one that ends meanwhile is left out)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as handle:
                stat = handle.read()
            with open(f"/proc/{entry}/cmdline", "rb") as handle:
                command = handle.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # ended meanwhile
            continue
        fields = stat[stat.rindex(b")") + 2:].split()  # the name may hold spaces and parentheses
        found[int(entry)] = (command, int(fields[11]) + int(fields[12]), int(fields[1]))
    return found


def cpu_seconds(pid):
    """(name, user + system CPU seconds) of a process, all threads included."""
    name, fields = _stat_fields(f"/proc/{pid}/stat")
    return name, (int(fields[11]) + int(fields[12])) / TICK


def threads(pid):
    """{thread id: (name, CPU seconds)} of a process's threads."""
    found = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            name, fields = _stat_fields(f"/proc/{pid}/task/{tid}/stat")
        except FileNotFoundError:  # ended meanwhile
            continue
        found[tid] = (name, (int(fields[11]) + int(fields[12])) / TICK)
    return found


def context_switches(pid):
    """Voluntary + involuntary context switches of all a process's threads."""
    total = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                total += sum(int(line.split()[1]) for line in f if "ctxt_switches" in line)
        except FileNotFoundError:
            continue
    return total


def _processes():
    """(pid, command name, /proc/<pid>/stat fields) of every process."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                yield (int(entry), *_stat_fields(f"/proc/{entry}/stat"))
            except (FileNotFoundError, ProcessLookupError):  # ended meanwhile
                continue


def process_group(pgid):
    """The ids of the processes in process group ``pgid`` (a server and its workers)."""
    return [pid for pid, _, fields in _processes() if int(fields[2]) == pgid]


def pids_named(name):
    """Processes whose command name is ``name`` (e.g. redis-server)."""
    return [pid for pid, command, _ in _processes() if command == name]


def machine_busy_seconds():
    """CPU seconds the whole machine spent busy (every process, not idle or waiting on I/O)."""
    with open("/proc/stat") as f:
        values = [int(v) for v in f.readline().split()[1:]]
    return (sum(values[:8]) - values[3] - values[4]) / TICK


class Snapshot:
    """CPU seconds and context switches of ``groups`` ({label: [pid, ...]}) at one moment,
    and of every thread of the processes in ``threads_of``."""

    def __init__(self, groups, threads_of=()):
        self.cpu = {label: {pid: _cpu_or_zero(pid) for pid in pids} for label, pids in groups.items()}
        self.switches = {label: sum(_switches_or_zero(pid) for pid in pids) for label, pids in groups.items()}
        self.threads = {pid: threads(pid) for pid in threads_of}
        self.machine = machine_busy_seconds()


def _cpu_or_zero(pid):
    try:
        return cpu_seconds(pid)[1]
    except FileNotFoundError:
        return 0.0


def _switches_or_zero(pid):
    try:
        return context_switches(pid)
    except FileNotFoundError:
        return 0


def per_thread_name(before, after):
    """{thread name: CPU seconds} between two snapshots, summed over the processes watched."""
    used = {}
    for pid, now in after.threads.items():
        for tid, (name, seconds) in now.items():
            used[name] = used.get(name, 0.0) + seconds - before.threads.get(pid, {}).get(tid, (name, 0.0))[1]
    return used
