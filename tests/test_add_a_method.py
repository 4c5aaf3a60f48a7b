"""docs/architecture.md's steps for adding a method, taken for every package: a function of the job that
returns the package's output, one entry in its METHODS table (nothing else edited), then the command line and
`optsolve verify` on its answer."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsolve.core.result import Status
from optsolve.core.solve import MethodOutput, entry


def _ot(job):
    """The product plan a b' (feasible, not optimal) with zero potentials."""
    from optsolve.ot.methods import PlanAnswer, plan_output

    ot = job.data
    rows, cols = np.nonzero(np.outer(ot.a, ot.b))
    out = PlanAnswer(np.zeros(ot.n), np.zeros(ot.m), "max_iter", "the product plan",
                     coo=(rows, cols, ot.a[rows] * ot.b[cols]), iterations=0, evaluations=0)
    return plan_output(job, "trivial", out)


def _qp(job):
    """x = 0 and y = 0, not claimed optimal."""
    from optsolve.qp.methods import answer

    qp = job.data
    return answer(qp, "max_iter", x=np.zeros(qp.n), y=np.zeros(qp.m), z=np.clip(np.zeros(qp.m), qp.l, qp.u),
                  iterations=0, evaluations=0, message="the origin")


def _cover(job):
    """Every element: a cover wherever the threshold can be met, fair or not."""
    from optsolve.cover.methods import set_solution

    out = MethodOutput(Status.MAX_ITER, None, "every element", iterations=0, evaluations=0)
    set_solution(out, job.data, range(job.data.n))
    return out


def _kmeans(job):
    """The predicted clusters' centroids (the finish assigns every point to its nearest)."""
    kp = job.data
    X = np.asarray(kp.X, dtype=float)
    centres = [X[kp.labels == c].mean(axis=0) for c in range(kp.k) if np.any(kp.labels == c)]
    return MethodOutput(Status.OPTIMAL, {"centres": np.asarray(centres)}, iterations=0)


def _truncated(job):
    """The samples' own moments (the naive estimate), in the package's typed output."""
    from optsolve.truncated.methods import TruncatedOutput

    tp = job.data
    theta = tp.family.from_moments(tp.mean_statistics(None))
    solution = {k: np.asarray(v).tolist() for k, v in tp.to_original(theta).items()}
    return TruncatedOutput(Status.MAX_ITER, solution, "the samples' moments", iterations=0,
                           evaluations=job.context["counter"].calls, theta=theta)


def _mvi(job):
    """The starting point, evaluated once."""
    from optsolve.mvi.operators import natural_residual

    mp = job.data
    z = np.asarray(mp.z0, dtype=float)
    residual = natural_residual(mp.C, z, mp.op.F(z))
    return MethodOutput(Status.MAX_ITER, {"z": z.tolist(), "residual": residual, "u_norm": None},
                        "the starting point", iterations=0, evaluations=1)


CASES = {
    "ot": (_ot, ("--family", "clouds", "--n", "12", "--m", "9")),
    "qp": (_qp, ("--family", "chain", "--n", "30")),
    "cover": (_cover, ("--family", "karate")),
    "kmeans": (_kmeans, ("--family", "iris")),
    "truncated": (_truncated, ("--family", "gaussian", "--d", "2", "--n", "300")),
    "mvi": (_mvi, ("--family", "polar")),
}


@pytest.mark.parametrize("kind", list(CASES))
def test_a_method_added_by_its_entry_alone_runs_through_the_cli_and_verify(cli, tmp_path, monkeypatch, kind):
    import importlib

    pkg = importlib.import_module(f"optsolve.{kind}")
    run, gen = CASES[kind]
    monkeypatch.setitem(pkg.METHODS, "trivial", entry(run, "a trivial answer, for the test"))
    problem, doc = tmp_path / "p.npz", tmp_path / "s.json"
    assert cli("gen", kind, *gen, "--seed", "3", "-o", problem).exit_code == 0
    help_text = cli(kind, "--help").stdout
    assert "trivial" in help_text  # offered by --method
    r = cli(kind, problem, "--method", "trivial", "-o", doc)
    assert r.exit_code in (0, 5), r.stderr  # optimal, or a best iterate written
    answer = json.loads(doc.read_text())
    assert answer["method"] == "trivial" and answer["solution"] is not None and answer["certificate"] is not None
    v = cli("verify", problem, doc)
    assert v.exit_code in (0, 6), v.stderr  # verify judges it, by the package's certificate alone
    assert json.loads(v.stdout)["holds"] == answer["certificate"]["holds"]  # and finds what the solve found


@pytest.mark.parametrize("kind", list(CASES))
def test_the_method_row_of_docs_commands_lists_every_entry_and_describes_each(kind):
    """docs/commands.md's `--method` row of each command names the aliases and METHODS, in table order, and
    says what each one does."""
    import importlib
    import re

    from conftest import ROOT

    text = (ROOT / "docs" / "commands.md").read_text()
    section = text.split(f"## `optsolve {kind}`", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| `--method "))
    names = row.split("`")[1].removeprefix("--method ").split("\\|")
    solver = importlib.import_module(f"optsolve.{kind}").SOLVER
    assert names == list(solver.method_names)
    description = row.split("|", 2)[2]
    for name in names:
        assert re.search(rf"`{re.escape(name)}`", description), f"{kind}: the row does not describe `{name}`"
