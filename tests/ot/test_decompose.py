"""Large clouds by domain decomposition (optsolve.ot.decompose), exercised at small sizes by lowering
the size above which it runs: the plan is feasible, its certified gap bounds the true one (POT's
emd), and the target is claimed only where it is met."""

from __future__ import annotations

import numpy as np
import ot as pot
import pytest

import optsolve.ot
from optsolve.ot import decompose
from optsolve.ot.problems import cost_matrix


@pytest.fixture
def small_blocks(monkeypatch):
    monkeypatch.setattr(decompose, "DIRECT_MAX", 500)
    monkeypatch.setattr(decompose, "BLOCK", 400)


def _clouds(kind, n, m, d, rng):
    if kind == "uniform":
        return rng.random((n, d)), rng.random((m, d))
    centres = rng.random((5, d))
    x = centres[rng.integers(0, 5, n)] + 0.05 * rng.standard_normal((n, d))
    y = centres[rng.integers(0, 5, m)][:, ::-1] + 0.05 * rng.standard_normal((m, d))
    return x, y


def _plan(res, n, m):
    P = res.arrays["plan"]
    P = P() if callable(P) else P
    return np.asarray(P.toarray() if hasattr(P, "toarray") else P).reshape(n, m)


@pytest.mark.parametrize("kind, d", [("uniform", 2), ("mixture", 2), ("uniform", 1), ("mixture", 3)])
def test_decomposed_plans_are_feasible_and_their_gap_is_certified(small_blocks, kind, d):
    rng = np.random.default_rng(31 + d)
    n, m = 2400, 2100
    x, y = _clouds(kind, n, m, d, rng)
    a, b = rng.dirichlet(np.ones(n) * 5), rng.dirichlet(np.ones(m) * 5)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean")
    stats = res.stats["exact"]["decomposition"]
    assert stats["sweeps"] >= 1 and stats["blocks"] >= 4
    P = _plan(res, n, m)
    assert np.abs(P.sum(1) - a).sum() + np.abs(P.sum(0) - b).sum() < 1e-9 and P.min() >= 0
    C = cost_matrix(x, y, "sqeuclidean")
    opt = pot.emd2(a, b, C, numItermax=10 ** 8)
    cert = res.certificate
    assert cert.holds, cert
    assert cert["gap_upper_bound"].value >= res.objective - opt - 1e-12  # never below the true gap
    assert cert["dual_lower_bound"].value <= opt + 1e-12
    if res.status.value == "optimal":
        assert cert["gap_within_target_gap"].holds
        assert res.objective - opt <= 1e-3 * max(opt, 1e-3 * C.max()) + 1e-12
    else:
        assert res.status.value == "max_iter" and "sweeps ran" in res.message


@pytest.mark.parametrize("polish_max", [0, 10 ** 6])
def test_a_strict_target_is_claimed_only_where_met(small_blocks, monkeypatch, polish_max):
    monkeypatch.setattr(decompose, "POLISH_MAX", polish_max)  # 0: the sweeps alone
    rng = np.random.default_rng(5)
    x, y = _clouds("uniform", 1500, 1500, 2, rng)
    w = np.full(1500, 1 / 1500)
    res = optsolve.ot.solve(w, w, x=x, y=y, cost="sqeuclidean", target_gap=1e-9)
    assert res.method == "exact" and len(res.stats["exact"]["decomposition"]["gaps"]) == decompose.SWEEPS
    assert res.certificate.holds
    if polish_max == 0:  # the joined potentials do not bound this close
        assert res.status.value == "max_iter" and "sweeps ran" in res.message
        assert res.certificate["gap_within_target_gap"].holds is None
    else:  # the finish runs to the target, or to its round limit
        assert "finish" in res.stats["exact"]
        if res.status.value == "optimal":
            assert res.certificate["gap_within_target_gap"].holds
            opt = pot.emd2(w, w, cost_matrix(x, y, "sqeuclidean"))
            assert res.objective - opt <= 1e-9 * opt + 1e-15


def test_the_lp_optimum_is_never_decomposed(small_blocks):
    rng = np.random.default_rng(6)
    x, y = _clouds("mixture", 900, 800, 2, rng)
    a, b = np.full(900, 1 / 900), np.full(800, 1 / 800)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method="exact")
    assert "decomposition" not in res.stats["exact"] and res.status.value == "optimal"
    assert res.objective == pytest.approx(pot.emd2(a, b, cost_matrix(x, y, "sqeuclidean")), rel=1e-9)


def test_partitions_cut_in_different_places():
    rng = np.random.default_rng(7)
    for d in (1, 2, 3):
        first, second = decompose.partitions(rng.random((3000, d)), 300)
        assert first.max() + 1 >= 8 and second.max() + 1 >= 8
        pairs = set(zip(first.tolist(), second.tolist()))
        assert len(pairs) > max(first.max(), second.max()) + 1  # blocks of one are split by the other


@pytest.mark.parametrize("d", [1, 2, 3])
def test_join_undoes_a_quadratic_per_block(d):
    rng = np.random.default_rng(8 + d)
    points = rng.random((3000, d)) * 50.0 + 7.0
    label = decompose.partitions(points, 300)[0]
    anchor = rng.standard_normal(3000) * 1e-3  # the potentials the blocks are matched to
    bend = np.zeros(3000)
    for k in range(int(label.max()) + 1):  # each block off by its own quadratic
        X = label == k
        c = rng.standard_normal(1 + d + d * d)
        P = points[X]
        bend[X] = c[0] + P @ c[1:1 + d] + ((P[:, :, None] * P[:, None, :]).reshape(X.sum(), -1) @ c[1 + d:])
    u = anchor - bend
    assert np.allclose(u + decompose._join(points, u, decompose.groups(label), anchor), anchor, atol=1e-8 * np.abs(bend).max())
    noisy = u + rng.standard_normal(3000) * 1e-2  # what is not quadratic on a block stays
    fixed = noisy + decompose._join(points, noisy, decompose.groups(label), anchor)
    assert not np.allclose(fixed, anchor, atol=1e-3)
    assert np.abs(fixed - anchor).mean() < np.abs(noisy - anchor).mean()


def test_blocks_that_fail_keep_their_part_of_the_plan(small_blocks, monkeypatch):
    from dataclasses import replace

    solve = decompose.solve_exact

    def failing_blocks(ot, *args, **kw):
        res = solve(ot, *args, **kw)
        return replace(res, status="numerical_error") if kw.get("pairs") is not None and not args else res

    monkeypatch.setattr(decompose, "solve_exact", failing_blocks)
    rng = np.random.default_rng(9)
    x, y = _clouds("mixture", 1500, 1400, 2, rng)
    a, b = rng.dirichlet(np.ones(1500) * 5), rng.dirichlet(np.ones(1400) * 5)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean")
    stats = res.stats["exact"]["decomposition"]
    assert all(gap == np.inf for gap in stats["gaps"])  # no sweep had every block solved
    P = _plan(res, 1500, 1400)
    assert np.abs(P.sum(1) - a).sum() + np.abs(P.sum(0) - b).sum() < 1e-9
    assert "finish" in res.stats["exact"] and res.certificate.holds  # the finish ran from the coarse potentials
