"""Preconditioned conjugate gradients on the Schur complement of MDOT-TNT's Newton systems
(:mod:`optsolve.ot.tnt`), plain (Jacobi, on the singular S) or discounted.

Kemertas, Farahmand and Jepson, "A Truncated Newton Method for Optimal Transport", ICLR 2025.
"""

from __future__ import annotations

from dataclasses import dataclass

from optsolve.ot.deadline import CG_ITERATION_PASSES, STEP_TAIL_PASSES


@dataclass
class PCGState:
    rho: float = 0.0


def l1(xp, z) -> float:
    return float(xp.abs(z).sum())


class _Schur:
    """``S_rho = D_{rP} - rho P D_{ch}^{-1} P^T`` of one Newton step: its products, its Jacobi preconditioner,
    the right-hand side ``b = -g`` and the start ``x0 = b / M_1``; ``iterations`` counts CG steps over runs."""

    def __init__(self, K, rP, ch, g):
        self.K, self.rP, self.xp = K, rP, K.xp
        self.inv_c = 1.0 / ch
        self.diag_q = K.sq_matvec(self.inv_c)
        self.b = -g
        self.x0 = self.b / self.precond(1.0)
        self.Qx0 = self.Q(self.x0)
        self.iterations = 0

    def Q(self, p):
        return self.K.matvec(self.K.rmatvec(p) * self.inv_c)

    def precond(self, rho):
        xp = self.xp
        M = self.rP - rho * self.diag_q
        pos = M > 0
        if not bool(pos.all()):
            smallest = float(M[pos].min()) if bool(pos.any()) else 1.0
            M = xp.where(pos, M, smallest)
        return M

    def residual(self, x, Qx) -> float:
        """The L1 residual of x in the unshifted system (rho = 1)."""
        return l1(self.xp, self.rP * x - Qx - self.b)

    def run(self, rho, own_target, target, cap, expired):
        """CG on S_rho from x0; returns (best x, best true residual, converged, negative curvature)."""
        rP, b = self.rP, self.b
        M = self.precond(rho)
        x, Qx = self.x0.copy(), self.Qx0.copy()
        r = b - (rP * x - rho * Qx)
        z = r / M
        p = z.copy()
        rz = float(r @ z)
        bx, bres = self.x0, self.residual(self.x0, self.Qx0)
        while self.iterations < cap:
            if expired is not None and expired(CG_ITERATION_PASSES + STEP_TAIL_PASSES):
                break
            q = self.Q(p)
            Sp = rP * p - rho * q
            pSp = float(p @ Sp)
            self.iterations += 1
            if not pSp > 0:
                return bx, bres, False, True
            a = rz / pSp
            x = x + a * p
            Qx = Qx + a * q
            r = r - a * Sp
            res = self.residual(x, Qx)
            if res < bres:
                bx, bres = x, res
            if res <= target and float(b @ x) > 0:
                return x, res, True, False
            if l1(self.xp, r) <= own_target:
                break
            z = r / M
            rz_new = float(r @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        return bx, bres, False, False


def pcg(K, rP, ch, g, target: float, state: PCGState, mode: str, cap: int, expired=None):
    """Approximately solve (D_{rP} - P D_{ch}^{-1} P^T) x = -g to L1 residual <= target.

    Returns (x, iterations, fell_back). x is a descent direction (-g . x > 0) unless none was found.
    ``mode="plain"`` falls back to the discounted loop (fell_back true) when rounding shows S as indefinite
    before the target is met: at high gamma S is so ill-conditioned that plain CG then stalls.
    ``expired(passes)``: true when ``passes`` more passes would run past the time limit; then stop
    with the best iterate so far, leaving time for the rest of the Newton step.
    """
    S = _Schur(K, rP, ch, g)
    b, x0 = S.b, S.x0
    best_x, best_res = x0, S.residual(x0, S.Qx0)
    if best_res <= target and float(b @ x0) > 0:
        return x0, 0, False

    def answer(fell_back: bool):  # x0 = -g / M with M > 0 is always a descent direction: the fallback
        return (best_x if float(b @ best_x) > 0 else x0), S.iterations, fell_back

    discounted = mode != "plain"
    if not discounted:
        x, res, _, negative = S.run(1.0, 0.0, target, cap, expired)
        if res < best_res:
            best_x, best_res = x, res
        if not (negative and best_res > target):
            return answer(False)
        # S is singular and, at high gamma, so ill-conditioned that rounding makes it look indefinite before
        # the target is met: the discounted loop, whose S_rho is definite, takes over (rho persists from its
        # last use, as in the discounted mode)

    while best_res > target and S.iterations < cap and not (
            expired is not None and expired(CG_ITERATION_PASSES + STEP_TAIL_PASSES)):
        state.rho = 1.0 - (1.0 - state.rho) / 4.0
        x, res, converged, negative = S.run(state.rho, 0.25 * target, target, cap, expired)
        if res < best_res:
            best_x, best_res = x, res
        if negative:
            state.rho = 0.0
            return answer(not discounted)
        if converged:
            break
    state.rho = max(0.0, 1.0 - 4.0 * (1.0 - state.rho))
    return answer(not discounted)


# --------------------------------------------------------------------------- projection
