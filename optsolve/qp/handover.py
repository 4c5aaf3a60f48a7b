"""ADMM's hand-over to PIQP or Clarabel (the default method's step 3, :mod:`optsolve.qp.auto`): when the iterations
hand over (:func:`far` at the first check, :func:`too_slow` from the second, beside the ski-rental switch of
:class:`optsolve.qp.admm`'s run), to which solver (:func:`to_clarabel`), how many steps PIQP gets
(:func:`piqp_iterations`), and the solver's run on the problem, its answer in ADMM's scaled variables
(:func:`piqp_finish`).
"""

from __future__ import annotations

import math
import time

import numpy as np

from optsolve.qp.auto import FILL_CLARABEL, has_clarabel, has_piqp
from optsolve.qp.problems import QPProblem
from optsolve.qp.scaling import Scaled

PIQP_MAX_ITER = 500  # PIQP's iterations in a finish without a deadline
PIQP_MIN_ITER = 50  # and at least this many in a hand-over without one (interior-point methods need 10 to 40)
FAR = 0.75  # at the first check, a distance to the tolerances of this over the tolerance hands over (see far)
DEAR = 0.5  # seconds: a factorisation longer than this is dear
HANDED = {"piqp": "handed over to PIQP", "clarabel": "handed over to Clarabel"}  # ADMM's run, as it reports it


def too_slow(pace: tuple, now: float, cost: float) -> bool:
    """Whether iterations that were ``d0`` from the tolerances at time ``t0`` and at best ``least`` since
    (``pace = (t0, d0, least)``; distances from :func:`optsolve.qp.termination.tolerance_distance`) need longer
    than ``cost`` seconds from ``now`` to reach them, their log distance falling at its pace so far; where it has
    not fallen, they never do. False once they are there (``least`` at most 1) or where it is not finite."""
    t0, d0, least = pace
    if least <= 1.0 or not (math.isfinite(least) and math.isfinite(d0)):
        return False
    fall = math.log(d0) - math.log(least)
    return fall <= 0.0 or math.log(least) * (now - t0) / fall > cost


def far(distance: float, eps_abs: float, eps_rel: float) -> bool:
    """Whether a run whose distance to the tolerances (:func:`optsolve.qp.termination.tolerance_distance`) is
    ``distance`` at its first check is still as far from them as the problem's own scale: its residuals at least
    ``FAR`` of the data they are measured against (``distance`` times the larger tolerance), where its iterations
    have not begun to converge. On the default table at 1e-3, every ADMM run this far at its first check (25
    iterations) ends 2-30 times slower than PIQP (BOYD1/2, CONT-101/200/201/300, HUESTIS, HUES-MOD, UBH1: 0.9-1.0);
    the farthest of the runs that end faster than PIQP are 0.39 (flow) and 0.31 (QSHIP12L). Not finite: False."""
    return math.isfinite(distance) and distance * max(eps_abs, eps_rel) >= FAR


def to_clarabel(ldl, numeric_time: float) -> bool:
    """Whether ADMM's hand-over goes to Clarabel, at its first check, rather than to PIQP: where Clarabel is
    installed and ADMM's factorisation was dear (``DEAR``) with a factor of at least ``FILL_CLARABEL`` times the
    KKT matrix's entries (``ldl``: :class:`optsolve.qp.ldl.QuasiDefinite` where QDLDL factored; neither the
    reduced form nor CHOLMOD's factor is read).
    There a supernodal factorisation (Clarabel's) runs several times faster a step than the simplicial ones of
    ADMM and PIQP, and ADMM pays the simplicial factor at every refactorisation and solve. On the default table at
    1e-3 the fill is 37-44 on CVXQP1/2/3_L (Clarabel alone 2.2-5.1 s, ADMM 5.9-18 s, PIQP 10-25 s) and at most
    17 elsewhere (flow 20,000: 16.7; CONT-300: 14.2; grids 7; mpc, svm, lasso, portfolio 1.3-3.4)."""
    if numeric_time < DEAR or not hasattr(ldl, "factor_entries") or not has_clarabel():
        return False
    entries = ldl.factor_entries()  # None: not known (CHOLMOD's factor)
    return entries is not None and entries >= FILL_CLARABEL * ldl.K.nnz


def piqp_iterations(deadline: float | None, budget: float, numeric_time: float) -> int:
    """PIQP's iteration cap, for it has no time limit of its own: as many of its steps as fit in the time left
    before ``deadline``, else in ``budget`` seconds (at least PIQP_MIN_ITER), each step costing about one
    factorisation of ADMM's KKT matrix (``numeric_time``)."""
    if deadline is None:
        steps = max(PIQP_MIN_ITER, budget / max(numeric_time, 1e-9))
    else:
        steps = max(1.0, (deadline - time.perf_counter()) / max(numeric_time, 1e-9))
    return int(min(PIQP_MAX_ITER, steps))


def piqp_finish(s: Scaled, st, unscaled: QPProblem | None = None, max_iter: int = PIQP_MAX_ITER,
                solver: str = "piqp", time_limit: float | None = None):
    """PIQP (or Clarabel: ``solver``, within ``time_limit`` seconds) on the scaled problem (or on ``unscaled``, its
    answer scaled back), for a stalled or handed-over run at the settings ``st``
    (:class:`optsolve.qp.admm.ADMMSettings`: its eps_abs and eps_rel): ``(x, y, z, solved)`` in the scaled
    variables, like :func:`optsolve.qp.ipm.interior_point`, or None where the package is missing or returns no
    point. The hand-over calls it on the file's own problem, as ``--method piqp`` does.

    Notes
    -----
    On the 40 smallest Maros-Meszaros files at eps 1e-6 (10,000 iterations), PIQP called on each
    scaled problem passed the certificate on 39, against 37 for admm with the hand-written steps. On
    HUESTIS at 1e-3, PIQP answers the file's own problem in 0.03 s, while its answer on the
    Ruiz-scaled problem fails the test.
    """
    if not (has_piqp() if solver == "piqp" else has_clarabel()):
        return None
    from optsolve.qp.peers import solve_clarabel, solve_piqp

    target = unscaled if unscaled is not None else QPProblem(P=s.P, q=s.q, A=s.A, l=s.l, u=s.u)
    run = solve_piqp if solver == "piqp" else solve_clarabel
    r = run(target, {"eps_abs": st.eps_abs, "eps_rel": st.eps_rel, "max_iter": max_iter}, time_limit,
            finish=unscaled is not None)
    x, y = r["x"], r["y"]
    if x.shape != (s.P.shape[0],) or not (np.all(np.isfinite(x)) and np.all(np.isfinite(y))):
        return None
    if unscaled is not None:
        x, y = x / s.D, s.c * y / s.E
    return x, y, np.clip(s.A @ x, s.l, s.u), r["status"] == "optimal"
