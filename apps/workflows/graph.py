"""A workflow run drawn as a server-rendered SVG: one column per depth, one box per job,
coloured by its execution's status. Plain layout arithmetic, no library."""

from dataclasses import dataclass
from html import escape

BOX_W, BOX_H, GAP_X, GAP_Y, PAD = 180, 46, 60, 24, 12
COLOURS = {
    "succeeded": "#2e7d32", "failed": "#c62828", "timed_out": "#c62828", "dead": "#6a1b9a",
    "skipped": "#757575", "queued": "#1565c0", "running": "#ef6c00",
}


@dataclass
class Node:
    key: object
    label: str
    status: str
    href: str
    column: int = 0
    row: int = 0

    @property
    def x(self):
        return PAD + self.column * (BOX_W + GAP_X)

    @property
    def y(self):
        return PAD + self.row * (BOX_H + GAP_Y)


def layout(nodes, edges):
    """Place ``nodes`` (in run order) in columns by their longest path from a root."""
    by_key = {node.key: node for node in nodes}
    incoming = {node.key: [] for node in nodes}
    for upstream, downstream, _ in edges:
        if upstream in by_key and downstream in by_key:
            incoming[downstream].append(upstream)
    depth = {}

    def depth_of(key, seen=()):
        if key not in depth:
            parents = [p for p in incoming[key] if p not in seen]  # cycles are refused; stay safe anyway
            depth[key] = 1 + max((depth_of(p, (*seen, key)) for p in parents), default=-1)
        return depth[key]

    rows = {}
    for node in nodes:
        node.column = depth_of(node.key)
        node.row = rows.get(node.column, 0)
        rows[node.column] = node.row + 1
    return nodes


def render_svg(nodes, edges):
    """The SVG text (safe to embed: every label is escaped)."""
    layout(nodes, edges)
    by_key = {node.key: node for node in nodes}
    width = PAD * 2 + (max((n.column for n in nodes), default=0) + 1) * (BOX_W + GAP_X) - GAP_X
    height = PAD * 2 + (max((n.row for n in nodes), default=0) + 1) * (BOX_H + GAP_Y) - GAP_Y
    parts = [f'<svg xmlns="http://www.w3.org/2000/svg" class="workflow-graph" width="{width}" height="{height}" '
             f'viewBox="0 0 {width} {height}" role="img" aria-label="Workflow run graph">',
             '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" markerWidth="6" markerHeight="6" '
             'orient="auto"><path d="M0,0 L10,5 L0,10 z" fill="#555"/></marker></defs>']
    for upstream, downstream, on in edges:
        a, b = by_key.get(upstream), by_key.get(downstream)
        if a is None or b is None:
            continue
        x1, y1, x2, y2 = a.x + BOX_W, a.y + BOX_H / 2, b.x, b.y + BOX_H / 2
        parts.append(f'<line class="edge" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="#555" '
                     f'marker-end="url(#arrow)"><title>on {escape(on)}</title></line>')
    for node in nodes:
        colour = COLOURS.get(node.status, "#555")
        parts.append(
            f'<a href="{escape(node.href)}"><g class="node status-{escape(node.status)}" '
            f'data-status="{escape(node.status)}">'
            f'<rect x="{node.x}" y="{node.y}" width="{BOX_W}" height="{BOX_H}" rx="6" fill="#fff" '
            f'stroke="{colour}" stroke-width="2"/>'
            f'<text x="{node.x + 10}" y="{node.y + 19}" font-size="13" fill="#111">{escape(node.label[:24])}</text>'
            f'<text x="{node.x + 10}" y="{node.y + 36}" font-size="12" fill="{colour}">{escape(node.status)}</text>'
            '</g></a>')
    parts.append("</svg>")
    return "".join(parts)
