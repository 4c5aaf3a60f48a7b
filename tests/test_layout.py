"""The package's layering: Click only in the command layer."""

from __future__ import annotations

import ast

from conftest import ROOT


def _imports(path) -> set:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
    return found


def test_core_never_imports_click_or_the_command_layer():
    for path in sorted((ROOT / "optsolve" / "core").glob("*.py")):
        bad = {m for m in _imports(path) if m == "click" or m.startswith("click.") or m == "optsolve.cli"
               or m.startswith("optsolve.commands")}
        assert not bad, f"{path.name} imports {sorted(bad)}"
