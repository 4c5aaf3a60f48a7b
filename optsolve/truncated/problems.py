"""Problem files of ``optsolve truncated`` and generators of its benchmark families.

Samples of a population p* observed only where they fall in a survival set S
(Karatapanis, Kontonis and Tzamos, ICLR 2025). Keys: ``samples`` (n x d); ``family``
(``gaussian``, the default: unknown mean and covariance; ``gaussian-mean``: known covariance
``cov``, unknown mean; ``exponential``: independent exponential coordinates); ``set``, the
truncation set as data (see :mod:`optsolve.truncated.sets`; optional when a membership
function is named with ``--oracle``); and, for benchmarks, the truth: ``true_mean``,
``true_cov`` (or ``true_rates``) and ``alpha`` (its survival mass p*(S)).
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from scipy.linalg import solve_triangular

from optsolve.core import memory, threads
from optsolve.core.errors import InputError
from optsolve.core.generate import Family, Param
from optsolve.core.problem import Field, Problem, Schema
from optsolve.truncated import families as fam
from optsolve.truncated.sets import Oracle, SetError, load_oracle, parse_set

FAMILY_NAMES = tuple(fam.FAMILIES)


STAT_ROWS = 8192  # rows of samples whitened at once
# Largest magnitude of a sample: its square (a sufficient statistic) stays finite, with room for sums.
MAX_ABS_SAMPLE = 1e150


# The certificate's sizes (its kernels are optsolve.truncated.certificate.fisher's; the memory guard below reads them).
STAT_BLOCK = 8192  # rows of samples or draws formed at once
KEEP_BYTES = 512 << 20  # accepted draws kept in memory; past this they are re-drawn for each product
DENSE_MAX_P = 200  # up to this many statistics F is summed and solved as a p x p matrix
# The certificate's draws (here, where the memory guard reads them):
# n / tol accepted, at least MIN_ACCEPTED, at most MAX_PROPOSALS proposals.
DEFAULT_TOL = 0.125
MIN_ACCEPTED = 4000
MAX_PROPOSALS = 4_000_000
DRAWS_AHEAD = 2  # blocks of proposals drawn ahead on other threads while the membership test runs


def block_workers() -> int:
    """Threads of the certificate's passes over blocks: the user's ``--threads``, else every core."""
    asked = threads.choose(None)
    return (os.cpu_count() or 1) if asked == threads.ALL else asked


def draw_rows(d: int) -> int:
    """Proposals drawn (and passed to the membership test) at once in d dimensions: about 4 M numbers."""
    return int(min(65536, max(1024, (1 << 22) // d)))


def wanted_draws(n: int, tol: float) -> int:
    """Accepted draws the certificate aims at: n / tol, at least MIN_ACCEPTED, at most MAX_PROPOSALS."""
    return int(min(MAX_PROPOSALS, max(MIN_ACCEPTED, math.ceil(n / tol))))


def statistics_count(family: str, d: int) -> int:
    """p, the number of sufficient statistics: d + d (d + 1) / 2 for the Gaussian, d otherwise."""
    return d + d * (d + 1) // 2 if family == "gaussian" else d


def certificate_bytes(family: str, n: int, d: int, tol: float | None = None) -> float:
    """Memory the certificate needs beside the samples, at its ``tol`` (default: its own, 0.125), with w threads
    (:func:`block_workers`): blocks of samples on each thread (3 arrays of STAT_BLOCK x d) and the row
    numbers of a holdout (2 n); then, up to DENSE_MAX_P statistics, a block of proposals and the membership
    test's work (4 arrays of rows x d), the p x p sum of T T' and its least-squares solve (3 p^2) and blocks
    of T (2 STAT_BLOCK x p); past it, for the Gaussian (see :mod:`optsolve.truncated.certificate.fisher`), the
    blocks of proposals in flight (Z and Y for this one and DRAWS_AHEAD more, its accepted rows), the accepted draws
    kept (at most n / tol plus a block, and at most KEEP_BYTES: the rest is re-drawn) with the masks of the
    rest, on each thread a re-drawn block (2 arrays of rows x d) and the products' chunks (4 of STAT_BLOCK x d),
    the partial sums of each block (d^2 + d), and d x d matrices and vectors of p."""
    p = statistics_count(family, d)
    rows = draw_rows(d)
    block, workers = STAT_BLOCK, block_workers()
    need = 8.0 * (3.0 * workers * block * d + 2.0 * n)
    if family != "gaussian" or p <= DENSE_MAX_P:
        return need + 8.0 * (4.0 * rows * d + 3.0 * p * p + 2.0 * block * p)
    accepted = wanted_draws(n, DEFAULT_TOL if tol is None else tol) + rows
    kept = min(float(KEEP_BYTES), 8.0 * d * accepted)
    blocks = MAX_PROPOSALS / rows + 1
    masks = MAX_PROPOSALS / 8.0 + 64.0 * blocks
    flight = (2.0 * (DRAWS_AHEAD + 1) + 1.0) * rows * d
    return need + kept + masks + 8.0 * (flight + workers * (2.0 * rows * d + 4.0 * block * d)
                                        + blocks * (d * d + d) + 12.0 * d * d + 8.0 * p)


def _rules(problem: Problem) -> None:
    X = problem["samples"]
    n, d = X.shape
    family = problem.get("family", "gaussian")
    if d == 0:
        raise problem.error(f"array 'samples' has shape ({n}, 0): d = 0 dimensions; expected at least one column.")
    for a in range(0, n, STAT_ROWS):  # by blocks of rows, here and below: no n x d temporary
        big = np.abs(X[a:a + STAT_ROWS]) > MAX_ABS_SAMPLE
        if big.any():
            r, c = np.argwhere(big)[0]
            raise problem.error(f"array 'samples' has {X[a + r, c]:g} at ({a + r}, {c}); samples must be at most "
                                f"{MAX_ABS_SAMPLE:g} in magnitude (their squares are sufficient statistics).")
    p = statistics_count(family, d)
    dense = family != "gaussian" or p <= DENSE_MAX_P
    memory.require(problem.source, f"family {family!r} in d = {d}, n = {n}: the certificate's work on the {p} "
                   f"sufficient statistics ({'their p x p covariance' if dense else 'its kept draws, by blocks'})",
                   certificate_bytes(family, n, d))
    if family == "gaussian-mean" and "cov" not in problem:
        raise problem.error("family 'gaussian-mean' needs the known covariance as key 'cov' (d x d).")
    if "cov" in problem:
        C = problem["cov"]
        if C.shape != (d, d) or not np.allclose(C, C.T, rtol=1e-10, atol=1e-12) or np.linalg.eigvalsh(
                0.5 * (C + C.T)).min() <= 0:
            raise problem.error(f"array 'cov' must be a symmetric positive definite {d} x {d} matrix.")
    need = d + 1 if family == "gaussian" else 2
    if n < need:
        raise problem.error(f"array 'samples' has n = {n} rows; family {family!r} in d = {d} needs at least {need}.")
    if family == "gaussian":
        mean, C = mean_and_covariance(X)
        s = np.linalg.svd(centred_r(X, mean), compute_uv=False)
        if s[-1] <= 1e-10 * max(s[0], 1e-300):
            raise problem.error(f"array 'samples' is rank-deficient: the centred samples span {int((s > 1e-10 * s[0]).sum())} "
                                f"of d = {d} dimensions, so no covariance can be estimated (drop the constant "
                                "directions, or give the covariance with family 'gaussian-mean').")
        try:
            np.linalg.cholesky(C)
        except np.linalg.LinAlgError:
            sd = np.sqrt(np.maximum(np.diag(C), 0.0))
            raise problem.error(f"array 'samples' has a covariance that is not numerically positive definite "
                                f"(standard deviations from {sd.min():.3g} to {sd.max():.3g}: squares under- or "
                                "overflow in float64); rescale the samples.") from None
    if family == "exponential" and X.min() < 0:
        r, c = np.argwhere(X < 0)[0]
        raise problem.error(f"array 'samples' has {X[r, c]:g} at ({r}, {c}); family 'exponential' needs "
                            "nonnegative samples.")
    if family == "exponential" and n and not (X.max(axis=0) > 0).all():
        c = int(np.flatnonzero(~(X.max(axis=0) > 0))[0])
        raise problem.error(f"array 'samples' is zero in every row of column {c}; family 'exponential' has no "
                            f"estimate then (the rate of coordinate {c} would be infinite).")
    if "set" in problem:
        try:
            S = parse_set(problem["set"], d)
        except SetError as exc:
            raise problem.error(f"{exc}.") from None
        check_inside(problem, np.concatenate([S.contains(X[a:a + STAT_ROWS]) for a in range(0, n, STAT_ROWS)]),
                     "the declared set")


def check_inside(problem, inside: np.ndarray, what: str) -> None:
    """Samples outside the set are an input error naming how many and which."""
    out = np.flatnonzero(~inside)
    if out.size:
        rows = ", ".join(str(int(i)) for i in out[:10]) + (", ..." if out.size > 10 else "")
        raise problem.error(f"{out.size} of the {inside.size} samples lie outside {what} (rows {rows}); "
                            "every sample must lie in the truncation set.")


SCHEMA = Schema(
    name="truncated",
    fields=(
        Field("samples", shape=("n", "d"), doc="the observed (truncated) samples, n x d"),
        Field("family", kind="string", required=False, choices=FAMILY_NAMES,
              doc="gaussian (default), gaussian-mean (known 'cov') or exponential"),
        Field("cov", shape=("d", "d"), required=False, doc="the known covariance (family gaussian-mean)"),
        Field("set", kind="object", required=False,
              doc="the truncation set: box, ball, halfspace, polytope, union, intersection, complement"),
        Field("true_mean", shape=("d",), required=False, doc="the population mean, when known (benchmarks)"),
        Field("true_cov", shape=("d", "d"), required=False, doc="the population covariance, when known"),
        Field("true_rates", shape=("d",), required=False, positive=True, doc="the population rates (exponential)"),
        Field("alpha", kind="scalar", required=False, doc="the survival mass p*(S), when known"),
    ),
    rules=(_rules,),
)


@dataclass
class TruncatedProblem:
    X: np.ndarray  # n x d, original coordinates
    family: object  # a families.* instance
    membership: object  # N x d -> bools, original coordinates
    shift: np.ndarray  # whitening: x = shift + z @ scale.T
    scale: np.ndarray
    known_cov: np.ndarray | None
    _Z: np.ndarray | None = None

    @property
    def n(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]

    @property
    def Z(self) -> np.ndarray:
        """The samples, whitened (formed on first use: only the SGD baselines and the bootstrap need them)."""
        if self._Z is None:
            self._Z = self.whiten(self.X)
        return self._Z

    def whiten(self, X) -> np.ndarray:
        return solve_triangular(self.scale, (X - self.shift).T, lower=True).T

    def mean_statistics(self, rows=None) -> np.ndarray:
        """The mean of T over the given rows (all by default) in whitened coordinates, by blocks of rows
        (no n x d copy)."""
        fam = self.family
        count = self.n if rows is None else rows.size
        s1 = np.zeros(self.d)
        s2 = 0.0
        for a in range(0, count, STAT_ROWS):
            Zb = self.whiten(self.X[a:a + STAT_ROWS] if rows is None else self.X[rows[a:a + STAT_ROWS]])
            s1 += Zb.sum(axis=0)
            s2 = s2 + fam.second_moment(Zb, np.ones(Zb.shape[0]))
        return fam.moments_from(s1 / count, s2 / count)

    def mean_log_h(self, rows) -> float:
        """The mean of log h over the given rows, whitened (a constant for the Gaussian family)."""
        if self.family.name == "gaussian":
            return float(self.family.log_h(self.X[:1])[0])
        total = 0.0
        for a in range(0, rows.size, STAT_ROWS):
            total += float(self.family.log_h(self.whiten(self.X[rows[a:a + STAT_ROWS]])).sum())
        return total / rows.size

    def oracle(self) -> Oracle:
        """A fresh counted oracle on whitened points."""
        return Oracle(self.membership, shift=self.shift, scale=self.scale)

    def to_original(self, theta) -> dict:
        """The family's parameters in the original coordinates."""
        p = self.family.params(theta)
        if self.family.name == "exponential":
            s = np.diag(self.scale)
            return {"rates": p["rates"] / s, "mean": p["mean"] * s}
        out = {"mean": self.shift + self.scale @ p["mean"]}
        out["covariance"] = self.known_cov if self.known_cov is not None else self.scale @ p["covariance"] @ self.scale.T
        return out


def centred_r(X, mean) -> np.ndarray:
    """R of a QR factorisation of the centred rows X - mean (d x d, the same singular values), by
    blocks of rows (Demmel, Grigori, Hoemmen and Langou's tall-skinny QR, SIAM J. Sci. Comput. 34,
    2012): no n x d copy."""
    R = np.zeros((0, X.shape[1]))
    with threads.limited(1):  # (files are read before a solve's thread limit; threaded QR of such blocks is slow)
        for a in range(0, X.shape[0], STAT_ROWS):
            R = np.linalg.qr(np.vstack([R, X[a:a + STAT_ROWS] - mean]), mode="r")
    return R


def mean_and_covariance(X) -> tuple[np.ndarray, np.ndarray]:
    """The rows' mean and (biased) covariance, by blocks of rows with the mean taken out first (no
    n x d copy)."""
    n, d = X.shape
    mean = np.zeros(d)
    for a in range(0, n, STAT_ROWS):
        mean += X[a:a + STAT_ROWS].sum(axis=0)
    mean /= n
    cov = np.zeros((d, d))
    for a in range(0, n, STAT_ROWS):
        B = X[a:a + STAT_ROWS] - mean
        cov += B.T @ B
    return mean, cov / n


def membership_of(problem: Problem, oracle_spec: str | None):
    if oracle_spec:
        return load_oracle(oracle_spec)
    if "set" not in problem:
        raise problem.error("no truncation set: give key 'set' in the file, or name a membership function with "
                            "'--oracle module:function'.")
    return parse_set(problem["set"], problem["samples"].shape[1]).contains


def prepare(problem: Problem, oracle_spec: str | None = None) -> TruncatedProblem:
    X = np.asarray(problem["samples"], dtype=float)
    n, d = X.shape
    name = problem.get("family", "gaussian")
    family = fam.FAMILIES[name](d)
    membership = membership_of(problem, oracle_spec)
    if oracle_spec:
        try:
            inside = np.asarray(membership(X)).astype(bool).reshape(n)
        except Exception as exc:  # the user's function
            raise InputError(f"The '--oracle' function failed on the samples ({type(exc).__name__}: {exc}).") from None
        check_inside(problem, inside, f"the set of '--oracle {oracle_spec}'")
    known = None
    if name == "gaussian":
        shift, cov = mean_and_covariance(X)
        scale = np.linalg.cholesky(cov)
    elif name == "gaussian-mean":
        known = np.asarray(problem["cov"], dtype=float)
        shift = X.mean(axis=0)
        scale = np.linalg.cholesky(0.5 * (known + known.T))
    else:
        shift = np.zeros(d)
        scale = np.diag(np.maximum(X.mean(axis=0), 1e-300))
    return TruncatedProblem(X, family, membership, shift, scale, known)


# --------------------------------------------------------------------------- generators


BALL_KEEPS = 0.86  # halfspace-ball: the share of its halfspace's mass its ball keeps (alpha 0.086: a halfspace of 0.1)
HALFSPACE_BALL_DRAWS = 200_000  # exact draws of the halfspace that place the ball's radius
DRAW_ROWS = 100_000  # rows of a halfspace's exact draws made at once


def random_spd(d: int, cond: float, rng) -> np.ndarray:
    """A random covariance with eigenvalues log-spaced in [1, cond] and random eigenvectors."""
    Q, R = np.linalg.qr(rng.standard_normal((d, d)))
    Q = Q * np.sign(np.diag(R))
    ev = np.geomspace(1.0, cond, d) if d > 1 else np.array([1.0])
    return (Q * ev) @ Q.T


def _scores(kind: str, mu, Sigma, L, rng, count: int, centre_shift: float):
    """For a set shape with one size parameter: each Gaussian draw's smallest size that contains it."""
    d = mu.size
    sd = np.sqrt(np.diag(Sigma))
    out = np.empty(count)
    step = 100_000
    for a in range(0, count, step):
        Y = mu + rng.standard_normal((min(step, count - a), d)) @ L.T
        if kind == "ball":
            c = mu.copy()
            c[0] += centre_shift * sd[0]
            out[a:a + Y.shape[0]] = np.sqrt(((Y - c) ** 2).sum(axis=1))
        else:
            s1 = np.abs((Y - (mu + 0.5 * sd)) / sd).max(axis=1)
            out[a:a + Y.shape[0]] = s1 if kind == "box" else np.minimum(s1, np.abs((Y - (mu - 1.5 * sd)) / sd).max(axis=1))
    return out


def random_direction(d: int, rng) -> np.ndarray:
    """A unit vector uniform on the sphere in d dimensions."""
    u = rng.standard_normal(d)
    return u / np.linalg.norm(u)


def halfspace_along(u, mu, Sigma, alpha: float) -> dict:
    """The halfspace u . x >= t of mass alpha under N(mu, Sigma), written a . x <= b with a = -u."""
    from scipy.stats import norm

    t = float(u @ mu + np.sqrt(u @ Sigma @ u) * norm.isf(alpha))
    return {"type": "halfspace", "a": (-np.asarray(u, dtype=float)).tolist(), "b": -t}


def make_set(kind: str, mu, Sigma, alpha: float, rng) -> tuple[dict, float]:
    """A set of the given kind with survival mass alpha under N(mu, Sigma), and that mass (exact
    for the halfspaces; otherwise from 2e5 / alpha^(1/2) Monte-Carlo draws, as a size quantile;
    halfspace-ball: from HALFSPACE_BALL_DRAWS exact draws of the halfspace)."""
    from scipy.stats import norm

    d = mu.size
    sd = np.sqrt(np.diag(Sigma))
    if kind == "halfspace":  # x_1 >= t, written a . x <= b with a = -e_1
        t = mu[0] + sd[0] * norm.isf(alpha)
        a = np.zeros(d)
        a[0] = -1.0
        return {"type": "halfspace", "a": a.tolist(), "b": float(-t)}, float(alpha)
    L = np.linalg.cholesky(Sigma)
    if kind == "halfspace-random":
        return halfspace_along(random_direction(d, rng), mu, Sigma, alpha), float(alpha)
    if kind == "halfspace-ball":
        cut = halfspace_along(random_direction(d, rng), mu, Sigma, alpha / BALL_KEEPS)
        Y = _halfspace_draws(mu, L, Sigma, cut, HALFSPACE_BALL_DRAWS, rng)
        r = np.sort(np.sqrt(((Y - mu) ** 2).sum(axis=1)))
        radius = float(r[int(BALL_KEEPS * r.size)])
        ball = {"type": "ball", "center": mu.tolist(), "radius": radius}
        mass = alpha / BALL_KEEPS * np.searchsorted(r, radius, side="right") / r.size
        return {"type": "intersection", "sets": [cut, ball]}, float(mass)
    count = int(min(4_000_000, max(200_000, 200 / alpha)))
    s = np.sort(_scores(kind, mu, Sigma, L, rng, count, 2.0))
    size = float(s[int(alpha * count)]) if int(alpha * count) < count else float(s[-1]) * 1.01
    mass = float(np.searchsorted(s, size, side="right") / count)
    if kind == "ball":
        c = mu.copy()
        c[0] += 2.0 * sd[0]
        return {"type": "ball", "center": c.tolist(), "radius": size}, mass
    box1 = {"type": "box", "lo": (mu + 0.5 * sd - size * sd).tolist(), "hi": (mu + 0.5 * sd + size * sd).tolist()}
    if kind == "box":
        return box1, mass
    box2 = {"type": "box", "lo": (mu - 1.5 * sd - size * sd).tolist(), "hi": (mu - 1.5 * sd + size * sd).tolist()}
    return {"type": "union", "sets": [box1, box2]}, mass


def _halfspace_draws(mu, L, Sigma, desc: dict, n: int, rng) -> np.ndarray:
    """n draws of N(mu, Sigma) restricted to the halfspace a . x <= b, exactly: s = a . x from its
    truncated normal by the inverse CDF, then x = y + Sigma a (s - a . y) / (a' Sigma a) with
    y ~ N(mu, Sigma) (x given a . x = s is Gaussian, and this is it), DRAW_ROWS rows at a time."""
    from scipy.stats import norm

    a = np.asarray(desc["a"], dtype=float)
    m, v = float(a @ mu), float(a @ Sigma @ a)
    k = Sigma @ a / v
    top = norm.cdf((desc["b"] - m) / np.sqrt(v))  # the halfspace's mass
    out = np.empty((n, mu.size))
    for lo in range(0, n, DRAW_ROWS):
        rows = min(DRAW_ROWS, n - lo)
        s = m + np.sqrt(v) * norm.ppf(np.maximum(top * rng.uniform(size=rows), 1e-300))
        Y = mu + rng.standard_normal((rows, mu.size)) @ L.T
        out[lo:lo + rows] = Y + np.outer(s - Y @ a, k)
    return out


def sample_truncated_gaussian(mu, Sigma, desc: dict, n: int, rng, max_draws: int = 200_000_000) -> np.ndarray:
    """n draws of N(mu, Sigma) restricted to the set (the halfspace x_1 >= t exactly, by the
    inverse CDF along x_1; any other halfspace exactly along its normal; other sets by rejection in
    batches, an intersection with a halfspace from that halfspace's exact draws)."""
    from scipy.stats import norm

    d = mu.size
    if desc["type"] == "halfspace" and np.count_nonzero(desc["a"]) == 1 and desc["a"][0] < 0:
        t = -desc["b"] / -desc["a"][0]
        s1 = np.sqrt(Sigma[0, 0])
        lo = norm.cdf((t - mu[0]) / s1)
        u = lo + (1 - lo) * rng.uniform(size=n)
        x1 = mu[0] + s1 * norm.ppf(np.minimum(u, 1 - 1e-16))
        if d == 1:
            return x1[:, None]
        k = Sigma[1:, 0] / Sigma[0, 0]
        Sc = Sigma[1:, 1:] - np.outer(k, Sigma[0, 1:])
        rest = mu[1:] + np.outer(x1 - mu[0], k) + rng.standard_normal((n, d - 1)) @ np.linalg.cholesky(Sc).T
        return np.column_stack([x1, rest])
    contains = parse_set(desc, d).contains
    L = np.linalg.cholesky(Sigma)
    if desc["type"] == "halfspace":
        return _halfspace_draws(mu, L, Sigma, desc, n, rng)
    cut = next((p for p in desc.get("sets", ()) if p["type"] == "halfspace"), None) \
        if desc["type"] == "intersection" else None
    got, total, drawn = [], 0, 0
    while total < n:  # by rejection (from the halfspace's exact draws, for an intersection with one)
        Y = mu + rng.standard_normal((200_000, d)) @ L.T if cut is None else _halfspace_draws(
            mu, L, Sigma, cut, 200_000, rng)
        drawn += Y.shape[0]
        Y = Y[contains(Y)]
        got.append(Y)
        total += Y.shape[0]
        if drawn > max_draws:
            raise ValueError(f"the set keeps too little mass to draw {n} samples")
    return np.vstack(got)[:n]


def gen_gaussian(rng, d=2, n=2000, alpha=0.1, set="halfspace", cond=10.0):
    if not 0 < alpha < 1:
        raise ValueError(f"The '--alpha' option must be a survival mass in (0, 1); got {alpha:g}.")
    if set == "halfspace-ball" and not alpha < BALL_KEEPS:
        raise ValueError(f"The '--alpha' option of set 'halfspace-ball' must be below {BALL_KEEPS:g} (its ball keeps "
                         f"{BALL_KEEPS:.0%} of its halfspace's mass); got {alpha:g}.")
    if not cond >= 1:
        raise ValueError(f"The '--cond' option must be a condition number >= 1; got {cond:g}.")
    mu = rng.standard_normal(d)
    Sigma = random_spd(d, cond, rng)
    desc, mass = make_set(set, mu, Sigma, alpha, rng)
    X = sample_truncated_gaussian(mu, Sigma, desc, n, rng)
    return {"samples": X, "family": "gaussian", "set": desc, "true_mean": mu, "true_cov": Sigma, "alpha": mass}


def gen_exponential(rng, d=2, n=2000, alpha=0.1):
    """Independent exponential coordinates (rates in [0.5, 2]) truncated to sum(x) >= t."""
    rates = rng.uniform(0.5, 2.0, size=d)
    # the sum of exponentials with unequal rates: its upper alpha quantile by Monte Carlo
    s = np.sort((rng.exponential(1.0 / rates, size=(400_000, d))).sum(axis=1))
    t = float(s[int((1 - alpha) * s.size)])
    desc = {"type": "halfspace", "a": [-1.0] * d, "b": -t}
    got, total = [], 0
    while total < n:
        Y = rng.exponential(1.0 / rates, size=(200_000, d))
        Y = Y[Y.sum(axis=1) >= t]
        got.append(Y)
        total += Y.shape[0]
    return {"samples": np.vstack(got)[:n], "family": "exponential", "set": desc, "true_rates": rates,
            "alpha": float(alpha)}


# Peak bytes of the generators (measured with tracemalloc, with a margin): Sigma and its factors, the
# batches of 200,000 draws where a set is sampled by rejection (400,000 for the exponential threshold),
# and the samples kept
def _gaussian_bytes(d, n, set, **_):
    batches = {"halfspace": 0, "halfspace-random": 3 * DRAW_ROWS}.get(set, 4 * 200_000 + 3 * DRAW_ROWS)
    return 64.0 * d * d + 8.0 * d * (batches + 5 * n)


def _exponential_bytes(d, n, **_):
    return 8.0 * d * (2 * 400_000 + 2 * 200_000 + 5 * n)


FAMILIES = {
    "gaussian": Family("gaussian", "N(mu, Sigma) in d dimensions, random SPD Sigma of condition number --cond, "
                       "truncated to a set of survival mass --alpha", gen_gaussian,
                       (Param("d", int, 2, "dimension"), Param("n", int, 2000, "samples"),
                        Param("alpha", float, 0.1, "survival mass p*(S)"),
                        Param("set", ("halfspace", "ball", "box", "union", "halfspace-random", "halfspace-ball"),
                              "halfspace", "halfspace x_1 >= t; a ball away from the mean; a box; a union of two "
                              "boxes; a halfspace along a random direction; that halfspace (of mass alpha / 0.86) "
                              "intersected with a ball about the mean keeping 86% of it"),
                        Param("cond", float, 10.0, "condition number of Sigma")), _gaussian_bytes),
    "exponential": Family("exponential", "independent exponential coordinates truncated to sum(x) >= t",
                          gen_exponential,
                          (Param("d", int, 2, "dimension"), Param("n", int, 2000, "samples"),
                           Param("alpha", float, 0.1, "survival mass p*(S)")), _exponential_bytes),
}
