"""Hand-written SQL stays behind one boundary (docs/architecture.md, apps/sql): the apps
write their statements in their own queries.py, and only apps/sql and those modules open
cursors, run SQL strings (on a cursor or through apps.sql.rows' fetch_all/fetch_one) or
use the ORM's raw-SQL escape hatches."""

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: Calls that open a cursor or pass SQL past the ORM.
SQL_CALLS = {"cursor", "binding_cursor", "prepared_cursor", "Cursor", "ClientCursor", "ServerCursor",
             "raw", "RawSQL", "extra"}
#: Calls whose first argument is SQL text: a cursor's, and apps.sql.rows' helpers.
SQL_TEXT_CALLS = {"execute", "executemany", "fetch_all", "fetch_one"}
SQL_STATEMENT = re.compile(r"\s*(SELECT|INSERT|UPDATE|DELETE|WITH|LOCK|TRUNCATE|VACUUM|ANALYZE)\b", re.IGNORECASE)


def _called_name(call):
    func = call.func
    return func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", None)


def _leading_text(node):
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return node.values[0].value
    if isinstance(node, ast.BinOp):  # "SELECT ..." + more
        return _leading_text(node.left)
    return ""


def _assigned_values(tree):
    """Each name's assigned values anywhere in the module, so ``sql = f"SELECT ..."`` then
    ``fetch_all(sql, ...)`` is seen like the string written in the call."""
    values = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign):
            targets = node.targets
        elif isinstance(node, (ast.AnnAssign, ast.AugAssign)) and node.value is not None:
            targets = [node.target]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name):
                values.setdefault(target.id, []).append(node.value)
    return values


def _is_sql(node, assigned):
    candidates = assigned.get(node.id, []) if isinstance(node, ast.Name) else [node]
    return any(SQL_STATEMENT.match(_leading_text(candidate)) for candidate in candidates)


def sql_outside_the_boundary(source, filename="<source>"):
    """Each call in ``source`` that opens a cursor, reaches raw SQL or executes a SQL
    string, as ``file:line name``."""
    found = []
    tree = ast.parse(source, filename)
    assigned = _assigned_values(tree)
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call):
            continue
        name = _called_name(node)
        if name in SQL_CALLS:
            found.append(f"{filename}:{node.lineno} {name}")
        elif name in SQL_TEXT_CALLS and node.args and _is_sql(node.args[0], assigned):
            found.append(f"{filename}:{node.lineno} {name}")
    return found


def _app_modules():
    for path in sorted((ROOT / "apps").rglob("*.py")):
        relative = path.relative_to(ROOT)
        if relative.parts[1] == "sql" or path.name == "queries.py" or "migrations" in relative.parts:
            continue
        yield relative


def test_the_apps_write_sql_only_in_their_queries_modules():
    found = [hit for relative in _app_modules()
             for hit in sql_outside_the_boundary((ROOT / relative).read_text(), str(relative))]
    assert not found, "hand-written SQL outside apps/sql and the apps' queries.py:\n" + "\n".join(found)


@pytest.mark.parametrize("source", [
    "connection.cursor()",
    "with connections['default'].cursor() as c: pass",
    "binding_cursor(connection)",
    "psycopg.Cursor(conn)",
    "psycopg.ClientCursor(conn)",
    "ServerCursor(conn, 'name')",
    "Job.objects.raw('SELECT 1')",
    "RawSQL('now()', [])",
    "Job.objects.extra(where=['1=1'])",
    "c.execute('SELECT 1')",
    "c.execute(f'  delete FROM {table} WHERE id = %s', [1])",
    "c.executemany('INSERT INTO t VALUES (%s)', rows)",
    "c.execute('WITH x AS (SELECT 1) SELECT * FROM x')",
    "c.execute('LOCK TABLE t')",
    "c.execute('VACUUM ANALYZE t')",
    "rows.prepared_cursor()",
    "rows.fetch_all('SELECT * FROM jobs_job WHERE id = %s', [1], Job)",
    "fetch_all(f'SELECT {rows.select_list(Job, \"j\")} FROM jobs_job j', [], Job)",
    "rows.fetch_one('SELECT 1', [])",
    "sql = f'SELECT {columns} FROM t'\nrows.fetch_all(sql, [], Job)",
    "sql = ('SELECT 1 '\n       'FROM t')\nfetch_one(sql, [])",
    "statement = 'UPDATE t SET x = 1 ' + where\nc.execute(statement)",
])
def test_the_check_sees_each_way_of_writing_sql(source):
    assert sql_outside_the_boundary(source)


@pytest.mark.parametrize("source", [
    "c.execute(queries.RECORD_PING, params)",
    "Job.objects.filter(id=1).update(state='x')",
    "executor.execute('selection of jobs')",
    "rows.fetch_all(queries.JOB_WITH_LINKS, params, Job, JobDependency)",
    "sql = queries.links_sql(len(ids))\nrows.fetch_all(sql, ids, JobDependency)",
    "sql = 'selection'\nexecutor.execute(sql)",
])
def test_the_check_passes_code_without_sql(source):
    assert not sql_outside_the_boundary(source)
