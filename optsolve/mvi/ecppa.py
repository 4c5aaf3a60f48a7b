"""The error-corrected inexact relaxed proximal point method (``ecppa``) and relaxed PPA (``rppa``).

After Pethick, Mavrothalassitis and Cevher, "Efficient Interpolation between Extragradient and
Proximal Methods for Weak MVIs" (ICLR 2025); the derivation is in :mod:`optsolve.mvi`.

Outer step k, from z_k in C: the inner loop runs the fixed-point iteration
w_j = P_C(z_k - gamma F(w_{j-1})), w_0 = z_k, towards the resolvent J_{gamma(F + N_C)}(z_k) (a
contraction of factor gamma L). Each inner point gives u_j = F(w_j) + (z_k - gamma F(w_{j-1}) -
w_j) / gamma in (F + N_C)(w_j), and with it the halfspace {x : <u_j, w_j - x> >= rho ||u_j||^2},
which holds z* by the weak Minty condition. Its step length
t_j = (<u_j, z_k - w_j> + rho ||u_j||^2) / ||u_j||^2 tends to gamma + rho at the resolvent. The
error correction: an inner point is acceptable once t_j >= sigma (gamma + rho) (the inner
accuracy is chosen by the iterates, not fixed in advance); from the first acceptable point on,
the loop goes on while the guaranteed decrease of ||z - z*||^2 per evaluation, phi_j / (j + 1),
still grows, where phi_j is the decrease certified by the projection onto the intersection of all
halfspaces of this outer step (those of w_1..w_j and of z_k itself, u = F(z_k)): for any mu >= 0,
d = sum mu_i u_i gives ||z - d - z*||^2 <= ||z - z*||^2 - (2 v'mu - mu'G mu) (v_i = t_i ||u_i||^2,
G the Gram matrix), and mu comes from coordinate ascent on that dual; phi_j >= every single
t_i^2 ||u_i||^2, so the guarantee of the single-halfspace step is kept. The loop also stops one
evaluation early when the growth of phi recorded in earlier outer steps predicts no gain per
evaluation (checked by a full step after AGE predicted stops). Then
z_{k+1} = P_C(z_k - lam d), a relaxed projection onto the polyhedron followed by one onto C
(neither moves a point away from z*: ||z_k - z*|| never increases).

Step sizes: gamma_k is chosen in the admissible window (-rho, 1/L_k) from a local Lipschitz
estimate L_k: the largest secant ||F(w_j) - F(w_{j-1})|| / ||w_j - w_{j-1}|| seen in the previous
outer step (it may shrink by at most a factor ``SHRINK`` per step and grows at once when an
inner secant shows gamma L_k > 1), capped by the global L when one is known. ``--gamma`` fixes
gamma instead. Without a rho, the method takes CEG+'s adaptive rho_k = -0.99 gamma_k / 2
(Pethick et al. 2022), which covers rho > -1/(2L).
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.mvi.evaluator import Evaluator, Setup, Stop
from optsolve.mvi.halfspaces import Halfspaces

SHRINK = 0.5  # a local Lipschitz estimate falls by at most this factor per outer step
TIGHT_FACTOR = 0.999  # gamma = TIGHT_FACTOR / L when L_k has reached the known global L
GAMMA_FACTOR = 0.9  # gamma = GAMMA_FACTOR / L_k where the window allows
MAX_INNER = 100_000
PREDICT = 0.8  # stop early when the recorded growth of the decrease predicts no gain per evaluation
AGE = 10  # after this many predicted stops in a row, one outer step checks the prediction


def _more_steps_pay(ratio: dict, j: int) -> bool:
    """Whether the growth of phi recorded at inner steps j + 1, j + 2, ... of earlier outer steps
    (``ratio[i]`` = phi_i / phi_{i-1}) predicts a larger decrease per evaluation than at step j."""
    prod, i = 1.0, j + 1
    while i in ratio:
        prod *= ratio[i]
        if prod > (i + 1) / (j + 1) * PREDICT:
            return True
        i += 1
    return False


def step_in_window(L_k: float, rho: float | None, tight: bool = False) -> float:
    """gamma in (-rho, 1/L_k): GAMMA_FACTOR / L_k, or the middle of the window when that is narrow;
    ``tight``: L_k is the known global L (no secant underestimate to guard against)."""
    g = (TIGHT_FACTOR if tight else GAMMA_FACTOR) / L_k
    if rho is not None and rho < 0:
        g = max(g, 0.5 * (1.0 / L_k - rho))
    return g


def probe_lipschitz(ev: Evaluator, z: np.ndarray, Fz: np.ndarray) -> float:
    """A secant estimate of the local Lipschitz constant at z: one evaluation at a nearby point of C."""
    scale = max(1.0, float(np.linalg.norm(z)))
    direction = -Fz
    for attempt in range(3):
        nrm = float(np.linalg.norm(direction))
        if nrm > 0:
            w = ev.C.project(z + 1e-3 * scale * direction / nrm)
            dw = float(np.linalg.norm(w - z))
            if dw > 1e-9 * scale:
                return max(float(np.linalg.norm(ev(w) - Fz)) / dw, 1e-12)
        direction = np.random.default_rng(attempt).standard_normal(z.size)
    return 1.0


class LocalLipschitz:
    """The local estimate L_k: grows at once, shrinks by at most SHRINK per outer step, <= L."""

    def __init__(self, first: float, L: float | None):
        self.L = L
        self.value = min(first, L) if L else first
        self.seen = 0.0

    @property
    def tight(self) -> bool:
        return bool(self.L) and self.value >= self.L

    def see(self, secant: float) -> bool:
        """Record a secant; True when it exceeds the estimate (the step must shrink)."""
        self.seen = max(self.seen, secant)
        if secant > self.value:
            self.value = min(secant, self.L) if self.L else secant
            return True
        return False

    def next_step(self) -> None:
        self.value = max(self.seen, SHRINK * self.value, 1e-12)
        if self.L:
            self.value = min(self.value, self.L)
        self.seen = 0.0


class Outer:
    """The outer steps of ecppa (or of rPPA with ``relaxed_ppa``) one at a time: :meth:`step` maps
    (z_k, F(z_k)) to z_{k+1}, keeping the local Lipschitz estimate, the recorded growth of phi and
    the counts between steps."""

    def __init__(self, ev: Evaluator, s: Setup, z: np.ndarray, Fz: np.ndarray, *, relaxed_ppa: bool = False):
        self.ev, self.s, self.relaxed_ppa = ev, s, relaxed_ppa
        self.local = None if s.gamma else LocalLipschitz(probe_lipschitz(ev, z, Fz), s.L)
        self.sigma = 0.5 if s.sigma is None else s.sigma
        forced = s.inner_steps if (s.inner_steps or relaxed_ppa) else None
        self.forced = 20 if relaxed_ppa and not forced else forced
        self.ratio: dict = {}
        self.pred_run = 0
        self.stats = {"outer": 0, "inner": 0, "max_inner": 0, "gamma_min": math.inf, "gamma_max": 0.0,
                      "inner_solver": None if relaxed_ppa else "fixed-point"}

    def gamma(self) -> float:
        local, s = self.local, self.s
        return s.gamma or step_in_window(local.value, s.rho, local.tight and not self.relaxed_ppa)

    def step(self, z: np.ndarray, Fz: np.ndarray) -> np.ndarray:
        """z_{k+1} from z_k = z (Stop from the evaluator, or 'numerical' when no halfspace separates)."""
        ev, s, C, local, forced, ratio = self.ev, self.s, self.ev.C, self.local, self.forced, self.ratio
        sigma, stats = self.sigma, self.stats
        gamma = self.gamma()
        w_prev, F_prev = z, Fz
        j = 0
        accepted = False  # an inner point passed the error-correction test
        rho = s.rho if s.rho is not None else -0.495 * gamma
        H = Halfspaces()
        if forced is None:  # the halfspace of z_k itself (u = F(z_k), no evaluation): it may help combined
            H.add(Fz, rho * float(Fz @ Fz), float(Fz @ Fz))
        best_score, min_uu, phi, phi_prev = -1.0, math.inf, 0.0, 0.0
        while True:
            j += 1
            rho = s.rho if s.rho is not None else -0.495 * gamma
            v = z - gamma * F_prev
            w = C.project(v)
            Fw = ev(w)
            u = Fw + (v - w) / gamma
            uu = float(u @ u)
            t = (float(u @ (z - w)) + rho * uu) / uu if uu > 0 else 0.0
            if local is not None:
                dw = float(np.linalg.norm(w - w_prev))
                if dw > 0 and local.see(float(np.linalg.norm(Fw - F_prev)) / dw) and gamma * local.value > 1:
                    # the contraction failed: a smaller step from here on
                    gamma = self.gamma()
            if forced is not None:
                if j >= forced:
                    break
            else:
                # phi: the certified decrease of ||z - z*||^2 by the projection onto all halfspaces so far
                phi = H.add(u, t * uu, uu)
                if t > 0:
                    min_uu = min(min_uu, uu)
                accepted = accepted or (t > 0 and t >= sigma * (gamma + rho))  # the error-correction test
                score = phi / (j + 1)  # the guaranteed decrease per evaluation
                if j >= 2 and phi_prev > 0:
                    ratio[j] = phi / phi_prev
                phi_prev = phi
                if accepted:
                    if score > best_score:
                        best_score = score
                    else:  # no better than the last point: separate with all of them
                        break
                    if (j + 1) in ratio and not _more_steps_pay(ratio, j):
                        if self.pred_run < AGE:
                            self.pred_run += 1
                            break  # the last outer steps say further inner points would not pay
                        self.pred_run = 0
                if j >= MAX_INNER:
                    break
            w_prev, F_prev = w, Fw
        ev.note_u(uu if forced is not None else min(min_uu, uu))
        stats["outer"] += 1
        ev.iteration = stats["outer"]
        stats["inner"] += j
        stats["max_inner"] = max(stats["max_inner"], j)
        stats["gamma_min"] = min(stats["gamma_min"], gamma)
        stats["gamma_max"] = max(stats["gamma_max"], gamma)
        if self.relaxed_ppa:
            return C.project(z + s.lam * (1 + rho / gamma) * (w - z))
        if forced is None and phi > 0:
            return C.project(z - s.lam * H.step())  # mu >= 0 with v'mu = mu'G mu = phi > 0: a Fejer step
        if t > 0:
            return C.project(z - s.lam * t * u)
        # no halfspace separates z_k from z*: the weak MVI fails here (or MAX_INNER hit)
        raise Stop("numerical", f"outer step {stats['outer']}: the inner loop found no separating "
                   f"halfspace in {j} steps (t = {t:.3g}); the weak Minty condition with rho = {rho:.4g} "
                   "seems not to hold")

    def next_step(self) -> None:
        if self.local is not None:
            self.local.next_step()


def ecppa(ev: Evaluator, s: Setup, *, relaxed_ppa: bool = False) -> dict:
    """Run until the evaluator stops it; returns counts. ``relaxed_ppa``: rPPA with s.inner_steps
    fixed inner steps, z_{k+1} = z_k + lam (1 + rho/gamma) (w_m - z_k)."""
    from optsolve.mvi import krylov

    z = s.z0.copy()
    Fz = ev(z)
    if not relaxed_ppa and s.inner != "fixed-point" and krylov.applies(ev, s):
        outer = krylov.KrylovOuter(ev, s)
    else:
        outer = Outer(ev, s, z, Fz, relaxed_ppa=relaxed_ppa)
    try:
        while True:
            if s.max_iter is not None and outer.stats["outer"] >= s.max_iter:
                raise Stop("max_iter")
            z = outer.step(z, Fz)
            Fz = ev(z)
            outer.next_step()
    except Stop as stop:
        outer.stats["stop"] = stop
    return outer.stats
