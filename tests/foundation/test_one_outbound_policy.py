"""One outbound policy (docs/security.md, "One outbound policy"): the OUTBOUND_* settings are
read, and an AddressPolicy is built, in cronsvc/delivery/guard.py's ``outbound_policy`` only.

Job validation, the workers, the channels, the script egress proxy and single sign-on once
each built their own policy and disagreed (an empty OUTBOUND_ALLOWED_PORTS refused every
port in the workers and none at save; SSO ignored OUTBOUND_ALLOWED_NETWORKS). This reads
the source tree for a second copy; tests/security/test_one_outbound_policy.py checks the
surfaces' verdicts agree and that each takes its policy from the one factory."""

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
GUARD = Path("cronsvc/delivery/guard.py")
SETTINGS = Path("config/settings.py")
SETTINGS_NAMES = {"OUTBOUND_ALLOW_PRIVATE", "OUTBOUND_ALLOWED_NETWORKS", "OUTBOUND_ALLOWED_PORTS"}
BUILDERS = {"AddressPolicy", "parse_ports", "parse_networks", "_outbound_policy"}


def sources():
    for top in ("apps", "cronsvc", "config"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if "migrations" not in path.parts:
                yield path.relative_to(ROOT), ast.parse(path.read_text(), filename=str(path))


def second_copies(tree):
    """(line, what) of each place in ``tree`` that reads an OUTBOUND_* setting or builds a policy."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in SETTINGS_NAMES:
            found.append((node.lineno, f"reads {node.attr}"))
        elif isinstance(node, ast.Constant) and node.value in SETTINGS_NAMES:
            found.append((node.lineno, f"names {node.value}"))  # getattr(settings, "OUTBOUND_...")
        elif isinstance(node, ast.Call):
            callee = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", None)
            if callee in BUILDERS:
                found.append((node.lineno, f"calls {callee}"))
    return found


def test_the_policy_is_built_from_settings_in_one_place_only():
    offenders = [f"{path}:{line}: {what}" for path, tree in sources() if path != GUARD
                 for line, what in second_copies(tree)
                 if not (path == SETTINGS and what.startswith("names"))]  # where the settings are defined
    assert offenders == [], "a second outbound policy: use cronsvc.delivery.guard.outbound_policy(settings)\n" + \
        "\n".join(offenders)


def test_the_check_sees_a_second_copy():
    planted = ast.parse("from django.conf import settings\n"
                        "from cronsvc.delivery.guard import AddressPolicy, parse_ports\n"
                        "def policy():\n"
                        "    ports = getattr(settings, 'OUTBOUND_ALLOWED_PORTS', '')\n"
                        "    return AddressPolicy(allow_private=settings.OUTBOUND_ALLOW_PRIVATE,\n"
                        "                         allowed_ports=parse_ports(ports) if ports else None)\n")
    assert [what for _, what in sorted(second_copies(planted))] == [
        "names OUTBOUND_ALLOWED_PORTS", "calls AddressPolicy", "reads OUTBOUND_ALLOW_PRIVATE", "calls parse_ports"]


def test_the_factory_is_where_the_settings_are_read():
    (guard,) = [tree for path, tree in sources() if path == GUARD]
    factory = next(node for node in guard.body if isinstance(node, ast.FunctionDef) and node.name == "outbound_policy")
    assert {f"reads {name}" for name in SETTINGS_NAMES} <= {what for _, what in second_copies(factory)}
