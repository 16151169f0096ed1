"""The documentation stays true to the code: every environment variable the settings read
is in docs/configuration.md, the README stays a short page whose links resolve, and every
source file or module the docs name exists."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
READ = re.compile(r'env_(?:str|int|float|bool|list)\(\s*"([A-Z0-9_]+)"')


def variables_read():
    names = set()
    for folder in ("config", "apps", "cronsvc"):
        for path in (ROOT / folder).rglob("*.py"):
            names.update(READ.findall(path.read_text()))
    return names


def test_every_environment_variable_is_documented():
    documented = set(re.findall(r"^\| `([A-Z0-9_]+)`", (ROOT / "docs/configuration.md").read_text(), re.M))
    assert len(variables_read()) > 50
    assert sorted(variables_read() - documented) == []


def test_the_readmes_links_to_docs_resolve():
    readme = (ROOT / "README.md").read_text()
    targets = set(re.findall(r"\]\(((?:docs|bench)/[^)#]+)", readme))
    assert "docs/configuration.md" in targets
    assert sorted(t for t in targets if not (ROOT / t).exists()) == []


DOCS = sorted([*ROOT.glob("docs/**/*.md"), ROOT / "README.md"])
SOURCE_PATH = re.compile(r"(?<![\w/.])((?:apps|cronsvc|config|bench|soak|tests)/[\w/.-]*?\.py)\b")
MODULE = re.compile(r"(?<![\w/.])((?:apps|cronsvc)(?:\.[a-z_][a-z0-9_]*)+)")
#: Dotted names in the docs that are not modules: logger names.
NOT_MODULES = {"cronsvc.access"}


def _defines(module_file, name):
    return re.search(rf"^(?:\s*(?:async )?def |\s*class |){name}\b", module_file.read_text(), re.M) is not None


def module_named(dotted):
    """Whether ``dotted`` is a module or package of the tree, or a name defined in one."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        base = ROOT.joinpath(*parts[:end])
        module = base.with_suffix(".py") if not base.is_dir() else base / "__init__.py"
        if module.exists():
            rest = parts[end:]
            return not rest or (len(rest) == 1 and _defines(module, rest[0]))
    return False


def named_in_docs(pattern):
    for doc in DOCS:
        for number, line in enumerate(doc.read_text().splitlines(), 1):
            for name in pattern.findall(line):
                yield f"{doc.relative_to(ROOT)}:{number} {name}", name


def test_every_source_path_named_in_the_docs_exists():
    named = list(named_in_docs(SOURCE_PATH))
    assert len(named) > 20
    assert [where for where, path in named if not (ROOT / path).exists()] == []


def test_every_module_named_in_the_docs_exists():
    named = list(named_in_docs(MODULE))
    assert len(named) > 20
    assert [where for where, dotted in named if dotted not in NOT_MODULES and not module_named(dotted)] == []


def test_the_docs_checks_see_a_moved_module():
    assert not module_named("apps.executions.delivery")
    assert not module_named("apps.executions.scheduler.tick")
    assert module_named("apps.executions.worker.batch")
    assert module_named("apps.executions.history.search.newest_window")
    assert SOURCE_PATH.findall("see `apps/executions/delivery.py` and apps/sql/rows.py.") == [
        "apps/executions/delivery.py", "apps/sql/rows.py"]
