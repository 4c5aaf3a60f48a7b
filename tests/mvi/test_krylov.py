"""ecppa's GMRES resolvents (an affine F on R^d) and the renumbering of large sparse operators: the
solutions against a direct solve, the inner stop against an independent residual, the option's
errors, and the numbering of the answer."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.sparse.linalg import spsolve

import optsolve.mvi as mvi
import optsolve.mvi.methods as mvi_methods
from optsolve.mvi import krylov
from optsolve.mvi import problems as P
from optsolve.mvi.ecppa import Setup
from optsolve.mvi.evaluator import Evaluator, Stop


def prepared(data):
    problem = mvi.SCHEMA.validate(data, source="test")
    return problem, P.prepare(problem)


def sparse_affine(d, rho, seed=0):
    return P.gen_affine(np.random.default_rng(seed), d=d, L=1.0, rho=rho, sparse="yes")


@pytest.mark.parametrize("d, rho", [(200, -0.5), (2000, -0.3), (1000, -0.7), (1000, 0.2)])
def test_gmres_resolvents_reach_the_direct_solution_with_fewer_evaluations(d, rho):
    data = sparse_affine(d, rho)
    problem, mp = prepared(data)
    reference = spsolve(sp.csc_matrix(data["M"]), -data["q"])  # F(z*) = 0 on R^d
    tol = 1e-8 * float(np.linalg.norm(data["q"]))
    runs = {}
    for inner in ("gmres", "fixed-point"):
        ev, run, stop = mvi_methods.optimize(mp, "ecppa", rho=mp.rho, inner=inner, tol=tol, max_evals=400_000)
        assert stop.reason == "converged", (inner, stop.reason, stop.detail)
        assert run["inner_solver"] == inner
        assert np.linalg.norm(ev.best_z - reference) <= 1e-6 * np.linalg.norm(reference)
        runs[inner] = ev.evals
    assert runs["gmres"] < runs["fixed-point"], runs


def test_unknown_rho_takes_the_adaptive_choice():
    data = sparse_affine(3000, -0.3)
    del data["rho"]
    problem, mp = prepared(data)
    assert mp.rho is None  # too large for the dense computation of rho
    res = mvi.solve_problem(problem, tol=1e-8)
    assert res.status.value == "optimal", res.message
    assert res.stats["inner_solver"] == "gmres" and res.certificate.holds


def test_without_L_gmres_takes_the_scale_of_a_few_power_steps():
    data = sparse_affine(3000, -0.3, seed=8)
    del data["L"], data["rho"]
    problem, _ = prepared(data)
    res = mvi.solve_problem(problem, tol=1e-8)
    assert res.status.value == "optimal" and res.certificate.holds
    assert res.stats["L"] is None and 0.5 < res.stats["L_estimate"] <= 1.0 + 1e-9  # ||M|| = 1: a lower estimate
    fixed = mvi.solve_problem(problem, tol=1e-8, inner_solver="fixed-point")  # its step needs the exact ||M||
    assert fixed.status.value == "optimal" and fixed.stats["L"] == pytest.approx(1.0, rel=1e-4)
    assert fixed.stats["L_estimate"] is None


def test_the_inner_stop_bounds_the_true_residual():
    """GMRES stops where ||b - (I + gamma M) w|| <= c ||w - z||, the bound that implies the error-correction
    test; the residual recomputed here in double precision keeps it up to the single-precision basis."""
    data = sparse_affine(4000, -0.5, seed=2)
    _, mp = prepared(data)
    M, q = data["M"], data["q"]
    ev = Evaluator(mp.op, mp.C, tol=0.0, max_evals=10_000)
    outer = krylov.KrylovOuter(ev, Setup(mp.z0, mp.L, mp.rho))
    z = np.random.default_rng(1).standard_normal(mp.d)
    Fz = M @ z + q
    w, products = outer._gmres(z, z, -outer.gamma * Fz)
    assert 0 < products <= krylov.KRYLOV_DIM and ev.evals == products
    r = z - outer.gamma * q - (w + outer.gamma * (M @ w))
    assert np.linalg.norm(r) <= 1.01 * outer.c * np.linalg.norm(w - z)
    u = M @ w + q
    t = (u @ (z - w) + mp.rho * (u @ u)) / (u @ u)
    assert t >= outer.sigma * (outer.gamma + mp.rho)  # the error-correction test, computed independently


def test_a_restart_continues_from_the_last_point():
    """With a basis of two directions GMRES restarts; the outer steps still reach the solution."""
    data = sparse_affine(600, -0.5, seed=4)
    _, mp = prepared(data)
    ev = Evaluator(mp.op, mp.C, tol=1e-8, max_evals=200_000)
    s = Setup(mp.z0, mp.L, mp.rho)
    z, Fz = s.z0.copy(), ev(s.z0.copy())
    outer = krylov.KrylovOuter(ev, s, dim=2)
    with pytest.raises(Stop) as stop:
        for _ in range(100_000):
            z = outer.step(z, Fz)
            Fz = ev(z)
    assert stop.value.reason == "converged"
    assert outer.stats["restarts"] > 0


@pytest.mark.parametrize("fmt", ["csc", "coo"])
def test_any_sparse_format_is_solved_by_rows(fmt):
    data = sparse_affine(1500, -0.3, seed=6)
    problem, mp = prepared(dict(data, M=data["M"].asformat(fmt)))
    assert mp.op.matrix.format == "csr"
    res = mvi.solve_problem(problem, tol=1e-8)
    csr = mvi.solve_problem(prepared(data)[0], tol=1e-8)
    assert res.status.value == "optimal" and res.certificate.holds
    assert res.stats["evaluations"] == csr.stats["evaluations"]


def test_a_tolerance_below_rounding_ends_saying_so():
    problem, _ = prepared(P.gen_affine(np.random.default_rng(0), d=100, L=1.0, rho=-0.5))
    res = mvi.solve_problem(problem, tol=1e-300, max_evals=100_000)
    assert res.status.value == "numerical_error" and "rounding level of F" in res.message, res.message
    assert res.solution["residual"] < 1e-12 and res.stats["evaluations"] < 100_000


def test_products_count_and_stop_at_the_budget():
    _, mp = prepared(sparse_affine(100, -0.3))
    ev = Evaluator(mp.op, mp.C, tol=0.0, max_evals=3)
    v = np.ones(mp.d)
    assert np.allclose(ev.product(v), mp.op.matrix @ v) and ev.evals == 1
    ev(v)
    ev.product(v)
    with pytest.raises(Stop) as stop:
        ev.product(v)
    assert stop.value.reason == "budget" and ev.evals == 3 and ev.f_time > 0


@pytest.mark.parametrize("data, why", [
    (lambda: dict(sparse_affine(100, -0.3), constraint="box", radius=5.0), "the constraint"),
    (lambda: P.gen_polar(None), "no matrix"),
])
def test_gmres_refused_where_it_does_not_apply(cli, tmp_path, data, why):
    raw = {k: (v.toarray() if sp.issparse(v) else v) for k, v in data().items()}
    path = tmp_path / "p.json"
    path.write_text(json.dumps({k: (v.tolist() if isinstance(v, np.ndarray) else v) for k, v in raw.items()}))
    r = cli("mvi", path, "--inner-solver", "gmres")
    assert r.exit_code != 0 and "--inner-solver gmres" in r.stderr and why in r.stderr, r.stderr
    assert "Traceback" not in r.stderr
    r = cli("mvi", path, "--inner-solver", "gmres", "--method", "eg+")
    assert r.exit_code != 0 and "does not apply to method 'eg+'" in r.stderr


def test_cli_reports_the_inner_solver_and_the_share_in_F(cli, tmp_path):
    path = tmp_path / "p.npz"
    assert cli("gen", "mvi", "--family", "affine", "--d", "1000", "--rho", "-0.4", "-o", path).exit_code == 0
    for inner in ("auto", "fixed-point"):
        r = cli("mvi", path, "--inner-solver", inner)
        assert r.exit_code == 0, r.stderr
        doc = json.loads(r.stdout)
        assert doc["stats"]["inner_solver"] == ("gmres" if inner == "auto" else "fixed-point")
        assert doc["stats"]["gmres_restarts"] == (0 if inner == "auto" else None)
        assert 0 < doc["stats"]["F_time_share"] <= 1 and doc["settings"]["inner_solver"] == inner
        assert doc["certificate"]["holds"]


def test_renumbered_problem_is_the_same_problem(monkeypatch):
    monkeypatch.setattr(P, "REORDER_FROM", 1000)
    monkeypatch.setattr(P, "REORDER_SPREAD", 16)
    data = dict(sparse_affine(4000, -0.3, seed=5), constraint="box", radius=10.0)  # z* inside: the weak MVI holds
    problem, mp = prepared(data)
    new, order = P.reordered(mp)
    assert order is not None and sorted(order) == list(range(mp.d))
    z = np.random.default_rng(0).uniform(-3, 3, mp.d)
    assert np.allclose(new.op.F(z[order]), mp.op.F(z)[order])
    assert np.array_equal(new.C.project(z[order]), mp.C.project(z)[order])
    assert np.array_equal(new.z_star, mp.z_star[order]) and np.array_equal(new.z0, mp.z0[order])
    res = mvi.solve_problem(problem, tol=1e-6)  # the answer in the file's numbering
    assert res.status.value == "optimal" and res.certificate.holds and res.stats["renumbered"]
    kept, none = P.reordered(P.prepare(mvi.SCHEMA.validate(sparse_affine(500, -0.3), source="small")))
    assert none is None


def test_a_banded_operator_is_not_renumbered(monkeypatch):
    monkeypatch.setattr(P, "REORDER_FROM", 1000)
    d = 4000
    M = sp.diags([np.ones(d - 1), np.full(d, 0.5), -np.ones(d - 1)], [-1, 0, 1], format="csr")
    problem, mp = prepared({"operator": "affine", "M": M, "q": np.ones(d)})
    assert P.reordered(mp)[1] is None
