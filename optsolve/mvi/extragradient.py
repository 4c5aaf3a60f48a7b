"""The extragradient-type baselines: EG+, CEG+, AdaptiveEG+, CurvatureEG+, EG and GDA.

* EG+ (Diakonikolas, Daskalakis and Jordan 2021): zbar = P_C(z - gamma F(z)),
  z+ = P_C(z - alpha gamma F(zbar)), gamma = 1/L, alpha = 1/2; guaranteed for
  rho > -(1 - alpha)/(2L) (Pethick et al. 2022).
* CEG+ (Pethick, Patrinos, Fercoq, Cevher, "Escaping limit cycles", ICLR 2022):
  zbar = P_C(z - gamma F(z)), z+ = z + lam alpha (H zbar - H z) with H = I - gamma F; here
  H zbar - H z = -gamma u with u = F(zbar) + (z - gamma F(z) - zbar)/gamma in (F + N_C)(zbar), so
  z+ = z - lam alpha gamma u (alpha = 1/2, lam = 1).
* AdaptiveEG+: the same with alpha_k gamma = sigma + <z - zbar, u> / ||u||^2, the projection onto
  the halfspace {x : <u, zbar - x> >= sigma ||u||^2}; sigma = rho when rho is known, otherwise the
  reference choice sigma = -0.99 gamma / 2.
* CurvatureEG+: AdaptiveEG+ with gamma_k = nu / ||JF(z_k)|| (one Jacobian evaluation per step,
  counted apart), halved (tau = 1/2) while gamma ||F(zbar) - F(z)|| > nu ||zbar - z||, and
  sigma_k = -0.99 gamma_k / 2, nu = 0.99. An operator without a Jacobian gets a secant estimate
  instead (one more F evaluation, counted with the others).
* EG (Korpelevich 1976) with gamma = 0.9/L, and GDA, z+ = P_C(z - gamma F(z)) with gamma = 0.1/L.

Every z+ is projected onto C (a projection onto a set holding z* keeps Fejer monotonicity).
When L is unknown the fixed-step methods use a secant estimate that only grows.
"""

from __future__ import annotations

import numpy as np

from optsolve.mvi.ecppa import probe_lipschitz
from optsolve.mvi.evaluator import Setup
from optsolve.mvi.evaluator import Evaluator, Stop

NU, TAU = 0.99, 0.5


class GrowingLipschitz:
    """The global L, or (unknown) the largest secant seen so far."""

    def __init__(self, ev: Evaluator, s: Setup, z, Fz):
        self.known = s.L is not None
        self.value = s.L if self.known else probe_lipschitz(ev, z, Fz)

    def see(self, z, Fz, w, Fw) -> None:
        if not self.known:
            dz = float(np.linalg.norm(w - z))
            if dz > 0:
                self.value = max(self.value, float(np.linalg.norm(Fw - Fz)) / dz)


def _loop(ev: Evaluator, s: Setup, step) -> dict:
    z = s.z0.copy()
    Fz = ev(z)
    stats = {"outer": 0, "inner": 0}
    state = {"L": GrowingLipschitz(ev, s, z, Fz)}
    try:
        while True:
            if s.max_iter is not None and stats["outer"] >= s.max_iter:
                raise Stop("max_iter")
            z_old, F_old = z, Fz
            z = step(z, Fz, state)
            stats["outer"] += 1
            ev.iteration = stats["outer"]
            Fz = ev(z)
            state["L"].see(z_old, F_old, z, Fz)
    except Stop as stop:
        stats["stop"] = stop
    return stats


def _extrapolate(ev, z, Fz, gamma, state):
    zbar = ev.C.project(z - gamma * Fz)
    Fbar = ev(zbar)
    state["L"].see(z, Fz, zbar, Fbar)
    u = Fbar + (z - gamma * Fz - zbar) / gamma
    return zbar, Fbar, u


def _halfspace_step(ev, z, zbar, u, sigma, lam):
    uu = float(u @ u)
    ev.note_u(uu)
    if uu == 0:
        return zbar
    return ev.C.project(z - lam * (sigma + float(u @ (z - zbar)) / uu) * u)


def _extragradient(ev: Evaluator, s: Setup, factor: float, alpha: float) -> dict:
    """zbar = P_C(z - gamma F(z)), z+ = P_C(z - alpha gamma F(zbar)), gamma = factor / L."""
    def step(z, Fz, state):
        gamma = s.gamma or factor / state["L"].value
        _, Fbar, u = _extrapolate(ev, z, Fz, gamma, state)
        ev.note_u(float(u @ u))
        return ev.C.project(z - alpha * gamma * Fbar)

    return _loop(ev, s, step)


def eg_plus(ev: Evaluator, s: Setup) -> dict:
    return _extragradient(ev, s, 1.0, 0.5)


def ceg_plus(ev: Evaluator, s: Setup) -> dict:
    def step(z, Fz, state):
        gamma = s.gamma or 1.0 / state["L"].value
        _, _, u = _extrapolate(ev, z, Fz, gamma, state)
        ev.note_u(float(u @ u))
        return ev.C.project(z - s.lam * 0.5 * gamma * u)

    return _loop(ev, s, step)


def adaptive_eg_plus(ev: Evaluator, s: Setup) -> dict:
    def step(z, Fz, state):
        gamma = s.gamma or 1.0 / state["L"].value
        zbar, _, u = _extrapolate(ev, z, Fz, gamma, state)
        sigma = s.rho if s.rho is not None else -0.99 * gamma / 2
        return _halfspace_step(ev, z, zbar, u, sigma, s.lam)

    return _loop(ev, s, step)


def curvature_eg_plus(ev: Evaluator, s: Setup) -> dict:
    def step(z, Fz, state):
        if s.gamma:
            gamma = s.gamma
        else:
            norm = ev.jacobian_norm(z)
            if norm is None:
                norm = probe_lipschitz(ev, z, Fz)
            gamma = NU / max(norm, 1e-12)
        while True:
            zbar, Fbar, u = _extrapolate(ev, z, Fz, gamma, state)
            if s.gamma or gamma * float(np.linalg.norm(Fbar - Fz)) <= NU * float(np.linalg.norm(zbar - z)):
                break
            gamma *= TAU
        return _halfspace_step(ev, z, zbar, u, -0.99 * gamma / 2, s.lam)

    return _loop(ev, s, step)


def eg(ev: Evaluator, s: Setup) -> dict:
    return _extragradient(ev, s, 0.9, 1.0)


def gda(ev: Evaluator, s: Setup) -> dict:
    def step(z, Fz, state):
        gamma = s.gamma or 0.1 / state["L"].value
        return ev.C.project(z - gamma * Fz)

    return _loop(ev, s, step)
