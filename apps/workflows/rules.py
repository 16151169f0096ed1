"""When does a downstream job run? Plain functions on statuses, no database."""

from cronsvc.statuses import FAILED, FINAL, RAN, SUCCEEDED

# A skipped upstream did not run, so it meets no condition: its downstream is skipped too.
MEETS = {
    "success": frozenset({SUCCEEDED}),
    "failure": FAILED,
    "any": RAN,
}

RUN, SKIP, WAIT = "run", "skip", "wait"


def decide(mode, links, statuses, taking_part):
    """RUN, SKIP or WAIT for a downstream job in one workflow run.

    ``links``: [(upstream job id, on)]; ``statuses``: {upstream job id: status of its
    execution in this run}; ``taking_part``: the upstream jobs that can have an execution in
    this run (reachable from the run's first job). Mode ``all`` runs when every upstream
    met its condition and is skipped as soon as one cannot; mode ``any`` runs on the first
    upstream that met its condition and is skipped when every upstream taking part
    finished without meeting it."""
    met = [upstream for upstream, on in links if statuses.get(upstream) in MEETS[on]]
    missed = [upstream for upstream, on in links
              if statuses.get(upstream) in FINAL and statuses.get(upstream) not in MEETS[on]]
    if mode == "all":
        if missed:
            return SKIP
        return RUN if len(met) == len(links) else WAIT
    if met:
        return RUN
    pending = [upstream for upstream, _ in links
               if upstream in taking_part and statuses.get(upstream) not in FINAL]
    return WAIT if pending else SKIP


def reachable(start, edges):
    """Every node reachable from ``start`` (included) along ``edges`` {node: [next]}."""
    seen, stack = {start}, [start]
    while stack:
        for following in edges.get(stack.pop(), ()):
            if following not in seen:
                seen.add(following)
                stack.append(following)
    return seen

