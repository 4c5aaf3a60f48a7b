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


# Solver modules a certificate still reads beyond the problem reader: each a kernel the certificate has no copy
# of yet (ot's separable grid products and Legendre c-transform; truncated's Gaussian statistics). The list
# only shrinks: a certificate that reads any other module of its package fails.
CERTIFICATE_SHARES = {"ot": {"grid", "legendre"}, "truncated": {"fisher"}}


def test_certificates_read_only_the_problem_reader_of_their_package():
    """A certificate is checked by code that does not share the solver's internals: from its own package it
    reads the problem file's rules (problems) and nothing else (but the kernels of CERTIFICATE_SHARES)."""
    for kind in SOLVERS:
        path = ROOT / "optsolve" / kind / "certificate.py"
        own = {m.split(".")[2] for m in _imports(path) if m.startswith(f"optsolve.{kind}.")}
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module == f"optsolve.{kind}":
                own |= {a.name for a in node.names}
        extra = own - {"problems"} - CERTIFICATE_SHARES.get(kind, set())
        assert not extra, f"{kind}/certificate.py reads {sorted(extra)} of its package"
        assert not any(m.startswith("optsolve.") and m.split(".")[1] in SOLVERS and m.split(".")[1] != kind
                       for m in _imports(path)), f"{kind}/certificate.py reads another solver"
    for kind, shared in CERTIFICATE_SHARES.items():  # each entry still needed: the list shrinks as copies come
        path = ROOT / "optsolve" / kind / "certificate.py"
        assert shared <= {m.split(".")[2] for m in _imports(path) if m.startswith(f"optsolve.{kind}.")}, kind


def test_certificates_read_no_name_of_their_package_or_its_methods():
    """A certificate is checked by code that does not share the solver's internals: it may read the problem
    file's rules (problems), shared constants (defaults) and tools of its own, not the package's entry module
    or its methods."""
    solvers = SOLVERS
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
