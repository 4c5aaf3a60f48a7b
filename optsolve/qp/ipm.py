"""A primal-dual interior-point finish for ADMM runs that stall (``--refine``, on by default).

OSQP's ADMM converges slowly on degenerate, LP-like problems (many Maros-Meszaros files stop
at the iteration cap). When polishing cannot finish such a run, a few dozen Newton steps of a
Mehrotra predictor-corrector interior-point method (Mehrotra 1992; Nocedal and Wright,
"Numerical Optimization", 2nd ed., section 16.6) on the same scaled problem usually can. Its
answer is accepted only when it passes the solver's own termination test.

Form: for every row with a finite lower bound a slack ``sl = a'x - l > 0`` with multiplier
``zl > 0``, for a finite upper bound ``su = u - a'x > 0`` with ``zu > 0``; equality rows
(``l = u``) stay equations with a free multiplier. OSQP's dual is ``y = zu - zl`` (inequality
rows), so that ``Px + q + A'y = 0``. Eliminating the slacks and the bound multipliers leaves
one quasi-definite system per step,

    [P + delta I, A'; A, -W^-1] [dx; dy] = [-r_d; -g / W],   W = zl/sl + zu/su,

(equality rows: ``a'dx - eps dy = -(a'x - b)``), factored once and solved twice (predictor and
corrector). It is factored as ADMM's KKT matrix is (:class:`optsolve.qp.ldl.QuasiDefinite`: the
ordering and symbolic analysis once, only the numeric LDL' again at each step, as W changes).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from optsolve.qp.ldl import QuasiDefinite

REG_PRIMAL = 1e-9  # delta: regularisation of P (keeps the system quasi-definite)
REG_EQ = 1e-10  # the same for equality rows
STEP_TO_BOUNDARY = 0.995
REFINE_STEPS = 3
EQ_TOL = 1e-4  # |u - l| below this (scaled): an equality row, as in the ADMM


def interior_point(s, x0, score, *, max_iter: int = 80, deadline: float | None = None):
    """``(x, y, z, accepted)`` for the scaled problem ``s`` (see :class:`optsolve.qp.scaling.Scaled`),
    starting near ``x0``: the first iterate whose ``score(x, y, z)`` (the termination test's largest
    ratio of a residual to its tolerance) is at most 1, else the iterate of the smallest score
    (``accepted`` False: a start for polishing); None when the steps break down at once."""
    with np.errstate(all="ignore"):
        return _interior_point(s, x0, score, max_iter, deadline)


@dataclass
class _Newton:
    """One interior-point iteration's Newton system (its factor, weights and residuals at the iterate's slacks
    sl, su and multipliers zl, zu), solved for the directions of :meth:`direction`."""

    P: object
    A: object
    AT: object
    factor: object
    Wexact: np.ndarray
    Winv: np.ndarray
    eq: np.ndarray
    free: np.ndarray
    has_l: np.ndarray
    has_u: np.ndarray
    sl: np.ndarray
    su: np.ndarray
    zl: np.ndarray
    zu: np.ndarray
    r_d: np.ndarray
    r_l: np.ndarray
    r_u: np.ndarray
    r_e: np.ndarray

    def direction(self, cl, cu):
        """Newton direction for complementarity targets sl zl -> cl, su zu -> cu (row-wise)."""
        P, A, AT, factor, Wexact, Winv = self.P, self.A, self.AT, self.factor, self.Wexact, self.Winv
        eq, free, has_l, has_u = self.eq, self.free, self.has_l, self.has_u
        sl, su, zl, zu, r_d, r_l, r_u, r_e = self.sl, self.su, self.zl, self.zu, self.r_d, self.r_l, self.r_u, self.r_e
        n = P.shape[0]
        g = np.where(has_u, (cu - zu * r_u) / su - zu, 0.0) - np.where(has_l, (cl - zl * r_l) / sl - zl, 0.0)
        rhs = np.concatenate([-r_d, np.where(eq, -r_e, np.where(free, 0.0, -g * Winv))])
        sol = factor.solve(rhs)

        def residual(v):
            return rhs - np.concatenate([P @ v[:n] + AT @ v[n:], A @ v[:n] - Wexact * v[n:]])

        res = residual(sol)
        for _ in range(REFINE_STEPS):  # iterative refinement against the unregularised system, while it helps
            trial = sol + factor.solve(res)
            res_trial = residual(trial)
            if not np.abs(res_trial).max() < 0.5 * np.abs(res).max():
                break
            sol, res = trial, res_trial
        dx, dy = sol[:n], sol[n:]
        adx = A @ dx
        dsl = np.where(has_l, adx + r_l, 0.0)
        dsu = np.where(has_u, r_u - adx, 0.0)
        # one-sided rows: the multiplier's step is the solved dy itself (dividing by a vanishing slack
        # would amplify rounding); range rows from the complementarity equations
        dzl = np.where(has_l, np.where(has_u, (cl - zl * sl - zl * dsl) / sl, -dy), 0.0)
        dzu = np.where(has_u, np.where(has_l, (cu - zu * su - zu * dsu) / su, dy), 0.0)
        # and their slacks' steps from the complementarity equations (not from A dx, inaccurate at that scale)
        dsl = np.where(has_l & ~has_u, (cl - zl * sl - sl * dzl) / np.maximum(zl, 1e-300), dsl)
        dsu = np.where(has_u & ~has_l, (cu - zu * su - su * dzu) / np.maximum(zu, 1e-300), dsu)
        return dx, dy, dsl, dsu, dzl, dzu


def _max_step(v, dv, mask):
    neg = mask & (dv < 0)
    return min(1.0, float((-v[neg] / dv[neg]).min())) if neg.any() else 1.0


def _interior_point(s, x0, score, max_iter, deadline):
    P, q, A, l, u = s.P, s.q, s.A, s.l, s.u
    n, m = P.shape[0], A.shape[0]
    if m == 0:
        return None
    eq = np.abs(u - l) < EQ_TOL
    has_l = np.isfinite(l) & ~eq
    has_u = np.isfinite(u) & ~eq
    b = np.where(eq, l, 0.0)
    lf, uf = np.where(has_l, l, 0.0), np.where(has_u, u, 0.0)
    Ax = A @ x0
    x = np.asarray(x0, dtype=float).copy()
    sl = np.where(has_l, np.maximum(Ax - lf, 1.0), 1.0)
    su = np.where(has_u, np.maximum(uf - Ax, 1.0), 1.0)
    zl, zu = np.where(has_l, 1.0, 0.0), np.where(has_u, 1.0, 0.0)
    ye = np.zeros(m)
    pairs = int(has_l.sum() + has_u.sum())
    H = (P + REG_PRIMAL * sp.eye(n, format="csc")).tocsc()
    AT = A.T.tocsr()
    factor = None

    def dual_y():
        return np.where(eq, ye, zu - zl)

    def mu_of(sl, zl, su, zu):
        return float((sl * zl)[has_l].sum() + (su * zu)[has_u].sum()) / max(pairs, 1)

    best, best_merit = None, np.inf
    for _ in range(max_iter):
        if deadline is not None and time.perf_counter() > deadline:
            break
        y = dual_y()
        Ax = A @ x
        z = np.clip(Ax, l, u)
        merit = score(x, y, z)
        if merit <= 1.0:
            return x, y, z, True
        if not np.isfinite(merit):
            break
        if merit < best_merit:
            best, best_merit = (x, y, z, False), merit
        r_d = P @ x + q + AT @ y
        r_l = np.where(has_l, Ax - lf - sl, 0.0)
        r_u = np.where(has_u, uf - Ax - su, 0.0)
        r_e = np.where(eq, Ax - b, 0.0)
        mu = mu_of(sl, zl, su, zu)
        W = np.where(has_l, zl / sl, 0.0) + np.where(has_u, zu / su, 0.0)
        free = ~eq & ~has_l & ~has_u
        Wexact = np.where(eq, 0.0, np.where(free, 1e12, 1.0 / np.maximum(W, 1e-300)))
        Winv = np.clip(np.where(eq, REG_EQ, Wexact), REG_EQ, 1e12)
        try:
            if factor is None:
                factor = QuasiDefinite(H, A, Winv)
            else:
                factor.update(Winv)
        except RuntimeError:  # a zero pivot: the steps have broken down
            break

        newton = _Newton(P, A, AT, factor, Wexact, Winv, eq, free, has_l, has_u, sl, su, zl, zu, r_d, r_l, r_u, r_e)
        zero = np.zeros(m)
        dx, dy, dsl, dsu, dzl, dzu = newton.direction(zero, zero)
        ap = min(_max_step(sl, dsl, has_l), _max_step(su, dsu, has_u))
        ad = min(_max_step(zl, dzl, has_l), _max_step(zu, dzu, has_u))
        mu_aff = mu_of(sl + ap * dsl, zl + ad * dzl, su + ap * dsu, zu + ad * dzu)
        sigma = min(1.0, (mu_aff / max(mu, 1e-300)) ** 3)
        dx, dy, dsl, dsu, dzl, dzu = newton.direction(sigma * mu - dsl * dzl, sigma * mu - dsu * dzu)
        # one step length for primal and dual: P couples x to the dual residual (unlike an LP)
        step = STEP_TO_BOUNDARY * min(_max_step(sl, dsl, has_l), _max_step(su, dsu, has_u),
                                      _max_step(zl, dzl, has_l), _max_step(zu, dzu, has_u))
        x = x + step * dx
        sl = np.where(has_l, sl + step * dsl, 1.0)
        su = np.where(has_u, su + step * dsu, 1.0)
        zl = np.where(has_l, zl + step * dzl, 0.0)
        zu = np.where(has_u, zu + step * dzu, 0.0)
        ye = np.where(eq, ye + step * dy, 0.0)
        if not (np.all(np.isfinite(x)) and np.all(np.isfinite(ye))):
            break
    return best
