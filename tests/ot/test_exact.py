"""The exact method (network simplex on candidate pairs, priced over all pairs) against POT's dense
emd, on clouds and matrices of several shapes; its pieces on their own; the default method."""

from __future__ import annotations

import json

import numpy as np
import ot as pot
import pytest

import optsolve.ot
from optsolve.core.files import save_problem
from optsolve.ot import exact
from optsolve.ot.problems import SCHEMA, cloud_max_cost, cost_matrix, grid_points, prepare


def _mixture(rng, n, d=2):
    centres = rng.random((5, d))
    return centres[rng.integers(0, 5, n)] + 0.05 * rng.standard_normal((n, d))


def _clouds(kind, n, m, d, rng):
    if kind == "uniform":
        return rng.random((n, d)), rng.random((m, d))
    return _mixture(rng, n, d), _mixture(rng, m, d)[:, ::-1]


def _reference(a, b, C):
    return pot.emd2(a, b, C, numItermax=10 ** 8)


def _check_exact(res, a, b, C):
    P = res.arrays["plan"]
    P = P() if callable(P) else P
    P = np.asarray(P.toarray() if hasattr(P, "toarray") else P)
    assert res.status.value == "optimal", res.message
    assert np.abs(P.sum(1) - a).sum() + np.abs(P.sum(0) - b).sum() < 1e-9
    opt = _reference(a, b, C)
    assert res.objective == pytest.approx(opt, rel=1e-9, abs=1e-12 * C.max())
    assert res.certificate.holds
    gap = res.certificate["gap_upper_bound"].value
    assert gap <= 1e-9 * max(abs(opt), 1e-3 * C.max())


@pytest.mark.parametrize("kind", ["uniform", "mixture"])
@pytest.mark.parametrize("n, m, d, cost", [(300, 200, 2, "sqeuclidean"), (700, 650, 2, "sqeuclidean"),
                                           (500, 500, 3, "sqeuclidean"), (400, 300, 2, "euclidean"),
                                           (300, 300, 2, "l1"), (200, 250, 12, "sqeuclidean")])
def test_exact_on_clouds_matches_dense_emd(kind, n, m, d, cost):
    rng = np.random.default_rng(n + m + d)
    x, y = _clouds(kind, n, m, d, rng)
    a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
    res = optsolve.ot.solve(a, b, x=x, y=y, cost=cost, method="exact")  # no target: the LP optimum
    _check_exact(res, a, b, cost_matrix(x, y, cost))


@pytest.mark.parametrize("n, m", [(1, 1), (1, 5), (7, 1), (40, 60), (450, 500)])
def test_exact_on_matrices_matches_dense_emd(n, m):
    rng = np.random.default_rng(n * m)
    C = rng.random((n, m)) ** 3 * 10
    a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
    res = optsolve.ot.solve(a, b, C, method="exact")
    _check_exact(res, a, b, C)


@pytest.mark.parametrize("ratio", [0.0, exact.STALL_RATIO])
def test_a_stalled_matrix_problem_is_solved_over_every_pair(monkeypatch, ratio):
    # colours with many repeats (a photograph's), given as the matrix: ties slow the candidates' duals
    rng = np.random.default_rng(41)
    x = np.round(rng.random((700, 3)) * 4) / 4
    y = np.round(rng.random((650, 3)) ** 2 * 4) / 4
    C = cost_matrix(x, y, "sqeuclidean")
    a, b = np.full(700, 1 / 700), rng.dirichlet(np.ones(650))
    a[::7] = 0.0  # rows without mass: the dense solve is over the others
    a /= a.sum()
    monkeypatch.setattr(exact, "STALL_RATIO", ratio)  # 0: the second full pricing pass goes dense
    res = optsolve.ot.solve(a, b, C, method="exact")
    _check_exact(res, a, b, C)
    if ratio == 0.0:
        assert res.stats["exact"]["dense_after_round"] >= 2


def test_zero_masses_duplicated_points_and_a_zero_optimum():
    rng = np.random.default_rng(5)
    x = rng.random((600, 2))
    x[300:] = x[:300]  # every point twice
    a = rng.dirichlet(np.ones(600))
    a[::7] = 0.0
    a /= a.sum()
    res = optsolve.ot.solve(a, a, x=x, y=x, cost="sqeuclidean")  # the default's target: exact at 0 too
    C = cost_matrix(x, x, "sqeuclidean")
    _check_exact(res, a, a, C)
    assert res.objective == pytest.approx(0.0, abs=1e-15)


def test_coarse_candidates_keep_links_between_cells_at_one_place():
    # 800 points on 26 integer values: many cells share a barycentre, so a cell is not always among its
    # own nearest cells; the candidates must still hold the coarse plan (solved here without merging)
    rng = np.random.default_rng(1)
    x, y = rng.integers(0, 26, (800, 1)).astype(float), rng.integers(0, 26, (800, 1)).astype(float)
    a, b = rng.dirichlet(np.ones(800)), rng.dirichlet(np.ones(800))
    ot = prepare(SCHEMA.validate({"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"}, source="p"),
                 low_memory=True)
    res = exact.solve_exact(ot)
    assert res.status == "optimal", res.message
    assert float(exact.pair_costs(ot, res.rows, res.cols) @ res.values) == pytest.approx(
        _reference(a, b, cost_matrix(x, y, "sqeuclidean")), rel=1e-9)


def test_huge_costs_off_a_sparse_support():
    rng = np.random.default_rng(8)
    n = 120
    C = np.full((n, n), 1e8)
    support = rng.random((n, n)) < 0.08
    support[np.arange(n), np.arange(n)] = True
    C[support] = rng.random(support.sum())
    a = b = np.full(n, 1.0 / n)
    res = optsolve.ot.solve(a, b, C)
    _check_exact(res, a, b, C)


def test_north_west_pairs_hold_a_feasible_plan():
    rng = np.random.default_rng(2)
    a, b = rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(45))
    oa, ob = rng.permutation(30), rng.permutation(45)
    r, c = exact.north_west_pairs(a, b, oa, ob)
    assert r.size <= 30 + 45 - 1
    C = np.full((30, 45), 1e6)
    C[r, c] = 0.0  # only these pairs are affordable: the LP must still carry all mass on them
    assert pot.emd2(a, b, C) == pytest.approx(0.0, abs=1e-9)


def test_balanced_cells_hold_at_most_the_cell_size():
    rng = np.random.default_rng(3)
    pts = np.vstack([rng.random((900, 2)) * 0.01, rng.random((100, 2)) + 5])  # very uneven density
    label = exact.balanced_cells(pts, 8)
    counts = np.bincount(label)
    assert counts.max() <= 8 and counts.min() >= 1 and label.max() + 1 == counts.size


@pytest.mark.parametrize("d", [1, 2, 3, 5])
@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean", "l1"])
def test_cloud_max_cost_is_the_largest_cost(d, cost):
    rng = np.random.default_rng(d)
    x, y = rng.standard_normal((300, d)), rng.random((200, d)) * 3
    value = cloud_max_cost(x, y, cost)
    exact_max = cost_matrix(x, y, cost).max()
    assert value is None or value == pytest.approx(exact_max, rel=1e-12)
    if d <= 3 or cost == "l1":
        assert value is not None


@pytest.mark.parametrize("kind", ["uniform", "mixture"])
@pytest.mark.parametrize("cost, spread", [("sqeuclidean", -1.0), ("sqeuclidean", np.inf), ("euclidean", None)])
def test_pricing_finds_the_pairs_that_restricted_duals_miss(monkeypatch, kind, cost, spread):
    from optsolve.ot import legendre

    if spread is not None:  # -1: the hull walk always; inf: the lifted k-d tree always
        monkeypatch.setattr(legendre, "TREE_SPREAD", spread)
    rng = np.random.default_rng(4)
    x, y = _clouds(kind, 500, 450, 2, rng)
    a, b = np.full(500, 1 / 500), np.full(450, 1 / 450)
    ot = prepare(SCHEMA.validate({"a": a, "b": b, "x": x, "y": y, "cost": cost}, source="t"), low_memory=True)
    sub = exact.Subproblem(ot)
    r, c = exact.north_west_pairs(sub.a, sub.b)  # one feasible plan's pairs alone: far from optimal
    G, u, v, code = exact._network_simplex(sub, r, c)
    assert code == 1
    vr, vc, worst, col_min, row_min = exact.violations(sub, u, v, 1e-12)
    reduced = cost_matrix(x, y, cost) - u[:, None] - v[None, :]
    assert worst == pytest.approx(min(reduced.min(), 0.0), abs=1e-12)
    np.testing.assert_allclose(col_min, reduced.min(0), rtol=0, atol=1e-12)  # every column's least, exactly
    np.testing.assert_allclose(row_min, reduced.min(1), rtol=0, atol=1e-12)
    assert vr.size > 0 and np.all(reduced[vr, vc] < -1e-12)
    assert set(np.flatnonzero(reduced.min(0) < -1e-12)) <= set(vc)  # each violated column gets a pair
    U, gap, f, g = exact.certified_gap(sub, G, u, v, col_min, row_min)
    assert U == pytest.approx(float((cost_matrix(x, y, cost)[G.row, G.col] * G.data).sum()), rel=1e-12)
    assert (cost_matrix(x, y, cost) - f[:, None] - g[None, :]).min() >= -1e-12  # feasible potentials
    assert U - float(a @ f + b @ g) == pytest.approx(gap, rel=1e-9, abs=1e-14)
    assert gap >= U - pot.emd2(a, b, cost_matrix(x, y, cost)) - 1e-12  # a bound, not below the true gap


def test_time_limit_returns_the_last_rounds_plan(monkeypatch):
    rng = np.random.default_rng(6)
    x, y = _clouds("mixture", 800, 800, 2, rng)
    a = b = np.full(800, 1 / 800)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", time_limit=1e-6)
    assert res.status.value in ("optimal", "time_limit")
    P = res.arrays["plan"]()
    assert np.abs(P.sum(1) - a).sum() + np.abs(P.sum(0) - b).sum() < 1e-9  # feasible whatever the status
    if res.status.value == "time_limit":
        assert "negative reduced costs" in res.message


def test_default_command_is_exact_on_clouds_and_verifies(cli, tmp_path):
    rng = np.random.default_rng(9)
    x, y = _clouds("uniform", 800, 700, 2, rng)
    path = tmp_path / "p.npz"
    save_problem(str(path), {"a": np.full(800, 1 / 800), "b": np.full(700, 1 / 700), "x": x, "y": y,
                             "cost": "sqeuclidean"})
    r = cli("ot", path, "-o", tmp_path / "s.json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["method"] == "exact" and doc["settings"]["method_rule"] == "auto"
    assert doc["stats"]["exact"]["rounds"] >= 1
    assert cli("verify", path, tmp_path / "s.json").exit_code == 0
    doc["solution"]["plan"]["value"][0] *= 1.5  # a forged plan fails
    (tmp_path / "f.json").write_text(json.dumps(doc))
    assert cli("verify", path, tmp_path / "f.json").exit_code == 6


def test_auto_picks_tnt_for_a_temperature_or_an_l1_grid_and_exact_for_a_target(cli, tmp_path):
    rng = np.random.default_rng(10)
    a, b = rng.dirichlet(np.ones(64)).reshape(8, 8), rng.dirichlet(np.ones(64)).reshape(8, 8)
    assert optsolve.ot.solve(a, b, cost="l1").method == "tnt"
    res = optsolve.ot.solve(a, b, cost="sqeuclidean")  # a squared Euclidean grid: exact, to the target
    assert res.method == "exact" and res.status.value == "optimal" and res.certificate.holds
    pts = grid_points(8, 8)
    opt = pot.emd2(a.ravel(), b.ravel(), cost_matrix(pts, pts, "sqeuclidean"))
    assert opt <= res.objective <= opt * (1 + 1e-3)
    x = rng.random((50, 2))
    w = np.full(50, 0.02)
    assert optsolve.ot.solve(w, w, x=x, y=x, cost="sqeuclidean", gamma=256.0).method == "tnt"
    assert optsolve.ot.solve(w, w, x=x, y=x, cost="sqeuclidean", target_gap=1e-2).method == "exact"
    with pytest.raises(Exception, match="'--gamma' and '--reg' do not apply"):
        optsolve.ot.solve(w, w, x=x, y=x, cost="sqeuclidean", method="exact", gamma=256.0)


def test_a_target_gap_under_auto_runs_the_documented_method_within_the_target_of_emd2(cli, tmp_path):
    """Asking auto for a target gap does not move it off the method it documents for 2-D clouds (exact meets
    every target): the document names that method and its rule, and the answer is within the target of emd2."""
    from optsolve.ot import choose_method

    rng = np.random.default_rng(34)
    x, y = rng.random((600, 2)), rng.random((600, 2))
    a, b = rng.dirichlet(np.ones(600)), rng.dirichlet(np.ones(600))
    data = {"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"}
    path = tmp_path / "clouds.npz"
    save_problem(str(path), data)
    documented = choose_method(SCHEMA.validate(data, source="t"), target_gap=1e-3)
    assert documented == choose_method(SCHEMA.validate(data, source="t")) == "exact"
    r = cli("ot", path, "--target-gap", "1e-3", "--device", "cpu", "-o", tmp_path / "s.json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["method"] == doc["settings"]["method"] == documented
    assert doc["settings"]["method_rule"] == "auto" and doc["settings"]["target_gap"] == 1e-3
    opt = _reference(a, b, cost_matrix(x, y, "sqeuclidean"))
    assert opt * (1 - 1e-12) <= doc["objective"] <= opt * (1 + 1e-3)


@pytest.mark.parametrize("kind", ["matrix", "clouds"])
def test_tnt_short_of_its_target_finishes_exactly(kind):
    rng = np.random.default_rng(11)
    x, y = _clouds("mixture", 150, 120, 2, rng)
    a, b = rng.dirichlet(np.ones(150)), rng.dirichlet(np.ones(120))
    C = cost_matrix(x, y, "sqeuclidean")
    data = {"C": C} if kind == "matrix" else {"x": x, "y": y, "cost": "sqeuclidean"}
    res = optsolve.ot.solve(a, b, **data, method="tnt", target_gap=1e-9, max_iter=2)  # stops far short
    assert res.method == "tnt" and "Finished exactly" in res.message
    assert res.solution["plan"]["format"] == "coo" and res.stats["exact"]["rounds"] >= 1
    assert res.stats["entropic_certified_gap"] > 1e-9
    _check_exact(res, a, b, C)


@pytest.mark.parametrize("d", [1, 2, 5])
def test_certificate_ctransform_by_kd_tree_equals_the_dense_minimum(d):
    from optsolve.ot.certificate import sq_ctransform

    rng = np.random.default_rng(d)
    x, y = rng.standard_normal((400, d)), rng.random((300, d))
    w = rng.standard_normal(400) * 3
    dense = (cost_matrix(x, y, "sqeuclidean") - w[:, None]).min(0)
    np.testing.assert_allclose(sq_ctransform(x, w, y), dense, rtol=0, atol=1e-12)


def test_certificate_of_clouds_without_a_pass_over_all_pairs_agrees_with_the_matrix():
    from optsolve.ot import certificate

    rng = np.random.default_rng(12)
    x, y = _clouds("mixture", 500, 400, 2, rng)
    a, b = rng.dirichlet(np.ones(500)), rng.dirichlet(np.ones(400))
    a[::9] = 0.0
    a /= a.sum()
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method="exact")
    clouds = SCHEMA.validate({"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"}, source="t")
    matrix = SCHEMA.validate({"a": a, "b": b, "C": cost_matrix(x, y, "sqeuclidean")}, source="t")
    kw = dict(method="exact", objective=res.objective, status="optimal")
    by_tree = certificate.check(clouds, res.solution, **kw)
    by_blocks = certificate.check(matrix, res.solution, **kw)
    assert by_tree.holds and by_blocks.holds
    for name in ("marginal_l1", "objective_matches", "dual_lower_bound", "dual_feasibility",
                 "complementary_slackness"):
        assert by_tree[name].value == pytest.approx(by_blocks[name].value, rel=1e-9, abs=1e-13), name
    moved = dict(res.solution, g=[v + 1e-3 if v is not None else v for v in res.solution["g"]])
    assert not certificate.check(clouds, moved, **kw).holds  # dual infeasible: found without the matrix
    assert not certificate.check(matrix, moved, **kw).holds


def test_max_iter_bounds_the_pricing_rounds():
    rng = np.random.default_rng(13)
    x, y = _clouds("mixture", 600, 600, 2, rng)
    w = np.full(600, 1 / 600)
    res = optsolve.ot.solve(w, w, x=x, y=y, cost="euclidean", max_iter=1)
    assert res.stats["exact"]["rounds"] == 1
    if res.status.value == "max_iter":  # a feasible plan, optimal on its candidates only
        assert "most negative" in res.message and res.stats["exact"]["most_negative"][-1] < 0
        assert res.certificate.holds  # feasible; no optimality claimed


@pytest.mark.parametrize("target", [None, 1e-2, 1e-6])
def test_the_default_stops_at_its_target_gap_and_is_that_close_to_emd(cli, tmp_path, target):
    rng = np.random.default_rng(700 + 650 + 2)  # a case whose first round leaves pairs to price in
    x, y = _clouds("mixture", 700, 650, 2, rng)
    a, b = rng.dirichlet(np.ones(700)), rng.dirichlet(np.ones(650))
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", target_gap=target)
    asked = target or 1e-3
    assert res.method == "exact" and res.settings["target_gap"] == asked
    assert res.status.value == "optimal", res.message
    C = cost_matrix(x, y, "sqeuclidean")
    opt = _reference(a, b, C)
    assert opt - 1e-12 <= res.objective <= opt * (1 + asked)  # relative to the cost itself, not the floor
    cert = res.certificate
    assert cert.holds and cert["gap_within_target_gap"].holds
    assert cert["gap_upper_bound"].value >= res.objective - opt - 1e-12
    names = {c.name for c in cert.checks}
    assert "gap_within_lp_tol" not in names  # the target was asked for, not the LP optimum
    if target is None:
        assert res.stats["exact"]["rounds"] == 1 and "Certified gap" in res.message
    path = tmp_path / "p.npz"
    save_problem(str(path), {"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"})
    args = ["ot", path, "-o", tmp_path / "s.json"] + (["--target-gap", str(target)] if target else [])
    assert cli(*args).exit_code == 0
    assert cli("verify", path, tmp_path / "s.json").exit_code == 0
    doc = json.loads((tmp_path / "s.json").read_text())
    noise = rng.random(700) * 1e-2 * C.max()  # duals whose bound is far short of the plan's cost
    doc["solution"]["f"] = [v + e for v, e in zip(doc["solution"]["f"], noise)]
    (tmp_path / "f.json").write_text(json.dumps(doc))
    r = cli("verify", path, tmp_path / "f.json")
    assert r.exit_code == 6 and "gap_within_target_gap" in r.stderr, r.stderr
