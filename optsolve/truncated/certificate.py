"""Independent checks of a truncated-statistics estimate, from the problem and the solution only.

Fresh independent draws of the estimated distribution p_hat (plain numpy, rejection by the
set's membership test or the user's ``--oracle``) give:

* alpha_hat = p_hat(S), with an exact (Clopper-Pearson) 95% interval;
* the gradient of the truncated NLL at the estimate, E_{p_hat | S}[T] - mean of T over the
  samples, in coordinates whitened by the estimate itself, and its size in the metric of
  the samples' own covariance of T: G = g' Cov(T)^-1 g. At the MLE, N_c G is chi-square with
  p degrees of freedom (p statistics, N_c accepted draws), inflated by (n - 1) / (n - p - 2)
  for the inverse of a covariance estimated from n samples: the check allows that times
  (p + 3 sqrt(2 p)) / N_c for the noise (N_c aims at n / tol, so that it resolves the rest), plus tol p / n for the estimate's own distance to the
  MLE, tol (default 0.125) times the data's statistical error in this metric (newton's
  Monte-Carlo error target). At the empirical moments N_c G is thousands of times p.
* positive definiteness of the covariance (or positive rates);
* the slack L(theta0) + R - L(estimate) of the paper's region, L the untruncated NLL of the
  samples and theta0 their empirical moments, for the methods that keep to it;
* with ``--holdout``, the truncated NLL of the held-out rows (the normaliser from the
  draws above).
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.result import Certificate, Check

CERT_SEED = 20250424
DEFAULT_TOL = 0.125
MIN_ACCEPTED = 4000
MAX_PROPOSALS = 4_000_000
LOG_2PI = math.log(2 * math.pi)


def _membership(problem, settings, oracle):
    from optsolve.truncated.sets import load_oracle, parse_set

    used = settings.get("oracle")
    if used and not oracle:
        raise InputError(f"This solution was computed with '--oracle {used}'; checking it needs the same "
                         "membership function: pass '--oracle' to optsolve verify.")
    if oracle:
        return load_oracle(oracle)
    return parse_set(problem["set"], problem["samples"].shape[1]).contains


def _estimate(problem, solution):
    """(kind, mean, covariance or None, rates or None) from the solution, checked for shape."""
    X = problem["samples"]
    d = X.shape[1]
    family = problem.get("family", "gaussian")
    if family == "exponential":
        rates = np.asarray(solution["rates"], dtype=float).reshape(-1)
        if rates.shape != (d,):
            raise ValueError(f"rates of shape {rates.shape}, expected ({d},)")
        return family, None, None, rates
    mean = np.asarray(solution["mean"], dtype=float).reshape(-1)
    if mean.shape != (d,):
        raise ValueError(f"mean of shape {mean.shape}, expected ({d},)")
    cov = np.asarray(problem["cov"] if family == "gaussian-mean" else solution["covariance"], dtype=float)
    if cov.shape != (d, d):
        raise ValueError(f"covariance of shape {cov.shape}, expected ({d}, {d})")
    return family, mean, 0.5 * (cov + cov.T), None


def _draw(family, mean, cov, rates, rng, N):
    if family == "exponential":
        return rng.exponential(1.0 / rates, size=(N, rates.size))
    return rng.multivariate_normal(mean, cov, size=N, method="cholesky")


def _stats(family, X, mean, cov, rates):
    """T in coordinates whitened by the estimate: (u, u_i u_j for i <= j) or u."""
    if family == "exponential":
        return X * rates
    U = np.linalg.solve(np.linalg.cholesky(cov), (X - mean).T).T
    if family == "gaussian-mean":
        return U
    iu = np.triu_indices(U.shape[1])
    return np.hstack([U, (U[:, :, None] * U[:, None, :])[:, iu[0], iu[1]]])


def _log_density(family, X, mean, cov, rates):
    if family == "exponential":
        return np.log(rates).sum() - X @ rates
    L = np.linalg.cholesky(cov)
    U = np.linalg.solve(L, (X - mean).T).T
    return -0.5 * (U * U).sum(axis=1) - np.log(np.diag(L)).sum() - 0.5 * X.shape[1] * LOG_2PI


def _naive(family, X, known):
    if family == "exponential":
        return None, None, 1.0 / X.mean(axis=0)
    cov = known if family == "gaussian-mean" else np.cov(X, rowvar=False, bias=True).reshape(X.shape[1], X.shape[1])
    return X.mean(axis=0), cov, None


def check(problem, solution: dict, *, method: str | None, objective, settings: dict, oracle: str | None = None
          ) -> Certificate:
    settings = settings or {}
    X = np.asarray(problem["samples"], dtype=float)
    n, d = X.shape
    try:
        family, mean, cov, rates = _estimate(problem, solution)
    except (KeyError, ValueError, TypeError) as exc:
        return Certificate([Check("solution_shape", None, None, False, str(exc))])
    checks = []
    if family == "exponential":
        low = float(rates.min())
        checks.append(Check("rates_positive", low, None, bool(low > 0 and np.isfinite(rates).all()),
                            "smallest rate"))
        if low <= 0:
            return Certificate(checks)
    else:
        low = float(np.linalg.eigvalsh(cov).min()) if np.isfinite(cov).all() else -np.inf
        checks.append(Check("covariance_spd", low, None, bool(low > 0), "smallest eigenvalue of the covariance"))
        if not low > 0:
            return Certificate(checks)
    contains = _membership(problem, settings, oracle)
    rng = np.random.default_rng(CERT_SEED)
    got, hits, proposals = [], 0, 0
    batch = 65536
    tol = float(settings.get("tol") or DEFAULT_TOL)
    wanted = max(MIN_ACCEPTED, int(n / tol))
    while hits < wanted and proposals < MAX_PROPOSALS:
        Y = _draw(family, mean, cov, rates, rng, batch)
        inside = np.asarray(contains(Y)).astype(bool).reshape(batch)
        got.append(Y[inside])
        hits += int(inside.sum())
        proposals += batch
    from scipy.stats import beta

    lo = 0.0 if hits == 0 else float(beta.ppf(0.025, hits, proposals - hits + 1))
    hi = 1.0 if hits == proposals else float(beta.ppf(0.975, hits + 1, proposals - hits))
    a_hat = hits / proposals
    checks.append(Check.info("alpha_hat", a_hat, f"p_hat(S) from {proposals} fresh proposals ({hits} in the set)"))
    checks.append(Check.info("alpha_interval", [lo, hi], "exact (Clopper-Pearson) 95% interval"))
    if solution.get("alpha_hat") is not None:
        checks.append(Check.info("reported_alpha_hat", solution["alpha_hat"], "the solver's own estimate"))
    rows = np.asarray(solution.get("holdout_rows") or [], dtype=np.int64)
    fit = np.setdiff1d(np.arange(n), rows) if rows.size else np.arange(n)
    if hits < 10:
        checks.append(Check("gradient_statistic", None, None, False,
                            f"only {hits} of {proposals} draws of the estimate fell in the set"))
        return Certificate(checks)
    Ya = np.vstack(got)
    Nc = Ya.shape[0]
    T_data = _stats(family, X[fit], mean, cov, rates)
    p = T_data.shape[1]
    s1, s2 = np.zeros(p), np.zeros(p)
    for a in range(0, Nc, 8192):  # the draws' statistics by blocks (p = 1,325 at d = 50)
        Tb = _stats(family, Ya[a:a + 8192], mean, cov, rates)
        s1 += Tb.sum(axis=0)
        s2 += (Tb * Tb).sum(axis=0)
    draw_mean = s1 / Nc
    draw_var = np.maximum(s2 / Nc - draw_mean ** 2, 0.0)
    g = draw_mean - T_data.mean(axis=0)
    H = np.cov(T_data, rowvar=False).reshape(p, p)
    G = float(g @ np.linalg.lstsq(H, g, rcond=1e-10)[0])
    m = fit.size
    inflation = (m - 1) / (m - p - 2) if m > p + 2 else np.inf  # E[S^-1] of a sample covariance of m rows
    limit = inflation * (p + 3.0 * math.sqrt(2.0 * p)) / Nc + tol * p / m
    checks.append(Check.at_most("gradient_statistic", G, limit,
                                f"g' Cov(T)^-1 g of the truncated NLL's gradient at the estimate ({Nc} fresh draws in "
                                f"the set, p = {p}); the limit is its Monte-Carlo noise plus tol p / n (tol = {tol:g})"))
    checks.append(Check.info("gradient_norm", float(np.linalg.norm(g)),
                             "Euclidean norm of the gradient, in coordinates whitened by the estimate"))
    checks.append(Check.info("gradient_standard_error",
                             float(np.sqrt((draw_var / Nc + T_data.var(axis=0) / fit.size).sum())),
                             "of that norm, from the draws and the samples"))
    nll = float(-_log_density(family, X[fit], mean, cov, rates).mean() + math.log(a_hat))
    checks.append(Check.info("truncated_nll", nll, "mean over the fitted samples, the normaliser from the draws"))
    if objective is not None:
        checks.append(Check.info("objective_difference", float(objective) - nll,
                                 "reported objective minus this estimate (both Monte-Carlo)"))
    if settings.get("radius") is not None and method in ("newton", "psgd"):
        m0, c0, r0 = _naive(family, X[fit], problem.get("cov"))
        L0 = float(-_log_density(family, X[fit], m0, c0, r0).mean())
        L1 = float(-_log_density(family, X[fit], mean, cov, rates).mean())
        slack = L0 + float(settings["radius"]) - L1
        checks.append(Check("region_slack", slack, 0.0, bool(slack >= -1e-8 * (1 + abs(L0))),
                            f"L(theta0) + R - L(estimate), at least 0 inside the region (R = {settings['radius']:.6g})"))
    if rows.size:
        held = float(-_log_density(family, X[rows], mean, cov, rates).mean() + math.log(a_hat))
        checks.append(Check.info("holdout_nll", held, f"truncated NLL of the {rows.size} held-out samples"))
    return Certificate(checks)
