"""Run every benchmark under bench/ and write bench/RESULTS.md: each script's printed
Markdown tables (or, for a script that prints plain figures, its output), with the
machine, the date and the commit, so each figure the README quotes has a reproducible
source. ``make bench`` runs it; the chaos soak (``python -m soak``) is included.

    .venv/bin/python bench/results.py                         # everything (an hour or more)
    .venv/bin/python bench/results.py --only bench_schedules --args bench_schedules="--calls 500 --rounds 1"
    .venv/bin/python bench/results.py --quick --output /tmp/RESULTS.md
    .venv/bin/python bench/results.py --only bench_api --merge   # rerun one, keep the others

Each benchmark uses its own database and Redis index (they refuse the tests' ones), as
``make bench`` always did. Figures are never pass/fail; a script that exits non-zero is
reported in the file and makes this command exit non-zero.
"""

from __future__ import annotations

import argparse
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
PG = "postgres://postgres@127.0.0.1:5432"


@dataclass
class Benchmark:
    name: str
    command: list[str]
    env: dict = field(default_factory=dict)
    quick: list[str] = field(default_factory=lambda: ["--quick"])
    migrate: bool = False  # the script expects a migrated database


def _env(db, redis_index, **extra):
    return {"DATABASE_URL": f"{PG}/{db}", "REDIS_URL": f"redis://127.0.0.1:6379/{redis_index}",
            "SECRET_KEY": "bench-only", **extra}


#: The environment each benchmark needs (its own database and Redis index), its quick
#: options, and whether it needs the database migrated first.
KNOWN = {
    "bench_scheduler": {"env": _env("cronsvc_bench", 5)},
    "bench_delivery": {"env": _env("cronsvc_bench_delivery", 6, OUTBOUND_ALLOWED_NETWORKS="127.0.0.0/8")},
    "bench_api": {"env": _env("cronsvc_bench_api", 4)},
    "bench_pings": {"env": _env("cronsvc_bench_pings", 11)},
    "bench_retention": {"env": _env("cronsvc_bench_retention", 7)},
    "bench_health": {"env": _env("cronsvc_bench_health", 5), "quick": [], "migrate": True},
    "bench_schedules": {"quick": ["--calls", "2000", "--rounds", "1"]},
}


def benchmarks():
    """Every bench/bench_*.py (with the environment it needs), then the chaos soak."""
    found = []
    for script in sorted(BENCH.glob("bench_*.py")):
        known = KNOWN.get(script.stem, {})
        found.append(Benchmark(script.stem, [sys.executable, str(script)], known.get("env", {}),
                               known.get("quick", ["--quick"]), known.get("migrate", False)))
    found.append(Benchmark("soak", [sys.executable, "-m", "soak"], {},
                           ["--seconds", "90", "--jobs", "300", "--interval", "10-30"]))
    return found


def machine():
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    ram = ""
    try:
        kib = int(next(l for l in Path("/proc/meminfo").read_text().splitlines() if l.startswith("MemTotal")).split()[1])
        ram = f", {kib / 1024 / 1024:.1f} GiB RAM"
    except (OSError, StopIteration, ValueError):
        pass
    return f"{os.cpu_count()} CPUs ({cpu}){ram}, {platform.system()} {platform.release()}, Python {platform.python_version()}"


# Files the benchmarks write their figures into: a second run right after a first is still
# a run of the committed code, though the first one's figures are not committed yet.
FIGURE_FILES = ("bench/README.md", "bench/RESULTS.md")


def commit(root=ROOT):
    def git(*args):
        return subprocess.run(["git", *args], cwd=root, capture_output=True, text=True).stdout.strip()

    head = git("rev-parse", "--short", "HEAD") or "unknown"
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                  *(f":(exclude){path}" for path in FIGURE_FILES))
    return head + (" (with uncommitted changes)" if changed else "")


def markdown_blocks(output):
    """The Markdown tables in a script's output, each with the heading or caption line just
    above it; None when there is no table (the caller then keeps the plain output)."""
    lines = output.splitlines()
    blocks, index = [], 0
    while index < len(lines):
        if lines[index].lstrip().startswith("|"):
            start = index
            while index < len(lines) and lines[index].lstrip().startswith("|"):
                index += 1
            caption = []
            back = start - 1
            while back >= 0 and not lines[back].strip():
                back -= 1
            if back >= 0 and not lines[back].lstrip().startswith("|"):
                caption = [lines[back].strip(), ""]
            blocks.append("\n".join([*caption, *(l.strip() for l in lines[start:index])]))
        else:
            index += 1
    return "\n\n".join(blocks) if blocks else None


def migrate(env):
    """Create the benchmark's database when missing and migrate it."""
    import psycopg

    url = env["DATABASE_URL"]
    server, _, name = url.rpartition("/")
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        if not conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", [name]).fetchone():
            conn.execute(f'CREATE DATABASE "{name}"')
    subprocess.run([sys.executable, "manage.py", "migrate", "--noinput", "-v0"], cwd=ROOT, env=env, check=True)


def run(benchmark, extra, quick):
    args = [*benchmark.command, *(benchmark.quick if quick else []), *extra]
    env = {**os.environ, **benchmark.env, "PYTHONUNBUFFERED": "1"}
    if benchmark.migrate:
        migrate(env)
    print(f"== {benchmark.name}: {shlex.join(args[1:])}", flush=True)
    started = time.monotonic()
    process = subprocess.Popen(args, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    output = []
    for line in process.stdout:  # echo as it goes: the long ones run for many minutes
        print(line, end="", flush=True)
        output.append(line)
    code = process.wait()
    return code, "".join(output), time.monotonic() - started, args


def section(benchmark, code, output, seconds, args):
    head = [f"## {benchmark.name}", "",
            f"`{shlex.join(['python', *args[1:]]).replace(str(ROOT) + '/', '')}` — {seconds / 60:.1f} min, "
            f"exit code {code}; {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}, commit {commit()}", ""]
    body = markdown_blocks(output)
    if body is None:
        tail = "\n".join(output.rstrip().splitlines()[-60:])
        body = f"```\n{tail}\n```"
    return "\n".join([*head, body, ""])


def merged(path, replaced, sections):
    """The file's earlier sections (in benchmark order) with those of ``replaced`` swapped
    for the new ones."""
    kept = {}
    if path.exists():
        for chunk in path.read_text().split("\n## ")[1:]:
            name = chunk.split("\n", 1)[0].strip()
            if name not in replaced:
                kept[name] = "## " + chunk.rstrip() + "\n"
    new = {text.split("\n", 1)[0][3:].strip(): text for text in sections}
    order = [b.name for b in benchmarks()]
    return [{**kept, **new}[name] for name in order if name in kept or name in new]


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--only", help="comma-separated benchmark names (bench_scheduler, soak, ...)")
    parser.add_argument("--quick", action="store_true", help="each benchmark's quick options (a smoke run)")
    parser.add_argument("--args", action="append", default=[], metavar="NAME=ARGS",
                        help="extra arguments for one benchmark, e.g. bench_schedules='--calls 500'")
    parser.add_argument("--output", default=str(BENCH / "RESULTS.md"))
    parser.add_argument("--merge", action="store_true",
                        help="keep the output file's sections of the benchmarks not run now (each section "
                             "names its own date and commit)")
    return parser.parse_args(argv)


def main(argv=None):
    options = parse_args(argv)
    extra = {}
    for item in options.args:
        name, _, text = item.partition("=")
        extra[name] = shlex.split(text)
    selected = [b for b in benchmarks() if not options.only or b.name in options.only.split(",")]
    if not selected:
        print("no benchmark selected", file=sys.stderr)
        return 2
    sections, failed = [], []
    for benchmark in selected:
        code, output, seconds, args = run(benchmark, extra.get(benchmark.name, []), options.quick)
        sections.append(section(benchmark, code, output, seconds, args))
        if code != 0:
            failed.append(benchmark.name)
    header = [
        "# Benchmark results", "",
        "Written by `make bench` (`bench/results.py`): figures one machine measured on one day, "
        "not a promise. What each benchmark measures and how: [bench/README.md](README.md).", "",
        f"- Date: {datetime.now(timezone.utc):%Y-%m-%d %H:%M UTC}",
        f"- Machine: {machine()}",
        f"- Commit: {commit()}",
        f"- Mode: {'quick (smoke run, not for quoting)' if options.quick else 'full'}"
        f"{'; merged: only ' + ', '.join(b.name for b in selected) + ' ran now, each section gives its own date and commit' if options.merge else ''}",
        f"- Failed: {', '.join(failed) if failed else 'none'}", "",
    ]
    if options.merge:
        sections = merged(Path(options.output), {b.name for b in selected}, sections)
    Path(options.output).write_text("\n".join(header + sections))
    print(f"wrote {options.output}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
