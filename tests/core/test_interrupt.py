"""Ctrl-C during a solve: the last iterate is written with status interrupted, exit code 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from optsolve.core.files import save_problem


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_writes_last_iterate(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "p.npz"
    save_problem(str(path), {"a": rng.dirichlet(np.ones(150)), "b": rng.dirichlet(np.ones(150)),
                             "x": rng.random((150, 2)), "y": rng.random((150, 2)), "cost": "sqeuclidean"})
    # a shell starts background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN:
    # give the child the default disposition, as a terminal's foreground process has
    proc = subprocess.Popen([sys.executable, "-m", "optsolve", "ot", str(path), "--method", "sinkhorn",
                             "--reg", "1e-5", "--tol", "1e-300", "--max-iter", "100000000", "-v"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    seen = ""
    while time.monotonic() < deadline:  # wait until the solver is iterating
        line = proc.stderr.readline()
        seen += line
        if "iter" in line:
            break
    assert "iter" in seen, seen
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["status"] == "interrupted"
    assert doc["solution"]["f"] and doc["stats"]["iterations"] > 0
    assert doc["certificate"]["checks"][0]["name"] == "marginal_l1" and doc["certificate"]["checks"][0]["holds"]
    assert "Traceback" not in err


class InterruptAt:
    """A progress object whose ``at``-th update raises KeyboardInterrupt (Ctrl-C inside the loop)."""

    def __init__(self, at: int):
        self.at, self.calls = at, 0

    def update(self, iteration, **metrics):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt

    def close(self):
        pass


def _truncated_problem():
    from optsolve.truncated.problems import FAMILIES, SCHEMA

    data = FAMILIES["gaussian"].generate(np.random.default_rng(0), d=2, n=3000)
    return SCHEMA.validate(data, source="test")


@pytest.mark.parametrize("method, at", [("newton", 2), ("psgd", 3), ("dgtz", 3)])
def test_truncated_interrupted_returns_the_estimate_so_far(method, at):
    import optsolve.truncated

    progress = InterruptAt(at)
    res = optsolve.truncated.solve_problem(_truncated_problem(), method=method, progress=progress)
    assert progress.calls == at
    assert res.status.value == "interrupted" and res.exit_code == 130
    cov = np.array(res.solution["covariance"])
    assert np.all(np.isfinite(res.solution["mean"])) and np.all(np.linalg.eigvalsh(cov) > 0)
    assert res.certificate is not None and res.solution["alpha_hat"] > 0


def _interrupt_reached(monkeypatch, at: int) -> dict:
    """optsolve.cover.greedy.reached raises KeyboardInterrupt once, at its ``at``-th call."""
    import optsolve.cover.greedy as greedy

    original, seen = greedy.reached, {"calls": 0}

    def reached(value, target):
        seen["calls"] += 1
        if seen["calls"] == at:
            raise KeyboardInterrupt
        return original(value, target)

    monkeypatch.setattr(greedy, "reached", reached)
    return seen


def _cover_problem():
    from optsolve.cover.problems import FAMILIES, SCHEMA

    data = FAMILIES["les_miserables"].generate(np.random.default_rng(0), balance=0.5, tau_frac=0.9)
    return SCHEMA.validate(data, source="test")


def test_cover_unfair_greedy_interrupted_keeps_the_set_so_far(monkeypatch):
    import optsolve.cover

    problem = _cover_problem()
    full = optsolve.cover.solve_problem(problem, method="unfair-greedy")
    assert full.status.value == "optimal" and len(full.solution["selected"]) > 3
    _interrupt_reached(monkeypatch, 4)  # once before the first pick, then after each: three picks made
    res = optsolve.cover.solve_problem(problem, method="unfair-greedy")
    assert res.status.value == "interrupted" and "Interrupted" in res.message
    assert res.solution["selected"] == full.solution["selected"][:3]  # the greedy order, cut short
    assert res.certificate is not None and res.objective == 3


@pytest.mark.parametrize("method", ["greedy", "threshold"])
def test_cover_convert_fair_interrupted_reports_its_search(monkeypatch, method):
    import optsolve.cover

    seen = _interrupt_reached(monkeypatch, 3)
    res = optsolve.cover.solve_problem(_cover_problem(), method=method)
    assert seen["calls"] >= 3
    assert res.status.value == "interrupted" and res.exit_code == 130
    assert res.message.startswith("Interrupted after") and res.stats["iterations"] >= 1 and res.stats["evaluations"] > 0
    assert res.solution is None  # no fair cover was found before the interrupt


def test_kmeans_refine_interrupted_keeps_the_estimate(monkeypatch):
    import optsolve.kmeans
    from optsolve.kmeans import lloyd

    rng = np.random.default_rng(0)
    X = np.concatenate([rng.normal(c, 0.3, (200, 2)) for c in ((0, 0), (4, 0), (0, 4))])
    labels = np.repeat(np.arange(3), 200)
    labels[rng.choice(600, 60, replace=False)] = rng.integers(0, 3, 60)  # some predicted labels wrong
    estimate = optsolve.kmeans.solve(X, labels, method="labels", refine=False)

    def interrupted(self, *args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(lloyd._Lloyd, "move", interrupted)  # within the first Lloyd step
    res = optsolve.kmeans.solve(X, labels, method="labels", lloyd_steps=50)
    assert res.status.value == "interrupted" and "refinement" in res.message
    assert np.allclose(res.solution["centres"], estimate.solution["centres"])
    assert res.objective == pytest.approx(estimate.objective) and res.certificate is not None
