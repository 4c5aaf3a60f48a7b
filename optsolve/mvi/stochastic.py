"""Bias-corrected stochastic extragradient (``bc-seg+``) for an operator that is a mean of N terms.

Method: BC-SEG+ of Pethick, Fercoq, Latafat, Patrinos and Cevher, "Solving stochastic weak Minty
variational inequalities without increasing batch size", ICLR 2023, the stochastic follow-up of the
weak-MVI methods of :mod:`optsolve.mvi.ecppa`. With F-hat(z, xi) the mean of a batch xi of B terms
drawn uniformly (with repeats), H = I - gamma F, a fixed gamma in (-2 rho, 1/L) and a diminishing
alpha_k in (0, 1):

    h_k     = z_k - gamma F-hat(z_k, xi_k) + (1 - alpha_k) (h_{k-1} - z_{k-1} + gamma F-hat(z_{k-1}, xi_k))
    zbar_k  = P_C(h_k)
    z_{k+1} = z_k + alpha_k (zbar_k - gamma F-hat(zbar_k, xi'_k) - h_k)

h_k estimates H z_k; the same batch xi_k at z_k and z_{k-1} makes the correction term's error shrink
with the step, so the estimate's variance vanishes as alpha_k -> 0 without a growing batch (sum alpha_k
infinite, sum alpha_k^2 finite). On R^d zbar_k = h_k and z_{k+1} = z_k - alpha_k gamma F-hat(zbar_k): the
paper's unconstrained scheme; with exact F and alpha = 1 it is Tseng's forward-backward-forward step.
Three batches per iteration, 3B terms.

Choices here (where the paper leaves them open):

* alpha_k = ALPHA0 / (1 + k / k0), k0 = ceil(N / B): constant over the first N / B iterations, then
  decaying as 1/k.
* The estimate starts from the full F(z_0), which the first residual check computes anyway
  (h_{-1} = z_0 - gamma F(z_0), z_{-1} = z_0).
* gamma = max(GAMMA_FACTOR / L, the middle of (-2 rho, 1/L)); with L unknown, a secant of the full F.
  Every iteration's same-batch pair gives a secant ||F-hat(z_k) - F-hat(z_{k-1})|| / ||z_k - z_{k-1}||
  of the sampled operator; gamma shrinks to GAMMA_FACTOR over the largest seen (h rescaled to the new
  gamma), since the guarantee needs gamma below 1 / (the sampled operator's Lipschitz constant). A
  gamma pushed below -2 rho leaves the guarantee: the run says so and suggests a larger batch.
* The answer is judged on the full F: F is evaluated at zbar_k (a point of C) once the terms sampled
  since the last such check reach max(N, CHECK_SHARE of all terms sampled), so at most a pass of the
  data, and later a fraction of the work, goes to checks; the reported point is the checked one with the
  smallest natural residual, and the stop is at ``tol`` on that residual.
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.mvi.ecppa import probe_lipschitz
from optsolve.mvi.evaluator import Setup
from optsolve.mvi.evaluator import Evaluator, Stop

ALPHA0 = 0.5  # alpha_k's start: EG+'s second-step ratio
GAMMA_FACTOR = 0.9  # gamma = GAMMA_FACTOR / L, below the 1/L bound
CHECK_SHARE = 0.1  # full-F checks after max(N, this share of the terms sampled so far)


def _start_gamma(L: float, rho: float | None) -> float:
    """GAMMA_FACTOR / L, or the middle of (-2 rho, 1/L) where that lies above it (never past 1/L: with an empty
    window, run with --force, the step stays GAMMA_FACTOR / L)."""
    g = GAMMA_FACTOR / L
    if rho is not None and -2.0 * rho < 1.0 / L:
        g = max(g, 0.5 * (1.0 / L - 2.0 * rho))
    return g


def bc_seg_plus(ev: Evaluator, s: Setup) -> dict:
    """Run BC-SEG+ with batches of ``s.batch`` terms drawn by a generator seeded with ``s.seed``."""
    N, B = ev.op.terms, int(s.batch)
    rng = np.random.default_rng(s.seed)
    z = s.z0.copy()
    ev.sampling = True
    Fz = ev(z)
    L = s.L if s.L is not None else probe_lipschitz(ev, z, Fz)
    gamma = s.gamma if s.gamma is not None else _start_gamma(L, s.rho)
    fixed = s.gamma is not None
    stats = {"outer": 0, "gamma_min": gamma, "gamma_max": gamma, "L_batch": 0.0, "notes": []}
    k0 = math.ceil(N / B)
    z_prev = z.copy()
    h = z - gamma * Fz
    next_check = N
    below_window = False
    try:
        while True:
            k = stats["outer"]
            if s.max_iter is not None and k >= s.max_iter:
                raise Stop("max_iter")
            alpha = ALPHA0 / (1.0 + k / k0)
            idx = np.sort(rng.integers(0, N, B))
            F_now, F_before = ev.sample(z, idx), ev.sample(z_prev, idx)
            step = float(np.linalg.norm(z - z_prev))
            if step > 0:
                secant = float(np.linalg.norm(F_now - F_before)) / step
                stats["L_batch"] = max(stats["L_batch"], secant)
                if not fixed and secant * gamma > GAMMA_FACTOR:
                    smaller = GAMMA_FACTOR / secant
                    h = z_prev + (smaller / gamma) * (h - z_prev)  # the estimate of z - gamma F at the new gamma
                    gamma = smaller
                    stats["gamma_min"] = gamma
                    below_window = below_window or (s.rho is not None and gamma <= -2.0 * s.rho)
            # h_k = z_k - gamma F-hat(z_k) + (1 - alpha)(h_{k-1} - (z_{k-1} - gamma F-hat(z_{k-1}))), same batch
            h -= z_prev
            h += gamma * F_before
            h *= 1.0 - alpha
            h += z
            h -= gamma * F_now
            zbar = ev.C.project(h)
            F_bar = ev.sample(zbar, np.sort(rng.integers(0, N, B)))
            z_prev = z
            z = z + alpha * (zbar - gamma * F_bar - h)
            stats["outer"] = k + 1
            ev.iteration = k + 1
            if ev.sampled_terms >= next_check:
                ev(zbar)  # the full F: the residual that counts, and the stop
                next_check = ev.sampled_terms + max(N, CHECK_SHARE * ev.sampled_terms)
    except Stop as stop:
        stats["stop"] = stop
    if below_window:
        stats["notes"].append(f"the sampled operator's secants (up to {stats['L_batch']:.3g}) pushed gamma to "
                              f"{stats['gamma_min']:.3g} <= -2 rho = {-2 * s.rho:.3g}, outside BC-SEG+'s guarantee; a "
                              "larger '--batch' lowers them")
    stats["term_evaluations"] = ev.sampled_terms
    return stats
