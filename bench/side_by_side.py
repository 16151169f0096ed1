"""Two checkouts of cronsvc, one benchmark, interleaved: A B A B ... in one run, so both see
the same machine (a shared machine's load moves more between hours than most changes move
a figure). Each round runs the benchmark once in each checkout, with the same arguments and
environment, and reads each figure a ``--figure`` pattern matches in its output; the table
gives each figure's median per checkout and B's ratio to A.

    .venv/bin/python bench/side_by_side.py --a /tmp/old --b . --rounds 3 \\
        --figure 'throughput n=10,000 .* = ([\\d,]+)/s' -- bench/bench_scheduler.py --quick --skip-beat

A pattern's first group is the figure (commas allowed); a pattern matching several lines
gives one figure per line, numbered in order; ``name::pattern`` names it in the table. The benchmark runs with each checkout's own
tree as its working directory and with the Python that runs this script. ``--a-env`` and
``--b-env`` (KEY=VALUE, repeatable) set one side's environment: give each its own database
when the checkouts' migrations differ.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_once(tree, command, timeout, env):
    started = time.monotonic()
    result = subprocess.run([sys.executable, *command], cwd=tree, capture_output=True, text=True, timeout=timeout,
                            env={**os.environ, **env})
    output = result.stdout + result.stderr
    if result.returncode != 0:
        raise SystemExit(f"{tree}: {' '.join(command)} exited {result.returncode}; its output ends:\n{output[-3000:]}")
    return output, time.monotonic() - started


def figures(output, patterns):
    found = {}
    for figure in patterns:
        name, _, pattern = figure.rpartition("::")
        for number, match in enumerate(re.finditer(pattern, output, re.MULTILINE), 1):
            found[f"{name or pattern} #{number}"] = float(match.group(1).replace(",", ""))
    return found


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--a", required=True, help="checkout A (the baseline)")
    parser.add_argument("--b", required=True, help="checkout B (the change)")
    parser.add_argument("--a-env", action="append", default=[], help="KEY=VALUE for A's runs")
    parser.add_argument("--b-env", action="append", default=[], help="KEY=VALUE for B's runs")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--figure", action="append", required=True, help="[name::]regular expression; group 1 is the figure")
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--logs", default="side-by-side-logs", help="each run's output goes here")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- then the benchmark and its arguments")
    args = parser.parse_args()
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    trees = {"A": Path(args.a).resolve(), "B": Path(args.b).resolve()}
    envs = {"A": dict(pair.split("=", 1) for pair in args.a_env), "B": dict(pair.split("=", 1) for pair in args.b_env)}
    logs = Path(args.logs)
    logs.mkdir(exist_ok=True)
    seen = {"A": {}, "B": {}}
    for round_number in range(1, args.rounds + 1):
        for name, tree in trees.items():
            output, seconds = run_once(tree, command, args.timeout, envs[name])
            (logs / f"{name}-{round_number}.log").write_text(output)
            for key, value in figures(output, args.figure).items():
                seen[name].setdefault(key, []).append(value)
            print(f"round {round_number} {name} ({tree}): {seconds:.0f} s", flush=True)
    print(f"\n{' '.join(command)}; {args.rounds} rounds interleaved; A = {trees['A']}, B = {trees['B']}\n")
    print("| figure | A median | B median | B / A | A runs | B runs |")
    print("|---|---:|---:|---:|---|---|")
    for key in seen["A"]:
        a, b = seen["A"][key], seen["B"].get(key, [])
        ratio = statistics.median(b) / statistics.median(a) if a and b and statistics.median(a) else float("nan")
        print(f"| `{key}` | {statistics.median(a):,.1f} | {statistics.median(b):,.1f} | {ratio:.2f} | "
              f"{', '.join(f'{v:,.0f}' for v in a)} | {', '.join(f'{v:,.0f}' for v in b)} |")


if __name__ == "__main__":
    main()
