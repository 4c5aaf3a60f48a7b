"""osqp's solution polishing, repeated as a primal-dual active-set method for a stalled run.

Stellato et al. (2020), "OSQP: an operator splitting solver for quadratic programs", section 4
(solution polishing); Hintermueller, Ito and Kunisch (2002), "The primal-dual active set strategy
as a semismooth Newton method", SIAM J. Optim. 13 (the update of the active set).
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from optsolve.qp.ldl import QuasiDefinite
from optsolve.qp.scaling import Scaled

ACTIVE_SET_ROUNDS = 30  # active-set updates when refining a stalled run


def _solve_active(s: Scaled, lower, upper, delta: float, refine_iter: int, start):
    """The equality-constrained QP on the rows in ``lower`` (at l) and ``upper`` (at u): (x, y) or None.

    ``start``: the (x, y) the regularisation is first centred at (osqp centres it at zero): each
    solve with the factor of the regularised matrix is a proximal step from the previous solution,
    so directions the active rows leave free stay near the iterate being polished instead of
    being pulled to zero (which breaks feasibility of the inactive rows on degenerate LP-like problems)."""
    n, m = s.P.shape[0], s.A.shape[0]
    active = np.flatnonzero(lower | upper)
    Ared = s.A.tocsr()[active]
    b = np.where(lower, s.l, s.u)[active]
    k = active.size
    K0 = sp.vstack([sp.hstack([s.P, Ared.T]), sp.hstack([Ared, sp.csc_matrix((k, k))])], format="csc")
    rhs = np.concatenate([-s.q, b])
    try:  # the regularised matrix [P + delta I, Ared'; Ared, -delta I] is quasi-definite: LDL' (QDLDL)
        factor = QuasiDefinite(s.P + delta * sp.eye(n, format="csc"), Ared, np.full(k, delta))
        sol = np.concatenate([start[0], start[1][active]])
        for _ in range(1 + refine_iter):  # the first step from the start, then the refinement
            sol = sol + factor.solve(rhs - K0 @ sol)
    except RuntimeError:  # singular reduced system
        return None
    if not np.all(np.isfinite(sol)):
        return None
    y = np.zeros(m)
    y[active] = sol[n:]
    return sol[:n], y


def polish(s: Scaled, x, y, z, delta: float, refine_iter: int, rounds: int = 1, deadline: float | None = None):
    """osqp's solution polishing on the scaled problem, optionally repeated as a primal-dual active-set method.

    The first active set is osqp's guess from the ADMM iterate (``z - l < -y``: at l;
    ``u - z < y``: at u); the equality-constrained QP on it is solved exactly (regularised KKT
    system plus iterative refinement). With ``rounds > 1`` the set is then updated by the
    primal-dual active-set rule (Hintermueller, Ito and Kunisch 2002): at l where
    ``y + (Ax - l) < 0``, at u where ``y + (Ax - u) > 0``, until it stops changing. Returns
    (x, y, z) with ``z = Ax`` projected on [l, u], or None. No round after the first starts past
    ``deadline`` (a ``time.perf_counter()`` value).
    """
    lower = (z - s.l) < -y
    upper = ~lower & ((s.u - z) < y)
    best, best_err, seen = None, math.inf, set()
    for k in range(max(1, rounds)):
        if k and deadline is not None and time.perf_counter() > deadline:
            break
        key = (lower.tobytes(), upper.tobytes())
        if key in seen:  # the rule cycles: keep the best set met
            break
        seen.add(key)
        sol = _solve_active(s, lower, upper, delta, refine_iter, (x, y))
        if sol is None:
            break
        x_act, y_act = sol
        Ax = s.A @ x_act
        sign = max(float(np.maximum(y_act[lower], 0.0).max(initial=0.0)),
                   float(np.maximum(-y_act[upper], 0.0).max(initial=0.0)))
        err = max(float(np.maximum(np.maximum(s.l - Ax, Ax - s.u), 0.0).max()),
                  float(np.abs(s.P @ x_act + s.q + s.A.T @ y_act).max()), sign)
        if err < best_err:
            best, best_err = (x_act, y_act, np.clip(Ax, s.l, s.u)), err
        with np.errstate(invalid="ignore"):
            lower = np.isfinite(s.l) & (y_act + (Ax - s.l) < 0)
            upper = ~lower & np.isfinite(s.u) & (y_act + (Ax - s.u) > 0)
    return best
