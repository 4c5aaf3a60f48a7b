"""--method piqp and --method clarabel: the interior-point packages called on the problem, judged by the
same certificate, against osqp to high accuracy."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

import optsolve.qp
from optsolve.qp.problems import FAMILIES, SCHEMA

PEERS = [pytest.param(name, marks=pytest.mark.skipif(not __import__("importlib").util.find_spec(name),
                                                       reason=f"{name} is not installed (optsolve[peers])"))
         for name in ("piqp", "clarabel")]


def problem(raw: dict):
    return SCHEMA.validate(raw, source="test")


def reference(p) -> float:
    return optsolve.qp.solve_problem(p, method="osqp", eps_abs=1e-9, eps_rel=1e-9, max_iter=200000).objective


@pytest.mark.parametrize("name", PEERS)
@pytest.mark.parametrize("fam", ["random", "eqqp", "lasso", "portfolio", "chain"])
def test_peer_matches_osqp_and_holds_its_certificate(name, fam):
    p = problem(FAMILIES[fam].generate(np.random.default_rng(7), n=40))
    res = optsolve.qp.solve_problem(p, method=name, eps_abs=1e-7, eps_rel=1e-7)
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    assert res.objective == pytest.approx(reference(p), rel=1e-5, abs=1e-6)
    assert res.stats["iterations"] >= 0 and res.stats[f"{name}_version"]


@pytest.mark.parametrize("name", PEERS)
def test_peer_on_degenerate_rows(name):
    """No constraints; a free row (both bounds infinite); an equality; one-sided rows of both kinds."""
    P = sp.diags([1.0, 2.0, 3.0], format="csc")
    q = np.array([-1.0, 1.0, -2.0])
    free = optsolve.qp.solve_problem(problem({"P": P, "q": q}), method=name, eps_abs=1e-8, eps_rel=1e-8)
    np.testing.assert_allclose(free.solution["x"], [1.0, -0.5, 2.0 / 3.0], atol=1e-6)
    A = sp.csc_matrix(np.array([[1.0, 1.0, 1.0], [1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]))
    raw = {"P": P, "q": q, "A": A, "l": np.array([-np.inf, 0.5, -np.inf, -1.0]),
           "u": np.array([np.inf, 0.5, 0.0, 0.5])}
    res = optsolve.qp.solve_problem(problem(raw), method=name, eps_abs=1e-8, eps_rel=1e-8)
    assert res.status.value == "optimal" and res.certificate.holds
    np.testing.assert_allclose(res.solution["x"], [0.5, -0.5, 0.5], atol=1e-6)
    y = np.asarray(res.solution["y"])
    assert abs(y[0]) < 1e-6 and y[3] > 0  # OSQP's signs: the upper bound of row 3 pushes


@pytest.mark.parametrize("name", PEERS)
def test_peer_infeasibility_claims_are_checked(name):
    P = sp.csc_matrix((2, 2))
    A = sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 1.0]]))
    infeasible = problem({"P": P, "q": np.zeros(2), "A": A, "l": np.array([2.0, -np.inf]),
                          "u": np.array([np.inf, 1.0])})
    res = optsolve.qp.solve_problem(infeasible, method=name)
    assert res.status.value == "infeasible" and res.certificate.holds, res.message
    unbounded = problem({"P": P, "q": np.array([-1.0, 0.0]), "A": sp.csc_matrix(np.array([[0.0, 1.0]])),
                         "l": np.array([0.0]), "u": np.array([1.0])})
    res = optsolve.qp.solve_problem(unbounded, method=name)
    assert res.status.value == "unbounded" and res.certificate.holds, res.message


def test_a_point_short_of_the_tighter_target_is_judged_at_the_requested_eps():
    from optsolve.qp import peers
    from optsolve.qp.problems import prepare

    p = problem(FAMILIES["random"].generate(np.random.default_rng(3), n=30))
    qp = prepare(p)
    ref = optsolve.qp.solve_problem(p, method="osqp", eps_abs=1e-9, eps_rel=1e-9, max_iter=200000)
    x, y = np.asarray(ref.solution["x"]), np.asarray(ref.solution["y"])
    s = {"eps_abs": 1e-6, "eps_rel": 1e-6}
    assert peers._outcome(qp, s, "max_iter", x, y, {})["status"] == "optimal"
    assert peers._outcome(qp, s, "max_iter", np.zeros(qp.n), np.zeros(qp.m), {})["status"] == "max_iter"
    assert peers._outcome(qp, s, "infeasible", x, y, {})["claim"] is y


@pytest.mark.parametrize("fam", ["random", "portfolio", "chain", "svm"])
def test_the_finish_polishes_an_answer_short_of_the_tolerance(fam):
    """osqp's answer at 1e-3, finished by polishing on the equilibrated problem, passes the test at 1e-9 and has
    the objective of osqp's own answer at 1e-9; an answer with no point, or a claim, is not finished."""
    import time

    from optsolve.qp import peers
    from optsolve.qp.problems import prepare

    p = problem(FAMILIES[fam].generate(np.random.default_rng(5), n=60))
    qp = prepare(p)
    rough = optsolve.qp.solve_problem(p, method="osqp", eps_abs=1e-3, eps_rel=1e-3, max_iter=200000)
    x, y = np.asarray(rough.solution["x"]), np.asarray(rough.solution["y"])
    tight = {"eps_abs": 1e-9, "eps_rel": 0.0}
    assert not peers.passes(qp, tight, x, y)
    done = peers.finished(qp, tight, x, y)
    assert done is not None and peers.passes(qp, tight, *done)
    assert qp.objective(done[0]) == pytest.approx(reference(p), rel=1e-7, abs=1e-9)
    out = peers._outcome(qp, tight, "max_iter", x, y, {"iterations": 7}, finish=time.perf_counter() + 10)
    assert out["status"] == "optimal" and out["stats"] == {"iterations": 7, "finished": "polished"} and out["passes"]
    assert peers._outcome(qp, tight, "max_iter", x, y, {})["status"] == "max_iter"  # no finish asked
    assert peers._outcome(qp, tight, "infeasible", x, y, {}, finish=time.perf_counter() + 10)["claim"] is y
    assert peers.finished(qp, tight, np.full(qp.n, np.nan), y) is None
    assert peers.finished(qp, tight, x[:-1], y) is None


@pytest.mark.skipif(not __import__("importlib").util.find_spec("piqp"), reason="piqp is not installed")
def test_rows_on_one_variable_are_piqp_box_bounds_with_their_duals():
    """Singleton rows go to PIQP's box: a negative coefficient (bounds flipped), a second row on the same
    variable (kept a general row), a one-sided row; the duals come back per row and pass the certificate."""
    from optsolve.qp import peers
    from optsolve.qp.problems import prepare

    P = sp.csc_matrix(np.array([[4.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 1.0]]))
    q = np.array([-8.0, 3.0, -5.0])
    A = sp.csc_matrix(np.array([[1.0, 1.0, 1.0],   # a general row
                                [-2.0, 0.0, 0.0],  # -2 x0 in [-3, 4]: x0 in [-2, 1.5]
                                [0.0, 0.5, 0.0],   # x1 >= -1 (one-sided)
                                [0.0, 0.0, 1.0],   # x2 <= 2
                                [0.0, 0.0, 3.0]]))  # 3 x2 <= 4.5: the same variable again
    l = np.array([-10.0, -3.0, -0.5, -np.inf, -np.inf])
    u = np.array([10.0, 4.0, np.inf, 2.0, 4.5])
    p = problem({"P": P, "q": q, "A": A, "l": l, "u": u})
    qp = prepare(p)
    rows, cols, coef = peers.box_rows(qp, np.isfinite(qp.l) | np.isfinite(qp.u))
    assert rows.tolist() == [1, 2, 3] and cols.tolist() == [0, 1, 2] and coef.tolist() == [-2.0, 0.5, 1.0]
    res = optsolve.qp.solve_problem(p, method="piqp", eps_abs=1e-9, eps_rel=1e-9)
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    assert res.objective == pytest.approx(reference(p), rel=1e-7, abs=1e-8)
    x, y = np.array(res.solution["x"]), np.array(res.solution["y"])
    np.testing.assert_allclose(P @ x + q + A.T @ y, 0.0, atol=1e-7)
    assert x[0] == pytest.approx(1.5, abs=1e-7) and y[1] < 0  # -2 x0 at its lower bound -3: y <= 0
    assert x[2] == pytest.approx(1.5, abs=1e-7) and y[4] > 0 and abs(y[3]) < 1e-7  # 3 x2 <= 4.5 binds, x2 <= 2 not
