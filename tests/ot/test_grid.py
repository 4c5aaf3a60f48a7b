"""Separable grid operations against dense sums, and grid rounding and certificates against the matrix path."""

from __future__ import annotations

import json

import numpy as np
import pytest

import optsolve.ot
from optsolve.ot import certificate, grid
from optsolve.ot.problems import SCHEMA, _image, cost_matrix, grid_points, prepare
from optsolve.ot.rounding import round_problem


def _dense(k1, k2, cost):
    pts = grid_points(k1, k2)
    return cost_matrix(pts, pts, cost)


@pytest.mark.parametrize("cost", ["l1", "sqeuclidean"])
def test_separable_passes_equal_dense_sums(cost, monkeypatch):
    monkeypatch.setattr(grid, "CHUNK", 17)  # force the chunked loops
    rng = np.random.default_rng(0)
    k1, k2 = 5, 7
    C = _dense(k1, k2, cost)
    C1, C2 = grid.axis_costs((k1, k2), cost)
    np.testing.assert_allclose(C1[:, None, :, None] + C2[None, :, None, :], C.reshape(k1, k2, k1, k2), atol=1e-15)
    w = rng.normal(size=k1 * k2) * 30
    w[[3, 11]] = -np.inf
    reg = 0.01
    L1, L2, M1, M2 = grid.log_cost_kernels(C1, C2, reg)
    with np.errstate(divide="ignore"):
        dense_lse = np.log(np.exp(w[None, :] - C / reg - 40).sum(1)) + 40
        dense_cost = np.log((C * np.exp(w[None, :] - C / reg - 40)).sum(1)) + 40
    np.testing.assert_allclose(grid.lse_apply(w, L1, L2), dense_lse, rtol=1e-12)
    np.testing.assert_allclose(np.logaddexp(grid.lse_apply(w, M1, L2), grid.lse_apply(w, L1, M2)), dense_cost,
                               rtol=1e-12)
    wmin = np.where(np.isfinite(w), w, np.inf)
    np.testing.assert_allclose(grid.min_apply(wmin, C1, C2), (wmin[None, :] + C).min(1), rtol=1e-14)
    x, y = rng.normal(size=k1 * k2), rng.normal(size=k1 * k2)
    assert grid.bilinear(x, y, C1, C2) == pytest.approx(x @ C @ y, rel=1e-12)


def _pair(cost, k=9, seed=3):
    rng = np.random.default_rng(seed)
    A, B = _image(rng, k, "shapes", 2.0), _image(rng, k, "grf", 2.0)  # shapes has zero pixels
    on_grid = prepare(SCHEMA.validate({"a": A, "b": B, "cost": cost}, source="test"))
    C = _dense(k, k, cost)
    as_matrix = SCHEMA.validate({"a": A.ravel(), "b": B.ravel(), "C": C}, source="test")
    return on_grid, as_matrix


@pytest.mark.parametrize("cost", ["l1", "sqeuclidean"])
def test_grid_problems_never_build_the_matrix(cost):
    ot, _ = _pair(cost)
    assert ot.C is None and ot.grid == (9, 9) and not ot.low_memory
    assert ot.max_cost() == pytest.approx(_dense(9, 9, cost).max(), rel=1e-14)


@pytest.mark.parametrize("cost", ["l1", "sqeuclidean"])
@pytest.mark.parametrize("gamma", [64.0, 4096.0])
def test_grid_rounding_and_dual_bound_equal_the_matrix_path(cost, gamma):
    ot, matrix_problem = _pair(cost)
    dense = prepare(matrix_problem)
    res = optsolve.ot.solve_problem(matrix_problem, gamma=gamma)
    f, g, reg = np.array(res.solution["f"], dtype=float), np.array(res.solution["g"], dtype=float), res.settings["reg"]
    f, g = np.where(np.isnan(f), -np.inf, f), np.where(np.isnan(g), -np.inf, g)
    f = f + np.random.default_rng(1).normal(size=f.size) * reg  # off the fixed point: rounding moves things
    on_grid, on_matrix = round_problem(ot, f, g, reg), round_problem(dense, f, g, reg)
    assert on_grid.objective == pytest.approx(on_matrix.objective, rel=1e-10)
    assert on_grid.marginal_error_before == pytest.approx(on_matrix.marginal_error_before, rel=1e-8)
    np.testing.assert_allclose(on_grid.f, on_matrix.f, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(on_grid.err_b, on_matrix.err_b, atol=1e-13)
    assert certificate.dual_bound_of(ot, f) == pytest.approx(certificate.dual_bound_of(dense, f), rel=1e-12)


@pytest.mark.parametrize("method", ["tnt", "emd"])
@pytest.mark.parametrize("cost", ["l1", "sqeuclidean"])
def test_grid_certificate_equals_the_matrix_certificate(method, cost):
    ot, matrix_problem = _pair(cost)
    grid_problem = SCHEMA.validate({"a": ot.a.reshape(9, 9), "b": ot.b.reshape(9, 9), "cost": cost}, source="test")
    res = optsolve.ot.solve_problem(grid_problem, method=method, gamma=2048.0 if method == "tnt" else None)
    doc = json.loads(res.to_json())
    on_grid = certificate.check(grid_problem, doc["solution"], method=method, objective=doc["objective"],
                                settings=doc["settings"], limits={}, status=doc["status"])
    on_matrix = certificate.check(matrix_problem, doc["solution"], method=method, objective=doc["objective"],
                                  settings=doc["settings"], limits={}, status=doc["status"])
    assert on_grid.holds and on_matrix.holds
    for name in ("relative_gap", "gap_upper_bound", "dual_lower_bound"):
        assert on_grid[name].value == pytest.approx(on_matrix[name].value, rel=1e-9, abs=1e-13)
    assert on_grid["marginal_l1"].value <= 1e-12
    import ot as pot

    opt = pot.emd2(ot.a, ot.b, _dense(9, 9, cost))
    assert on_grid["dual_lower_bound"].value <= opt + 1e-12 <= doc["objective"] + 2e-12


def test_grid_certificate_catches_a_tampered_solution():
    ot, _ = _pair("l1")
    grid_problem = SCHEMA.validate({"a": ot.a.reshape(9, 9), "b": ot.b.reshape(9, 9), "cost": "l1"}, source="test")
    for method, key in (("tnt", "f"), ("emd", "g")):
        doc = json.loads(optsolve.ot.solve_problem(grid_problem, method=method).to_json())
        sol = doc["solution"]
        i = next(i for i, v in enumerate(sol[key]) if v is not None and ot.a[i] > 0 and ot.b[i] > 0)
        sol[key][i] += 0.05
        cert = certificate.check(grid_problem, sol, method=method, objective=doc["objective"],
                                 settings=doc["settings"], limits={}, status=doc["status"])
        assert not cert.holds


def test_grid_problem_streams_its_plan_in_blocks():
    ot, matrix_problem = _pair("sqeuclidean")
    res = optsolve.ot.solve(ot.a.reshape(9, 9), ot.b.reshape(9, 9), cost="sqeuclidean", block_size=4, gamma=1024.0)
    f = np.array([-np.inf if v is None else v for v in res.solution["f"]])
    g = np.array([-np.inf if v is None else v for v in res.solution["g"]])
    dense = prepare(matrix_problem)
    P = res.arrays["plan"]()  # computed from the grid, four columns at a time
    np.testing.assert_allclose(P, round_problem(dense, f, g, res.settings["reg"]).plan(dense), atol=1e-14)
    assert np.abs(P.sum(1) - ot.a).sum() + np.abs(P.sum(0) - ot.b).sum() < 1e-13
    assert (P * dense.C).sum() == pytest.approx(res.objective, rel=1e-12)


@pytest.mark.parametrize("shape", [(5, 7), (16, 16)])
@pytest.mark.parametrize("gamma", [3.0, 800.0, 1e6])
def test_l1_geometric_scans_equal_the_generic_nesting(shape, gamma):
    rng = np.random.default_rng(2)
    C1, C2 = grid.axis_costs(shape, "l1")
    w = rng.normal(size=shape[0] * shape[1]) * 40
    w[[0, 5, 6]] = -np.inf
    generic = grid.lse_apply(w, -gamma * C1, -gamma * C2)
    scanned = grid.lse_apply_l1(w, shape, gamma / max(shape))
    np.testing.assert_allclose(scanned, generic, rtol=1e-13, atol=1e-12)
    everything_empty = grid.lse_apply_l1(np.full(w.size, -np.inf), shape, 1.0)
    assert np.all(everything_empty == -np.inf)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_exp_flush_is_exp_with_tiny_results_zeroed(dtype):
    from optsolve.core.backend import EXP_FLOOR, exp_flush

    x = np.array([0.0, -1.0, -80.0, -690.0, -720.0, -800.0, -1e6, -np.inf, np.nan], dtype=dtype)
    floor = EXP_FLOOR[np.dtype(dtype)]
    expected = np.where(x >= floor, np.exp(x.astype(np.float64)), 0.0)
    expected[np.isnan(x)] = np.nan
    y = exp_flush(np, x.copy())
    np.testing.assert_allclose(y, expected.astype(dtype), rtol=1e-6 if dtype == np.float32 else 1e-15)
    assert y.dtype == dtype
    inplace = x.copy()
    assert exp_flush(np, inplace, out=inplace) is inplace
