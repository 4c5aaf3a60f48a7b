"""Projected stochastic gradient baselines for the truncated MLE, in coordinates whitened by
the empirical moments theta0 (where theta0 is the standard member of the family).

The stochastic gradient of the truncated NLL at theta from one data point x and one draw y
of p_theta | S (rejection sampling, one oracle call per proposal) is T(y) - T(x); for the
Gaussian, in (Sigma^-1 mu, Sigma^-1) with Sigma^-1 a full symmetric matrix: (y - x,
(x x' - y y') / 2), as Daskalakis et al. write it.

* ``psgd``: the paper's projected SGD form (Karatapanis, Kontonis and Tzamos, ICLR 2025, as a
  public re-implementation runs it): learning rate 0.1, batches of 10 data points and 10
  accepted draws per step, each iterate projected back onto D = {L(theta) <= L(theta0) + R}
  by bisection on the segment from theta0, R from max(3, log(1/alpha_0) + 2) growing by 1.1x
  each time the projection acts, up to 10 (as that re-implementation does), 5 epochs, the
  average of the last half of the iterates.
* ``dgtz``: Daskalakis, Gouleakis, Tzamos and Zampetakis (FOCS 2018), in the tuned form
  (ours; the literal form diverges): one data point and one draw per step, step size
  1 / (lambda (t + 100)) with lambda = 0.25, projection onto the ball around theta0 of radius
  log(1/a) / a^2 with a = min(alpha_0^2, 0.05) (alpha is unknown; the ball is then at least
  1,198 wide and constrains nothing, as in the tuned form; ``--radius`` sets it), the
  covariance's eigenvalues kept in [0.01, 100] (whitened), 5 epochs, the average of the last
  half of the iterates.
"""

from __future__ import annotations

import math
import time

import numpy as np

from optsolve.core.history import trace
from optsolve.truncated.sampling import STOPPED, Sampler, stop_of

EPOCHS = 5
PSGD_MAX_RADIUS = 10.0


def _project_segment(family, theta0, theta, inside) -> np.ndarray:
    """The point of [theta0, theta] farthest from theta0 that satisfies ``inside`` (bisection)."""
    if inside(theta):
        return theta
    lo, hi = 0.0, 1.0
    for _ in range(30):
        mid = 0.5 * (lo + hi)
        if inside(theta0 + mid * (theta - theta0)):
            lo = mid
        else:
            hi = mid
    return theta0 + lo * (theta - theta0)


def _clip_spectrum(family, theta, lo=0.01, hi=100.0):
    """Keep the Gaussian covariance's eigenvalues in [lo, hi]; exponential rates positive."""
    if family.name == "gaussian":
        h, P = family.split(theta)
        mu = np.linalg.solve(P, h) if family.valid(theta) else np.zeros(family.d)
        ev, V = np.linalg.eigh(0.5 * (P + P.T))
        P = (V * np.clip(ev, 1.0 / hi, 1.0 / lo)) @ V.T
        return family.join(P @ mu, P)
    if family.name == "exponential":
        return np.minimum(theta, -1e-3)
    return theta


def run(method: str, family, Z, oracle, rng, *, max_calls=None, radius=None, epochs: int = EPOCHS, deadline=None,
        progress=None, alpha0=None) -> dict:
    """``psgd`` or ``dgtz`` on whitened samples Z: the averaged iterate, ``stop`` ('converged' when
    every epoch ran; 'budget', 'time_limit' or 'collapse' otherwise, with the average so far).
    ``alpha0``: (accepted, proposals) of p_theta0 on S when measured already."""
    from optsolve.truncated.newton import ZeroMass, alpha0_and_radius

    n = Z.shape[0]
    Tbar = family.moments(Z, np.full(n, 1.0 / n))
    theta0 = family.from_moments(Tbar)
    sampler = Sampler(family, oracle, rng, max_calls=max_calls, deadline=deadline)
    try:
        alpha0, _ = alpha0_and_radius(family, theta0, sampler, alpha0)
    except (ZeroMass, *STOPPED) as exc:
        stop, reason = ("collapse", str(exc)) if isinstance(exc, ZeroMass) else stop_of(exc)
        return {"theta": theta0, "theta0": theta0, "steps": 0, "samples_drawn": 0, "stop": stop, "reason": reason}
    batch = 10 if method == "psgd" else 1
    steps = epochs * n // batch
    theta = theta0.copy()
    avg, counted = np.zeros_like(theta), 0
    R = float(radius) if radius is not None else max(3.0, math.log(1.0 / alpha0) + 2.0)
    if method == "psgd":
        L0 = -theta0 @ Tbar + family.A(theta0)

        def inside(th):
            return family.valid(th) and -th @ Tbar + family.A(th) <= L0 + R
    else:
        low = min(alpha0 ** 2, 0.05)  # alpha is unknown; at most 0.05, the ball is at least 1,198 wide
        ball = float(radius) if radius is not None else math.log(1.0 / low) / low ** 2

    ones = np.full(batch, 1.0 / batch)
    stop, reason = "converged", ""
    t = -1
    try:
        for t in range(steps):
            if deadline is not None and t % 100 == 0 and time.perf_counter() > deadline:
                stop, reason = "time_limit", "the time limit was reached"
                break
            rows = rng.integers(0, n, size=batch)
            try:
                ys, _ = sampler.accepted_draws(theta, batch)
            except STOPPED as exc:
                stop, reason = stop_of(exc)
                break
            g = family.matrix_gradient(family.moments(ys, ones) - family.moments(Z[rows], ones))
            if method == "psgd":
                step = theta - 0.1 * g
                theta = _project_segment(family, theta0, step, inside)
                if radius is None and theta is not step:  # the region was active: it grows, up to R = 10
                    R = min(PSGD_MAX_RADIUS, 1.1 * R)
            else:
                theta = theta - g / (0.25 * (t + 100))
                step = theta - theta0
                norm = float(np.linalg.norm(step))
                if norm > ball:
                    theta = theta0 + step * (ball / norm)
                theta = _clip_spectrum(family, theta)
            if t >= steps // 2:
                avg += theta
                counted += 1
            if t % 100 == 0:
                if progress is not None:
                    progress.update(t, oracle_calls=oracle.calls)
                trace(t, float(np.linalg.norm(g)), evaluations=oracle.calls, measure="norm of the stochastic gradient",
                      evaluations_of="membership oracle")
    except KeyboardInterrupt:  # Ctrl-C or a signal (optsolve.core.signals): the average so far
        stop, reason = "interrupted", "interrupted"
    theta = avg / counted if counted else theta
    if method == "dgtz":
        theta = _clip_spectrum(family, theta)
    return {"theta": theta, "theta0": theta0, "alpha0": alpha0, "radius": R if method == "psgd" else ball,
            "steps": t + 1 if steps else 0, "samples_drawn": sampler.accepted, "stop": stop, "reason": reason}
