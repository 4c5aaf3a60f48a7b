"""The README's commands and examples stay true."""

from __future__ import annotations

import re

from conftest import ROOT

README = (ROOT / "README.md").read_text()


def test_two_setup_commands():
    assert "pip install . && optsolve ot data/ot/example.npz" in README
    assert "pip install '.[test]' && pytest" in README


def test_ci_runs_the_readme_test_command():
    assert "pip install '.[test]' && pytest" in (ROOT / ".ci" / "run").read_text()


def test_python_example_runs(capsys):
    block = re.search(r"## Python API\s+```python\n(.*?)```", README, re.S).group(1)
    exec(compile(block, "README.md", "exec"), {})
    assert capsys.readouterr().out.startswith("optimal ")


def test_cvxpy_example_runs():
    import pytest

    pytest.importorskip("cvxpy")
    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    block = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "from_cvxpy" in b][0]
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["res"].status.value == "optimal"
    assert abs(scope["x"].value.sum() - 1.0) < 1e-5


def test_exit_code_table_matches_the_code():
    from optsolve.core.result import EXIT_CODES, USAGE_EXIT_CODE

    table = dict(re.findall(r"^\| (\d+) \| (.+?) \|$", README.split("## Exit codes", 1)[1].split("\n## ", 1)[0], re.M))
    for status, code in EXIT_CODES.items():
        if status.value == "internal_error":
            assert "internal error" in table[str(code)]
        else:
            assert status.value in table[str(code)] or status.value.replace("_", " ") in table[str(code)], status
    assert "usage" in table[str(USAGE_EXIT_CODE)]


def test_mvi_example_runs(capsys):
    import numpy as np

    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    block = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "optsolve.mvi" in b][0]
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    assert scope["res"].status.value == "optimal" and scope["res2"].status.value == "optimal"
    assert np.allclose(scope["res2"].solution["z"], np.linalg.solve(scope["M"], -np.ones(2)), atol=1e-5)


def test_kmeans_estimator_example_runs(capsys):
    import numpy as np

    section = README.split("## Python API", 1)[1].split("\n## ", 1)[0]
    block = [b for b in re.findall(r"```python\n(.*?)```", section, re.S) if "PredictedLabelsKMeans" in b][0]
    scope = {}
    exec(compile(block, "README.md", "exec"), scope)
    km = scope["km"]
    found = sorted(map(tuple, np.round(km.cluster_centers_)))
    assert found == [(0.0, 0.0), (0.0, 5.0), (5.0, 0.0)] and km.result_.certificate.holds
    assert km.predict([[4.0, 1.0]]).tolist() == [int(np.argmin(((km.cluster_centers_ - [4, 1]) ** 2).sum(1)))]


def test_the_readme_stays_under_40_kb():
    assert len(README.encode()) < 40_000  # the measured tables live in docs/benchmarks.md
