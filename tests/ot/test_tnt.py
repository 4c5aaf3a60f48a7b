"""MDOT-TNT: certified gaps against POT's exact emd, schedule behaviour, dtypes, limits, edge cases."""

from __future__ import annotations

import numpy as np
import ot as pot
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import optsolve.ot
from optsolve.core.errors import ParameterError
from optsolve.ot.problems import FAMILIES, cost_matrix, grid_points


def family_problem(name, seed, **params):
    fam = FAMILIES[name]
    values = dict(fam.defaults(), **params)
    data = fam.generate(np.random.default_rng(seed), **values)
    C = data["C"] if "C" in data else cost_matrix(data["x"], data["y"], data["cost"])
    return data["a"] / data["a"].sum(), data["b"] / data["b"].sum(), C


FAMILY_CASES = [
    ("images", {"size": 8, "kind": "whitenoise"}),
    ("images", {"size": 8, "kind": "grf", "cost": "euclidean"}),
    ("images", {"size": 8, "kind": "cauchy"}),
    ("images", {"size": 10, "kind": "shapes", "cost": "l1"}),
    ("clouds", {"n": 50, "m": 35, "d": 3}),
    ("clouds", {"n": 40, "m": 60, "d": 2, "cost": "euclidean"}),
]


@pytest.mark.parametrize("name,params", FAMILY_CASES)
def test_certified_gap_contains_emd_and_shrinks_with_gamma(name, params):
    a, b, C = family_problem(name, 1, **params)
    opt = pot.emd2(a, b, C)
    gaps = []
    for gamma in (2.0 ** 6, 2.0 ** 9, 2.0 ** 12):
        res = optsolve.ot.solve(a, b, C, gamma=gamma)
        assert res.status.value == "optimal", res.message
        assert res.certificate.holds
        lower = res.certificate["dual_lower_bound"].value
        assert lower <= opt * (1 + 1e-12) + 1e-15
        assert res.objective >= opt * (1 - 1e-12) - 1e-15
        assert res.certificate["gap_upper_bound"].value >= res.objective - opt - 1e-15
        P = res.arrays["plan"]
        np.testing.assert_allclose(P.sum(1), a, atol=1e-12)
        np.testing.assert_allclose(P.sum(0), b, atol=1e-12)
        gaps.append(res.objective - opt)
    assert gaps[2] < gaps[0]
    assert gaps[2] <= 0.05 * opt + 1e-12


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(2, 25), m=st.integers(2, 25),
       gamma=st.sampled_from([4.0, 64.0, 1024.0, 16384.0]))
def test_certificate_sound_on_random_problems(seed, n, m, gamma):
    rng = np.random.default_rng(seed)
    a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
    C = rng.random((n, m)) ** 2
    res = optsolve.ot.solve(a, b, C, gamma=gamma)
    opt = pot.emd2(a, b, C)
    assert res.certificate["dual_lower_bound"].value <= opt + 1e-12
    assert res.objective >= opt - 1e-12
    assert res.certificate["marginal_l1"].value <= 1e-12


@pytest.mark.parametrize("pcg", ["discounted", "plain"])
def test_both_pcg_variants_agree(pcg):
    a, b, C = family_problem("images", 3, size=10, kind="grf")
    res = optsolve.ot.solve(a, b, C, gamma=4096.0, pcg=pcg, tol=1e-9)
    ref = pot.sinkhorn(a, b, C, C.max() / 4096.0, stopThr=1e-12, numItermax=100000, method="sinkhorn_stabilized")
    assert res.certificate.holds
    # the same entropic problem: the plans agree to the marginal tolerances
    assert np.abs(res.arrays["plan"] - ref).sum() < 1e-6
    assert res.stats["cg_iterations"] > 0 and res.stats["newton_steps"] > 0


def test_matches_entropic_optimum_at_tight_tolerance():
    a, b, C = family_problem("clouds", 4, n=30, m=30)
    gamma = 256.0
    res = optsolve.ot.solve(a, b, C, gamma=gamma, tol=1e-11)
    reg = C.max() / gamma
    ref = pot.sinkhorn(a, b, C, reg, stopThr=1e-13, numItermax=200000)
    assert np.abs(res.arrays["plan"] - ref).sum() < 1e-8


def test_float32_path():
    a, b, C = family_problem("images", 5, size=8, kind="cauchy")
    r32 = optsolve.ot.solve(a, b, C, gamma=512.0, dtype="float32")
    r64 = optsolve.ot.solve(a, b, C, gamma=512.0, dtype="float64")
    assert r32.stats["dtype"] == "float32" and r64.stats["dtype"] == "float64"
    assert r32.certificate.holds  # the certificate is recomputed in float64 from the rounded potentials
    assert r32.objective == pytest.approx(r64.objective, rel=1e-3)


def test_float32_beyond_its_range_warns(caplog):
    a, b, C = family_problem("clouds", 5, n=10, m=10)
    import logging

    logging.getLogger("optsolve").propagate = True
    with caplog.at_level(logging.WARNING, logger="optsolve"):
        optsolve.ot.solve(a, b, C, gamma=2.0 ** 12, dtype="float32")
    assert any("float32" in r.message for r in caplog.records)


def test_zero_marginal_entries_are_dropped_and_restored(rng):
    a, b, C = family_problem("clouds", 6, n=30, m=25)
    a[[0, 5, 7]] = 0
    b[[3, 4]] = 0
    a, b = a / a.sum(), b / b.sum()
    res = optsolve.ot.solve(a, b, C, gamma=1024.0)
    assert res.certificate.holds
    f, g = res.solution["f"], res.solution["g"]
    assert np.all(np.isneginf(f[[0, 5, 7]])) and np.all(np.isneginf(g[[3, 4]]))
    P = res.arrays["plan"]
    assert np.all(P[[0, 5, 7]] == 0) and np.all(P[:, [3, 4]] == 0)
    assert res.objective >= pot.emd2(a, b, C) - 1e-12


def test_duplicated_points_and_n_neq_m():
    rng = np.random.default_rng(8)
    x = rng.random((20, 2))
    x = np.vstack([x, x[:5]])  # duplicates
    y = rng.random((12, 2))
    a, b = np.full(25, 1 / 25), np.full(12, 1 / 12)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", gamma=2048.0)
    assert res.status.value == "optimal" and res.certificate.holds
    assert res.problem.size == {"n": 25, "m": 12}


def test_target_gap_is_met_and_certified():
    a, b, C = family_problem("images", 2, size=8, kind="grf")
    res = optsolve.ot.solve(a, b, C, method="tnt", target_gap=1e-3)
    assert res.status.value == "optimal"
    assert res.certificate["relative_gap"].value <= 1e-3
    assert res.stats["stage_log"][-1]["relative_gap"] <= 1e-3
    assert res.stats["final_gamma"] > 16
    opt = pot.emd2(a, b, C)
    assert (res.objective - opt) / opt <= 1e-3


def test_time_limit_returns_last_completed_stage():
    a, b, C = family_problem("images", 2, size=12, kind="whitenoise")
    res = optsolve.ot.solve(a, b, C, gamma=2.0 ** 16, time_limit=1e-9)
    assert res.status.value == "time_limit"
    assert res.exit_code == 5
    assert res.certificate["marginal_l1"].holds  # the rounded plan of whatever stage is returned


def test_max_iter_counts_newton_steps():
    a, b, C = family_problem("images", 2, size=10, kind="grf")
    res = optsolve.ot.solve(a, b, C, gamma=2.0 ** 14, max_iter=3)
    assert res.status.value == "max_iter"
    assert res.stats["newton_steps"] <= 3
    assert res.certificate["marginal_l1"].holds


def test_stats_and_settings_are_reported():
    a, b, C = family_problem("clouds", 9, n=20, m=20)
    res = optsolve.ot.solve(a, b, 3.0 * C, gamma=512.0)
    st_ = res.stats
    for key in ("stages", "newton_steps", "cg_iterations", "evaluations", "final_gamma", "stage_log"):
        assert key in st_
    assert st_["final_gamma"] == 512.0
    assert res.settings["reg"] == pytest.approx(3.0 * C.max() / 512.0)
    assert [s["gamma"] for s in st_["stage_log"]] == sorted(s["gamma"] for s in st_["stage_log"])
    assert res.certificate["entropic_bias_bound"].value == pytest.approx(
        res.settings["reg"] * min(-(a * np.log(a)).sum(), -(b * np.log(b)).sum()))


def test_reported_costs_in_user_units():
    a, b, C = family_problem("clouds", 10, n=15, m=15)
    r1 = optsolve.ot.solve(a, b, C, gamma=1024.0)
    r2 = optsolve.ot.solve(a, b, 1000.0 * C, gamma=1024.0)
    assert r2.objective == pytest.approx(1000.0 * r1.objective, rel=1e-9)
    assert np.allclose(r2.solution["f"], 1000.0 * r1.solution["f"], rtol=1e-7, atol=1e-9)


@pytest.mark.parametrize("kw,match", [
    ({"gamma": -1.0}, "'--gamma' option must be a float in \\(0, inf\\); got -1.0"),
    ({"gamma": 0.0}, "'--gamma' option"),
    ({"gamma": 10.0, "reg": 0.1}, "at most one of '--reg' and '--gamma'"),
    ({"pcg": "fancy"}, "'--pcg' option must be one of"),
    ({"dtype": "float16"}, "'--dtype' option must be one of"),
    ({"target_gap": 0.01, "method": "sinkhorn"}, "applies to '--method exact' and '--method tnt' only"),
])
def test_bad_options(kw, match):
    a, b, C = family_problem("clouds", 1, n=5, m=5)
    with pytest.raises(ParameterError, match=match):
        optsolve.ot.solve(a, b, C, **kw)


def test_tnt_on_backend(backend):
    a, b, C = family_problem("clouds", 11, n=40, m=30)
    res = optsolve.ot.solve(a, b, C, gamma=1024.0, device=backend.device)
    assert res.stats["device"] == backend.device
    assert res.certificate.holds
    assert res.objective >= pot.emd2(a, b, C) - 1e-12


@pytest.mark.parametrize("layout", ["low-memory", "grid", "target-gap"])
def test_tnt_layouts_on_backend(backend, layout):
    """Streamed clouds, images on a grid and --target-gap, each solved and certified on the backend."""
    from optsolve.ot.problems import _image

    rng = np.random.default_rng(12)
    if layout == "grid":
        A, B = _image(rng, 8, "shapes", 2.0), _image(rng, 8, "grf", 2.0)
        kw = {"a": A, "b": B, "cost": "l1", "gamma": 2048.0}
        pts = grid_points(8, 8)
        a, b, C = A.ravel() / A.sum(), B.ravel() / B.sum(), cost_matrix(pts, pts, "l1")
    else:
        x, y = rng.random((50, 2)), rng.random((40, 2))
        a, b = rng.dirichlet(np.ones(50)), rng.dirichlet(np.ones(40))
        kw = {"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"}
        kw.update({"low_memory": True, "block_size": 7} if layout == "low-memory" else {"target_gap": 1e-3})
        C = cost_matrix(x, y, "sqeuclidean")
    res = optsolve.ot.solve(**kw, device=backend.device)
    assert res.stats["device"] == backend.device
    assert res.certificate.holds, res.certificate
    opt = pot.emd2(a, b, C)
    assert res.certificate["dual_lower_bound"].value <= opt + 1e-12 <= res.objective + 2e-12
    if layout == "target-gap":
        assert res.certificate["relative_gap"].value <= 1e-3


def test_streamed_rounding_in_another_namespace_equals_the_row_blocks():
    """round_problem with an array namespace other than numpy streams column blocks (the GPU path); on
    numpy, a matrix is rounded by fused passes over row blocks (RowBlocks): the two agree."""
    import types

    from optsolve.ot.certificate import dual_bound_of
    from optsolve.ot.problems import OTProblem
    from optsolve.ot.rounding import round_problem

    proxy = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    rng = np.random.default_rng(3)
    x, y = rng.random((30, 2)), rng.random((20, 2))
    a, b = rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(20))
    a[4] = 0.0
    a /= a.sum()
    C = cost_matrix(x, y, "sqeuclidean")
    ot = OTProblem(a=a, b=b, C=C, mass=1.0, block=6)
    f, g = rng.normal(size=30) * 0.01, rng.normal(size=20) * 0.01
    f[4] = -np.inf
    kept, streamed = round_problem(ot, f, g, 0.01), round_problem(ot, f, g, 0.01, xp=proxy)
    assert streamed.objective == pytest.approx(kept.objective, rel=1e-12)
    np.testing.assert_allclose(streamed.f, kept.f, rtol=1e-13)
    np.testing.assert_allclose(streamed.err_b, kept.err_b, atol=1e-15)
    assert dual_bound_of(ot, kept.f, proxy) == pytest.approx(dual_bound_of(ot, kept.f), rel=1e-13)


@pytest.mark.parametrize("cost", ["sqeuclidean", "euclidean", "l1"])
def test_low_memory_equals_dense(cost):
    rng = np.random.default_rng(12)
    x, y = rng.random((37, 2)), rng.random((29, 2))
    a, b = rng.dirichlet(np.ones(37)), rng.dirichlet(np.ones(29))
    a[3] = 0
    a /= a.sum()
    dense = optsolve.ot.solve(a, b, x=x, y=y, cost=cost, gamma=1024.0, low_memory=False)
    low = optsolve.ot.solve(a, b, x=x, y=y, cost=cost, gamma=1024.0, low_memory=True, block_size=7)
    assert low.settings["low_memory"] is True and dense.settings["low_memory"] is False
    assert low.certificate.holds
    assert low.objective == pytest.approx(dense.objective, rel=1e-9)
    np.testing.assert_allclose(low.solution["f"], dense.solution["f"], rtol=1e-7, atol=1e-10)
    assert low.stats["newton_steps"] == dense.stats["newton_steps"]
    np.testing.assert_allclose(np.asarray(low.arrays["plan"]), dense.arrays["plan"], atol=1e-12)
    sparse = optsolve.ot.solve(a, b, x=x, y=y, cost=cost, gamma=1024.0, low_memory=True, block_size=5,
                               plan_threshold=1e-6)
    P = sparse.arrays["plan"]()
    assert P.format == "csr" and P.nnz < 37 * 29
    assert np.abs(P.toarray() - dense.arrays["plan"]).max() <= 1e-6


def test_low_memory_needs_points_and_tnt():
    a, b, C = family_problem("clouds", 1, n=6, m=6)
    from optsolve.core.errors import InputError

    with pytest.raises(InputError, match="low-memory mode needs point clouds"):
        optsolve.ot.solve(a, b, C, low_memory=True)
    rng = np.random.default_rng(1)
    x = rng.random((6, 2))
    with pytest.raises(ParameterError, match="in low-memory mode use '--method exact' or '--method tnt'"):
        optsolve.ot.solve(a, b, x=x, y=x, cost="sqeuclidean", method="emd", low_memory=True)


def test_low_memory_cli_and_streaming_verify(cli, tmp_path):
    from optsolve.core.files import save_problem

    rng = np.random.default_rng(3)
    path = tmp_path / "clouds.npz"
    save_problem(str(path), {"a": rng.dirichlet(np.ones(40)), "b": rng.dirichlet(np.ones(30)),
                             "x": rng.random((40, 3)), "y": rng.random((30, 3)), "cost": "euclidean"})
    sol = tmp_path / "s.json"
    plan = tmp_path / "plan.npz"
    r = cli("ot", path, "--low-memory", "--block-size", "8", "-o", sol, "--plan", plan, "--plan-threshold", "1e-9")
    assert r.exit_code == 0, r.stderr
    import json

    doc = json.loads(sol.read_text())
    assert doc["settings"]["low_memory"] is True and doc["settings"]["block_size"] == 8
    assert doc["arrays"]["keys"]["plan"]["format"] == "csr"
    with np.load(plan) as z:
        assert str(z["plan.format"]) == "csr"
    assert cli("verify", path, sol).exit_code == 0
    doc["objective"] *= 1.0001
    sol.write_text(json.dumps(doc))
    assert cli("verify", path, sol).exit_code == 6


@pytest.mark.parametrize("low_memory", [False, True])
def test_truncated_products_agree_with_the_plain_path(low_memory):
    from optsolve.ot.problems import OTProblem
    from optsolve.ot.tnt import solve_tnt

    rng = np.random.default_rng(21)
    x, y = rng.random((60, 2)), rng.random((50, 2))
    a, b = rng.dirichlet(np.ones(60)), rng.dirichlet(np.ones(50))
    ot = OTProblem(a=a, b=b, C=None if low_memory else cost_matrix(x, y, "sqeuclidean"), mass=1.0, x=x, y=y,
                   cost="sqeuclidean", block=16)
    plain = solve_tnt(ot, gamma_f=2.0 ** 13, truncate=False)
    trunc = solve_tnt(ot, gamma_f=2.0 ** 13, truncate=True)
    assert plain.status == trunc.status == "optimal"
    assert trunc.passes < plain.passes  # the sparse products were used
    np.testing.assert_allclose(trunc.f, plain.f, rtol=1e-6, atol=1e-9)
    np.testing.assert_allclose(trunc.g, plain.g, rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("doc,needle", [
    ({"a": [0.5, 0.5], "b": [0.5, 0.5], "C": [[0.0, -1.0], [1.0, 0.0]]}, "array 'C' has 1 negative entry"),
    ({"a": [0.5, 0.5], "b": [0.5, 0.5], "C": [[0.0, float("nan")], [1.0, 0.0]]}, "array 'C' contains NaN"),
    ({"a": [0.5, -0.5, 1.0], "b": [0.5, 0.5], "C": [[0.0, 1.0], [1.0, 0.0], [1.0, 1.0]]}, "array 'a' has 1 negative"),
    ({"a": [0.5, 0.5], "b": [0.5, 0.5, 0.5], "C": [[0.0, 1.0, 1.0], [1.0, 0.0, 1.0]]}, "--normalize"),
    ({"a": [0.5, 0.5], "b": [0.5, 0.5], "C": [[0.0, 1.0, 2.0], [1.0, 0.0, 2.0]]},
     "array 'b' has shape (2,), expected (3,) to match 'C' (2, 3)"),
    # grid problems: images a, b with an l1 or sqeuclidean cost and nothing else
    ({"a": [[0.5, 0.0], [0.0, 0.5]], "b": [[0.25, 0.25], [0.25, 0.25]], "cost": "euclidean"}, "key 'cost' must be"),
    ({"a": [[0.5, 0.0], [0.0, 0.5]], "b": [0.5, 0.5], "cost": "l1"}, "both must be images"),
    ({"a": [[0.5, 0.0], [0.0, 0.5]], "b": [[0.25, 0.25, 0.0], [0.25, 0.25, 0.0]], "cost": "l1"},
     "array 'b' has shape (2, 3), expected (2, 2) to match 'a' (2, 2)"),
    ({"a": [[0.5, 0.0], [0.0, 0.5]], "b": [[0.25, 0.25], [0.25, 0.25]], "cost": "l1", "C": [[0.0]]},
     "take a 'cost' and no 'C'"),
])
def test_bad_inputs_exit_7(cli, tmp_path, doc, needle):
    import json

    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    r = cli("ot", path)
    assert r.exit_code == 7
    assert needle in r.stderr and str(path) in r.stderr


def test_verbose_logs_one_line_per_stage(cli):
    from conftest import EXAMPLE_OT

    r = cli("ot", EXAMPLE_OT, "--gamma", "256", "-v")
    assert r.exit_code == 0
    stage_lines = [line for line in r.stderr.splitlines() if "stage" in line and "gamma=" in line]
    assert len(stage_lines) == r.json()["stats"]["stages"]


@pytest.mark.parametrize("name", ["example.npz", "clouds.npz"])
def test_bundled_examples_solve_and_verify(cli, tmp_path, name):
    from conftest import DATA

    path = DATA / "ot" / name
    sol = tmp_path / "s.json"
    assert cli("ot", path, "-o", sol, "-q").exit_code == 0
    assert cli("verify", path, sol, "-q").exit_code == 0


@pytest.mark.parametrize("cost", ["sqeuclidean", "l1"])
def test_grid_kernel_agrees_with_the_dense_path(cost):
    from optsolve.ot.problems import SCHEMA as OT_SCHEMA
    from optsolve.ot.problems import _image, prepare
    from optsolve.ot.rounding import round_problem
    from optsolve.ot.tnt import solve_tnt

    rng = np.random.default_rng(5)
    A, B = _image(rng, 12, "grf", 2.0), _image(rng, 12, "cauchy", 2.0)
    ot = prepare(OT_SCHEMA.validate({"a": A, "b": B, "cost": cost}, source="test"))
    assert ot.grid == (12, 12)
    grid = solve_tnt(ot, gamma_f=2.0 ** 12, structure=True)
    dense = solve_tnt(ot, gamma_f=2.0 ** 12, structure=False)
    assert grid.status == dense.status == "optimal"
    np.testing.assert_allclose(grid.f, dense.f, rtol=1e-6, atol=1e-8)
    u_grid = round_problem(ot, grid.f, grid.g, grid.reg).objective
    u_dense = round_problem(ot, dense.f, dense.g, dense.reg).objective
    assert u_grid == pytest.approx(u_dense, rel=1e-7)


def test_grid_problem_end_to_end(cli, tmp_path):
    import json

    path = tmp_path / "grid.npz"
    r = cli("gen", "ot", "--family", "images", "--size", "10", "--kind", "shapes", "--cost", "l1", "--store", "grid",
            "-o", path)
    assert r.exit_code == 0, r.stderr
    sol = tmp_path / "s.json"
    r = cli("ot", path, "--gamma", "4096", "-o", sol)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(sol.read_text())
    assert doc["problem"]["size"] == {"n": 100, "m": 100}
    data = np.load(path)
    a, b = data["a"].ravel(), data["b"].ravel()
    from optsolve.ot.problems import cost_matrix, grid_points

    pts = grid_points(10, 10)
    opt = pot.emd2(a / a.sum(), b / b.sum(), cost_matrix(pts, pts, "l1"))
    assert doc["certificate"]["holds"]
    lower = next(c["value"] for c in doc["certificate"]["checks"] if c["name"] == "dual_lower_bound")
    assert lower <= opt + 1e-12 <= doc["objective"] + 2e-12
    f = doc["solution"]["f"]
    assert all(fi is None for fi, ai in zip(f, a) if ai == 0)  # zero masses: -inf, written as null
    assert cli("verify", path, sol).exit_code == 0


def test_low_memory_rounding_with_zero_masses_on_the_grid():
    from optsolve.ot.problems import SCHEMA as OT_SCHEMA
    from optsolve.ot.problems import _image

    rng = np.random.default_rng(9)
    A, B = _image(rng, 8, "shapes", 2.0), _image(rng, 8, "grf", 2.0)
    problem = OT_SCHEMA.validate({"a": A, "b": B, "cost": "sqeuclidean"}, source="test")
    import optsolve.ot as ot_

    dense = ot_.solve_problem(problem, gamma=1024.0, low_memory=False)
    low = ot_.solve_problem(problem, gamma=1024.0, low_memory=True, block_size=5)
    assert low.certificate.holds and dense.certificate.holds
    assert low.objective == pytest.approx(dense.objective, rel=1e-10)


def test_colour_transfer_family(cli, tmp_path):
    rng = np.random.default_rng(4)
    src, tgt = tmp_path / "src.npy", tmp_path / "tgt.npy"
    np.save(src, (rng.random((12, 10, 3)) * 255).astype(np.uint8))
    np.save(tgt, rng.random((8, 9, 3)))
    out = tmp_path / "colour.npz"
    r = cli("gen", "ot", "--family", "colour", "--source", src, "--target", tgt, "--n", "50", "-o", out)
    assert r.exit_code == 0, r.stderr
    data = np.load(out)
    assert data["x"].shape == (50, 3) and data["y"].shape == (50, 3)
    assert 0.0 <= data["x"].min() and data["x"].max() <= 1.0
    assert cli("ot", out, "-q").exit_code == 0
    r = cli("gen", "ot", "--family", "colour", "--source", src, "-o", out)
    assert r.exit_code == 2 and "--source and --target" in r.stderr
    bad = tmp_path / "flat.npy"
    np.save(bad, np.zeros((4, 4)))
    r = cli("gen", "ot", "--family", "colour", "--source", bad, "--target", tgt, "-o", out)
    assert r.exit_code == 2 and "expected (height, width, 3)" in r.stderr


def test_digits_family(cli, tmp_path):
    out = tmp_path / "digits.npz"
    r = cli("gen", "ot", "--family", "digits", "--size", "16", "--cost", "l1", "--seed", "2", "-o", out)
    assert r.exit_code == 0, r.stderr
    data = np.load(out)
    assert data["a"].shape == (16, 16) and str(data["cost"]) == "l1"
    assert data["a"].min() >= 0 and data["a"].sum() == pytest.approx(1.0)
    r = cli("ot", out, "-q")
    assert r.exit_code == 0 and r.json()["certificate"]["holds"]


def test_target_gap_result_reuses_the_last_rounding():
    a, b, C = family_problem("images", 2, size=8, kind="grf")
    res = optsolve.ot.solve(a, b, C, method="tnt", target_gap=1e-3)
    fresh = optsolve.ot.solve(a, b, C, gamma=res.stats["final_gamma"], target_gap=None)
    # the same stage rounded afresh gives the same plan and objective
    assert res.stats["stage_log"][-1]["relative_gap"] == pytest.approx(res.certificate["relative_gap"].value,
                                                                       rel=1e-9)
    assert res.certificate.holds
    np.testing.assert_allclose(res.arrays["plan"].sum(0), b / b.sum(), atol=1e-12)
    assert fresh.certificate.holds


# --------------------------------------------------------------------------- robustness: nearly one-to-one plans
# Uniform point clouds with uniform weights have plans close to a permutation at high gamma: the Newton system is
# then nearly singular in many directions and the truncated plan decouples into blocks. The line search used to
# fail there (numerical_error at n = 2,000 and 5,000 under --target-gap 1e-3).


def point_clouds(n, seed, kind="uniform"):
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        x, y = rng.random((n, 2)), rng.random((n, 2))
    else:  # five Gaussian blobs
        centres = rng.random((5, 2))
        x, y = (centres[rng.integers(0, 5, n)] + 0.05 * rng.standard_normal((n, 2)) for _ in range(2))
    return np.full(n, 1.0 / n), np.full(n, 1.0 / n), x, y


def assert_certified_against_emd(res, a, b, x, y):
    C = cost_matrix(x, y, "sqeuclidean")
    opt = pot.emd2(a, b, C, numItermax=10 ** 7)
    assert res.certificate.holds, res.certificate
    assert res.certificate["dual_lower_bound"].value <= opt * (1 + 1e-9)
    assert res.objective >= opt * (1 - 1e-9)
    assert res.certificate["gap_upper_bound"].value >= res.objective - opt - 1e-9 * opt  # emd2's own rounding
    return opt


@pytest.mark.parametrize("n,seed,kind", [(1000, 1, "uniform"), (1000, 1, "gaussians"),
                                         pytest.param(2000, 0, "uniform", marks=pytest.mark.slow),
                                         pytest.param(2000, 1, "gaussians", marks=pytest.mark.slow)])
def test_point_clouds_meet_the_target_gap(n, seed, kind):
    a, b, x, y = point_clouds(n, seed, kind)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method="tnt", target_gap=1e-3)
    assert res.status.value == "optimal", res.message
    assert res.stats["stage_log"][-1]["relative_gap"] <= 1e-3  # met by tnt's own stages
    opt = assert_certified_against_emd(res, a, b, x, y)
    assert (res.objective - opt) / opt <= 1e-2


@pytest.mark.parametrize("n,seed", [(200, 0), (400, 2), (700, 4)])
def test_point_clouds_at_high_gamma(n, seed):
    a, b, x, y = point_clouds(n, seed)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method="tnt", gamma=2.0 ** 19)
    assert res.status.value == "optimal", res.message
    assert res.stats["final_gamma"] == 2.0 ** 19
    opt = assert_certified_against_emd(res, a, b, x, y)
    assert (res.objective - opt) / opt <= 1e-3


def _cloud_problem(n=120, seed=3):
    from optsolve.ot.problems import SCHEMA, prepare

    a, b, x, y = point_clouds(n, seed)
    return prepare(SCHEMA.validate(dict(a=a, b=b, x=x, y=y, cost="sqeuclidean"), source="test"))


def _plan(res, ot):
    C = cost_matrix(ot.x, ot.y, "sqeuclidean")
    return np.exp((res.f[:, None] + res.g[None, :] - C) / res.reg)


def test_failed_line_searches_fall_back_and_recover(monkeypatch):
    from optsolve.ot import tnt

    ot = _cloud_problem()
    ref = tnt.solve_tnt(ot, gamma_f=2.0 ** 12)
    real, calls = tnt._line_search, []

    def failing(*args, **kwargs):  # the 3rd to 5th line searches fail
        calls.append(1)
        if 3 <= len(calls) <= 5:
            return ("line search failed (forced)",) + (None,) * 6
        return real(*args, **kwargs)

    monkeypatch.setattr(tnt, "_line_search", failing)
    res = tnt.solve_tnt(ot, gamma_f=2.0 ** 12)
    assert res.status == "optimal" and res.gamma == 2.0 ** 12
    fb = res.stats.fallbacks
    assert fb.get("resync", 0) >= 1 and fb.get("resync", 0) + fb.get("sinkhorn", 0) == 3
    per_stage = {}
    for entry in res.stats.stage_log:
        for kind, k in entry.get("fallbacks", {}).items():
            per_stage[kind] = per_stage.get(kind, 0) + k
    assert per_stage == fb  # every fallback is recorded with its stage
    # the same entropic plan, to the stage's tolerance
    assert np.abs(_plan(res, ot) - _plan(ref, ot)).sum() < 1e-4


def test_a_failed_stage_is_retried_at_a_smaller_gamma(monkeypatch):
    from optsolve.ot import tnt

    ot = _cloud_problem()
    real, failed = tnt.project, []

    def flaky(K, gamma, *args, **kwargs):
        if gamma > 1000 and not failed:
            failed.append(gamma)
            raise tnt.StageFailed("forced failure")
        return real(K, gamma, *args, **kwargs)

    monkeypatch.setattr(tnt, "project", flaky)
    res = tnt.solve_tnt(ot, gamma_f=2.0 ** 12)
    assert res.status == "optimal" and res.gamma == 2.0 ** 12
    assert res.stats.fallbacks["lower_gamma"] == 1
    gammas = [e["gamma"] for e in res.stats.stage_log]
    assert gammas == sorted(gammas)
    (entry,) = [e for e in res.stats.stage_log if "retried_after" in e]
    assert entry["gamma"] < failed[0] and entry["fallbacks"]["lower_gamma"] == 1
    assert entry["retried_after"][0]["gamma"] == failed[0]
    assert "forced failure" in entry["retried_after"][0]["reason"]


@pytest.mark.parametrize("target_gap,status", [(None, "optimal_inaccurate"), (1e-9, "numerical_error")])
def test_a_stage_that_keeps_failing_ends_with_its_reason(monkeypatch, target_gap, status):
    from optsolve.ot import tnt

    ot = _cloud_problem()
    real = tnt.project

    def broken(K, gamma, *args, **kwargs):
        if gamma > 1000:
            raise tnt.StageFailed("forced failure")
        return real(K, gamma, *args, **kwargs)

    monkeypatch.setattr(tnt, "project", broken)
    gap_fn = (lambda f, g, reg: 1.0) if target_gap else None
    res = tnt.solve_tnt(ot, gamma_f=2.0 ** 12, target_gap=target_gap, gap_fn=gap_fn)
    assert res.status == status
    assert "forced failure" in res.message and "retries at smaller gamma" in res.message
    assert res.gamma <= 1000 and np.all(np.isfinite(res.f))
    assert 1 <= res.stats.fallbacks["lower_gamma"] <= tnt.RETREATS_MAX


def test_plan_marginals_stay_exact_after_a_long_step_on_a_truncated_plan():
    from optsolve.core.backend import get_backend
    from optsolve.ot import tnt

    ot = _cloud_problem(300, 0)
    gamma = 2.0 ** 16
    K = tnt.DenseKernel(np, cost_matrix(ot.x, ot.y, "sqeuclidean") / ot.max_cost(), np.float64)
    res = tnt.solve_tnt(ot, gamma_f=gamma, backend=get_backend("cpu"))
    u = res.f * gamma / ot.max_cost()
    v = res.g * gamma / ot.max_cost()
    K.threshold = 1e-18
    plan = tnt.Plan(K, gamma, 30.0)
    plan.rebuild(u, v)
    assert K.sparse is not None and K.sparse.density < 0.1  # truncated
    # a long step on a few rows: what the truncation dropped there grows by up to e^20
    u2 = u.copy()
    u2[:5] += 20.0
    lr, lc = plan.log_marginals(u2, v)
    np.testing.assert_allclose(np.exp(lr), np.exp(K.log_rows(u2, v, gamma)), rtol=1e-9)
    np.testing.assert_allclose(np.exp(lc), np.exp(K.log_cols(u2, v, gamma)), rtol=1e-9, atol=1e-15)


def test_tolerance_below_the_float64_floor_is_said():
    a, b, C = family_problem("clouds", 4, n=60, m=60)
    res = optsolve.ot.solve(a, b, C, gamma=2.0 ** 16, tol=1e-15)
    assert res.status.value == "optimal", res.message
    assert "below what float64 resolves" in res.message
    assert res.certificate.holds
