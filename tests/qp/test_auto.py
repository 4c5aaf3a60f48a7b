"""The default method ``auto``: each branch of its rule, each fall-through, against dense references."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import scipy.sparse as sp

import optsolve.qp
from optsolve.qp import auto
from optsolve.qp.admm import SWITCHED, ADMMSettings, solve_admm
from optsolve.qp.problems import FAMILIES, SCHEMA, QPProblem, prepare

needs_piqp = pytest.mark.skipif(not auto.has_piqp(), reason="piqp is not installed")


def problem(raw: dict):
    return SCHEMA.validate(raw, source="test")


def failing(key: str, said: str):
    """A peer's solve function (:mod:`optsolve.qp.peers`) that ends with a numerical error and no point."""

    def broken(qp, s, time_limit, finish=False):
        return {"status": "numerical_error", "x": np.full(qp.n, np.nan), "y": np.zeros(qp.m), "claim": None,
                "stats": {"iterations": 2, key: said}}

    return broken


def kkt_reference(P, q, A, b):
    """min 1/2 x'Px + q'x s.t. Ax = b by a dense solve of the KKT system (least squares where singular)."""
    n, m = P.shape[0], A.shape[0]
    K = np.block([[P, A.T], [A, np.zeros((m, m))]])
    sol = np.linalg.lstsq(K, np.concatenate([-q, b]), rcond=None)[0]
    return sol[:n], sol[n:]


def test_default_is_auto_and_reports_what_ran():
    res = optsolve.qp.solve_problem(problem(FAMILIES["chain"].generate(np.random.default_rng(0), n=40)))
    assert res.method == "auto" and res.stats["method_used"] in ("piqp", "admm", "admm, then piqp", "kkt")
    assert res.status.value == "optimal" and res.certificate.holds


@pytest.mark.parametrize("seed", range(4))
def test_equality_only_is_one_kkt_solve(seed):
    rng = np.random.default_rng(seed)
    n, m = 30, 12
    F = rng.standard_normal((n, n - m + 2))
    P = F @ F.T  # singular (rank n - m + 2), positive definite on the equality rows' null space
    P += np.diag(rng.uniform(0.0, 1.0, n) * (seed % 2))
    A = rng.standard_normal((m, n))
    b = rng.standard_normal(m)
    q = rng.standard_normal(n)
    raw = {"P": sp.csc_matrix(P), "q": q, "A": sp.csc_matrix(A), "l": b, "u": b}
    res = optsolve.qp.solve_problem(problem(raw), eps_abs=1e-8, eps_rel=1e-8)
    assert res.stats["method_used"] == "kkt" and res.status.value == "optimal" and res.certificate.holds
    x, y = kkt_reference(P, q, A, b)
    ref = 0.5 * x @ P @ x + q @ x
    assert res.objective == pytest.approx(ref, rel=1e-6, abs=1e-6)
    np.testing.assert_allclose(A @ res.solution["x"], b, atol=1e-6)


def test_equality_only_with_dependent_rows_and_without_rows():
    P = sp.diags([1.0, 2.0, 4.0], format="csc")
    q = np.array([1.0, -1.0, 2.0])
    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [2.0, 2.0, 0.0], [0.0, 1.0, 1.0]]))  # row 2 = 2 x row 1
    b = np.array([1.0, 2.0, 0.5])
    res = optsolve.qp.solve_problem(problem({"P": P, "q": q, "A": A, "l": b, "u": b}), eps_abs=1e-9, eps_rel=1e-9)
    assert res.stats["method_used"] == "kkt" and res.certificate.holds
    x, _ = kkt_reference(P.toarray(), q, A.toarray(), b)
    np.testing.assert_allclose(res.solution["x"], x, atol=1e-7)
    # a free row (both bounds infinite) is no constraint: still one KKT solve, its dual 0
    Af = sp.vstack([A, sp.csc_matrix(np.array([[1.0, 0.0, 1.0]]))], format="csc")
    raw = {"P": P, "q": q, "A": Af, "l": np.append(b, -np.inf), "u": np.append(b, np.inf)}
    res = optsolve.qp.solve_problem(problem(raw), eps_abs=1e-9, eps_rel=1e-9)
    assert res.stats["method_used"] == "kkt" and res.certificate.holds and res.solution["y"][3] == 0.0
    np.testing.assert_allclose(res.solution["x"], x, atol=1e-7)
    free = optsolve.qp.solve_problem(problem({"P": P, "q": q}), eps_abs=1e-9, eps_rel=1e-9)
    assert free.stats["method_used"] == "kkt"
    np.testing.assert_allclose(free.solution["x"], -q / np.array([1.0, 2.0, 4.0]), atol=1e-8)


def test_inconsistent_equalities_and_unbounded_fall_through_to_admm():
    A = sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 1.0]]))
    infeasible = problem({"P": sp.eye(2, format="csc"), "q": np.zeros(2), "A": A, "l": np.array([1.0, 2.0]),
                          "u": np.array([1.0, 2.0])})
    res = optsolve.qp.solve_problem(infeasible)
    assert res.status.value == "infeasible" and res.certificate.holds
    assert res.stats["method_used"].startswith("admm") and "KKT system" in res.message
    unbounded = problem({"P": sp.diags([1.0, 0.0], format="csc"), "q": np.array([0.0, -1.0])})
    res = optsolve.qp.solve_problem(unbounded)
    assert res.status.value == "unbounded" and res.certificate.holds


@needs_piqp
def test_small_problems_go_to_piqp_and_match_osqp():
    for fam in ("portfolio", "huber", "flow"):
        p = problem(FAMILIES[fam].generate(np.random.default_rng(3), n=300))
        assert auto.choose(prepare(p), warm=False) == "piqp"
        res = optsolve.qp.solve_problem(p, eps_abs=1e-6, eps_rel=1e-6)
        ref = optsolve.qp.solve_problem(p, method="osqp", eps_abs=1e-9, eps_rel=1e-9, max_iter=200000)
        assert res.stats["method_used"] == "piqp" and res.status.value == "optimal" and res.certificate.holds
        assert res.objective == pytest.approx(ref.objective, rel=1e-4, abs=1e-5)


@needs_piqp
def test_piqp_that_does_not_answer_falls_through_to_admm(monkeypatch):
    from optsolve.qp import peers

    broken = failing("piqp_status", "PIQP_NUMERICS")
    monkeypatch.setattr(peers, "solve_piqp", broken)
    p = problem(FAMILIES["portfolio"].generate(np.random.default_rng(0), n=100))
    monkeypatch.setattr(auto, "has_clarabel", lambda: False)
    res = optsolve.qp.solve_problem(p)
    assert res.stats["method_used"] == "admm" and res.status.value == "optimal" and res.certificate.holds
    assert "PIQP ended PIQP_NUMERICS" in res.message


@needs_piqp
@pytest.mark.skipif(not auto.has_clarabel(), reason="clarabel is not installed")
def test_clarabel_follows_a_failed_piqp_before_admm(monkeypatch):
    from optsolve.qp import peers

    broken = failing("piqp_status", "PIQP_NUMERICS")
    monkeypatch.setattr(peers, "solve_piqp", broken)
    p = problem(FAMILIES["portfolio"].generate(np.random.default_rng(0), n=100))
    res = optsolve.qp.solve_problem(p)
    assert res.stats["method_used"] == "clarabel" and res.status.value == "optimal" and res.certificate.holds
    ref = optsolve.qp.solve_problem(p, method="osqp", eps_abs=1e-7, eps_rel=1e-7, max_iter=100000)
    assert res.objective == pytest.approx(ref.objective, rel=1e-4, abs=1e-5)
    assert auto.fits("clarabel", 10.0, None, {"piqp": 1.0}) and not auto.fits("clarabel", 1.0, None, {"piqp": 1.0})
    assert auto.fits("piqp", 1.0, {"piqp": 0.05}, {}) and not auto.fits("piqp", 0.1, {"piqp": 0.05}, {})
    monkeypatch.setattr(auto, "NEXT_AFTER_SPENT", 1e9)  # Clarabel would not fit the time left: ADMM next
    res = optsolve.qp.solve_problem(p, time_limit=60.0)
    assert res.stats["method_used"].startswith("admm") and "PIQP ended PIQP_NUMERICS" in res.message
    assert "Clarabel ended" not in res.message


def test_rule_without_piqp_and_with_a_warm_start(monkeypatch):
    p = problem(FAMILIES["portfolio"].generate(np.random.default_rng(0), n=100))
    qp = prepare(p)
    assert auto.choose(qp, warm=True) == "admm"
    monkeypatch.setattr(auto, "has_piqp", lambda: False)
    assert auto.choose(qp, warm=False) == "admm"
    res = optsolve.qp.solve_problem(p)
    assert res.stats["method_used"] == "admm" and res.certificate.holds
    big = prepare(problem(FAMILIES["grid"].generate(np.random.default_rng(0), n=2000)))
    assert auto.kkt_entries(big.P, big.A) > auto.PIQP_FIRST_ENTRIES


@needs_piqp
def test_admm_hands_a_slow_run_over_to_piqp():
    """switch_after = 0: the first failing termination check after the iterations have cost the setup hands over;
    the answer passes the same test."""
    qp = prepare(problem(FAMILIES["portfolio"].generate(np.random.default_rng(2), n=200)))
    st = ADMMSettings(eps_abs=1e-6, eps_rel=1e-6, switch_after=0.0)
    r = solve_admm(qp, st)
    assert r.status == "optimal" and r.polished == SWITCHED and r.iterations % st.check_every == 0
    assert "handed over to PIQP" in r.message
    ref = solve_admm(qp, ADMMSettings(eps_abs=1e-6, eps_rel=1e-6))
    assert ref.polished is None and ref.iterations > r.iterations
    assert qp.objective(r.x) == pytest.approx(qp.objective(ref.x), rel=1e-4, abs=1e-6)


def test_active_row_factors_raise_rho_where_a_bound_is_active():
    from optsolve.qp.admm import active_row_factors

    l, u = np.array([0.0, -np.inf, -1.0, 0.0, 2.0]), np.array([1.0, 2.0, np.inf, 5.0, 2.0])
    z = np.array([0.0, 2.0, 3.0, 2.5, 2.0])  # at l, at u, inside (one-sided), inside, an equality
    np.testing.assert_allclose(active_row_factors(l, u, z, 3.0), [3.0, 3.0, 1 / 3, 1 / 3, 3.0])


@pytest.mark.parametrize("name, n", [("portfolio", 200), ("svm", 500), ("random", 200)])
def test_active_set_rho_reaches_osqps_answer_in_fewer_iterations(name, n):
    """ADMM with one rho per row from its active set (auto's ADMM) stops on the same termination test as osqp, in
    fewer iterations on these problems, and its answer agrees with osqp's to the tolerance."""
    raw = problem(FAMILIES[name].generate(np.random.default_rng(1), n=n))
    qp = prepare(raw)
    plain = solve_admm(qp, ADMMSettings(refine_stalled=False))
    rows = solve_admm(qp, ADMMSettings(refine_stalled=False, row_spread=auto.ROW_SPREAD))
    assert plain.status == rows.status == "optimal" and rows.iterations < plain.iterations
    ref = optsolve.qp.solve_problem(raw, method="osqp", eps_abs=1e-9, eps_rel=1e-9, max_iter=100000)
    assert qp.objective(rows.x) == pytest.approx(ref.objective, rel=1e-2, abs=1e-2)


def test_active_set_rho_refactors_at_most_its_steps_and_auto_uses_it(monkeypatch):
    """The active set sets the rows' rho at the first ROW_SPREAD_STEPS adaptive-rho steps only; the default's
    ADMM runs with it, ``--method admm`` without (osqp's iterates)."""
    import optsolve.qp.admm as admm

    calls = []
    original = admm.active_row_factors
    monkeypatch.setattr(admm, "active_row_factors", lambda *a: calls.append(1) or original(*a))
    raw = problem(FAMILIES["portfolio"].generate(np.random.default_rng(2), n=300))
    monkeypatch.setattr(auto, "has_piqp", lambda: False)  # ADMM for the default, without a (timed) hand-over
    res = optsolve.qp.solve_problem(raw)
    assert res.stats["method_used"] == "admm" and res.status.value == "optimal" and res.certificate.holds
    assert 1 <= len(calls) <= admm.ROW_SPREAD_STEPS
    calls.clear()
    plain = optsolve.qp.solve_problem(raw, method="admm")
    assert not calls and plain.stats["iterations"] == optsolve.qp.solve_problem(raw, method="osqp").stats["iterations"]


def test_piqp_iterations_fit_the_time_left_or_the_budget():
    """PIQP has no time limit: the hand-over and the finish cap its iterations by the time left (or a budget)."""
    import time

    from optsolve.qp.handover import PIQP_MAX_ITER, PIQP_MIN_ITER, piqp_iterations

    assert piqp_iterations(None, 10.0, 0.1) == 100
    assert piqp_iterations(None, 1.0, 0.1) == PIQP_MIN_ITER and piqp_iterations(None, 1e9, 0.1) == PIQP_MAX_ITER
    soon = time.perf_counter() + 2.0
    assert 15 <= piqp_iterations(soon, 1e9, 0.1) <= 20
    assert piqp_iterations(time.perf_counter() - 1.0, 1e9, 0.1) == 1  # past the deadline: one step at most


@needs_piqp
def test_a_claim_failing_its_own_checks_hands_over_before_any_lp(monkeypatch):
    """Where the run may hand over, an infeasibility claim whose vector fails its checks goes to PIQP at once (no
    exact LP); where PIQP does not answer optimal, the next claim gets the exact check as before."""
    import optsolve.qp.admm as admm

    n = 30
    eye = sp.eye(n, format="csc")
    qp = prepare(problem({"P": eye, "q": np.ones(n), "A": sp.vstack([eye, eye], format="csc"),
                          "l": np.concatenate([np.ones(n), np.full(n, -np.inf)]),
                          "u": np.concatenate([np.full(n, np.inf), np.zeros(n)])}))  # x >= 1 and x <= 0
    calls, handed = [], []
    real_finish = admm.piqp_finish
    monkeypatch.setattr(admm, "piqp_finish", lambda *a, **k: handed.append(1) or real_finish(*a, **k))

    def verify(kind, vec, exact=True):
        calls.append((kind, exact))
        return (vec, "") if exact else (None, "fails its checks")

    r = solve_admm(qp, ADMMSettings(switch_after=1e9), verify_claim=verify)
    assert r.status == "infeasible"
    assert calls == [("infeasible", False), ("infeasible", True)] and handed == [1]
    calls.clear()
    r = solve_admm(qp, ADMMSettings(), verify_claim=verify)  # no hand-over: the exact check at once
    assert r.status == "infeasible" and calls == [("infeasible", True)]


@needs_piqp
def test_a_tight_tolerance_goes_to_piqp_first_at_any_size():
    big = problem(FAMILIES["grid"].generate(np.random.default_rng(0), n=2000))
    qp = prepare(big)
    assert auto.choose(qp, warm=False) == "admm"  # above PIQP_FIRST_ENTRIES at the default tolerance
    assert auto.choose(qp, warm=False, eps=auto.PIQP_FIRST_EPS) == "piqp"
    assert auto.choose(qp, warm=True, eps=1e-9) == "admm"  # a warm start is ADMM's alone
    res = optsolve.qp.solve_problem(big, eps_abs=1e-6, eps_rel=0.0)
    assert res.stats["method_used"] == "piqp" and res.status.value == "optimal" and res.certificate.holds
    loose = optsolve.qp.solve_problem(big, eps_abs=1e-6, eps_rel=1e-3)  # the larger of the two decides
    assert loose.stats["method_used"] != "piqp"


def test_features_read_the_problem():
    """Sizes, stored KKT entries, row shares, the longest row and P's off-diagonal entries, on a problem built by
    hand: 3 variables, rows x0 + x1 = 1 (equality), 0 <= x2 <= 2 (a bound), x0 + x1 + x2 free."""
    P = sp.csc_matrix(np.array([[2.0, 1.0, 0.0], [1.0, 2.0, 0.0], [0.0, 0.0, 1.0]]))
    A = sp.csc_matrix(np.array([[1.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 1.0]]))
    qp = prepare(problem({"P": P, "q": np.zeros(3), "A": A, "l": np.array([1.0, 0.0, -np.inf]),
                          "u": np.array([1.0, 2.0, np.inf])}))
    f = auto.features(qp)
    assert (f["n"], f["m"], f["row_max"], f["eq_only"]) == (3, 3, 3, 0)
    assert f["entries"] == auto.kkt_entries(qp.P, qp.A) == 1 + 3 + 6 + 3
    assert f["eq_share"] == pytest.approx(1 / 3) and f["box_share"] == pytest.approx(1 / 3)
    assert f["p_offdiag_per_col"] == pytest.approx(2 / 3) and f["row_share"] == 1.0
    assert f["dense_rows"] == 1.0  # each row holds more than DENSE_ROW_SHARE of 3 variables
    assert auto.features(qp, {"entries", "row_max"}) == {"entries": f["entries"], "row_max": 3}
    as_csr = QPProblem(P=qp.P, q=qp.q, A=qp.A.tocsr(), l=qp.l, u=qp.u)  # rows counted in either storage
    assert auto.features(as_csr, {"row_max", "row_share"}) == {"row_max": 3, "row_share": 1.0}
    none = QPProblem(P=qp.P, q=qp.q, A=sp.csc_matrix((0, 3)), l=np.zeros(0), u=np.zeros(0))
    assert auto.features(none, {"row_max", "row_share"}) == {"row_max": 0, "row_share": 0.0}


def with_budget_row(raw: dict, share: float) -> dict:
    """``raw`` with one more row, -1e6 <= sum of the first ``share`` of the variables <= 1e6 (inactive)."""
    A = sp.csr_matrix(raw["A"])
    n = A.shape[1]
    row = sp.csr_matrix((np.ones(int(share * n)), (np.zeros(int(share * n), dtype=int), np.arange(int(share * n)))),
                        shape=(1, n))
    return dict(raw, A=sp.vstack([A, row]).tocsc(), l=np.append(raw["l"], -1e6), u=np.append(raw["u"], 1e6))


@needs_piqp
def test_a_dense_row_sends_a_large_problem_to_piqp_without_probes(monkeypatch):
    """Above PIQP_FIRST_ENTRIES at eps 1e-3 a grid goes to ADMM; with a row holding every variable, or
    DENSE_ROW_SHARE of them, to PIQP, unprobed (the probes are for problems sent by their tolerance); a row
    holding fewer leaves it to ADMM. PIQP's answer holds its certificate at osqp's objective."""
    from optsolve.qp import peers

    raw = dict(FAMILIES["grid"].generate(np.random.default_rng(0), n=2000))
    raw.pop("partition")
    plain = prepare(problem(raw))
    assert auto.kkt_entries(plain.P, plain.A) > auto.PIQP_FIRST_ENTRIES and auto.choose(plain, warm=False) == "admm"
    for share, first in ((1.0, "piqp"), (auto.DENSE_ROW_SHARE + 0.01, "piqp"), (auto.DENSE_ROW_SHARE - 0.01, "admm")):
        assert auto.choose(prepare(problem(with_budget_row(raw, share))), warm=False) == first, share
    dense_qp = prepare(problem(with_budget_row(raw, 1.0)))
    assert auto.choose(dense_qp, warm=True) == "admm"  # a warm start: ADMM
    with monkeypatch.context() as patch:
        patch.setattr(auto, "fills_in", lambda qp: True)  # a factor that fills in: Clarabel before PIQP
        assert auto.choose(dense_qp, warm=False) == "clarabel"
        patch.setattr(auto, "FIRST_RULE", ("entries", auto.PIQP_FIRST_ENTRIES, "piqp", (
            "entries", auto.kkt_entries(dense_qp.P, dense_qp.A) - 1, ("row_share", auto.DENSE_ROW_SHARE, "admm",
                                                                     "piqp"), "admm")))
        patch.setattr(auto, "fills_in", lambda qp: False)
        assert auto.choose(dense_qp, warm=False) == "admm"  # above the rule's size for a dense row: ADMM
    monkeypatch.setattr(auto, "by_pace", lambda qp, settings: pytest.fail("probed"))
    monkeypatch.setattr(peers, "probe", lambda *a: pytest.fail("probed"))
    dense = problem(with_budget_row(raw, 1.0))
    res = optsolve.qp.solve_problem(dense)
    assert res.stats["method_used"] == "piqp" and res.status.value == "optimal" and res.certificate.holds
    assert "probe_s" not in res.stats
    ref = optsolve.qp.solve_problem(dense, method="osqp", eps_abs=1e-6, eps_rel=1e-6)
    assert res.objective == pytest.approx(ref.objective, rel=1e-2, abs=1e-3)


def test_a_dense_matrix_is_not_a_dense_row():
    """A's rows all dense (150 rows over 300 variables) is no sparse problem coupled by a few rows: ADMM first,
    above PIQP_FIRST_ENTRIES (PIQP refactors the dense matrix at every step); the same sparse problem with one
    dense row, and with dense rows up to DENSE_ROWS_MAX of the variables, goes to PIQP."""
    rng = np.random.default_rng(2)
    n, m = 300, 150
    A = rng.standard_normal((m, n))
    raw = {"P": sp.diags(rng.random(n) + 0.1, format="csc"), "q": rng.standard_normal(n), "A": sp.csc_matrix(A),
           "l": -np.ones(m) - rng.random(m), "u": np.ones(m) + rng.random(m)}
    dense = prepare(problem(raw))
    f = auto.features(dense, {"entries", "row_share", "dense_rows"})
    assert f["entries"] > auto.PIQP_FIRST_ENTRIES and f["row_share"] == 1.0 and f["dense_rows"] == 0.5
    if auto.has_piqp():
        assert auto.choose(dense, warm=False) == "admm"
    few = int(auto.DENSE_ROWS_MAX * n)  # this many dense rows over a sparse problem of the same size
    band = sp.diags([np.ones(n), np.ones(n - 1)], [0, 1], format="csr")[: n // 2]
    coupled = sp.vstack([band] * 300 + [sp.csc_matrix(A[:few])]).tocsc()
    k = coupled.shape[0]
    sparse_raw = dict(raw, A=coupled, l=-np.ones(k) - 1.0, u=np.ones(k) + 1.0)
    sparse = prepare(problem(sparse_raw))
    f = auto.features(sparse, {"entries", "row_share", "dense_rows"})
    assert f["entries"] > auto.PIQP_FIRST_ENTRIES and f["dense_rows"] == few / n
    if auto.has_piqp():
        assert auto.choose(sparse, warm=False) == "piqp"
        more = prepare(problem(dict(sparse_raw, A=sp.vstack([coupled, sp.csc_matrix(A[:1])]).tocsc(),
                                    l=np.append(sparse_raw["l"], -2.0), u=np.append(sparse_raw["u"], 2.0))))
        assert auto.choose(more, warm=False) == "admm"  # one dense row more than DENSE_ROWS_MAX of them


@pytest.mark.skipif(not auto.has_clarabel(), reason="clarabel is not installed")
def test_an_equality_only_problem_with_a_dear_factor_of_p_goes_to_clarabel_first(monkeypatch):
    """Equality rows only, P's factor dear (P = MM' + I, M sparse random: nearly dense): Clarabel first, its answer
    the KKT solve's; below KKT_CLARABEL_WORK, the KKT solve; where Clarabel has no answer, the KKT solve still."""
    from optsolve.qp import methods

    rng = np.random.default_rng(4)
    n, m = 1500, 150
    M = sp.random(n, n, density=3.0 / n, random_state=rng)
    A = sp.random(m, n, density=5.0 / n, random_state=rng, format="csc")
    b = A @ rng.standard_normal(n)
    raw = {"P": (M @ M.T + sp.eye(n)).tocsc(), "q": rng.standard_normal(n), "A": A, "l": b, "u": b}
    qp = prepare(problem(raw))
    assert auto.equality_only(qp) and qp.P_work >= auto.KKT_CLARABEL_WORK
    assert auto.choose(qp, warm=False) == "clarabel"
    res = optsolve.qp.solve_problem(problem(raw))
    assert res.stats["method_used"] == "clarabel" and res.status.value == "optimal" and res.certificate.holds
    with monkeypatch.context() as patch:
        patch.setattr(auto, "KKT_CLARABEL_WORK", 2 * qp.P_work)
        assert auto.choose(qp, warm=False) == "kkt"
        kkt = optsolve.qp.solve_problem(problem(raw))
    assert kkt.stats["method_used"] == "kkt" and kkt.certificate.holds
    assert res.objective == pytest.approx(kkt.objective, rel=1e-3, abs=1e-3)
    monkeypatch.setattr(methods, "_interior_points", lambda job, tries, paces=None: (None, "no answer; "))
    after = optsolve.qp.solve_problem(problem(raw))
    assert after.stats["method_used"] == "kkt" and after.objective == pytest.approx(kkt.objective, rel=1e-9)


def test_first_by_rule_walks_nested_splits():
    rule = ("entries", 100, ("row_max", 5, "piqp", "clarabel"), "admm")
    assert auto.first_by_rule({"entries": 100, "row_max": 5}, rule) == "piqp"
    assert auto.first_by_rule({"entries": 50, "row_max": 6}, rule) == "clarabel"
    assert auto.first_by_rule({"entries": 101, "row_max": 0}, rule) == "admm"
    assert auto.first_by_rule({"entries": 1, "row_max": 1}) == "piqp"  # FIRST_RULE: small problems go to PIQP
    assert auto.rule_features(rule) == {"entries", "row_max"} and auto.rule_features("admm") == set()


@needs_piqp
@pytest.mark.skipif(not auto.has_clarabel(), reason="clarabel is not installed")
def test_a_rule_naming_clarabel_runs_it_and_falls_through_to_admm(monkeypatch):
    from optsolve.qp import peers

    p = problem(FAMILIES["svm"].generate(np.random.default_rng(1), n=100))
    monkeypatch.setattr(auto, "FIRST_RULE", "clarabel")
    res = optsolve.qp.solve_problem(p)
    assert res.stats["method_used"] == "clarabel" and res.status.value == "optimal" and res.certificate.holds
    ref = optsolve.qp.solve_problem(p, method="osqp", eps_abs=1e-6, eps_rel=1e-6)
    assert res.objective == pytest.approx(ref.objective, rel=1e-2, abs=1e-3)

    broken = failing("clarabel_status", "NumericalError")
    monkeypatch.setattr(peers, "solve_clarabel", broken)
    res = optsolve.qp.solve_problem(p)  # PIQP next
    assert res.stats["method_used"] == "piqp" and res.status.value == "optimal" and res.certificate.holds
    monkeypatch.setattr(peers, "solve_piqp", failing("piqp_status", "PIQP_NUMERICS"))
    res = optsolve.qp.solve_problem(p)
    assert res.stats["method_used"] in ("admm", "admm, then piqp")  # the hand-over is timed: either may end it
    assert res.status.value == "optimal" and res.certificate.holds
    assert "Clarabel ended NumericalError" in res.message and "PIQP ended PIQP_NUMERICS" in res.message
    monkeypatch.undo()
    monkeypatch.setattr(auto, "FIRST_RULE", "clarabel")
    monkeypatch.setattr(auto, "has_clarabel", lambda: False)
    assert auto.choose(prepare(p), warm=False) == "piqp"  # not installed: PIQP instead


def test_by_pace_probes_clarabel_only_where_piqp_steps_are_dear(monkeypatch):
    from optsolve.qp import peers

    qp = prepare(problem(FAMILIES["grid"].generate(np.random.default_rng(0), n=200)))
    probed = []

    def fake(paces):
        def probe(name, qp, settings):
            probed.append(name)
            return paces[name]
        return probe

    monkeypatch.setattr(auto, "has_clarabel", lambda: True)
    monkeypatch.setattr(peers, "probe", fake({"piqp": auto.PACE_GATE / 2, "clarabel": 0.0}))
    assert auto.by_pace(qp, {})[0] == "piqp" and probed == ["piqp"]  # cheap steps: Clarabel not probed
    probed.clear()
    monkeypatch.setattr(peers, "probe", fake({"piqp": 10.0, "clarabel": 10.0 / auto.CLARABEL_PACE * 0.9}))
    assert auto.by_pace(qp, {}) == ("clarabel", {"piqp": 10.0, "clarabel": 10.0 / auto.CLARABEL_PACE * 0.9})
    monkeypatch.setattr(peers, "probe", fake({"piqp": 10.0, "clarabel": 10.0 / auto.CLARABEL_PACE * 1.1}))
    assert auto.by_pace(qp, {})[0] == "piqp"


@needs_piqp
@pytest.mark.skipif(not auto.has_clarabel(), reason="clarabel is not installed")
def test_a_tight_tolerance_on_a_large_problem_runs_the_faster_paced_solver(monkeypatch):
    """Above PIQP_FIRST_ENTRIES at eps 1e-6 both solvers are probed for real (gate 0) and the faster-paced one,
    here Clarabel by fiat (CLARABEL_PACE 0), answers; the probes' seconds are in the stats."""
    big = problem(FAMILIES["grid"].generate(np.random.default_rng(0), n=2000))
    monkeypatch.setattr(auto, "PACE_GATE", 0.0)
    monkeypatch.setattr(auto, "CLARABEL_PACE", 0.0)
    res = optsolve.qp.solve_problem(big, eps_abs=1e-6, eps_rel=0.0)
    assert res.stats["method_used"] == "clarabel" and res.status.value == "optimal" and res.certificate.holds
    assert set(res.stats["probe_s"]) == {"piqp", "clarabel"} and all(v > 0 for v in res.stats["probe_s"].values())
    ref = optsolve.qp.solve_problem(big, method="piqp", eps_abs=1e-6, eps_rel=0.0)
    assert res.objective == pytest.approx(ref.objective, rel=1e-5, abs=1e-6)


@needs_piqp
def test_piqp_follows_a_failed_clarabel_where_its_probes_fit_the_time_left(monkeypatch):
    from optsolve.qp import peers

    big = problem(FAMILIES["grid"].generate(np.random.default_rng(0), n=2000))
    monkeypatch.setattr(auto, "by_pace", lambda qp, settings: ("clarabel", {"piqp": 0.01, "clarabel": 0.01}))

    broken = failing("clarabel_status", "NumericalError")
    monkeypatch.setattr(peers, "solve_clarabel", broken)
    res = optsolve.qp.solve_problem(big, eps_abs=1e-6, eps_rel=0.0)
    assert res.stats["method_used"] == "piqp" and res.status.value == "optimal" and res.certificate.holds
    assert res.stats["probe_s"] == {"piqp": 0.01, "clarabel": 0.01}
    monkeypatch.setattr(auto, "PIQP_AFTER_PROBES", 1e9)  # PIQP would not fit: ADMM next
    res = optsolve.qp.solve_problem(big, eps_abs=1e-6, eps_rel=0.0, time_limit=60.0)
    assert res.stats["method_used"].startswith("admm") and "Clarabel ended NumericalError" in res.message
    assert "PIQP ended" not in res.message


def test_too_slow_reads_the_pace_of_the_first_checks():
    """Two checks of recorded runs at 1e-3 (time, distance to the tolerances) against PIQP's expected cost: AUG2DCQP
    (370 then 250 in 0.034 s: 0.48 s more, against 0.21 s) hands over; flow 10,000 (380 then 190 in 0.022 s:
    0.17 s more, against 0.75 s) does not; no fall at all hands over; a run that is there, or not finite, does not."""
    from optsolve.qp.handover import too_slow

    assert too_slow((0.051, 370.0, 250.0), 0.085, 0.214)
    assert not too_slow((0.098, 380.0, 190.0), 0.120, 0.750)
    assert too_slow((0.0, 10.0, 10.0), 1.0, 1e9) and too_slow((0.0, 10.0, 10.0), 0.001, 1e9)
    assert not too_slow((0.0, 10.0, 0.9), 1.0, 0.0)
    assert not too_slow((0.0, float("inf"), 5.0), 1.0, 0.0) and not too_slow((0.0, 10.0, float("nan")), 1.0, 0.0)


def test_tolerance_distance_is_the_largest_residual_over_its_tolerance():
    from optsolve.qp.termination import gap_limit, tolerance_distance, tolerance_tests

    r = {"rows": 3, "prim": 2e-3, "prim_tol_scale": 1.0, "dual": 1e-3, "dual_tol_scale": 9.0, "gap": -5e-3,
         "gap_tol_scale": 4.0}
    assert tolerance_distance(r, 1e-3, 1e-3) == pytest.approx(max(1.0, 0.1, 5e-3 / gap_limit(r, 1e-3, 1e-3)))
    assert tolerance_distance(dict(r, rows=0), 1e-3, 1e-3) == pytest.approx(5e-3 / gap_limit(r, 1e-3, 1e-3))
    assert tolerance_distance(r, 1e-2, 1e-2) < 1.0 and all(tolerance_tests(r, 1e-2, 1e-2))
    assert tolerance_distance(r, 0.0, 0.0) > 1.0
    assert tolerance_distance(r, 1e-3, 1e-3, gap=False) == pytest.approx(1.0)  # the gap left out (check_dualgap)


@needs_piqp
def test_a_run_whose_residuals_do_not_fall_hands_over_at_its_second_check(monkeypatch):
    """Portfolio at 1e-3: the distance to the tolerances rises from the first check to the second, so the run hands
    over there, long before the ski-rental switch (here out of reach); without the pace rule it runs to the end."""
    from optsolve.qp import admm

    qp = prepare(problem(FAMILIES["portfolio"].generate(np.random.default_rng(0), n=1000)))
    st = ADMMSettings(eps_abs=1e-3, eps_rel=1e-3, switch_after=1e6, row_spread=auto.ROW_SPREAD)
    r = solve_admm(qp, st)
    assert r.status == "optimal" and r.polished == SWITCHED and r.iterations == 2 * st.check_every
    monkeypatch.setattr(admm, "too_slow", lambda pace, now, cost: False)
    alone = solve_admm(qp, st)
    assert alone.status == "optimal" and alone.polished is None and alone.iterations > 4 * st.check_every
    assert qp.objective(r.x) == pytest.approx(qp.objective(alone.x), rel=1e-2, abs=1e-3)


@needs_piqp
def test_a_hopeless_run_hands_over_under_a_deadline_shorter_than_twice_piqps_cost():
    """Under a deadline the hand-over waits for the time left to hold twice PIQP's expected cost, unless the
    iterations' pace says they would not reach the tolerances in the time left either: portfolio at 1e-3, whose
    distance rises, with PIQP's expected cost far beyond the deadline, hands over at its second check all the
    same; a deadline the run's pace can meet keeps the iterations going."""
    import time

    qp = prepare(problem(FAMILIES["portfolio"].generate(np.random.default_rng(0), n=1000)))
    st = ADMMSettings(eps_abs=1e-3, eps_rel=1e-3, switch_after=1e9, row_spread=auto.ROW_SPREAD)
    r = solve_admm(qp, st, deadline=time.perf_counter() + 600.0)
    assert r.status == "optimal" and r.polished == SWITCHED and r.iterations == 2 * st.check_every
    lasso = prepare(problem(FAMILIES["lasso"].generate(np.random.default_rng(0), n=500)))
    kept = solve_admm(lasso, st, deadline=time.perf_counter() + 600.0)
    assert kept.status == "optimal" and kept.polished != SWITCHED


def test_far_is_a_distance_at_the_scale_of_the_data():
    from optsolve.qp.handover import FAR, far

    assert far(FAR / 1e-3, 1e-3, 1e-3) and not far(0.99 * FAR / 1e-3, 1e-3, 1e-3)
    assert far(FAR / 1e-4, 1e-6, 1e-4)  # the larger tolerance
    assert not far(float("inf"), 1e-3, 1e-3) and not far(float("nan"), 1e-3, 1e-3)


@needs_piqp
def test_a_run_as_far_as_the_data_at_its_first_check_hands_over_there(monkeypatch):
    """A box-constrained QP with two dense equality rows of large entries (as HUESTIS): 25 iterations leave the
    residuals at the scale of the data, so the run hands over at its first check, under a deadline too; the answer
    is the one the iterations reach alone (no hand-over)."""
    import time

    from optsolve.qp import admm

    rng = np.random.default_rng(0)
    n = 500
    dense = rng.uniform(0.5, 1.5, (2, n)) * 1e3
    b = dense @ rng.uniform(0.0, 1.0, n)
    raw = {"P": sp.diags(rng.uniform(1.0, 2.0, n)).tocsc(), "q": rng.standard_normal(n),
           "A": sp.vstack([sp.csr_matrix(dense), sp.eye(n)]).tocsc(),
           "l": np.concatenate([b, np.zeros(n)]), "u": np.concatenate([b, np.ones(n)])}
    qp = prepare(problem(raw))
    st = ADMMSettings(eps_abs=1e-3, eps_rel=1e-3, switch_after=1e6, row_spread=auto.ROW_SPREAD)
    r = solve_admm(qp, st)
    assert r.status == "optimal" and r.polished == SWITCHED and r.iterations == st.check_every
    timed = solve_admm(qp, st, deadline=time.perf_counter() + 600.0)  # PIQP's expected cost beyond the deadline
    assert timed.polished == SWITCHED and timed.iterations == st.check_every
    monkeypatch.setattr(admm, "far", lambda distance, eps_abs, eps_rel: False)
    monkeypatch.setattr(admm, "too_slow", lambda pace, now, cost: False)
    alone = solve_admm(qp, dataclasses.replace(st, max_iter=100_000))
    assert alone.status == "optimal" and alone.polished is None and alone.iterations > 2 * st.check_every
    assert qp.objective(r.x) == pytest.approx(qp.objective(alone.x), rel=1e-2)


def test_a_new_rho_waits_for_the_iterations_to_cost_a_share_of_a_factorisation(monkeypatch):
    """The default's ADMM takes a new rho only once the iterations since the last factorisation have cost
    REFACTOR_SHARE of one: with a share out of reach it never refactors and still ends optimal, with none it does
    (osqp's ADMM, without row_spread, is not gated)."""
    from optsolve.qp import admm

    qp = prepare(problem(FAMILIES["svm"].generate(np.random.default_rng(0), n=300)))
    st = ADMMSettings(eps_abs=1e-4, eps_rel=1e-4, row_spread=auto.ROW_SPREAD)
    monkeypatch.setattr(admm, "REFACTOR_SHARE", 0.0)
    free = solve_admm(qp, st)
    monkeypatch.setattr(admm, "REFACTOR_SHARE", 1e12)
    gated = solve_admm(qp, st)
    plain = solve_admm(qp, ADMMSettings(eps_abs=1e-4, eps_rel=1e-4))
    assert free.rho_updates > 0 and gated.rho_updates == 0 and plain.rho_updates > 0
    assert free.status == gated.status == "optimal"
    assert qp.objective(gated.x) == pytest.approx(qp.objective(free.x), rel=1e-3, abs=1e-4)


def test_next_check_comes_early_only_where_the_pace_ends_the_run_before_the_regular_one():
    from optsolve.qp.termination import EARLY_MIN, next_check

    assert next_check((50, 12.0), 75, 1.003, 25) == 75 + EARLY_MIN  # LISWET7 at 1e-3: ends at 80, not 100
    assert next_check((25, 100.0), 50, 50.0, 25) is None  # 212 more iterations at this pace
    assert next_check((25, 10.0), 50, 2.0, 25) == 50 + 17  # ceil(1.5 * log 2 / (log 5 / 25))
    assert next_check((65, 3.0), 70, 2.0, 25) is None  # 13 more: the regular check at 75 comes first
    assert next_check((45, 3.0), 50, 2.0, 25) == 50 + 13
    assert next_check(None, 25, 2.0, 25) is None and next_check((25, 2.0), 50, 3.0, 25) is None  # no pace, rising
    assert next_check((25, 2.0), 50, 0.5, 25) is None and next_check((25, 2.0), 50, float("nan"), 25) is None


@pytest.mark.parametrize("name, n", [("chain", 300), ("huber", 1000), ("flow", 1000)])
def test_early_checks_end_a_run_between_the_regular_checks_on_the_same_test(name, n):
    """The default's ADMM checks between the regular checks where the pace predicts the end there: the same
    iterates, so the run ends sooner on the same termination test, at an answer matching the regular run's."""
    qp = prepare(problem(FAMILIES[name].generate(np.random.default_rng(0), n=n)))
    early = solve_admm(qp, ADMMSettings(row_spread=auto.ROW_SPREAD, early_checks=True))
    regular = solve_admm(qp, ADMMSettings(row_spread=auto.ROW_SPREAD))
    assert early.status == regular.status == "optimal"
    assert early.iterations % 25 != 0 and early.iterations < regular.iterations and regular.iterations % 25 == 0
    assert qp.objective(early.x) == pytest.approx(qp.objective(regular.x), rel=1e-2, abs=1e-2)


def test_to_clarabel_reads_the_factors_fill_where_the_factorisation_was_dear():
    from types import SimpleNamespace

    from optsolve.qp.handover import DEAR, FILL_CLARABEL, to_clarabel

    def ldl(fill):
        return SimpleNamespace(K=sp.eye(100, format="csc"), factor_entries=lambda: int(fill * 100))

    assert not to_clarabel(ldl(FILL_CLARABEL), 0.9 * DEAR)  # cheap: never read
    assert not to_clarabel(ldl(0.9 * FILL_CLARABEL), 2 * DEAR)
    assert not to_clarabel(SimpleNamespace(K=sp.eye(100, format="csc")), 2 * DEAR)  # the reduced form
    assert to_clarabel(ldl(FILL_CLARABEL), 2 * DEAR) == auto.has_clarabel()


def test_a_run_whose_factor_fills_in_hands_over_to_clarabel_at_its_first_check(monkeypatch):
    """Where the factor fills in (:func:`to_clarabel`, here forced), the run that has not ended at its first check
    hands over to Clarabel there, and reports it; the answer is osqp's to the tolerance."""
    if not auto.has_clarabel():
        pytest.skip("clarabel is not installed")
    from optsolve.qp import admm
    from optsolve.qp.handover import HANDED

    monkeypatch.setattr(admm, "to_clarabel", lambda ldl, numeric_time: True)
    raw = FAMILIES["portfolio"].generate(np.random.default_rng(0), n=1000)
    qp = prepare(problem(raw))
    st = ADMMSettings(eps_abs=1e-3, eps_rel=1e-3, switch_after=auto.SWITCH_AFTER, row_spread=auto.ROW_SPREAD)
    r = solve_admm(qp, st)
    assert r.status == "optimal" and r.polished == HANDED["clarabel"] and r.iterations == st.check_every
    assert "handed over to Clarabel" in r.message
    from optsolve.qp import peers

    real = peers.solve_clarabel
    monkeypatch.setattr(peers, "solve_clarabel", failing("clarabel_status", "NumericalError"))
    after = solve_admm(qp, st)  # Clarabel without an answer: PIQP's switch still stands (the pace, at check 2)
    assert after.status == "optimal" and after.polished == SWITCHED and after.iterations == 2 * st.check_every
    monkeypatch.setattr(peers, "solve_clarabel", real)
    monkeypatch.setattr(auto, "choose", lambda qp, warm, eps=1e-3: "admm")
    res = optsolve.qp.solve_problem(problem(raw))
    ref = optsolve.qp.solve_problem(problem(raw), method="osqp", eps_abs=1e-6, eps_rel=1e-6)
    assert res.stats["method_used"] == "admm, then clarabel" and res.certificate.holds
    assert res.objective == pytest.approx(ref.objective, rel=1e-2, abs=1e-3)


def sparse_random_qp(n: int, m: int, seed: int = 0) -> dict:
    """A QP whose KKT factor fills in: P = MM' + I and A with a few random entries a row, bounds on Ax and x."""
    rng = np.random.default_rng(seed)
    M = sp.random(n, n, density=2.0 / n, random_state=rng)
    A = sp.vstack([sp.random(m, n, density=3.0 / n, random_state=rng), sp.eye(n)], format="csc")
    x = rng.uniform(-1, 1, n)
    return {"P": (M @ M.T + sp.eye(n)).tocsc(), "q": rng.standard_normal(n), "A": A,
            "l": np.concatenate([A[:m] @ x - 1, -np.ones(n)]), "u": np.concatenate([A[:m] @ x + 1, np.ones(n)])}


def test_the_convexity_check_leaves_ps_fill_for_the_solver():
    """The file's check factors P + delta I (n above the dense check); the fill it saw reaches the QPProblem."""
    filled = prepare(problem(sparse_random_qp(2000, 1000)))
    assert filled.P_fill is not None and filled.P_fill > auto.P_FILL_GATE
    chain = prepare(problem(FAMILIES["chain"].generate(np.random.default_rng(0), n=2000)))
    assert chain.P_fill is not None and chain.P_fill < 1.0
    small = prepare(problem(sparse_random_qp(200, 100)))  # the dense eigenvalue check: no factor
    assert small.P_fill is None and small.P_work is None and not auto.fills_in(small)
    assert filled.P_work > chain.P_work > 0


def test_a_dear_factor_of_p_sends_a_small_problem_to_admm(monkeypatch):
    """Below PIQP_FIRST_ENTRIES, where the file's check found P's factor dear (P = MM' + 0.1 I with M sparse
    random: its factor nearly dense), ADMM first (it factors once, PIQP at every step); its answer holds at osqp's
    objective. With the threshold above that work, PIQP; the work of a dense P's Cholesky factor is its columns'
    squared lengths, 1 to n."""
    rng = np.random.default_rng(3)
    n = 1000
    M = sp.random(n, n, density=3.0 / n, random_state=rng)
    raw = {"P": (M @ M.T + 0.1 * sp.eye(n)).tocsc(), "q": 10 * rng.standard_normal(n), "A": sp.eye(n, format="csc"),
           "l": -np.ones(n), "u": np.ones(n)}
    qp = prepare(problem(raw))
    assert auto.kkt_entries(qp.P, qp.A) <= auto.PIQP_FIRST_ENTRIES and qp.P_work >= auto.P_WORK_ADMM
    if not auto.has_piqp():
        return
    assert auto.choose(qp, warm=False) == "admm"
    assert auto.choose(qp, warm=False, eps=1e-6) == "piqp"  # a tight tolerance: PIQP at any size
    res = optsolve.qp.solve_problem(problem(raw))
    assert res.stats["method_used"].startswith("admm") and res.status.value == "optimal" and res.certificate.holds
    ref = optsolve.qp.solve_problem(problem(raw), method="osqp", eps_abs=1e-6, eps_rel=1e-6)
    assert res.objective == pytest.approx(ref.objective, rel=1e-2, abs=1e-3)
    monkeypatch.setattr(auto, "P_WORK_ADMM", 2 * qp.P_work)
    assert auto.choose(qp, warm=False) == "piqp"
    k = 400  # above the dense eigenvalue check, dense: LAPACK's Cholesky factor
    B = rng.standard_normal((k, k))
    dense = prepare(problem({"P": sp.csc_matrix(B @ B.T / k + np.eye(k)), "q": np.ones(k)}))
    assert dense.P_fill is None and dense.P_work == k * (k + 1) * (2 * k + 1) / 6
    block = np.zeros((2 * k, 2 * k))  # dense on half its columns, diagonal on the rest: the block's factor
    block[:k, :k] = B @ B.T / k
    block[np.diag_indices(2 * k)] += 1.0
    half = prepare(problem({"P": sp.csc_matrix(block), "q": np.ones(2 * k)}))
    assert half.P_work == k * (k + 1) * (2 * k + 1) / 6 + k


def test_a_factor_that_would_fill_in_sends_the_default_to_clarabel_before_admm_factors(monkeypatch):
    """Where P's factor fills in, the KKT matrix's symbolic step runs; where its factor would hold FILL_CLARABEL
    times its entries at DEAR_WORK, Clarabel runs first (its answer is osqp's); below either, ADMM."""
    if not auto.has_clarabel():
        pytest.skip("clarabel is not installed")
    raw = sparse_random_qp(2000, 1000)
    qp = prepare(problem(raw))
    monkeypatch.setattr(auto, "FIRST_RULE", ("entries", 1000, "piqp", "admm"))  # ADMM at this size
    monkeypatch.setattr(auto, "PIQP_FIRST_ENTRIES", 1000)
    assert auto.choose(qp, warm=False) == "admm"  # work far below DEAR_WORK at this size
    monkeypatch.setattr(auto, "FILL_CLARABEL", 10.0)  # the factor holds 15 times the KKT matrix's entries
    assert not auto.fills_in(qp)
    monkeypatch.setattr(auto, "DEAR_WORK", 1e6)
    assert auto.fills_in(qp) and auto.choose(qp, warm=False) == "clarabel"
    assert auto.choose(qp, warm=True) == "admm"
    monkeypatch.setattr(auto, "SYMBOLIC_MAX_ENTRIES", 1000)
    assert not auto.fills_in(qp)  # too large for the step: left to ADMM's hand-over
    monkeypatch.setattr(auto, "SYMBOLIC_MAX_ENTRIES", 10**6)
    monkeypatch.setattr(auto, "FILL_CLARABEL", 20.0)
    assert not auto.fills_in(qp)
    monkeypatch.setattr(auto, "FILL_CLARABEL", 10.0)
    chain = prepare(problem(FAMILIES["chain"].generate(np.random.default_rng(0), n=2000)))
    assert not auto.fills_in(chain)  # P's factor does not fill in: no symbolic step
    res = optsolve.qp.solve_problem(problem(raw))
    ref = optsolve.qp.solve_problem(problem(raw), method="osqp", eps_abs=1e-7, eps_rel=1e-7)
    assert res.stats["method_used"] == "clarabel" and res.certificate.holds
    assert res.objective == pytest.approx(ref.objective, rel=1e-3, abs=1e-3)
