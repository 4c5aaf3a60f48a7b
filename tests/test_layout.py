"""The package's layering: Click only in the command layer, a core that knows no solver, no import cycle."""

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


SOLVERS = ("ot", "qp", "cover", "kmeans", "truncated", "mvi")


def _module_names() -> dict:
    """optsolve's module names -> their files."""
    out = {}
    for path in sorted((ROOT / "optsolve").rglob("*.py")):
        parts = path.relative_to(ROOT).with_suffix("").parts
        out[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return out


def _import_graph() -> dict:
    """module -> the optsolve modules it imports anywhere in its file (inside functions and TYPE_CHECKING
    blocks too: an import deferred to a function still ties the two modules together)."""
    modules = _module_names()
    graph = {}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        edges = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                edges |= {a.name for a in node.names if a.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[:len(package.split(".")) - node.level + 1]
                    base = ".".join(up + ([base] if base else []))
                for a in node.names:
                    edges.add(f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base)
        graph[name] = {m for m in edges if m in modules and m != name}
    return graph


def test_core_imports_no_solver_package_and_names_no_command():
    """core finds the solver packages through the registry (optsolve.catalogue's table), never by name."""
    for path in sorted((ROOT / "optsolve" / "core").glob("*.py")):
        tree = ast.parse(path.read_text())
        bad = {m for m in _imports(path) if any(m == f"optsolve.{k}" or m.startswith(f"optsolve.{k}.") for k in SOLVERS)}
        assert not bad, f"core/{path.name} imports {sorted(bad)}"
        named = {node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and node.value in SOLVERS}
        assert not named, f"core/{path.name} names the commands {sorted(named)}"


def test_no_import_cycle():
    graph = _import_graph()
    index, low, stack, on, cycles = {}, {}, [], set(), []

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                cycles.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    assert not cycles, f"modules that import each other (directly or around a loop): {cycles}"


def test_the_cycle_test_sees_a_cycle_inside_a_function(tmp_path, monkeypatch):
    """The graph counts an import made inside a function (the way a cycle hides)."""
    import conftest

    pkg = tmp_path / "optsolve"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from optsolve.b import g\n")
    (pkg / "b.py").write_text("def g():\n    from optsolve import a\n    return a\n")
    monkeypatch.setattr(conftest, "ROOT", tmp_path)
    monkeypatch.setitem(globals(), "ROOT", tmp_path)
    graph = _import_graph()
    assert graph["optsolve.a"] == {"optsolve.b"} and graph["optsolve.b"] == {"optsolve.a"}


def test_no_module_over_600_lines():
    for path in sorted((ROOT / "optsolve").rglob("*.py")):
        lines = len(path.read_text().splitlines())
        assert lines <= 600, f"{path.relative_to(ROOT)} has {lines} lines"


def _certificate_files(kind: str) -> list:
    """The certificate's modules: certificate.py, or the certificate/ package's."""
    single = ROOT / "optsolve" / kind / "certificate.py"
    return [single] if single.exists() else sorted((ROOT / "optsolve" / kind / "certificate").glob("*.py"))


def test_certificates_read_only_the_problem_reader_of_their_package():
    """A certificate is checked by code that does not share the solver's internals: from its own package it
    reads the problem file's rules (problems) and nothing else: its kernels are its own (certificate/*.py)."""
    for kind in SOLVERS:
        for path in _certificate_files(kind):
            own = {m.split(".")[2] for m in _imports(path) if m.startswith(f"optsolve.{kind}.")}
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.ImportFrom) and node.module == f"optsolve.{kind}":
                    own |= {a.name for a in node.names}
            extra = own - {"problems", "certificate"}
            assert not extra, f"{path.relative_to(ROOT)} reads {sorted(extra)} of its package"
            assert not any(m.startswith("optsolve.") and m.split(".")[1] in SOLVERS and m.split(".")[1] != kind
                           for m in _imports(path)), f"{path.relative_to(ROOT)} reads another solver"


def test_no_function_over_80_lines():
    """A function longer than that does several things: each gets its own, named."""
    for path in sorted((ROOT / "optsolve").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                assert lines <= 80, f"{path.relative_to(ROOT)}: {node.name} has {lines} lines"
