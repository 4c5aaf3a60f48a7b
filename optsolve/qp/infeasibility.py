"""Exact infeasibility certificates by linear programming, for claims ADMM makes.

ADMM detects infeasibility from the differences of its iterates (OSQP's test), which can
be fooled: a direction along which the objective decreases for a long time looks like a
recession direction (osqp declares PRIMALC1, 2 and 5 of the Maros-Meszaros set unbounded,
and they are not). Before such a claim is reported, the direction is recomputed exactly as
the solution of a linear feasibility problem (HiGHS through scipy.optimize.linprog):

* primal infeasibility (Farkas): ``dy = p - n`` with ``p, n >= 0`` supported on the rows with
  a finite upper / lower bound, ``A'dy = 0`` and ``u'p - l'n = -1``;
* unboundedness: ``d`` with ``P d = 0``, ``A_i d <= 0`` where ``u_i`` is finite,
  ``A_i d >= 0`` where ``l_i`` is finite, and ``q'd = -1``.

Each LP is feasible exactly when the claim is true; the smallest such vector in the 1-norm is
returned with unit inf-norm, or None.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from optsolve.qp.problems import QPProblem

LP_TIME_LIMIT = 60.0


def _linprog(c, A_ub, b_ub, A_eq, b_eq, time_limit):
    from scipy.optimize import linprog

    res = linprog(c, A_ub=A_ub, b_ub=b_ub, A_eq=A_eq, b_eq=b_eq, bounds=(0, None), method="highs",
                  options={"time_limit": time_limit, "presolve": True})
    return res.x if res.status == 0 else None


def farkas_vector(qp: QPProblem, time_limit: float = LP_TIME_LIMIT):
    """dy proving that no x has l <= Ax <= u, or None when the LP finds none."""
    up, lo = np.flatnonzero(np.isfinite(qp.u)), np.flatnonzero(np.isfinite(qp.l))
    if up.size + lo.size == 0:
        return None
    A = qp.A.tocsr()
    A_eq = sp.vstack([sp.hstack([A[up].T, -A[lo].T]),
                      sp.csr_matrix(np.concatenate([qp.u[up], -qp.l[lo]])[None, :])], format="csc")
    b_eq = np.concatenate([np.zeros(qp.n), [-1.0]])
    sol = _linprog(np.ones(up.size + lo.size), None, None, A_eq, b_eq, time_limit)
    if sol is None:
        return None
    dy = np.zeros(qp.m)
    np.add.at(dy, up, sol[:up.size])
    np.add.at(dy, lo, -sol[up.size:])
    return dy / max(float(np.abs(dy).max()), 1e-300)


def recession_direction(qp: QPProblem, time_limit: float = LP_TIME_LIMIT):
    """d along which the objective decreases without bound while staying feasible, or None."""
    n = qp.n
    A = qp.A.tocsr()
    up, lo = np.flatnonzero(np.isfinite(qp.u)), np.flatnonzero(np.isfinite(qp.l))
    split = lambda M: sp.hstack([M, -M])  # noqa: E731  d = d+ - d-
    A_ub = sp.vstack([split(A[up]), split(-A[lo])], format="csc") if up.size + lo.size else None
    b_ub = np.zeros(up.size + lo.size) if A_ub is not None else None
    A_eq = sp.vstack([split(qp.P), split(sp.csr_matrix(qp.q[None, :]))], format="csc")
    b_eq = np.concatenate([np.zeros(n), [-1.0]])
    sol = _linprog(np.ones(2 * n), A_ub, b_ub, A_eq, b_eq, time_limit)
    if sol is None:
        return None
    d = sol[:n] - sol[n:]
    return d / max(float(np.abs(d).max()), 1e-300)
