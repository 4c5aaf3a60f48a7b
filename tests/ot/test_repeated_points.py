"""optsolve ot on point clouds whose points repeat (integer grids, points of dimension 0), against POT's emd2."""

from __future__ import annotations

import numpy as np
import pytest

import optsolve.ot
from optsolve.core.files import save_problem
from optsolve.ot import repeats
from optsolve.ot.problems import SCHEMA, cost_matrix


def _integer_clouds(seed, n, values, d):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, values, (n, d)).astype(float)
    y = rng.integers(0, values, (n, d)).astype(float)
    return rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(n)), x, y


def _check_plan(res, a, b):
    plan = res.arrays["plan"]
    plan = plan() if callable(plan) else plan
    plan = plan.toarray() if hasattr(plan, "toarray") else np.asarray(plan)
    assert np.abs(plan.sum(1) - a).sum() + np.abs(plan.sum(0) - b).sum() <= 1e-8 and plan.min() >= -1e-12


@pytest.mark.parametrize("n, values, d", [(3000, 10, 2), (1285, 26, 1)])
def test_repeated_coordinates_reach_the_optimum(n, values, d):
    import ot as pot

    a, b, x, y = _integer_clouds(0, n, values, d)
    opt = pot.emd2(a, b, cost_matrix(x, y, "sqeuclidean"), numItermax=10**7)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean")
    assert res.status.value == "optimal", res.message
    assert res.certificate.holds
    assert opt - 1e-9 <= res.objective <= opt * (1 + 1e-3)
    _check_plan(res, a, b)


@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean", "l1"])
def test_points_of_dimension_zero_are_solved(cli, tmp_path, cost):
    a, b = np.full(5, 0.2), np.full(4, 0.25)
    path = tmp_path / "p.npz"
    save_problem(str(path), {"a": a, "b": b, "x": np.zeros((5, 0)), "y": np.zeros((4, 0)), "cost": cost})
    for method in ("auto", "exact", "tnt", "emd", "sinkhorn"):
        out = tmp_path / f"{method}.json"
        r = cli("ot", path, "--method", method, "-o", out)
        assert r.exit_code == 0, f"{method}: {r.stderr}"
        assert cli("verify", path, out).exit_code == 0
        res = optsolve.ot.solve(a, b, x=np.zeros((5, 0)), y=np.zeros((4, 0)), cost=cost, method=method)
        assert res.status.value == "optimal" and res.objective == 0.0 and res.certificate.holds
        _check_plan(res, a, b)


def _reference(a, b, x, y):
    import ot as pot

    return pot.emd2(a, b, cost_matrix(x, y, "sqeuclidean"), numItermax=10**7)


@pytest.mark.parametrize("n, values, d", [(3000, 10, 2), (1285, 26, 1), (120, 10, 2)])
def test_every_method_on_repeated_points_and_verify_accepts_it(cli, tmp_path, n, values, d):
    a, b, x, y = _integer_clouds(1, n, values, d)
    opt = _reference(a, b, x, y)
    path = tmp_path / "p.npz"
    save_problem(str(path), {"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"})
    # POT's log-domain Sinkhorn takes seconds per hundred points: the small case only
    for method in ("auto", "exact", "emd", "tnt") + (("sinkhorn",) if n <= 200 else ()):
        res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method=method)
        assert res.status.value == "optimal" and res.certificate.holds, f"{method}: {res.message}"
        _check_plan(res, a, b)
        assert res.objective >= opt * (1 - 1e-12)
        if method in ("emd", "exact"):  # the LP optimum
            assert res.objective == pytest.approx(opt, rel=1e-9)
        elif method != "sinkhorn":  # the default target gap
            assert res.objective <= opt * (1 + 1e-3)
        out = tmp_path / f"{method}.json"
        assert cli("ot", path, "--method", method, "-o", out).exit_code == 0
        assert cli("verify", path, out).exit_code == 0


def test_a_larger_repeated_cloud_is_solved_on_its_distinct_points():
    import ot as pot
    import scipy.sparse as sp

    a, b, x, y = _integer_clouds(2, 20000, 10, 2)
    a[::5] = 0.0  # points of zero mass among the repeats
    a /= a.sum()
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method="exact")
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    assert res.stats["distinct_points"] == {"n": 100, "m": 100}
    assert res.problem.size == {"n": 20000, "m": 20000}
    plan = res.solution["plan"]
    P = sp.coo_matrix((plan["value"], (plan["row"], plan["col"])), shape=(20000, 20000)).tocsr()
    assert np.abs(np.asarray(P.sum(1)).ravel() - a).sum() + np.abs(np.asarray(P.sum(0)).ravel() - b).sum() <= 1e-12
    assert P.nnz <= 2 * 20000 + 200 and P.data.min() > 0  # sparse: entries of the distinct plan plus points
    # the reference: POT on the 100 x 100 problem of the grid's cells, masses summed
    cell = lambda p: (p[:, 0] * 10 + p[:, 1]).astype(int)
    grid = np.stack(np.divmod(np.arange(100), 10), 1).astype(float)
    ref = pot.emd2(np.bincount(cell(x), a, 100), np.bincount(cell(y), b, 100), cost_matrix(grid, grid, "sqeuclidean"))
    assert res.objective == pytest.approx(ref, rel=1e-9)
    f, g = np.asarray(res.solution["f"]), np.asarray(res.solution["g"])
    assert all(np.ptp(f[cell(x) == k]) == 0 and np.ptp(g[cell(y) == k]) == 0 for k in range(100))  # equal points


def test_near_repeats_are_not_merged():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 5, (300, 2)).astype(float)
    x[1::2] += 1e-9 * rng.random((150, 2))  # close to a repeat, but no two points equal
    y = rng.random((250, 2)) * 4
    y[:100] = y[100:200]
    a, b = rng.dirichlet(np.ones(300)), rng.dirichlet(np.ones(250))
    merged = repeats.find(SCHEMA.validate({"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"}, source="p"))
    assert np.unique(merged.label_x).size == np.unique(x, axis=0).shape[0]
    assert np.unique(merged.label_y).size == 150
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method="exact")
    assert res.stats["distinct_points"] == {"n": np.unique(x, axis=0).shape[0], "m": 150}
    assert res.status.value == "optimal" and res.certificate.holds
    assert res.objective == pytest.approx(_reference(a, b, x, y), rel=1e-9)
    _check_plan(res, a, b)


def test_split_gives_each_member_its_mass_within_its_groups():
    rng = np.random.default_rng(4)
    label_x, label_y = rng.integers(0, 7, 60), rng.integers(0, 5, 40)
    a, b = rng.dirichlet(np.ones(60)), rng.dirichlet(np.ones(40))
    a[:6] = 0.0
    a /= a.sum()
    A, B = np.bincount(label_x, a, 7), np.bincount(label_y, b, 5)
    import ot as pot

    G = pot.emd(A, B, rng.random((7, 5)))
    row, col = np.nonzero(G)
    merge = repeats.Merge(None, label_x, label_y, a, b, None, None)
    i, j, w = repeats.expand_plan(merge, row, col, G[row, col])
    assert np.abs(np.bincount(i, w, 60) - a).sum() + np.abs(np.bincount(j, w, 40) - b).sum() <= 1e-14
    assert (w > 0).all() and i.size <= row.size + 60 + 40
    assert np.allclose(np.bincount(label_x[i] * 5 + label_y[j], w, 35), G.ravel())  # within the distinct pairs


@pytest.mark.parametrize("cost", ["euclidean", "l1"])
@pytest.mark.parametrize("method", ["exact", "emd"])
def test_repeated_points_under_other_costs(cost, method):
    import ot as pot

    a, b, x, y = _integer_clouds(5, 500, 6, 2)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost=cost, method=method)
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    assert res.stats["distinct_points"] == {"n": 36, "m": 36}
    assert res.objective == pytest.approx(pot.emd2(a, b, cost_matrix(x, y, cost), numItermax=10**7), rel=1e-9)
    _check_plan(res, a, b)
