"""Exponential families through one sufficient-statistics interface.

p_theta(y) = h(y) exp(theta . T(y) - A(theta)). Each family gives, for a parameter vector
theta (flat) and points Y (N x d): ``dot(Y, theta)`` = theta . T(y) per row, ``moments(Y, w)`` =
sum_i w_i T(y_i) (theta-shaped), ``log_h``, ``A``, ``valid`` (theta in the natural domain),
``sample``, ``from_moments`` (the untruncated MLE: the theta whose E[T] is given) and
``params`` (mean, covariance, ... for the output). T itself is never formed: for the full
Gaussian it has d + d(d + 1) / 2 entries.

* ``gaussian``: theta = (h, P), the precision P = Sigma^-1 and h = P mu, with
  theta . T(y) = h . y - y' P y / 2; the flat vector holds h and the upper triangle of P
  (T's second part: -y_i^2 / 2 on the diagonal, -y_i y_j above it: the upper triangle only,
  so that the Fisher information is not singular).
* ``gaussian-mean``: known covariance (identity after whitening), theta = Sigma^-1 mu, T(y) = y.
* ``exponential``: independent exponential coordinates, theta = -rates, T(y) = y, y >= 0.
"""

from __future__ import annotations

import math

import numpy as np

LOG_2PI = math.log(2.0 * math.pi)
ROWS = 8192  # rows per block of a product over draws: its temporaries stay small, whatever N


def blocks(N: int):
    """Row slices of at most ROWS rows covering range(N)."""
    return (slice(a, min(a + ROWS, N)) for a in range(0, N, ROWS))


class Gaussian:
    name = "gaussian"

    def __init__(self, d: int):
        self.d = d
        self.iu = np.triu_indices(d)
        self.coef = np.where(self.iu[0] == self.iu[1], -0.5, -1.0)
        self.p = d + self.iu[0].size

    def split(self, theta):
        return theta[:self.d], self._symmetric(theta[self.d:])

    def join(self, h, P):
        return np.concatenate([h, P[self.iu]])

    def dot(self, Y, theta):
        """theta . T(y) per row, in the precision of Y (single precision rows: the Newton systems')."""
        h, P = self.split(theta)
        out = Y @ h.astype(Y.dtype, copy=False)
        if P.any():
            P = P.astype(Y.dtype, copy=False)
            for b in blocks(Y.shape[0]):
                out[b] -= 0.5 * np.einsum("ij,ij->i", Y[b] @ P, Y[b])
        return out

    def second_moment(self, Y, w):
        """sum_i w_i y_i y_i' (d x d), by blocks of rows (in Y's precision, summed in double)."""
        S2 = np.zeros((self.d, self.d))
        w = w.astype(Y.dtype, copy=False)
        for b in blocks(Y.shape[0]):
            S2 += (Y[b] * w[b, None]).T @ Y[b]
        return S2

    def moments(self, Y, w):
        return self.moments_from((w.astype(Y.dtype, copy=False) @ Y).astype(float), self.second_moment(Y, w))

    def moments_from(self, m1, m2):
        """E[T] from the mean m1 and the second moment m2 = E[y y'] (d x d)."""
        return np.concatenate([m1, self.coef * m2[self.iu]])

    def inverse_fisher(self, m):
        """v -> J v, J the Jacobian of :meth:`from_moments` at the moments m: the inverse Fisher
        information of the Gaussian whose E[T] is m (d^3 per product, no p x p matrix). Newton's
        systems use it as their preconditioner: the Fisher information of p_theta | S differs from
        it only where the set makes p_theta | S non-Gaussian.

        Notes
        -----
        With Sigma = E[y y'] - mu mu' and P = Sigma^-1, theta = (P mu, P); a change (dmu, dS2) of the
        moments moves Sigma by dS = dS2 - dmu mu' - mu dmu', P by dP = -P dS P and h by dP mu + P dmu.
        J is the Hessian of the convex conjugate of A: symmetric positive definite in the flat
        coordinates.
        """
        d = self.d
        mu = m[:d]
        P = np.linalg.inv(self._symmetric(m[d:] / self.coef) - np.outer(mu, mu))
        P = 0.5 * (P + P.T)

        def apply(v):
            dmu = v[:d]
            dS = self._symmetric(v[d:] / self.coef) - np.outer(dmu, mu) - np.outer(mu, dmu)
            dP = -P @ dS @ P
            return self.join(dP @ mu + P @ dmu, 0.5 * (dP + dP.T))

        return apply

    def _symmetric(self, upper):
        M = np.zeros((self.d, self.d))
        M[self.iu] = upper
        return M + M.T - np.diag(np.diag(M))

    def shifted(self, theta, mean):
        """The member with theta's covariance and the given mean (a proposal for importance draws)."""
        h, P = self.split(theta)
        return self.join(P @ mean, P)

    def log_h(self, Y):
        return np.full(Y.shape[0], -0.5 * self.d * LOG_2PI)

    def _chol(self, P):
        try:
            return np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            return None

    def valid(self, theta) -> bool:
        h, P = self.split(theta)
        return bool(np.isfinite(theta).all()) and self._chol(P) is not None

    def A(self, theta) -> float:
        h, P = self.split(theta)
        L = np.linalg.cholesky(P)
        mu = np.linalg.solve(P, h)
        return 0.5 * float(h @ mu) - float(np.log(np.diag(L)).sum())

    def sample(self, theta, N: int, rng) -> np.ndarray:
        return self.transform(theta, rng.standard_normal((N, self.d)))

    def transform(self, theta, Z) -> np.ndarray:
        """Draws of p_theta from standard normal rows Z."""
        mu, M = self.affine(theta)
        return mu + Z @ M

    def affine(self, theta):
        """(mu, M): the draws of p_theta are mu + z M for standard normal rows z. M = L^-1 for P = L L':
        cov(L^-T z) = (L L')^-1 = P^-1 (one matrix product for all rows); numpy's inverse of the small
        factor (scipy's triangular solve cost milliseconds per call on busy machines)."""
        h, P = self.split(theta)
        L = np.linalg.cholesky(P)
        return np.linalg.solve(P, h), np.linalg.inv(L)

    def logpdf(self, theta, Y):
        return self.dot(Y, theta) - self.A(theta) + self.log_h(Y)

    def from_moments(self, m):
        mu = m[:self.d]
        Sigma = self._symmetric(m[self.d:] / self.coef) - np.outer(mu, mu)
        P = np.linalg.inv(Sigma)
        P = 0.5 * (P + P.T)
        return self.join(P @ mu, P)

    def params(self, theta) -> dict:
        h, P = self.split(theta)
        Sigma = np.linalg.inv(P)
        return {"mean": Sigma @ h, "covariance": 0.5 * (Sigma + Sigma.T)}

    def standard(self):
        """theta of N(0, I)."""
        return self.join(np.zeros(self.d), np.eye(self.d))

    def matrix_gradient(self, g):
        """A gradient in the flat theta as the gradient in (h, P) with P a full symmetric matrix (each
        off-diagonal entry counted once in each triangle, half of the flat one): the steps SGD takes."""
        return np.concatenate([g[:self.d], np.where(self.iu[0] == self.iu[1], 1.0, 0.5) * g[self.d:]])


class _Linear:
    """Families with T(y) = y."""

    def __init__(self, d: int):
        self.d = d
        self.p = d

    def dot(self, Y, theta):
        return Y @ theta.astype(Y.dtype, copy=False)

    def moments(self, Y, w):
        return (w.astype(Y.dtype, copy=False) @ Y).astype(float)

    def logpdf(self, theta, Y):
        return self.dot(Y, theta) - self.A(theta) + self.log_h(Y)

    def matrix_gradient(self, g):
        return g

    def second_moment(self, Y, w):
        return 0.0

    def moments_from(self, m1, m2):
        """E[T] from the mean m1 (and the second moment m2, unused)."""
        return np.asarray(m1, dtype=float)


class GaussianMean(_Linear):
    name = "gaussian-mean"

    def log_h(self, Y):
        return -0.5 * np.einsum("ij,ij->i", Y, Y) - 0.5 * self.d * LOG_2PI

    def valid(self, theta) -> bool:
        return bool(np.isfinite(theta).all())

    def A(self, theta) -> float:
        return 0.5 * float(theta @ theta)

    def sample(self, theta, N, rng):
        return self.transform(theta, rng.standard_normal((N, self.d)))

    def transform(self, theta, Z):
        return theta + Z

    def affine(self, theta):
        return np.array(theta, dtype=float), np.eye(self.d)

    def from_moments(self, m):
        return np.array(m, dtype=float)

    def inverse_fisher(self, m):
        """The inverse Fisher information (the identity: T(y) = y has covariance I)."""
        return lambda v: np.array(v, dtype=float)

    def shifted(self, theta, mean):
        return np.array(mean, dtype=float)

    def params(self, theta) -> dict:
        return {"mean": np.array(theta), "covariance": np.eye(self.d)}

    def standard(self):
        return np.zeros(self.d)


class Exponential(_Linear):
    name = "exponential"

    def log_h(self, Y):
        return np.where(np.all(Y >= 0, axis=1), 0.0, -np.inf)

    def valid(self, theta) -> bool:
        return bool(np.isfinite(theta).all() and np.all(theta < 0))

    def A(self, theta) -> float:
        return -float(np.log(-theta).sum())

    def sample(self, theta, N, rng):
        return rng.exponential(1.0 / -theta, size=(N, self.d))

    def affine(self, theta):
        return None

    def transform(self, theta, Z):
        """Draws from standard normal rows Z (through the normal CDF)."""
        from scipy.special import log_ndtr

        return -log_ndtr(-Z) / -theta  # -log(1 - Phi(z)) is a standard exponential

    def from_moments(self, m):
        return -1.0 / np.asarray(m, dtype=float)

    def inverse_fisher(self, m):
        """The inverse Fisher information at the means m: diag(m^2) (the variance of T(y) = y is
        1 / rate^2)."""
        m2 = np.asarray(m, dtype=float) ** 2
        return lambda v: m2 * v

    def shifted(self, theta, mean):
        """None: the exponential's draws stay those of p_theta."""
        return None

    def params(self, theta) -> dict:
        rates = -np.asarray(theta)
        return {"rates": rates, "mean": 1.0 / rates}

    def standard(self):
        return -np.ones(self.d)


FAMILIES = {"gaussian": Gaussian, "gaussian-mean": GaussianMean, "exponential": Exponential}


def kl_gaussian(mu0, S0, mu1, S1) -> float:
    """KL(N(mu0, S0) || N(mu1, S1))."""
    d = len(mu0)
    L1 = np.linalg.cholesky(S1)
    M = np.linalg.solve(L1, S0)
    M = np.linalg.solve(L1, M.T)
    diff = np.linalg.solve(L1, np.asarray(mu1) - np.asarray(mu0))
    _, logdet0 = np.linalg.slogdet(S0)
    logdet1 = 2.0 * np.log(np.diag(L1)).sum()
    return 0.5 * float(np.trace(M) + diff @ diff - d + logdet1 - logdet0)
