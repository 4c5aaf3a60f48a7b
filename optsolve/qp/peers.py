"""Interior-point solvers called on the problem as peers: PIQP and Clarabel (optional packages).

PIQP: Schwan, Jiang, Kuhn and Jones, "PIQP: a proximal interior-point quadratic programming
solver" (CDC 2023); it takes ``min 1/2 x'Px + c'x`` with ``Ax = b`` and ``h_l <= Gx <= h_u``.
Clarabel: Goulart and Chen, "Clarabel: an interior-point solver for conic programs with
quadratic objectives" (2024); it takes ``Ax + s = b`` with s in a product of cones (zero cone for
equalities, nonnegative orthant for one-sided rows).

A row of OSQP's form ``l <= a'x <= u`` goes to an equality where ``l = u``, to the two-sided
(PIQP) or one or two one-sided rows (Clarabel) otherwise, and nowhere where both bounds are
infinite. The duals come back in OSQP's convention (``Px + q + A'y = 0``, y >= 0 at upper bounds,
y <= 0 at lower ones): PIQP's ``z_u - z_l`` on inequality rows, Clarabel's upper-row duals minus
its lower-row duals. Each function returns the status in optsolve's vocabulary, x and y (or
None), the solver's own statistics, and for an infeasibility claim the vector that supports it
(a Farkas direction dy, or an unbounded ray dx), for the caller to check.

Both solvers measure their tolerances on their own (equilibrated) problem, not on OSQP's
unscaled residuals that the certificate judges, so they are asked for ``TIGHTER`` times the
requested eps: interior-point iterations converge fast near the end, and an answer that meets
only the solver's own test fails the certificate (Maros-Meszaros at 1e-6: PIQP asked for 1e-6
passed it on 27 of the 40 smallest files). Where a solver stops short of the tighter target
(its iteration limit, or numerics), its point is still taken when it passes OSQP's termination
test at the requested eps (:func:`passes`), as the certificate will judge it.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from optsolve.qp.problems import QPProblem

TIGHTER = 1e-4


def _rows(qp: QPProblem):
    """Masks of the equality rows, and of the other rows with a finite bound."""
    finite_l, finite_u = np.isfinite(qp.l), np.isfinite(qp.u)
    eq = finite_l & finite_u & (qp.l == qp.u)
    return eq, ~eq & (finite_l | finite_u)


def unscaled_residuals(qp: QPProblem, x: np.ndarray, y: np.ndarray) -> dict:
    """OSQP's termination quantities of (x, y) on the unscaled problem (z = Ax clipped to the bounds)."""
    from optsolve.qp.admm import residuals_of
    from optsolve.qp.scaling import Scaled

    plain = Scaled(P=qp.P, q=qp.q, A=qp.A, l=qp.l, u=qp.u, D=np.ones(qp.n), E=np.ones(qp.m), c=1.0)
    return residuals_of(plain, x, y, np.clip(qp.A @ x, qp.l, qp.u))


def passes(qp: QPProblem, s: dict, x: np.ndarray, y: np.ndarray) -> bool:
    """OSQP's termination test at the requested eps on the unscaled problem."""
    from optsolve.qp.admm import tolerance_tests

    if x.shape != (qp.n,) or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return False
    return all(tolerance_tests(unscaled_residuals(qp, x, y), s["eps_abs"], s["eps_rel"]))


def trace_answer(qp: QPProblem, iterations: int, x: np.ndarray | None, y: np.ndarray | None) -> None:
    """The one point of ``--history`` that a method without a per-iteration trace has: its answer's residuals."""
    from optsolve.core.history import active, trace
    from optsolve.qp.admm import RESIDUAL_MEASURE

    if active() is None or x is None or y is None:
        return
    r = unscaled_residuals(qp, x, y)
    trace(iterations, max(r["prim"], r["dual"]), measure=RESIDUAL_MEASURE, prim=r["prim"], dual=r["dual"], gap=r["gap"])


def _outcome(qp: QPProblem, s: dict, kind: str, x, y, stats: dict) -> dict:
    if kind in ("max_iter", "numerical_error", "optimal_inaccurate") and passes(qp, s, x, y):
        kind = "optimal"  # short of the tighter target, within the requested one
    return {"status": kind, "x": x, "y": y, "stats": stats,
            "claim": y if kind == "infeasible" else x if kind == "unbounded" else None}


def solve_piqp(qp: QPProblem, s: dict, time_limit: float | None) -> dict:
    """PIQP on ``qp`` at the settings ``s`` (eps_abs, eps_rel, max_iter). PIQP has no time limit of its own:
    ``time_limit`` (kept for the common signature) bounds nothing here; its iterations are few and bounded."""
    import piqp

    eq, ineq = _rows(qp)
    A = qp.A.tocsr()
    solver = piqp.SparseSolver()
    st = solver.settings
    st.verbose, st.max_iter = False, s["max_iter"]
    st.eps_abs, st.eps_rel = max(TIGHTER * s["eps_abs"], 1e-12), max(TIGHTER * s["eps_rel"], 1e-14)
    if hasattr(st, "eps_duality_gap_abs"):  # its own duality-gap test, else at PIQP's defaults (LISWET1 at
        # 1e-6: PIQP_SOLVED with a gap of 4.9e-6; with these, 9e-11)
        st.eps_duality_gap_abs, st.eps_duality_gap_rel = st.eps_abs, st.eps_rel
    solver.setup(qp.P.tocsc(), qp.q, A[eq].tocsc(), qp.l[eq], A[ineq].tocsc(), qp.l[ineq], qp.u[ineq], None, None)
    status = solver.solve()
    r = solver.result
    y = np.zeros(qp.m)
    y[eq] = np.asarray(r.y)
    y[ineq] = np.asarray(r.z_u) - np.asarray(r.z_l)
    x = np.asarray(r.x, dtype=float)
    name = str(status).rsplit(".", 1)[-1]
    kind = {"PIQP_SOLVED": "optimal", "PIQP_MAX_ITER_REACHED": "max_iter", "PIQP_PRIMAL_INFEASIBLE": "infeasible",
            "PIQP_DUAL_INFEASIBLE": "unbounded"}.get(name, "numerical_error")
    stats = {"iterations": int(r.info.iter), "piqp_status": name, "piqp_version": piqp.__version__}
    return _outcome(qp, s, kind, x, y, stats)


def solve_clarabel(qp: QPProblem, s: dict, time_limit: float | None) -> dict:
    """Clarabel on ``qp`` at the settings ``s`` (eps_abs, eps_rel, max_iter), within ``time_limit`` seconds."""
    import clarabel

    eq, ineq = _rows(qp)
    upper = np.flatnonzero(ineq & np.isfinite(qp.u))
    lower = np.flatnonzero(ineq & np.isfinite(qp.l))
    A = qp.A.tocsr()
    stacked = sp.vstack([A[eq], A[upper], -A[lower]], format="csc")
    b = np.concatenate([qp.u[eq], qp.u[upper], -qp.l[lower]])
    k, ku = int(eq.sum()), upper.size
    cones = [clarabel.ZeroConeT(k), clarabel.NonnegativeConeT(ku + lower.size)]
    st = clarabel.DefaultSettings()
    st.verbose = False
    st.max_iter = int(s["max_iter"])
    st.tol_gap_abs, st.tol_gap_rel = max(TIGHTER * s["eps_abs"], 1e-12), max(TIGHTER * s["eps_rel"], 1e-14)
    st.tol_feas = min(max(TIGHTER * s["eps_abs"], 1e-12), 1e-8)
    if time_limit is not None:
        st.time_limit = float(time_limit)
    sol = clarabel.DefaultSolver(sp.triu(qp.P, format="csc"), qp.q, stacked, b, cones, st).solve()
    z = np.asarray(sol.z, dtype=float)
    y = np.zeros(qp.m)
    y[np.flatnonzero(eq)] = z[:k]
    np.add.at(y, upper, z[k:k + ku])
    np.subtract.at(y, lower, z[k + ku:])
    x = np.asarray(sol.x, dtype=float)
    name = str(sol.status).rsplit(".", 1)[-1]
    kind = {"Solved": "optimal", "AlmostSolved": "optimal_inaccurate", "MaxIterations": "max_iter",
            "MaxTime": "time_limit", "PrimalInfeasible": "infeasible", "DualInfeasible": "unbounded",
            "AlmostPrimalInfeasible": "infeasible", "AlmostDualInfeasible": "unbounded"}.get(name, "numerical_error")
    stats = {"iterations": int(sol.iterations), "clarabel_status": name, "clarabel_version": clarabel.__version__}
    return _outcome(qp, s, kind, x, y, stats)
