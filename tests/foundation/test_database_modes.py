"""One switch per hot path between PostgreSQL (the server mode) and SQLite (the embedded
mode): only apps/sql/modes.py reads a connection's vendor, and a function asks
``on_postgresql()`` at most once, to pick its path's implementation (apps/sql/modes.py)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MODES = Path("apps/sql/modes.py")


def mode_questions(source, filename="<source>"):
    """Each place in ``source`` that reads a connection's ``vendor``, and each function
    that calls ``on_postgresql()`` more than once, as ``file:line what``."""
    found = []
    for node in ast.walk(ast.parse(source, filename)):
        if isinstance(node, ast.Attribute) and node.attr == "vendor":
            found.append(f"{filename}:{node.lineno} vendor")
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            asks = [call for call in ast.walk(node) if isinstance(call, ast.Call)
                    and getattr(call.func, "id", getattr(call.func, "attr", None)) == "on_postgresql"]
            if len(asks) > 1:
                found.append(f"{filename}:{node.lineno} {node.name} asks on_postgresql() {len(asks)} times")
    return found


def test_only_the_modes_module_asks_which_database_it_is_on():
    modules = [path.relative_to(ROOT) for path in sorted((ROOT / "apps").rglob("*.py"))]
    found = [hit for module in modules if module != MODES and "migrations" not in module.parts  # (history)
             for hit in mode_questions((ROOT / module).read_text(), str(module))]
    assert not found, "a database vendor asked outside one dispatcher per path:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    'if connection.vendor == "postgresql": pass',
    'x = connections["default"].vendor',
    'def f(editor): return editor.connection.vendor != "sqlite"',
    "def f():\n    if on_postgresql(): a()\n    if on_postgresql(): b()",
    "def f():\n    if modes.on_postgresql(): a()\n    return modes.on_postgresql()",
])
def test_the_check_sees_each_way_of_asking(source):
    assert mode_questions(source)


def test_one_question_in_a_dispatcher_is_fine():
    assert not mode_questions("def f(rows):\n    if not on_postgresql():\n        return a(rows)\n    return b(rows)")
