"""A shields.io-style flat badge: "cron | <state>", drawn without any customer text."""

COLOURS = {"up": "#4c1", "failing": "#e05d44", "paused": "#9f9f9f"}
LABEL = "cron"
CHAR_WIDTH = 7  # Verdana 11px averages about 7 px per lower-case letter
PADDING = 10

TEMPLATE = """<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="20" role="img" aria-label="{label}: {text}">
<title>{label}: {text}</title>
<linearGradient id="s" x2="0" y2="100%"><stop offset="0" stop-color="#bbb" stop-opacity=".1"/><stop offset="1" stop-opacity=".1"/></linearGradient>
<clipPath id="r"><rect width="{width}" height="20" rx="3" fill="#fff"/></clipPath>
<g clip-path="url(#r)"><rect width="{left}" height="20" fill="#555"/><rect x="{left}" width="{right}" height="20" fill="{colour}"/><rect width="{width}" height="20" fill="url(#s)"/></g>
<g fill="#fff" text-anchor="middle" font-family="Verdana,Geneva,DejaVu Sans,sans-serif" font-size="11">
<text x="{label_x}" y="14">{label}</text><text x="{text_x}" y="14">{text}</text></g>
</svg>
"""


def badge_svg(state):
    """The SVG text for ``state`` (a key of COLOURS; fixed words, nothing to escape)."""
    left = len(LABEL) * CHAR_WIDTH + PADDING
    right = len(state) * CHAR_WIDTH + PADDING
    return TEMPLATE.format(width=left + right, left=left, right=right, colour=COLOURS[state], label=LABEL,
                           text=state, label_x=left / 2, text_x=left + right / 2)
