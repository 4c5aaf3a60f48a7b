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


def test_no_module_over_600_lines():
    for path in sorted((ROOT / "optsolve").rglob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= 600, f"{path.relative_to(ROOT)} has {lines} lines"


def test_certificates_read_no_name_of_their_package_or_its_methods():
    """A certificate is checked by code that does not share the solver's internals: it may read the problem
    file's rules (problems), shared constants (defaults) and tools of its own, not the package's entry module
    or its methods."""
    solvers = ("ot", "qp", "cover", "kmeans", "truncated", "mvi")
    for kind in solvers:
        path = ROOT / "optsolve" / kind / "certificate.py"
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == f"optsolve.{kind}":
                names = {a.name for a in node.names}
                assert names <= {"defaults"}, f"{kind}/certificate.py imports {sorted(names)} from the package"
            if isinstance(node, ast.ImportFrom) and node.module:
                assert node.module not in (f"optsolve.{kind}.methods", f"optsolve.{kind}.solve"), node.module
                assert not any(node.module.startswith(f"optsolve.{other}") for other in solvers if other != kind)
