"""The exact truncated MLE of a Gaussian truncated to a halfspace, a reference for tests and
benchmarks (no sampling: the normaliser p_theta(a . x <= b) = Phi((b - a . mu) / sqrt(a' Sigma a))
is closed-form).

With u = a . x ~ N(m, s^2) truncated to u <= b, beta = (b - m) / s and lambda = phi(beta) / Phi(beta):
E[u] = m - s lambda, Var[u] = s^2 (1 - beta lambda - lambda^2); x given u is Gaussian, so with
k = Sigma a / s^2: E[x] = mu + k (E[u] - m) and Cov[x] = Sigma + k k' (Var[u] - s^2). The NLL in
natural parameters (h = P mu, P = Sigma^-1 = C C', C lower triangular) is

    -h . xbar + tr(P M2) / 2 + h' P^-1 h / 2 - log det C + log Phi(beta)

with gradient -xbar + E[x] in h and (M2 - E[x x']) / 2 in P (times 2 C by the chain rule);
L-BFGS minimises it from the empirical moments. The samples are whitened by their own
moments first.
"""

from __future__ import annotations

import numpy as np
from scipy.optimize import minimize
from scipy.special import log_ndtr


def _truncated_moments(mu, Sigma, a, b):
    m = float(a @ mu)
    s2 = float(a @ Sigma @ a)
    s = np.sqrt(s2)
    beta = (b - m) / s
    logphi = -0.5 * beta * beta - 0.5 * np.log(2 * np.pi)
    lam = np.exp(logphi - log_ndtr(beta))
    Eu = m - s * lam
    Vu = s2 * (1.0 - beta * lam - lam * lam)
    k = Sigma @ a / s2
    Ex = mu + k * (Eu - m)
    Cov = Sigma + np.outer(k, k) * (Vu - s2)
    return Ex, Cov, float(log_ndtr(beta))


def halfspace_mle(X, a, b, tol: float = 1e-10) -> tuple[np.ndarray, np.ndarray]:
    """(mean, covariance) maximising the likelihood of samples X of N(mu, Sigma) | {a . x <= b}."""
    X = np.asarray(X, dtype=float)
    n, d = X.shape
    m0 = X.mean(axis=0)
    L0 = np.linalg.cholesky(np.cov(X, rowvar=False, bias=True).reshape(d, d))
    Z = np.linalg.solve(L0, (X - m0).T).T
    aw = L0.T @ np.asarray(a, dtype=float)  # a . x = aw . z + a . m0
    bw = float(b) - float(np.asarray(a, dtype=float) @ m0)
    zbar = Z.mean(axis=0)
    M2 = Z.T @ Z / n
    il = np.tril_indices(d)

    def unpack(v):
        C = np.zeros((d, d))
        C[il] = v[d:]
        return v[:d], C

    def fun(v):
        h, C = unpack(v)
        P = C @ C.T
        try:
            Lp = np.linalg.cholesky(P)
        except np.linalg.LinAlgError:
            return np.inf, np.zeros_like(v)
        Sigma = np.linalg.inv(P)
        Sigma = 0.5 * (Sigma + Sigma.T)
        mu = Sigma @ h
        Ex, Cov, logPhi = _truncated_moments(mu, Sigma, aw, bw)
        val = -h @ zbar + 0.5 * np.sum(P * M2) + 0.5 * h @ mu - np.log(np.diag(Lp)).sum() + logPhi
        G = 0.5 * (M2 - (Cov + np.outer(Ex, Ex)))
        gC = 2.0 * G @ C
        return val, np.concatenate([-zbar + Ex, gC[il]])

    v0 = np.concatenate([np.zeros(d), np.eye(d)[il]])
    res = minimize(fun, v0, jac=True, method="L-BFGS-B", options={"maxiter": 20000, "gtol": tol, "ftol": 1e-15})
    h, C = unpack(res.x)
    Sigma = np.linalg.inv(C @ C.T)
    mu = Sigma @ h
    return m0 + L0 @ mu, L0 @ Sigma @ L0.T
