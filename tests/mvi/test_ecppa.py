"""ecppa's properties, checked numerically: known solutions, Fejer monotonicity, adaptive inner
steps, and the reductions to AdaptiveEG+ (one inner step) and relaxed PPA (many)."""

from __future__ import annotations

import numpy as np
import pytest

import optsolve.mvi as mvi
import optsolve.mvi.methods as mvi_methods
from optsolve.mvi import problems as P
from optsolve.mvi.ecppa import Setup, ecppa
from optsolve.mvi.evaluator import Evaluator
from optsolve.mvi.extragradient import adaptive_eg_plus


def prepared(data):
    problem = mvi.SCHEMA.validate(data, source="test")
    return problem, P.prepare(problem)


CASES = {
    "polar": lambda: P.gen_polar(None, a=1.0),
    "lower-bound": lambda: P.gen_lower_bound(None),
    "quadratic -0.9": lambda: P.gen_quadratic_game(None, L=1.0, rho=-0.9),
    "quadratic -0.5": lambda: P.gen_quadratic_game(None, L=1.0, rho=-0.5),
    "quadratic 0": lambda: P.gen_quadratic_game(None, L=1.0, rho=0.0),
    "affine d=50": lambda: P.gen_affine(np.random.default_rng(3), d=50, L=1.0, rho=-0.5),
    "global-forsaken": lambda: P.gen_global_forsaken(None),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_known_solutions_recovered(name):
    data = CASES[name]()
    problem, mp = prepared(data)
    res = mvi.solve_problem(problem, max_evals=200_000)
    assert res.status.value == "optimal", res.message
    assert res.certificate.holds
    assert res.solution["residual"] <= 1e-6
    assert res.solution["distance_to_z_star"] < 1e-4
    if name.startswith("affine"):
        assert np.allclose(mp.z_star, np.linalg.solve(data["M"], -data["q"]))


def outer_iterates(mp, monkeypatch, **setup):
    """z_1, z_2, ...: ecppa evaluates F at z_{k+1} right before its outer step's ``next_step``."""
    import optsolve.mvi.ecppa as mod
    from optsolve.mvi import krylov

    points, outer = [], []
    F = mp.op.F
    monkeypatch.setattr(mp.op, "F", lambda z: (points.append(np.array(z, copy=True)), F(z))[1])
    for cls in (mod.Outer, krylov.KrylovOuter):
        step = cls.next_step
        monkeypatch.setattr(cls, "next_step", lambda self, step=step: (outer.append(points[-1]), step(self))[1])
    ev = Evaluator(mp.op, mp.C, tol=1e-9, max_evals=5_000)
    ecppa(ev, Setup(mp.z0, mp.L, mp.rho, **setup))
    return [mp.z0] + outer


@pytest.mark.parametrize("name, inner", [("polar", "auto"), ("lower-bound", "fixed-point"),
                                         ("quadratic -0.9", "fixed-point"), ("quadratic -0.5", "fixed-point"),
                                         ("quadratic -0.9", "gmres"), ("lower-bound", "gmres"),
                                         ("affine d=50", "fixed-point"), ("affine d=50", "gmres"),
                                         ("global-forsaken", "auto")])
@pytest.mark.parametrize("lam", [0.5, 1.0, 1.9])
def test_fejer_monotone(name, inner, lam, monkeypatch):
    _, mp = prepared(CASES[name]())
    outer = outer_iterates(mp, monkeypatch, lam=lam, inner=inner)
    assert len(outer) >= (2 if inner == "gmres" and mp.d <= 30 else 4)  # exact resolvents there: one step or two
    dist = np.array([np.linalg.norm(z - mp.z_star) for z in outer])
    assert np.all(np.diff(dist) <= 1e-12 * max(1.0, dist[0]) + 1e-15), np.diff(dist).max()


def test_inner_steps_grow_as_rho_approaches_minus_one_over_L():
    means = []
    for rho in (-0.1, -0.5, -0.9, -0.99):
        _, mp = prepared(P.gen_quadratic_game(None, L=1.0, rho=rho))
        gamma = 0.5 * (1.0 - rho)  # the middle of the window (-rho, 1/L)
        ev, run, stop = mvi_methods.optimize(mp, "ecppa", rho=rho, gamma=gamma, max_evals=20_000, tol=1e-8,
                                     inner="fixed-point")
        means.append(run["inner"] / run["outer"])
    assert all(b > a for a, b in zip(means, means[1:])), means


def _evaluated_points(mp, method, **setup):
    points = []
    op = mp.op
    F = op.F

    def spy(z):
        points.append(np.array(z, copy=True))
        return F(z)

    op.F = spy
    try:
        ev = Evaluator(op, mp.C, tol=1e-300, max_evals=60)
        s = Setup(mp.z0, mp.L, mp.rho, **setup)
        (ecppa if method == "ecppa" else adaptive_eg_plus)(ev, s)
    finally:
        op.F = F
    return np.array(points)


@pytest.mark.parametrize("name", ["polar", "quadratic 0", "global-forsaken"])
def test_one_inner_step_is_adaptive_eg_plus(name):
    _, mp = prepared(CASES[name]())
    gamma = 0.9 / mp.L
    ours = _evaluated_points(mp, "ecppa", gamma=gamma, inner_steps=1)
    theirs = _evaluated_points(mp, "adaptive-eg+", gamma=gamma)
    assert ours.shape == theirs.shape
    assert np.abs(ours - theirs).max() <= 1e-12


def test_many_inner_steps_approach_relaxed_ppa():
    _, mp = prepared(P.gen_quadratic_game(None, L=1.0, rho=-0.5))
    gamma = 0.75

    def after(method, m):
        ev, run, stop = mvi_methods.optimize(mp, method, rho=mp.rho, gamma=gamma, inner_steps=m, max_iter=5, tol=1e-300)
        return ev

    def final(method, m):
        pts = []
        F = mp.op.F
        mp.op.F = lambda z: (pts.append(np.array(z, copy=True)), F(z))[1]
        try:
            after(method, m)
        finally:
            mp.op.F = F
        return pts[-1]  # the last evaluated point: z_5

    gaps = [np.linalg.norm(final("ecppa", m) - final("rppa", m)) for m in (5, 20, 400)]
    assert gaps[2] < 1e-6
    assert gaps[2] < gaps[1] < gaps[0]


def test_local_steps_beat_the_global_lipschitz_step_on_the_polar_game():
    problem, mp = prepared(P.gen_polar(None, a=1.0))
    local = mvi.solve_problem(problem)
    fixed = mvi.solve_problem(problem, gamma=max(0.9 / mp.L, 0.5 * (1 / mp.L - mp.rho)))
    assert local.status.value == fixed.status.value == "optimal"
    assert local.stats["evaluations"] < fixed.stats["evaluations"] / 10
