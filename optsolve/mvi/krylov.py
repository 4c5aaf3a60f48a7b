"""ecppa's inner loop where F is affine and C = R^d: the resolvent as a linear system, by GMRES.

For F(z) = M z + q on R^d, the resolvent w = J_{gamma F}(z_k) of ecppa's outer step solves
(I + gamma M) w = b, b = z_k - gamma q. The fixed-point inner loop of :mod:`optsolve.mvi.ecppa`
is Richardson's iteration on this system, which contracts only while gamma L < 1; there the
outer proximal steps converge slowly on the eigenvalues of M of small modulus (a step of
|1 + gamma mu|^-1 there is little more than gamma mu). GMRES (Saad and Schultz, "GMRES: a
generalized minimal residual algorithm for solving nonsymmetric linear systems", SIAM J. Sci.
Stat. Comput. 7, 1986) has no such bound, so the step is gamma = KRYLOV_GAMMA / L: the outer
steps then near the solution in tens, each solved roughly. Where d is at most the basis's KRYLOV_DIM
directions, GMRES solves the system exactly within d products whatever gamma is, and the outer step
z_{k+1} = w + (rho / gamma)(z_k - w) (exact resolvent, lam = 1) contracts by |rho| / gamma: there
gamma = EXACT_GAMMA / L (measured in docs/benchmarks.md, bench-mvi). Only L's scale matters here: where no
L is given, NORM_STEPS power steps on M estimate it (:func:`norm_estimate`).

I + gamma M is invertible for every gamma > 0 under the weak Minty condition with rho > -1/L:
an eigenvalue mu of M with a real eigenvector v has v'M^-1 v = ||v||^2 / mu >= rho ||v||^2, so no
real mu lies in [-1/|rho|, 0), and |mu| <= L < 1/|rho|.

The error-correction test decides how roughly. GMRES from w_0 = z_k keeps w - z_k = V y with V
orthonormal, so ||w - z_k|| = ||y||, and its residual r = b - (I + gamma M) w has a known norm at
every step. With u = F(w) = (z_k - w - r) / gamma, the halfspace step length is
t = gamma + rho + <u, r> / ||u||^2, so t >= sigma (gamma + rho) holds once ||r|| <= a ||u||,
a = (1 - sigma)(gamma + rho); and since ||u|| >= (||y|| - ||r||) / gamma, once
||r|| <= c ||y|| with c = beta / (1 + beta), beta = a / gamma. The loop stops there (or at
KRYLOV_DIM directions, then restarts from w); the point w is evaluated (F(w) = u, its natural
residual measured like every point's), t is computed exactly, and the outer step is ecppa's:
the projection onto the halfspaces of z_k and of w (:class:`optsolve.mvi.halfspaces.Halfspaces`), a
Fejer step whatever the accuracy reached, so long as t > 0.

Each product M v counts as one evaluation of F (it costs the same sparse product).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.linalg import solve_triangular

from optsolve.mvi.evaluator import Evaluator, Setup, Stop
from optsolve.mvi.halfspaces import Halfspaces
from optsolve.mvi.operators import norm2

KRYLOV_GAMMA = 10.0  # gamma = KRYLOV_GAMMA / L
EXACT_GAMMA = 1e4  # gamma = EXACT_GAMMA / L where d <= KRYLOV_DIM: GMRES is exact within d products at any gamma
KRYLOV_DIM = 30  # GMRES directions kept before a restart: the basis's KRYLOV_DIM + 1 vectors of length d lie
# within the WORK_VECTORS that optsolve.mvi.problems.prepare requires of the memory budget
BREAKDOWN = 1e-6  # a new direction below this share of its column ends the basis (the single-precision basis's
# rounding is far above the double-precision one's 1e-14)
REORTHOGONALIZE = 0.5  # a second Gram-Schmidt pass where the first left less than this share of the norm
ROUNDOFF = 1000.0  # where no halfspace separates and ||F(z)|| <= ROUNDOFF eps L ||z||, F's rounding is the cause
MAX_RESTARTS = 20  # of GMRES within one outer step, while the error-correction test fails
NORM_STEPS = 10  # power steps of the estimate of ||M|| where no L is known


def _project_out(V: np.ndarray, w: np.ndarray) -> np.ndarray:
    """w -= V'(V w) in place for the single-precision basis V (one pass over it each way); returns V w."""
    h = V @ w.astype(np.float32)
    w -= h @ V
    return h.astype(np.float64)


def applies(ev: Evaluator, s: Setup) -> bool:
    """Whether ecppa solves its resolvents by GMRES: an affine F on R^d."""
    return ev.op.matrix is not None and ev.C.kind == "none" and s.inner_steps is None


def norm_estimate(ev: Evaluator, d: int) -> float:
    """A lower estimate of ||M|| by NORM_STEPS power steps on M (counted as evaluations): the scale of gamma
    where no L is known. Any gamma > 0 keeps the method's guarantee (see the module's notes)."""
    v = np.random.default_rng(0).standard_normal(d)
    v /= np.linalg.norm(v)
    best = 0.0
    for _ in range(NORM_STEPS):
        Mv = ev.product(v)
        size = float(np.linalg.norm(Mv))
        if not (size > 0 and math.isfinite(size)):
            break
        best = max(best, size)
        v = Mv / size
    return best if best > 0 else 1.0


class KrylovOuter:
    """ecppa's outer steps with the resolvent solved by restarted GMRES (see the module's notes)."""

    def __init__(self, ev: Evaluator, s: Setup, dim: int = KRYLOV_DIM):
        self.ev, self.s = ev, s
        self.L = s.L or norm_estimate(ev, s.z0.size)
        self.gamma = s.gamma or (EXACT_GAMMA if s.z0.size <= dim else KRYLOV_GAMMA) / self.L
        # without a given rho: CEG+'s adaptive choice at the global L, which covers rho > -1/(2L)
        self.rho = s.rho if s.rho is not None else -0.495 / self.L
        sigma = 0.5 if s.sigma is None else s.sigma
        beta = (1.0 - sigma) * (1.0 + self.rho / self.gamma)
        self.sigma, self.c = sigma, beta / (1.0 + beta)
        self.V = np.empty((dim + 1, s.z0.size), dtype=np.float32)
        self.stats = {"outer": 0, "inner": 0, "max_inner": 0, "gamma_min": self.gamma, "gamma_max": self.gamma,
                      "restarts": 0, "inner_solver": "gmres", "L_estimate": None if s.L else self.L}

    def _gmres(self, z: np.ndarray, x: np.ndarray, r0: np.ndarray) -> tuple[np.ndarray, int]:
        """GMRES on (I + gamma M) w = z - gamma q from x (residual r0), until ||r|| <= c ||x + V y - z||
        or the basis is full; returns (w, products)."""
        ev, V, gamma = self.ev, self.V, self.gamma
        m = V.shape[0] - 1
        H = np.zeros((m + 1, m))
        cs, sn = np.zeros(m), np.zeros(m)
        g = np.zeros(m + 1)
        g[0] = float(np.linalg.norm(r0))
        if g[0] == 0.0:
            return x, 0
        np.divide(r0, g[0], out=V[0])
        # w - z = offset + V y: ||w - z||^2 = ||offset||^2 + 2 (V offset)'y + ||y||^2, with V offset kept
        offset = None if x is z else (x - z).astype(np.float32)
        oo = 0.0 if offset is None else float(np.linalg.norm(x - z)) ** 2
        vo = np.zeros(m + 1)
        y, j = np.zeros(0), 0
        while j < m:
            w = ev.product(V[j])
            w *= gamma
            w += V[j]
            h = _project_out(V[: j + 1], w)  # classical Gram-Schmidt ...
            beta = float(np.linalg.norm(w))
            # ... and once more where it cancelled (Kahan's "twice is enough"; ||w|| before by Pythagoras)
            if beta * beta < REORTHOGONALIZE ** 2 * (float(h @ h) + beta * beta):
                h += _project_out(V[: j + 1], w)
                beta = float(np.linalg.norm(w))
            if not (math.isfinite(beta) and np.isfinite(h).all()):
                raise Stop("numerical", "the GMRES basis of the resolvent's system is not finite")
            for i in range(j):  # the earlier Givens rotations on the new column
                h[i], h[i + 1] = cs[i] * h[i] + sn[i] * h[i + 1], -sn[i] * h[i] + cs[i] * h[i + 1]
            rad = math.hypot(h[j], beta)
            cs[j], sn[j] = (h[j] / rad, beta / rad) if rad > 0 else (1.0, 0.0)
            H[: j + 1, j] = h
            H[j, j] = rad
            g[j + 1], g[j] = -sn[j] * g[j], cs[j] * g[j]
            j += 1
            y = solve_triangular(H[:j, :j], g[:j], check_finite=False)
            if offset is not None:
                vo[j - 1] = float(V[j - 1] @ offset)
            dist = math.sqrt(max(oo + 2.0 * float(vo[:j] @ y) + float(y @ y), 0.0))
            if beta <= BREAKDOWN * rad or abs(g[j]) <= self.c * dist:  # (a breakdown: the Krylov space holds w)
                break
            np.divide(w, beta, out=V[j])
        return x + y.astype(np.float32) @ V[:j], j

    def step(self, z: np.ndarray, Fz: np.ndarray) -> np.ndarray:
        """z_{k+1} from z_k = z: GMRES to the error-correction test, then the halfspace step."""
        ev, s, gamma, rho = self.ev, self.s, self.gamma, self.rho
        stats = self.stats
        x, r, products = z, -gamma * Fz, 0  # the residual of w_0 = z_k: b - (I + gamma M) z_k = -gamma F(z_k)
        for _ in range(MAX_RESTARTS + 1):
            w, j = self._gmres(z, x, r)
            products += j
            Fw = ev(w)
            with np.errstate(over="ignore"):
                uu = float(Fw @ Fw)
            if math.isinf(uu):
                raise Stop("numerical", f"outer step {stats['outer'] + 1}: ||F(w)||^2 overflows float64 (||F(w)|| = "
                           f"{norm2(Fw):.3g}), which the halfspace step needs; rescale the operator")
            t = (float(Fw @ (z - w)) + rho * uu) / uu if uu > 0 else 0.0
            if t >= self.sigma * (gamma + rho):
                break
            stats["restarts"] += 1
            x, r = w, z - w - gamma * Fw  # b - (I + gamma M) w, from F(w) without a product
        ev.note_u(uu)
        stats["outer"] += 1
        ev.iteration = stats["outer"]
        stats["inner"] += products
        stats["max_inner"] = max(stats["max_inner"], products)
        H = Halfspaces()
        ff = float(Fz @ Fz)
        H.add(Fz, rho * ff, ff)
        phi = H.add(Fw, t * uu, uu)
        if phi > 0:
            return z - s.lam * H.step()
        residual = math.sqrt(ff)
        floor = ROUNDOFF * np.finfo(float).eps * self.L * float(np.linalg.norm(z))
        if residual <= floor:
            raise Stop("numerical", f"outer step {stats['outer']}: the natural residual {residual:.3g} is at the "
                       f"rounding level of F ({floor:.2g}: {ROUNDOFF:g} eps L ||z||), where no step lowers it; a "
                       "larger --tol is reachable")
        raise Stop("numerical", f"outer step {stats['outer']}: GMRES found no separating halfspace in {products} "
                   f"products (t = {t:.3g}); the weak Minty condition with rho = {rho:.4g} seems not to hold")

    def next_step(self) -> None:
        pass
