"""Solvers called on the problem as peers: osqp, and the interior-point solvers PIQP and Clarabel (optional
packages).

osqp: Stellato, Banjac, Goulart, Bemporad and Boyd, "OSQP: an operator splitting solver for quadratic
programs" (Math. Prog. Comp. 2020), called with optsolve's settings; its setup errors become optsolve's.

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
unscaled residuals that the certificate judges, so they are asked for less than the requested eps:
Clarabel for ``TIGHTER`` times it; PIQP for each fraction in ``PIQP_LADDER`` in turn, a tenth
first and 1e-4 where that answer fails the test (a target far below what an answer needs costs
PIQP its whole iteration limit on files where a tenth of eps ends in a few dozen iterations: see
docs/qp-default.md). Where a solver stops short of its target (its iteration limit, or numerics),
its point is still taken when it passes OSQP's termination test at the requested eps
(:func:`passes`), as the certificate will judge it. Rows that bound a single variable go to PIQP
as its box bounds (the Maros-Meszaros files carry their bounds as identity rows).

With ``finish`` (the default method's calls), an answer that fails the test is finished by osqp's
polishing repeated as an active-set method (:func:`finished`): an interior point meets its active
rows only to the barrier's last mu and leaves duals of that size on the others, which on badly
scaled files (POWELL20, QFORPLAN, HUESTIS: duals of 1e8 and more) leaves a duality gap of 1e-5 to
1e-3 with both residuals below 1e-9; the equality-constrained QP on the active set, solved with
iterative refinement, has exact complementarity.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

from optsolve.core.errors import InputError, ParameterError, SolverError
from optsolve.qp.problems import QPProblem

TIGHTER = 1e-4
BOX_COEF_RANGE = (1e-6, 1e6)  # a row a x_j in [l, u] becomes PIQP's box [l/a, u/a] only with |a| in this range
FINISH_DELTA = 1e-7  # the finish's regularisation of its active-set KKT system (on the equilibrated problem)
FINISH_REFINE = 25  # its refinement steps per active set
FINISH_SCALING = 10  # Ruiz passes of the problem it solves on, as ADMM's default
FINISH_ROUNDS = 10  # its active-set rounds at most
FINISH_MIN_S = 0.1  # seconds: no finish round starts once the solver's own time (at least this) has passed again
PIQP_LADDER = ((1e-1, 500), (1e-4, 100))  # PIQP's targets, in fractions of the requested eps, and its iteration
# caps (within --max-iter): the next where the last answer fails the test; an interior-point run past these is lost


def _rows(qp: QPProblem):
    """Masks of the equality rows, and of the other rows with a finite bound."""
    finite_l, finite_u = np.isfinite(qp.l), np.isfinite(qp.u)
    eq = finite_l & finite_u & (qp.l == qp.u)
    return eq, ~eq & (finite_l | finite_u)


def unscaled_residuals(qp: QPProblem, x: np.ndarray, y: np.ndarray) -> dict:
    """OSQP's termination quantities of (x, y) on the unscaled problem (z = Ax clipped to the bounds)."""
    from optsolve.qp.termination import residuals_of
    from optsolve.qp.scaling import Scaled

    plain = Scaled(P=qp.P, q=qp.q, A=qp.A, l=qp.l, u=qp.u, D=np.ones(qp.n), E=np.ones(qp.m), c=1.0)
    return residuals_of(plain, x, y, np.clip(qp.A @ x, qp.l, qp.u))


def passes(qp: QPProblem, settings: dict, x: np.ndarray, y: np.ndarray) -> bool:
    """OSQP's termination test at the requested eps on the unscaled problem."""
    from optsolve.qp.termination import tolerance_tests

    if x.shape != (qp.n,) or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return False
    return all(tolerance_tests(unscaled_residuals(qp, x, y), settings["eps_abs"], settings["eps_rel"]))


def trace_answer(qp: QPProblem, iterations: int, x: np.ndarray | None, y: np.ndarray | None) -> None:
    """The one point of ``--history`` that a method without a per-iteration trace has: its answer's residuals."""
    from optsolve.core.history import active, trace
    from optsolve.qp.termination import RESIDUAL_MEASURE

    if active() is None or x is None or y is None:
        return
    r = unscaled_residuals(qp, x, y)
    trace(iterations, max(r["prim"], r["dual"]), measure=RESIDUAL_MEASURE, prim=r["prim"], dual=r["dual"], gap=r["gap"])


def finish_by(started: float, time_limit: float | None) -> float:
    """When a finish started now must stop starting rounds: after as long again as the solver's run since
    ``started`` (at least ``FINISH_MIN_S``), and within ``time_limit`` seconds of ``started`` where one is given."""
    now = time.perf_counter()
    until = now + max(now - started, FINISH_MIN_S)
    return until if time_limit is None else min(until, started + time_limit)


def finished(qp: QPProblem, settings: dict, x, y, deadline: float | None = None):
    """An answer (x, y) finished by osqp's polishing, repeated as a primal-dual active-set method
    (:func:`optsolve.qp.polish.polish`, at most ``FINISH_ROUNDS`` rounds), on the Ruiz-equilibrated problem: the
    finished (x, y) where it passes OSQP's test at the requested eps (:func:`passes`), else None. No round after
    the first starts past ``deadline`` (a ``time.perf_counter()`` value)."""
    from optsolve.qp.polish import polish
    from optsolve.qp.scaling import ruiz_scale

    if qp.m == 0 or x is None or y is None or x.shape != (qp.n,) or np.shape(y) != (qp.m,) \
            or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return None
    s = ruiz_scale(qp, FINISH_SCALING)
    xs, ys = x / s.D, np.asarray(y, dtype=float) * s.c / s.E
    try:
        out = polish(s, xs, ys, s.A @ xs, FINISH_DELTA, FINISH_REFINE, rounds=FINISH_ROUNDS, deadline=deadline)
    except (RuntimeError, MemoryError):  # an active set whose system cannot be factored
        return None
    if out is None:
        return None
    x, y = s.D * out[0], s.E * out[1] / s.c
    return (x, y) if passes(qp, settings, x, y) else None


def _outcome(qp: QPProblem, settings: dict, kind: str, x, y, stats: dict, finish: float | None = None) -> dict:
    """The peer's answer in the form of this module's functions, with whether it passes OSQP's test at the requested
    eps (``passes``; not tested for a claim); ``finish``: where given, an answer that fails the test is finished
    (:func:`finished`) with that deadline."""
    ok = kind not in ("infeasible", "unbounded") and passes(qp, settings, x, y)
    if ok and kind in ("max_iter", "numerical_error", "optimal_inaccurate"):
        kind = "optimal"  # short of the tighter target, within the requested one
    elif finish is not None and not ok and kind not in ("infeasible", "unbounded", "time_limit"):
        done = finished(qp, settings, x, y, finish)
        if done is not None:
            ok, kind, (x, y), stats = True, "optimal", done, dict(stats, finished="polished")
    return {"status": kind, "x": x, "y": y, "stats": stats, "passes": ok,
            "claim": y if kind == "infeasible" else x if kind == "unbounded" else None}


def box_rows(qp: QPProblem, rows: np.ndarray):
    """The rows among ``rows`` (a mask) with one stored nonzero whose column no earlier such row bounds: bounds
    on one variable, which PIQP takes as its box x_l <= x <= x_u. Returns (rows, their columns, coefficients)."""
    A = qp.A.tocsr()
    counts = np.diff(A.indptr)
    single = np.flatnonzero(rows & (counts == 1))
    size = np.abs(A.data[A.indptr[single]])
    single = single[(size >= BOX_COEF_RANGE[0]) & (size <= BOX_COEF_RANGE[1])]  # bounds / coefficient stay finite
    cols = A.indices[A.indptr[single]]
    cols, first = np.unique(cols, return_index=True)
    single = single[first]
    return single, cols, A.data[A.indptr[single]]


def solve_piqp(qp: QPProblem, settings: dict, time_limit: float | None, finish: bool = False) -> dict:
    """PIQP on ``qp`` at the settings ``s`` (eps_abs, eps_rel, max_iter). PIQP has no time limit of its own:
    ``time_limit`` (seconds from the call) only decides whether a second run starts; its iterations are few and
    bounded. Rows that bound one variable go to PIQP's box (:func:`box_rows`), the others to Ax = b and
    h_l <= Gx <= h_u. PIQP is asked for each fraction of eps in ``PIQP_LADDER`` in turn, within its iteration cap,
    until an answer passes OSQP's test at eps (:func:`passes`) or claims infeasibility (for the caller to check);
    with ``finish``, each answer that fails the test is finished (:func:`finished`) before the next step."""
    start, out = time.perf_counter(), {}
    for k, (tight, cap) in enumerate(PIQP_LADDER):
        if k:  # the next step only where its cap of iterations, at the last step's pace, fits the time left
            pace = (time.perf_counter() - start) / max(1, out["stats"]["iterations"])
            if time_limit is not None and start + time_limit - time.perf_counter() < pace * cap:
                break
        out = _piqp_once(qp, dict(settings, max_iter=min(int(settings["max_iter"]), cap)), tight,
                         finish=start if finish else None, time_limit=time_limit)
        if out["status"] in ("infeasible", "unbounded") or (out["status"] == "optimal" and out["passes"]):
            break
    return out


def _piqp_once(qp: QPProblem, settings: dict, tight: float, finish: float | None = None,
               time_limit: float | None = None) -> dict:
    """One PIQP run at ``tight`` times eps; ``finish``: where given, the start of the caller's clock, and an answer
    that fails the test is finished within :func:`finish_by`'s deadline (``time_limit``: seconds from that start)."""
    import piqp

    eq, ineq = _rows(qp)
    A = qp.A.tocsr()
    brows, bcols, coef = box_rows(qp, ineq)
    general = ineq.copy()
    general[brows] = False
    x_l, x_u = np.full(qp.n, -np.inf), np.full(qp.n, np.inf)
    lo, hi = qp.l[brows] / coef, qp.u[brows] / coef
    x_l[bcols], x_u[bcols] = np.where(coef > 0, lo, hi), np.where(coef > 0, hi, lo)
    solver = piqp.SparseSolver()
    st = solver.settings
    st.verbose, st.max_iter = False, settings["max_iter"]
    st.eps_abs, st.eps_rel = max(tight * settings["eps_abs"], 1e-12), max(tight * settings["eps_rel"], 1e-14)
    if hasattr(st, "eps_duality_gap_abs"):  # its own duality-gap test, else at PIQP's defaults (LISWET1 at
        # 1e-6: PIQP_SOLVED with a gap of 4.9e-6; with these, 9e-11)
        st.eps_duality_gap_abs, st.eps_duality_gap_rel = st.eps_abs, st.eps_rel
    solver.setup(qp.P.tocsc(), qp.q, A[eq].tocsc(), qp.l[eq], A[general].tocsc(), qp.l[general], qp.u[general],
                 x_l if brows.size else None, x_u if brows.size else None)
    status = solver.solve()
    r = solver.result
    y = np.zeros(qp.m)
    y[eq] = np.asarray(r.y)
    y[general] = np.asarray(r.z_u) - np.asarray(r.z_l)
    if brows.size:  # the row a x_j carries the box's dual over a
        y[brows] = (np.asarray(r.z_bu)[bcols] - np.asarray(r.z_bl)[bcols]) / coef
    x = np.asarray(r.x, dtype=float)
    name = str(status).rsplit(".", 1)[-1]
    kind = {"PIQP_SOLVED": "optimal", "PIQP_MAX_ITER_REACHED": "max_iter", "PIQP_PRIMAL_INFEASIBLE": "infeasible",
            "PIQP_DUAL_INFEASIBLE": "unbounded"}.get(name, "numerical_error")
    stats = {"iterations": int(r.info.iter), "piqp_status": name, "piqp_version": piqp.__version__,
             "piqp_target": tight}
    return _outcome(qp, settings, kind, x, y, stats, None if finish is None else finish_by(finish, time_limit))


def probe(name: str, qp: QPProblem, settings: dict) -> float:
    """Seconds that ``name`` ('piqp' or 'clarabel') takes to set up and make one step on ``qp``: its setup and
    about two factorisations of its KKT matrix (its starting point's and the step's)."""
    start = time.perf_counter()
    one = dict(settings, max_iter=1)
    if name == "piqp":
        _piqp_once(qp, one, PIQP_LADDER[0][0])
    else:
        solve_clarabel(qp, one, None)
    return time.perf_counter() - start


def solve_clarabel(qp: QPProblem, settings: dict, time_limit: float | None, finish: bool = False) -> dict:
    """Clarabel on ``qp`` at the settings ``s`` (eps_abs, eps_rel, max_iter), within ``time_limit`` seconds; with
    ``finish``, an answer that fails the test is finished (:func:`finished`)."""
    import clarabel

    start = time.perf_counter()

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
    st.max_iter = int(settings["max_iter"])
    st.tol_gap_abs, st.tol_gap_rel = max(TIGHTER * settings["eps_abs"], 1e-12), max(TIGHTER * settings["eps_rel"],
                                         1e-14)
    st.tol_feas = min(max(TIGHTER * settings["eps_abs"], 1e-12), 1e-8)
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
    return _outcome(qp, settings, kind, x, y, stats, finish_by(start, time_limit) if finish else None)


OSQP_STATUS = {"solved": "optimal", "solved inaccurate": "optimal_inaccurate",
               "primal infeasible": "infeasible", "dual infeasible": "unbounded",
               "primal infeasible inaccurate": "max_iter", "dual infeasible inaccurate": "max_iter",
               "maximum iterations reached": "max_iter", "run time limit reached": "time_limit",
               "problem non convex": "numerical_error", "interrupted": "interrupted"}


# osqp's setup errors (osqp.SolverError names) -> the error optsolve reports and what it means
OSQP_SETUP_ERRORS = {
    "OSQP_NONCVX_ERROR": (InputError, "P is not positive semidefinite: osqp found the problem non-convex "
                                      "when it factorised the KKT matrix"),
    "OSQP_DATA_VALIDATION_ERROR": (InputError, "osqp rejected the problem data"),
    "OSQP_SETTINGS_VALIDATION_ERROR": (ParameterError, "osqp rejected the settings"),
    "OSQP_LINSYS_SOLVER_INIT_ERROR": (SolverError, "osqp could not factorise its KKT matrix"),
    "OSQP_MEM_ALLOC_ERROR": (SolverError, "osqp could not allocate its workspace"),
}


def osqp_error(exc, osqp, said: str):
    """The optsolve error for an OSQPException ``exc``, in one line; ``said``: what osqp printed meanwhile
    (its first line, the cause, is quoted unless the meaning already says it)."""
    code = exc.args[0] if exc.args else None
    try:
        name = osqp.SolverError(code).name
    except ValueError:
        name = f"error code {code!r}"
    cls, meaning = OSQP_SETUP_ERRORS.get(name, (SolverError, "osqp failed to set up the problem"))
    lines = [line.strip() for line in said.splitlines() if line.strip()]
    cause = lines[0].split(": ", 1)[-1].rstrip(".") if lines and name != "OSQP_NONCVX_ERROR" else ""
    return cls(f"{meaning} ({name}{': ' + cause if cause else ''}).")


def fd2_into(file):
    """Point file descriptor 2 at ``file`` (where C code such as osqp writes); returns the restorer."""
    import os
    import sys

    sys.stderr.flush()
    try:
        saved = os.dup(2)
    except OSError:  # no descriptor 2 (closed): nothing to keep
        return lambda: None
    os.dup2(file.fileno(), 2)

    def restore():
        os.dup2(saved, 2)
        os.close(saved)

    return restore


def solve_osqp(qp: QPProblem, settings: dict, deadline: float | None, x0=None, y0=None) -> dict:
    """osqp on the problem with optsolve's ``settings``: status, x, y, osqp's statistics, and the vector of an
    infeasibility claim (for the caller to check). A setup failure raises the optsolve error osqp's code means."""
    import contextlib
    import sys
    import tempfile

    import osqp
    import scipy.sparse as sp

    solver = osqp.OSQP()
    big = 1e30
    with contextlib.redirect_stdout(sys.stderr):
        # osqp prints its setup errors to stderr in several lines: they are kept for one error line
        with tempfile.TemporaryFile() as said:
            restore = fd2_into(said)
            failure = None
            try:
                solver.setup(sp.triu(qp.P, format="csc"), qp.q, qp.A, np.maximum(qp.l, -big), np.minimum(qp.u, big),
                             eps_abs=settings["eps_abs"], eps_rel=settings["eps_rel"], max_iter=settings["max_iter"],
                             verbose=False, rho=settings["rho"], sigma=settings["sigma"], alpha=settings["alpha"],
                             scaling=settings["scaling"], adaptive_rho=bool(settings["adaptive_rho"]),
                             check_termination=settings["check_every"], eps_prim_inf=settings["eps_prim_inf"],
                             eps_dual_inf=settings["eps_dual_inf"], polishing=settings["polish"],
                             **({"time_limit": max(deadline - time.perf_counter(), 1e-3)} if deadline else {}))
                if x0 is not None:
                    solver.warm_start(x=x0, y=y0)
            except osqp.OSQPException as exc:
                failure = exc
            finally:
                restore()
            said.seek(0)
            text = said.read().decode("utf-8", "replace")
        if failure is not None:
            raise osqp_error(failure, osqp, text) from None
        if text:
            sys.stderr.write(text)
        r = solver.solve(raise_error=False)
    status = OSQP_STATUS.get(r.info.status, "numerical_error")
    stats = {"iterations": int(r.info.iter), "evaluations": 1 + int(r.info.rho_updates),
             "rho_updates": int(r.info.rho_updates),
             "prim_res": float(r.info.prim_res), "dual_res": float(r.info.dual_res), "osqp_status": r.info.status,
             "osqp_version": osqp.__version__}
    claim = r.prim_inf_cert if status == "infeasible" else r.dual_inf_cert if status == "unbounded" else None
    return {"status": status, "x": np.asarray(r.x, dtype=float), "y": r.y, "stats": stats,
            "claim": None if claim is None else np.asarray(claim, dtype=float)}
