"""The documentation stays true to the code: every environment variable the settings read
is in docs/configuration.md, and the README stays a short page whose links resolve."""

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
