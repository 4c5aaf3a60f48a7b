"""The halfspaces of one outer step of the error-corrected proximal point method, each holding a solution
z*, and the certified decrease of ||z_k - z*||^2 by a step onto their intersection (shared by
:mod:`optsolve.mvi.ecppa`'s fixed-point inner loop and :mod:`optsolve.mvi.krylov`'s resolvents)."""

from __future__ import annotations

import math

import numpy as np

SWEEPS = 50  # coordinate-ascent sweeps of the dual of the projection onto the inner halfspaces


def _dual_ascent(G, v, mu, sweeps):
    """Coordinate ascent on phi(mu) = 2 v'mu - mu'G mu over mu >= 0 (in place); returns phi."""
    m = len(v)
    for _ in range(sweeps):
        change = 0.0
        for i in range(m):
            if G[i, i] <= 0:
                continue
            new = max(0.0, mu[i] + (v[i] - float(G[i] @ mu)) / G[i, i])
            change = max(change, abs(new - mu[i]) * math.sqrt(G[i, i]))
            mu[i] = new
        if change <= 1e-12 * max(1e-300, math.sqrt(max(float(mu @ G @ mu), 0.0))):
            break
    vm, q = float(v @ mu), float(mu @ G @ mu)
    if vm > 0 and q > 0:  # the best multiple of mu: then v'mu = mu'G mu, and lam (2 - lam) phi is certified
        mu *= vm / q
        return vm * vm / q
    return 2.0 * vm - q


class Halfspaces:
    """The halfspaces {y : <u_i, z_k - y> >= v_i} of one outer step, each holding z*, and the
    certified decrease phi = 2 v'mu - mu'G mu of ||z_k - z*||^2 by the step d = sum mu_i u_i
    (mu >= 0 by :func:`_dual_ascent`; G the Gram matrix of the u_i). At most CAP are kept: past
    that the one with the smallest weight goes, never the deepest single one (phi stays at least
    max_i v_i^2 / ||u_i||^2, the decrease of the single-halfspace step)."""

    CAP = 32

    def __init__(self):
        self.U: list = []
        self.v = np.zeros(0)
        self.G = np.zeros((0, 0))
        self.mu = np.zeros(0)
        self.phi = 0.0

    def add(self, u: np.ndarray, v: float, uu: float) -> float:
        """Add the halfspace of u with depth v (uu = ||u||^2); returns the new phi."""
        if len(self.U) >= self.CAP:
            self._drop()
        m = len(self.U)
        G = np.empty((m + 1, m + 1))
        G[:m, :m] = self.G
        G[:m, m] = G[m, :m] = [float(x @ u) for x in self.U]
        G[m, m] = uu
        self.U.append(u)
        self.v, self.G, self.mu = np.append(self.v, v), G, np.append(self.mu, 0.0)
        if v > 0 and uu > 0 and v * v / uu > self.phi:  # start from the new halfspace alone: it beats mu
            self.mu[:] = 0.0
            self.mu[-1] = v / uu
        self.phi = _dual_ascent(self.G, self.v, self.mu, SWEEPS)
        return self.phi

    def _drop(self) -> None:
        diag = np.maximum(np.diag(self.G), 1e-300)
        deepest = int(np.argmax(np.where(self.v > 0, self.v * self.v / diag, -np.inf)))
        weights = self.mu.copy()
        weights[deepest] = np.inf
        i = int(np.argmin(weights))
        del self.U[i]
        keep = np.arange(len(self.v)) != i
        self.v, self.mu, self.G = self.v[keep], self.mu[keep], self.G[np.ix_(keep, keep)]

    def step(self) -> np.ndarray:
        return np.asarray(self.U).T @ self.mu
