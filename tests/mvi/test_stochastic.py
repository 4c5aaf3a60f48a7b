"""``--batch``: BC-SEG+ on operators given as a mean of terms, judged on the full F."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from optsolve.mvi import stochastic
from optsolve.mvi.ecppa import Setup
from optsolve.mvi.evaluator import Evaluator
from optsolve.mvi.operators import ConstraintSet, Operator

GAMES = Path(__file__).with_name("sumgames.py")
D = 8


def game(name: str) -> str:
    return f"{GAMES}:{name}"


def problem(tmp_path, **extra) -> Path:
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"z0": [0.0] * D, **extra}))
    return path


def solve(cli, path, *args):
    r = cli("mvi", path, *args)
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


WEAK = ("--operator", game("weak"), "--rho", "-0.2", "--lipschitz", "1")


def test_a_weak_mvi_sum_is_solved_and_certified_on_the_full_operator(cli, tmp_path):
    path, sol = problem(tmp_path), tmp_path / "s.json"
    r = cli("mvi", path, *WEAK, "--batch", "64", "--tol", "2e-2", "--time-limit", "60", "-o", sol)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(sol.read_text())
    assert doc["method"] == "bc-seg+" and doc["status"] == "optimal" and doc["certificate"]["holds"]
    s = doc["stats"]
    assert s["batch"] == 64 and s["terms"] == 2000 and s["term_evaluations"] > 0
    assert s["passes"] == pytest.approx(s["evaluations"] + s["term_evaluations"] / 2000)
    assert doc["settings"]["seed"] == 0 and doc["settings"]["batch"] == 64
    # the residual is the full F's: recomputed here from the module's own F
    import importlib.util

    spec = importlib.util.spec_from_file_location("sumgames_check", GAMES)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    z = np.array(doc["solution"]["z"])
    assert np.linalg.norm(mod.weak(z)) == pytest.approx(doc["solution"]["residual"], rel=1e-9)
    assert doc["solution"]["residual"] <= 2e-2
    assert cli("verify", path, sol, "--operator", game("weak"), "--tol", "2e-2").exit_code == 0


def test_the_seed_fixes_the_run(cli, tmp_path):
    path = problem(tmp_path)
    runs = [solve(cli, path, *WEAK, "--batch", "32", "--max-iter", "300", "--seed", seed)[1]
            for seed in ("5", "5", "6")]
    assert runs[0]["solution"]["z"] == runs[1]["solution"]["z"]
    assert runs[0]["solution"]["z"] != runs[2]["solution"]["z"]
    assert runs[0]["status"] == "max_iter" and runs[0]["stats"]["iterations"] == 300


def test_a_box_constrained_monotone_sum_reaches_the_deterministic_answer(cli, tmp_path):
    path = problem(tmp_path, constraint="box", radius=0.3)
    _, exact = solve(cli, path, "--operator", game("monotone"), "--tol", "1e-10")
    r, doc = solve(cli, path, "--operator", game("monotone"), "--rho", "0", "--lipschitz", "1", "--batch", "64",
                   "--tol", "1e-2", "--time-limit", "60")
    assert r.exit_code == 0 and doc["certificate"]["holds"], r.stderr
    z, z_exact = np.array(doc["solution"]["z"]), np.array(exact["solution"]["z"])
    assert np.abs(z).max() <= 0.3 + 1e-12  # a point of C: the checks evaluate P_C(h)
    assert np.linalg.norm(z - z_exact) < 0.05


def test_the_budget_counts_sampled_terms_as_fractions_of_an_evaluation(cli, tmp_path):
    path = problem(tmp_path)
    r, doc = solve(cli, path, *WEAK, "--batch", "50", "--max-evals", "4", "--tol", "1e-12")
    assert r.exit_code == 5 and doc["status"] == "max_iter"
    s = doc["stats"]
    assert 4 - 50 / 2000 <= s["passes"] < 4 + 50 / 2000


class Recording(Evaluator):
    """An evaluator that keeps every sampled point."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.points = []

    def sample(self, z, idx):
        self.points.append(z.copy())
        return super().sample(z, idx)


def test_with_exact_terms_it_is_extragradient_with_the_diminishing_second_step():
    """Every term equal to F: the bias correction vanishes, h_k = z_k - gamma F(z_k) and
    z_{k+1} = z_k - alpha_k gamma F(z_k - gamma F(z_k)); recomputed here from that recurrence."""
    M = np.array([[-0.2, 0.9], [-0.9, -0.2]])
    q = np.array([0.5, -1.0])
    F = lambda z: M @ z + q  # noqa: E731
    op = Operator("exact", 2, F, terms=10, batch=lambda z, idx: F(z))
    ev = Recording(op, ConstraintSet("none"), tol=1e-14, max_evals=10**6)
    L, gamma, batch, steps = float(np.linalg.norm(M, 2)), 0.8, 5, 40
    stats = stochastic.bc_seg_plus(ev, Setup(np.array([1.0, 1.0]), L, None, gamma=gamma, batch=batch, max_iter=steps))
    assert stats["stop"].reason == "max_iter"
    z, k0 = np.array([1.0, 1.0]), 2  # ceil(N / B)
    for k in range(steps):
        alpha = stochastic.ALPHA0 / (1 + k / k0)
        zbar = z - gamma * F(z)
        np.testing.assert_allclose(ev.points[3 * k + 2], zbar, rtol=1e-12, atol=1e-12)
        z = z - alpha * gamma * F(zbar)
    assert np.linalg.norm(F(z)) < np.linalg.norm(F(np.array([1.0, 1.0])))


@pytest.mark.parametrize("args, needle", [
    (("--operator", game("weak"), "--method", "bc-seg+"), "--batch B"),
    (("--operator", game("weak"), "--method", "ecppa", "--batch", "8"), "applies to method bc-seg+"),
    (("--operator", game("half"), "--batch", "8"), "half_batch(z, idx)"),
    (("--operator", game("empty"), "--batch", "8"), "positive integer"),
    (("--operator", game("weak"), "--batch", "5000"), "at most the operator's 2000 terms"),
    (("--operator", game("weak"), "--batch", "8", "--relax", "1.5"), "'--relax'"),
    (("--operator", game("weak"), "--batch", "8", "--rho", "-0.6", "--lipschitz", "1"), "-1/(2L)"),
])
def test_misuses_are_one_line_errors(cli, tmp_path, args, needle):
    r, _ = solve(cli, problem(tmp_path), *args)
    assert r.exit_code == 7, r.stderr
    assert needle in r.stderr and "Traceback" not in r.stderr


def test_batch_on_an_operator_that_is_no_sum(cli, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"operator": "polar"}))
    r, _ = solve(cli, path, "--batch", "4")
    assert r.exit_code == 7 and "mean of terms" in r.stderr and "'polar'" in r.stderr


def test_a_batch_function_of_the_wrong_shape_is_caught_before_the_solve(cli, tmp_path):
    r, _ = solve(cli, problem(tmp_path), "--operator", game("flat"), "--batch", "8")
    assert r.exit_code == 7 and "batch function returned shape (3,)" in r.stderr


def test_forced_outside_the_range_runs_and_says_so(cli, tmp_path):
    r, doc = solve(cli, problem(tmp_path), "--operator", game("weak"), "--batch", "64", "--rho", "-0.6",
                   "--lipschitz", "1", "--force", "--max-iter", "50")
    assert doc["status"] == "max_iter" and "outside bc-seg+'s guarantee" in doc["message"]
    assert max(doc["stats"]["gamma"]) <= 0.9  # the step never passes 1/L, even with an empty window
