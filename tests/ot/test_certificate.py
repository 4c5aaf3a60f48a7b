"""The OT certificate: valid bounds for any potentials, and tampering makes a check fail."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import optsolve.ot
from optsolve.ot import certificate
from optsolve.ot.problems import SCHEMA, OTProblem, cost_matrix


def _problem(rng, n=12, m=10):
    x, y = rng.random((n, 2)), rng.random((m, 2))
    a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
    return a, b, cost_matrix(x, y, "sqeuclidean")


@settings(max_examples=40, deadline=None)
@given(f=arrays(np.float64, 6, elements=st.floats(-5, 5)), seed=st.integers(0, 2**16))
def test_dual_bound_is_a_lower_bound_for_any_potentials(f, seed):
    rng = np.random.default_rng(seed)
    a, b, C = _problem(rng, 6, 5)
    import ot as pot

    opt = pot.emd2(a, b, C)
    assert certificate.dual_bound_of(OTProblem(a=a, b=b, C=C, mass=1.0), f) <= opt + 1e-12


def _doc(method, rng, **kw):
    a, b, C = _problem(rng)
    res = optsolve.ot.solve(a, b, C, method=method, **kw)
    problem = SCHEMA.validate({"a": a, "b": b, "C": C}, source="test")
    return problem, json.loads(res.to_json())


def _recheck(problem, doc, **limits):
    return certificate.check(problem, doc["solution"], method=doc["method"], objective=doc["objective"],
                             settings=doc["settings"], limits=limits, status=doc["status"])


@pytest.mark.parametrize("method,kw", [("emd", {}), ("sinkhorn", {"reg": 0.02})])
def test_round_trip_through_json_holds(rng, method, kw):
    problem, doc = _doc(method, rng, **kw)
    cert = _recheck(problem, doc)
    assert cert.holds
    assert [c["value"] for c in doc["certificate"]["checks"]] == [c.value for c in cert.checks]
    assert all(c.limit is not None for c in cert.checks if c.holds is not None)
    assert {c.name for c in cert.checks if c.holds is None} >= {"relative_gap", "gap_upper_bound"}


TAMPERS = {
    "potential_f": lambda s: s["f"].__setitem__(0, s["f"][0] + 0.05),
    "potential_g": lambda s: s["g"].__setitem__(1, s["g"][1] - 0.05),
    "dual_bound": lambda s: s.__setitem__("dual_bound", s["dual_bound"] * 1.01),
}


@pytest.mark.parametrize("method,kw", [("emd", {}), ("sinkhorn", {"reg": 0.02})])
@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_tampered_solution_fails(rng, method, kw, tamper):
    problem, doc = _doc(method, rng, **kw)
    bad = copy.deepcopy(doc)
    TAMPERS[tamper](bad["solution"])
    assert not _recheck(problem, bad).holds


@pytest.mark.parametrize("method,kw", [("emd", {}), ("sinkhorn", {"reg": 0.02})])
def test_tampered_objective_fails(rng, method, kw):
    problem, doc = _doc(method, rng, **kw)
    doc["objective"] *= 0.99
    cert = _recheck(problem, doc)
    assert not cert["objective_matches"].holds


def test_tampered_emd_plan_fails(rng):
    problem, doc = _doc("emd", rng)
    plan = doc["solution"]["plan"]
    plan["value"][0] += 1e-3
    cert = _recheck(problem, doc)
    assert not cert["marginal_l1"].holds
    plan["value"][0] = -1.0
    assert not _recheck(problem, doc)["nonnegativity"].holds


def test_emd_plan_with_fractional_indices_does_not_fit(rng):
    problem, doc = _doc("emd", rng)
    doc["solution"]["plan"]["row"][0] += 0.5
    with pytest.raises(ValueError, match="not integers"):
        _recheck(problem, doc)


def test_suboptimal_emd_plan_fails_the_gap(rng):
    a, b, C = _problem(rng)
    problem = SCHEMA.validate({"a": a, "b": b, "C": C}, source="test")
    P = np.outer(a, b)  # feasible, not optimal
    row, col = np.nonzero(P)
    res = optsolve.ot.solve(a, b, C, method="emd")
    sol = dict(res.solution, plan={"format": "coo", "row": row, "col": col, "value": P[row, col]})
    cert = certificate.check(problem, sol, method="emd", objective=float((C * P).sum()), settings={},
                             limits={}, status="optimal")
    assert cert["marginal_l1"].holds and cert["objective_matches"].holds
    assert not cert["gap_within_lp_tol"].holds and not cert["complementary_slackness"].holds
    # the same plan labelled as another method's is judged the same: the plan's format decides
    relabelled = certificate.check(problem, sol, method="tnt", objective=float((C * P).sum()), settings={},
                                   limits={}, status="optimal")
    assert not relabelled["gap_within_lp_tol"].holds
    # a plan that claims no optimum reports the optimality residuals without judging them
    stopped = certificate.check(problem, sol, method="emd", objective=float((C * P).sum()), settings={},
                                limits={}, status="max_iter")
    assert stopped["gap_within_lp_tol"].holds is None and stopped.holds


def test_downgrade_when_certificate_fails(rng):
    a, b, C = _problem(rng)
    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=0.05, feas_tol=1e-300)  # no rounded plan meets it
    assert not res.certificate["marginal_l1"].holds
    assert res.status.value == "optimal_inaccurate"
    assert res.exit_code == 6
    assert "marginal_l1" in res.message
    assert res.settings["feas_tol"] == 1e-300


@pytest.mark.parametrize("status", ["infeasible", "unbounded"])
def test_infeasible_or_unbounded_claims_have_no_certificate(rng, status):
    problem, doc = _doc("emd", rng)
    cert = certificate.check(problem, doc["solution"], objective=doc["objective"], settings={}, limits={},
                             status=status)
    assert not cert.holds and not cert[f"{status}_certificate"].holds
    assert certificate.CLAIMS == ("optimal",)


def test_target_gap_is_judged_only_when_given(rng):
    problem, doc = _doc("sinkhorn", rng, reg=0.05)
    rel = _recheck(problem, doc)["relative_gap"].value
    assert rel > 1e-6
    assert _recheck(problem, doc, target_gap=10 * rel)["gap_within_target_gap"].holds
    assert not _recheck(problem, doc, target_gap=rel / 10)["gap_within_target_gap"].holds
    with pytest.raises(KeyError):
        _recheck(problem, doc)["gap_within_target_gap"]


def test_row_block_measures_equal_the_column_blocks(rng):
    """On a matrix in host memory the rounded Gibbs plan is measured over row blocks on threads; any other
    array namespace (a GPU's) takes column blocks: the two agree, zero masses and negative entries included."""
    import types

    proxy = types.SimpleNamespace(**{k: getattr(np, k) for k in dir(np) if not k.startswith("__")})
    n, m = 41, 33
    x, y = rng.random((n, 2)), rng.random((m, 2))
    a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
    a[[3, 17]] = 0.0
    b[5] = 0.0
    a, b = a / a.sum(), b / b.sum()
    ot = OTProblem(a=a, b=b, C=cost_matrix(x, y, "sqeuclidean"), mass=1.0, block=7)
    f, g = rng.normal(size=n) * 0.01 - 0.03, rng.normal(size=m) * 0.01 - 0.03  # some rows above their mass
    f[[3, 17]], g[5] = np.nan, np.nan  # as a document writes them (null)
    solution = {"plan": {"format": "gibbs_rounded", "reg": 0.01}}
    rows = certificate._block_measures(ot, solution, f, g, False)
    cols = certificate._block_measures(ot, solution, f, g, False, proxy)
    for r, c in zip(rows, cols):
        np.testing.assert_allclose(r, c, rtol=1e-12, atol=1e-15)
    assert rows[3] > 0  # the rank-one term of a plan this far off its marginals has negative entries
    fs = np.where(np.isnan(f), -np.inf, f)
    assert certificate.dual_bound_of(ot, fs) == pytest.approx(certificate.dual_bound_of(ot, fs, proxy), rel=1e-13)


@pytest.fixture
def small_problem(tmp_path, rng):
    a, b, C = _problem(rng, 40, 30)
    path = tmp_path / "p.npz"
    from optsolve.core.files import save_problem

    save_problem(str(path), {"a": a, "b": b, "C": C})
    return path, a, b, C


@pytest.mark.parametrize("options, reg", [(["--method", "sinkhorn", "--reg", "0.05"], 0.05),
                                          (["--method", "tnt", "--gamma", "16"], None),
                                          (["--reg", "0.05"], 0.05)])  # auto: the entropic problem, by tnt
def test_an_entropic_answer_says_so_in_the_summary_and_the_document(cli, tmp_path, small_problem, options, reg):
    import ot as pot

    path, a, b, C = small_problem
    r = cli("ot", path, *options, "-o", tmp_path / "s.json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    reg = reg if reg is not None else C.max() / 16
    checks = {c["name"]: c["value"] for c in doc["certificate"]["checks"]}
    gap, rel = checks["gap_upper_bound"], checks["relative_gap"]
    stated = f"entropic at reg {reg:.3g}; LP gap <= {gap:.3g}, {100 * rel:.3g}% of the cost"
    assert doc["qualifier"] == stated
    assert r.stderr.startswith(f"optsolve ot: optimal ({stated}), objective")
    assert doc["objective"] - gap <= pot.emd2(a, b, C) + 1e-12  # the stated gap covers the true one
    v = cli("verify", path, tmp_path / "s.json")
    assert v.exit_code == 0, v.stderr
    assert {c["name"]: c["holds"] for c in json.loads(v.stdout)["checks"]}["qualifier_matches"] is True


@pytest.mark.parametrize("options", [[], ["--method", "tnt", "--target-gap", "1e-3"], ["--method", "emd"]])
def test_an_answer_to_the_lp_has_no_qualifier(cli, tmp_path, small_problem, options):
    path = small_problem[0]
    r = cli("ot", path, *options, "-o", tmp_path / "s.json")
    assert r.exit_code == 0, r.stderr
    assert "entropic" not in r.stderr and "LP gap" not in r.stderr
    assert r.stderr.startswith("optsolve ot: optimal, objective")
    doc = json.loads((tmp_path / "s.json").read_text())
    assert "qualifier" in doc and doc["qualifier"] is None
    v = cli("verify", path, tmp_path / "s.json")
    assert v.exit_code == 0 and "qualifier_matches" not in v.stdout


def test_verify_refuses_a_qualifier_that_understates_the_gap_or_qualifies_an_lp_answer(
        cli, tmp_path, small_problem, verify_forged):
    path = small_problem[0]
    assert cli("ot", path, "--method", "sinkhorn", "--reg", "0.05", "-o", tmp_path / "s.json").exit_code == 0
    doc = json.loads((tmp_path / "s.json").read_text())
    forged = dict(doc, qualifier=doc["qualifier"].replace("LP gap <= ", "LP gap <= 0.1 x "))
    assert verify_forged(path, forged).exit_code == 6
    gap = next(c["value"] for c in doc["certificate"]["checks"] if c["name"] == "gap_upper_bound")
    forged = dict(doc, qualifier=doc["qualifier"].replace(f"{gap:.3g}", f"{gap / 2:.3g}"))
    r = verify_forged(path, forged)
    assert r.exit_code == 6 and "qualifier_matches" in r.stderr, r.stderr
    older = {k: v for k, v in doc.items() if k != "qualifier"}  # written before the field: reported only
    r = verify_forged(path, older)
    assert r.exit_code == 0, r.stderr
    assert cli("ot", path, "--method", "emd", "-o", tmp_path / "e.json").exit_code == 0
    exact = json.loads((tmp_path / "e.json").read_text())
    r = verify_forged(path, dict(exact, qualifier=doc["qualifier"]))
    assert r.exit_code == 6 and "qualifier_matches" in r.stderr, r.stderr


def test_the_certificates_distinct_points_agree_with_the_solvers_on_random_clouds():
    from optsolve.ot.certificate import kernels
    from optsolve.ot.repeats import distinct

    rng = np.random.default_rng(5)
    for n, d, pool in ((1, 2, 1), (50, 2, 10), (200, 3, 150), (30, 1, 30), (40, 2, 1000)):
        P = rng.integers(0, pool, size=(n, d)).astype(float) / 7.0
        mine, theirs = kernels.distinct(P), distinct(P)
        assert (mine is None) == (theirs is None)
        if mine is not None:
            (f1, l1), (f2, l2) = mine, theirs
            assert np.array_equal(P[f1][l1], P) and np.array_equal(P[f2][l2], P)
            assert np.array_equal(np.sort(P[f1], axis=0), np.sort(P[f2], axis=0))


def test_the_certificates_constants_are_its_own_and_equal_the_solvers():
    from optsolve.ot import defaults

    assert certificate.DEFAULT_TARGET_GAP == defaults.TARGET_GAP


@pytest.mark.parametrize("d", [1, 2, 3, 4])
@pytest.mark.parametrize("spread", [0.0, 0.05, 5.0])
def test_the_certificates_c_transform_agrees_with_the_solvers_and_with_brute_force(d, spread):
    """kernels.sq_ctransform (hull walk, or the lifted tree) against legendre.Envelope and the full minimum,
    on uniform and clustered clouds with weights that vary little or a lot between neighbours."""
    from optsolve.ot.certificate import kernels
    from optsolve.ot.legendre import Envelope

    rng = np.random.default_rng(7 + d)
    for P in (rng.random((400, d)), rng.random((6, d))[rng.integers(0, 6, 400)] + 0.02 * rng.standard_normal((400, d))):
        w = spread * rng.standard_normal(400) + (P * P).sum(1) * (spread > 1)
        Q = rng.random((300, d)) * 1.4 - 0.2
        full = ((P[None, :, :] - Q[:, None, :]) ** 2).sum(-1) - w[None, :]
        want = full.min(1)
        mine = kernels.sq_ctransform(P, w, Q)
        assert np.allclose(mine, want, rtol=0, atol=1e-12 * max(1.0, np.abs(want).max()))
        assert np.allclose(mine, Envelope(P, w).ctransform(Q), rtol=0, atol=1e-12 * max(1.0, np.abs(want).max()))


def test_the_certificates_grid_kernels_agree_with_the_solvers_and_with_dense_sums():
    from optsolve.ot import grid
    from optsolve.ot.certificate import kernels

    rng = np.random.default_rng(11)
    for shape, cost in (((5, 7), "sqeuclidean"), ((6, 6), "l1"), ((1, 9), "l1")):
        C1, C2 = grid.axis_costs(shape, cost)
        C = (C1[:, None, :, None] + C2[None, :, None, :]).reshape(C1.shape[0] * C2.shape[0], -1)
        n = C.shape[0]
        w = rng.standard_normal(n)
        w[rng.random(n) < 0.2] = np.inf  # entries skipped by a minimum
        assert np.allclose(kernels.grid_min_plus(w, C1, C2), (w[None, :] + C).min(1))
        assert np.array_equal(kernels.grid_min_plus(w, C1, C2), grid.min_apply(w, C1, C2))
        reg = 0.05
        u, v = rng.standard_normal(n), rng.standard_normal(n)
        u[rng.random(n) < 0.2] = -np.inf  # rows and columns of zero mass
        K = np.exp(u[:, None] + v[None, :] - C / reg)
        r, c, cost_value = kernels.grid_gibbs(u, v, C1, C2, reg)
        assert np.allclose(r, K.sum(1)) and np.allclose(c, K.sum(0)) and np.isclose(cost_value, (C * K).sum())
        theirs = grid.gibbs_sums(u, v, C1, C2, reg)
        assert np.allclose(r, theirs[0]) and np.allclose(c, theirs[1]) and np.isclose(cost_value, theirs[2])
        x, y = rng.standard_normal(n), rng.standard_normal(n)
        assert np.isclose(kernels.grid_bilinear(x, y, C1, C2), x @ C @ y)
        assert np.isclose(kernels.grid_bilinear(x, y, C1, C2), grid.bilinear(x, y, C1, C2))
