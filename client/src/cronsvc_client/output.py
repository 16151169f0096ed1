"""`--output table` (for people) and `--output json` (for scripts: the API's objects as sent)."""

import json

import click

FORMATS = ("table", "json")


def output_option(command):
    return click.option("--output", "-o", "output", type=click.Choice(FORMATS), default="table", show_default=True,
                        help="table for people, json (the API's objects) for scripts.")(command)


def _text(value):
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (dict, list)):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return str(value)


def to_json(value):
    return json.dumps(value, indent=2, ensure_ascii=False, default=str)


def table(rows, columns):
    """``columns``: (header, function of the raw object) pairs; widths fit the contents."""
    cells = [[header for header, _ in columns]]
    cells += [[_text(read(row)) for _, read in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    return "\n".join(_row(line, widths) for line in cells)


def emit_list(items, output, columns):
    raws = [item.raw for item in items]
    click.echo(to_json(raws) if output == "json" else table(raws, columns))


def emit_one(item, output, fields=None):
    """One object: every field (or ``fields``) on its own line."""
    if output == "json":
        click.echo(to_json(item.raw))
        return
    keys = fields or list(item.raw)
    width = max(len(key) for key in keys)
    for key in keys:
        click.echo(f"{key.ljust(width)}  {_text(item.raw.get(key))}")


def stream_header(output, columns, widths):
    """A stream's table header (tail); JSON Lines have none."""
    if output == "table":
        click.echo(_row([header for header, _ in columns], widths))


def emit_line(item, output, columns, widths):
    """One row of a stream: a JSON Lines object, or a table row in fixed widths (the rows
    to come are not known yet)."""
    if output == "json":
        click.echo(json.dumps(item.raw, ensure_ascii=False, default=str))
    else:
        click.echo(_row([_text(read(item.raw)) for _, read in columns], widths))


def _row(cells, widths):
    return "  ".join(cell.ljust(width) for cell, width in zip(cells, widths)).rstrip()
