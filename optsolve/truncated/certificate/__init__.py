"""Independent checks of a truncated-statistics estimate, from the problem and the solution only.

Fresh draws of the estimated distribution p_hat (plain numpy, rejection by the set's membership
test or the user's ``--oracle``), seeded from the problem's samples and never from the
document, give:

* alpha_hat = p_hat(S), with an exact (Clopper-Pearson) 95% interval; the reported alpha_hat
  must agree with it within the Monte-Carlo error of the draws;
* the gradient g of the truncated NLL at the estimate, E_{p_hat | S}[T] - mean of T over the
  fitted samples, in coordinates whitened by the estimate, and its size in the metric of the
  draws' own covariance F of T (the estimate's Fisher information): G = g' F^-1 g. At the MLE,
  N_c G is about chi-square with p degrees of freedom (p statistics, N_c accepted draws): the
  check allows (p + 3 sqrt(2 p)) / N_c for that noise (N_c aims at n / tol) plus tol p / m for
  the estimate's own Monte-Carlo distance to the MLE, tol times the data's statistical error
  in this metric (m fitted samples; newton's target), both times N_c / (N_c - p - 2): with F
  estimated from the same draws, N_c G is Hotelling's T^2, whose mean is p (N_c - 1) /
  (N_c - p - 2) (Hotelling, Ann. Math. Statist. 2, 1931), a visible excess once p is a few
  percent of N_c (d = 100: p = 5,150). At the empirical moments N_c G is thousands of times p;
* positive definiteness of the covariance (or positive rates);
* the reported objective, the truncated NLL of the fitted samples, against the one recomputed
  with the draws' alpha_hat: within objective_rtol |NLL| + objective_atol plus four standard
  errors of log alpha_hat, sqrt((1 - a) / hits);
* with ``--radius R`` (verify's, never the document's), the slack L(theta0) + R - L(estimate)
  of the paper's region, L the untruncated NLL of the fitted samples and theta0 their
  empirical moments;
* held-out rows (``--holdout``): at most the share verify allows, and the rows the solver's
  rule draws from the document's seed (a seed picks a random subset; it cannot pick rows that
  suit an estimate); their truncated NLL is reported.

Scale: the samples are read by blocks of rows (their mean and scatter, :func:`fisher.sample_moments`),
the draws are made and passed to the membership test by blocks, and for the Gaussian with more than
:data:`DENSE_MAX_P` statistics G is solved by conjugate gradients on products with F formed from the
kept draws (:mod:`optsolve.truncated.certificate.fisher`), never an n x p or p x p array: memory O(d^2) beside the
kept draws, which :func:`optsolve.truncated.problems.certificate_bytes` bounds. Up to DENSE_MAX_P
statistics F is summed and solved as a p x p matrix.

What was solved (method, seed, bootstrap, the document's tol and radius) is reported, never
trusted: every limit comes from :data:`LIMITS`, given by the caller.
"""

from __future__ import annotations

import hashlib
import math
import time
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.result import Certificate, Check, Limit, solution_vector
from optsolve.truncated.certificate.fisher import (DrawSums, KeptDraws, SampleMoments, block_normals,
                                                   gaussian_statistic, one_blas_thread, sample_moments, upper)
from optsolve.truncated.problems import (DEFAULT_TOL, DENSE_MAX_P, DRAWS_AHEAD, MAX_PROPOSALS, STAT_BLOCK,
                                         block_workers, draw_rows, statistics_count, wanted_draws)

CERT_SEED = 20250424
NOISE_Z = 4.0  # standard errors of log alpha_hat allowed between two estimates from one stream of draws
LOG_2PI = math.log(2 * math.pi)
HASH_ROWS = 1 << 16  # rows of samples hashed at once
# The solver's own rules, restated so that the certificate reads none of its modules (a test checks that
# they agree): newton doubles R at most MAX_DOUBLINGS times; psgd grows it up to PSGD_MAX_RADIUS.
MAX_DOUBLINGS = 2
PSGD_MAX_RADIUS = 10.0

LIMITS = (
    Limit("tol", DEFAULT_TOL, "larger",
          "the estimate's Monte-Carlo error allowed, as a fraction of the data's statistical error: the "
          "gradient statistic's allowance tol p / m, and the certificate's draws (n / tol accepted)"),
    Limit("radius", None, "larger",
          "R of the region L(theta) <= L(theta0) + R the estimate must lie in; by default the largest R "
          "the solver's rules reach, max(4 R_0, 10) with R_0 = log(1/alpha_0) + 2 (alpha_0 measured by "
          "seeded draws of the samples' own fit, from the file's set); unset (a set given by --oracle "
          "only): the excess L(estimate) - L(theta0) is reported, not judged"),
    Limit("holdout", 0.0, "larger",
          "the largest share of the samples a solution may hold out of the fit"),
    Limit("objective_rtol", 1e-6, "larger",
          "relative tolerance between the reported and the recomputed truncated NLL (beside the "
          "Monte-Carlo error of the normaliser)"),
    Limit("objective_atol", 1e-6, "larger",
          "absolute floor of that comparison (nats per sample)"),
)
# An estimation problem with samples inside the set always has a likelihood: nothing to be
# infeasible, and a bounded truncated NLL is never certified unbounded here.
CLAIMS = ("optimal",)
USER_FUNCTIONS = ("oracle",)  # the user function verify's --oracle passes to check()


def gradient_limit(p: int, Nc: int, tol: float, m: int) -> float:
    """The gradient statistic's limit: the noise of G at the MLE, (p + 3 sqrt(2 p)) / N_c, plus the
    estimate's allowance tol p / m, both scaled by Hotelling's N_c / (N_c - p - 2) for F taken from
    the same N_c draws (0 where N_c <= p + 2: too few draws to judge, so the check fails)."""
    if Nc <= p + 2:
        return 0.0
    return ((p + 3.0 * math.sqrt(2.0 * p)) / Nc + tol * p / m) * Nc / (Nc - p - 2)


def resolved_limits(limits: dict | None) -> dict:
    """Every limit of :data:`LIMITS`: the given values, the documented defaults for the rest."""
    out = {lim.name: lim.default for lim in LIMITS}
    out.update({k: v for k, v in (limits or {}).items() if k in out and v is not None})
    for name in ("tol", "objective_rtol", "objective_atol"):
        v = out[name]
        if not (isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and v >= 0):
            raise InputError(f"The '--{name.replace('_', '-')}' limit must be a finite number >= 0; got {v!r}.")
    if not out["tol"] > 0:
        raise InputError(f"The '--tol' limit must be positive; got {out['tol']!r}.")
    for name in ("radius", "holdout"):
        v = out[name]
        if v is not None and not (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0):
            raise InputError(f"The '--{name}' limit must be a number >= 0; got {v!r}.")
    return out


@dataclass
class Estimate:
    family: str
    mean: np.ndarray | None
    cov: np.ndarray | None
    rates: np.ndarray | None
    chol: np.ndarray | None = None  # the covariance's Cholesky factor L, and L^-1
    chol_inv: np.ndarray | None = None


@dataclass
class Draws:
    """What the certificate's draws of p_hat gave: counts, and either the sums of T and T T' over the accepted
    draws (``s1``, ``s2``: up to DENSE_MAX_P statistics) or the accepted draws themselves, whitened, with their
    sums (``kept``, ``sums``: the Gaussian's structure)."""

    hits: int
    proposals: int
    wanted: int
    s1: np.ndarray | None = None
    s2: np.ndarray | None = None  # p x p
    kept: KeptDraws | None = None
    sums: DrawSums | None = None
    cut: bool = False  # stopped by the deadline

    @property
    def alpha(self) -> float:
        return self.hits / self.proposals if self.proposals else 0.0

    @property
    def log_alpha_se(self) -> float:
        """Standard error of log alpha_hat (delta method on the binomial)."""
        return math.sqrt(max(1.0 - self.alpha, 0.0) / self.hits) if self.hits else math.inf


def problem_seed(problem, stream: int = 0) -> np.random.Generator:
    """The certificate's generator, from the problem's samples and family alone (``stream`` 0: the
    estimate's draws; 1: the draws measuring alpha_0)."""
    X = problem["samples"]
    digest = hashlib.sha256()
    for a in range(0, X.shape[0], HASH_ROWS):  # the bytes of the float64 array, in C order, by blocks of rows
        digest.update(np.ascontiguousarray(X[a:a + HASH_ROWS], dtype=np.float64))
    digest.update(str(X.shape).encode() + str(problem.get("family", "gaussian")).encode())
    return np.random.default_rng([CERT_SEED, int.from_bytes(digest.digest()[:8], "little"), stream])


def clopper_pearson(k: int, N: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial confidence interval for k successes in N trials (Clopper and Pearson, Biometrika 26,
    1934), from the beta quantiles: lower B^-1(a; k, N - k + 1), upper B^-1(1 - a; k + 1, N - k), a = (1 - level) / 2."""
    from scipy.special import betaincinv

    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(betaincinv(k, N - k + 1, a))
    hi = 1.0 if k == N else float(betaincinv(k + 1, N - k, 1 - a))
    return lo, hi


ALPHA0_DRAWS = (4000, 1 << 16)  # proposals measuring alpha_0; the second batch only when the first has no hit


def initial_mass(problem, contains, most: int | None = None) -> tuple[int, int]:
    """(accepted, proposals) of seeded draws of the samples' own fit (all rows) on the set: alpha_0,
    from which R_0 = log(1/alpha_0) + 2. The solver and verify measure it alike. ``most``: no batch
    is drawn that would make the proposals pass it (an oracle budget)."""
    X = problem["samples"]
    family = problem.get("family", "gaussian")
    known = np.asarray(problem["cov"], dtype=float) if "cov" in problem else None
    est0 = _naive(family, sample_moments(X, second=family == "gaussian"), known)
    rng = problem_seed(problem, 1)
    acc = drawn = 0
    for count in ALPHA0_DRAWS:
        if most is not None and drawn + count > most:
            break
        if family == "exponential":
            Y = rng.exponential(1.0 / est0.rates, size=(count, X.shape[1]))
        else:
            Y = est0.mean + rng.standard_normal((count, X.shape[1])) @ est0.chol.T
        acc += int(np.count_nonzero(contains(Y)))
        drawn += count
        if acc:
            break
    return acc, drawn


def largest_radius(R0: float) -> float:
    """The largest R the solver's own rules reach from R_0: newton doubles it at most MAX_DOUBLINGS
    times, psgd grows it up to PSGD_MAX_RADIUS."""
    return max(R0 * 2.0 ** MAX_DOUBLINGS, PSGD_MAX_RADIUS)


def limits_from_problem(problem) -> dict:
    """verify's default radius, from the problem's set (none when the set is given by --oracle only)."""
    from optsolve.truncated.problems import SetError, parse_set

    if "set" not in problem:
        return {}
    try:
        contains = parse_set(problem["set"], problem["samples"].shape[1]).contains
        acc, drawn = initial_mass(problem, contains)
    except (SetError, np.linalg.LinAlgError):
        return {}
    return {"radius": largest_radius(math.log(drawn / acc) + 2.0)} if acc else {}


def _membership(problem, settings, oracle):
    from optsolve.truncated.problems import load_oracle, parse_set

    used = settings.get("oracle") if isinstance(settings, dict) else None
    if oracle:
        fn, label = load_oracle(oracle), f"The '--oracle {oracle}' function"
    elif "set" in problem:
        fn, label = parse_set(problem["set"], problem["samples"].shape[1]).contains, "The truncation set"
    elif used:
        raise InputError(f"This solution was computed with '--oracle {used}'; checking it needs the same "
                         "membership function: pass '--oracle' to optsolve verify.")
    else:
        raise InputError(f"{problem.source}: no truncation set: give key 'set' in the file, or name a membership "
                         "function with '--oracle module:function'.")
    if used and not oracle:
        raise InputError(f"This solution was computed with '--oracle {used}'; checking it needs the same "
                         "membership function: pass '--oracle' to optsolve verify.")

    def contains(Y):
        try:
            got = np.asarray(fn(Y))
        except Exception as exc:  # the user's function
            raise InputError(f"{label} failed on the certificate's draws ({type(exc).__name__}: {exc}).") from None
        if got.shape != (Y.shape[0],):
            raise InputError(f"{label} returned shape {got.shape} for {Y.shape[0]} points; expected "
                             f"({Y.shape[0]},) booleans.")
        return got.astype(bool)

    return contains


def estimate_of(problem, solution) -> Estimate:
    """The estimate in the solution, checked for shape (KeyError, ValueError or TypeError when it does not fit)."""
    X = problem["samples"]
    d = X.shape[1]
    family = problem.get("family", "gaussian")
    if not isinstance(solution, dict):
        raise TypeError(f"the solution is a {type(solution).__name__}, expected an object")
    if family == "exponential":
        rates = solution_vector(solution, "rates", d)
        if solution.get("mean") is not None:
            mean = solution_vector(solution, "mean", d)
            with np.errstate(divide="ignore", invalid="ignore"):
                if not np.allclose(mean, 1.0 / rates, rtol=1e-9, atol=0.0):
                    raise ValueError("solution 'mean' is not 1 / rates")
        return Estimate(family, None, None, rates)
    mean = solution_vector(solution, "mean", d)
    if family == "gaussian-mean":
        cov = np.asarray(problem["cov"], dtype=float)
    else:
        raw = solution.get("covariance")
        if raw is None:
            raise KeyError("solution has no 'covariance'")
        if not isinstance(raw, list) or len(raw) != d or not all(isinstance(r, list) and len(r) == d for r in raw):
            raise ValueError(f"solution 'covariance' must be a {d} x {d} nested list")
        cov = np.array([[np.nan if v is None else v for v in row] for row in raw], dtype=float)
    return Estimate(family, mean, 0.5 * (cov + cov.T), None)


def _stats(est: Estimate, X):
    """T in coordinates whitened by the estimate: (u, u_i u_j for i <= j) or u."""
    if est.family == "exponential":
        return X * est.rates
    U = (X - est.mean) @ est.chol_inv.T
    if est.family == "gaussian-mean":
        return U
    iu = np.triu_indices(U.shape[1])
    return np.hstack([U, U[:, iu[0]] * U[:, iu[1]]])


def _whitened(est: Estimate, mom: SampleMoments) -> tuple[np.ndarray, np.ndarray]:
    """The samples' mean of u and of uu', u the samples whitened by the (Gaussian) estimate."""
    ubar = est.chol_inv @ (mom.mean - est.mean)
    W = est.chol_inv @ mom.scatter @ est.chol_inv.T
    return ubar, 0.5 * (W + W.T) + np.outer(ubar, ubar)


def _mean_stats(est: Estimate, mom: SampleMoments) -> np.ndarray:
    """The samples' mean of T (:func:`_stats`), from their moments."""
    if est.family == "exponential":
        return mom.mean * est.rates
    ubar, M = _whitened(est, mom)
    return ubar if est.family == "gaussian-mean" else np.concatenate([ubar, upper(M)])


def _nll(est: Estimate, mom: SampleMoments) -> float:
    """The samples' mean negative log-density under the (untruncated) estimate, from their moments."""
    if est.family == "exponential":
        return float(mom.mean @ est.rates - np.log(est.rates).sum())
    ubar, M = _whitened(est, mom)
    return float(0.5 * np.trace(M) + np.log(np.diag(est.chol)).sum() + 0.5 * ubar.size * LOG_2PI)


def _naive(family: str, mom: SampleMoments, known) -> Estimate:
    """The samples' own fit: their mean and scatter (or the known covariance), or the rates 1 / mean."""
    if family == "exponential":
        return Estimate(family, None, None, 1.0 / mom.mean)
    d = mom.mean.size
    cov = known if family == "gaussian-mean" else mom.scatter.reshape(d, d)
    L = np.linalg.cholesky(cov)
    return Estimate(family, mom.mean, cov, None, L, np.linalg.inv(L))


def validity_checks(est: Estimate) -> list[Check]:
    """Positive rates or a positive definite covariance (the estimate's Cholesky factor is set)."""
    if est.family == "exponential":
        low = float(est.rates.min()) if np.isfinite(est.rates).all() else math.nan
        return [Check.require("rates_positive", low, bool(low > 0), "every rate finite and > 0", "smallest rate")]
    ok = bool(np.isfinite(est.mean).all() and np.isfinite(est.cov).all())
    low = float(np.linalg.eigvalsh(est.cov).min()) if ok else math.nan
    if ok and low > 0:
        try:
            est.chol = np.linalg.cholesky(est.cov)
            est.chol_inv = np.linalg.inv(est.chol)
            ok = bool(np.isfinite(est.chol_inv).all())
        except np.linalg.LinAlgError:
            ok = False
    return [Check.require("covariance_spd", low, bool(ok and low > 0), "finite, smallest eigenvalue > 0",
                          "smallest eigenvalue of the covariance (the mean must be finite too)")]


def draw(problem, est: Estimate, contains, *, tol: float, deadline: float | None = None,
         structured: bool | None = None) -> Draws:
    """Rejection draws of p_hat | S, by blocks of proposals, until n / tol (at least MIN_ACCEPTED) are accepted or
    MAX_PROPOSALS are made. ``structured`` (default: the Gaussian with more than DENSE_MAX_P statistics): the
    accepted draws are kept, whitened, for :func:`fisher.gaussian_statistic`, block k of proposals drawn from
    the k-th child of the problem's seed (the next blocks drawn on other threads while the membership test
    runs on this one); otherwise the proposals come from the seed's one stream and their T and T T' are summed
    by blocks (nothing of size N_c is kept)."""
    X = problem["samples"]
    n, d = X.shape
    p = statistics_count(est.family, d)
    if structured is None:
        structured = est.family == "gaussian" and p > DENSE_MAX_P
    rng = problem_seed(problem)
    rows = draw_rows(d)
    out = Draws(0, 0, wanted_draws(n, tol))
    if structured:
        return _draw_structured(out, rng.bit_generator.seed_seq, est, contains, rows, deadline)
    out.s1, out.s2 = np.zeros(p), np.zeros((p, p))
    while out.hits < out.wanted and out.proposals < MAX_PROPOSALS:
        if deadline is not None and time.perf_counter() > deadline:
            out.cut = True
            break
        if est.family == "exponential":
            Y = rng.exponential(1.0 / est.rates, size=(rows, d))
        else:
            Y = est.mean + rng.standard_normal((rows, d)) @ est.chol.T
        Ya = Y[contains(Y)]
        out.proposals += rows
        out.hits += Ya.shape[0]
        for a in range(0, Ya.shape[0], STAT_BLOCK):
            Tb = _stats(est, Ya[a:a + STAT_BLOCK])
            out.s1 += Tb.sum(axis=0)
            out.s2 += Tb.T @ Tb
    return out


def _draw_structured(out: Draws, seed, est: Estimate, contains, rows: int, deadline) -> Draws:
    from scipy.linalg.blas import dtrmm

    d = est.mean.size

    def normals(k):
        return block_normals(seed, k, rows, d)

    def proposals(k):  # u = L^-1 (y - mean) = z: the accepted rows of Z are the whitened draws
        Z = normals(k)
        Y = dtrmm(1.0, est.chol, Z.T, lower=1).T  # Z L' with L triangular: half a general product's work
        Y += est.mean
        return Z, Y

    out.kept, out.sums = KeptDraws(d, normals), DrawSums.zeros(d)
    workers = block_workers()
    ahead = min(workers, DRAWS_AHEAD) if workers > 1 else 0
    with one_blas_thread(workers), ThreadPoolExecutor(max(ahead, 1)) as pool:
        pending = deque(pool.submit(proposals, k) for k in range(ahead))
        k = 0
        while out.hits < out.wanted and out.proposals < MAX_PROPOSALS:
            if deadline is not None and time.perf_counter() > deadline:
                out.cut = True
                break
            if ahead:
                Z, Y = pending.popleft().result()
                pending.append(pool.submit(proposals, k + ahead))
            else:
                Z, Y = proposals(k)
            inside = contains(Y)  # on this thread only: a user's oracle need not be thread-safe
            U = Z[inside]
            out.kept.add(U, k, inside)
            out.sums.add(U)
            out.proposals += rows
            out.hits += U.shape[0]
            k += 1
        for f in pending:
            f.cancel()
    return out


def measure(problem, solution: dict, *, limits: dict | None = None, settings: dict | None = None,
            oracle: str | None = None, deadline: float | None = None) -> Draws | None:
    """The certificate's draws for ``solution`` (None when the estimate is not a valid distribution):
    the solver takes its alpha_hat from them and hands them back to :func:`check`."""
    lim = resolved_limits(limits)
    est = estimate_of(problem, solution)
    if not all(c.holds for c in validity_checks(est)):
        return None
    return draw(problem, est, _membership(problem, settings or {}, oracle), tol=float(lim["tol"]), deadline=deadline)


def _holdout_rows(solution, settings, n: int, share) -> tuple[np.ndarray, list[Check]]:
    raw = solution.get("holdout_rows")
    if raw is None or (isinstance(raw, list) and not raw):
        return np.zeros(0, dtype=np.int64), []
    if not isinstance(raw, list) or not all(isinstance(v, int) and not isinstance(v, bool) for v in raw):
        raise ValueError("solution 'holdout_rows' must be a list of row numbers")
    rows = np.asarray(raw, dtype=np.int64)
    if rows.min() < 0 or rows.max() >= n or np.unique(rows).size != rows.size:
        raise ValueError(f"solution 'holdout_rows' must be distinct rows in [0, {n})")
    allowed = 0 if not share else max(1, int(round(float(share) * n)))
    checks = [Check.at_most("holdout_rows", int(rows.size), allowed,
                            f"rows held out of the fit; at most round(holdout n) with holdout = {share or 0:g} "
                            "(give --holdout to verify a solution that holds rows out)")]
    seed = settings.get("seed") if isinstance(settings, dict) else None
    if isinstance(seed, int) and not isinstance(seed, bool) and seed >= 0:
        expected = np.sort(np.random.default_rng(seed).permutation(n)[:rows.size])
        same = bool(np.array_equal(np.sort(rows), expected))
    else:
        same = False
    checks.append(Check.require("holdout_rows_drawn", int(rows.size), same,
                                "the rows the solver's rule draws from settings.seed",
                                "a seed selects a random subset, so the rows cannot be picked to suit an estimate"))
    return np.sort(rows), checks


def check(problem, solution: dict, *, method: str | None = None, objective=None, settings: dict | None = None,
          limits: dict | None = None, status: str | None = "optimal", oracle: str | None = None,
          draws: Draws | None = None, deadline: float | None = None, **extra) -> Certificate:
    """The certificate of ``solution`` for ``problem``, judged against ``limits`` (see :data:`LIMITS`).

    ``settings`` (the document's, untrusted) serves only to ask for a missing ``--oracle`` and to
    redraw the held-out rows from its seed; ``method`` is reported, not used. ``draws``: the result
    of :func:`measure` for this solution and limits, when the caller has it already."""
    settings = settings if isinstance(settings, dict) else {}
    lim = resolved_limits(limits)
    tol = float(lim["tol"])
    X = problem["samples"]
    n, d = X.shape
    checks = []
    if status in ("infeasible", "unbounded"):
        checks.append(Check.require("claim_certificate", status, False, "optimal: the only claim this command "
                                    "certifies", f"a truncated-statistics estimate has no certificate of being "
                                    f"{status}: its samples lie in the set, so the likelihood exists"))
    try:
        est = estimate_of(problem, solution)
    except (KeyError, ValueError, TypeError) as exc:
        what = "rates" if problem.get("family") == "exponential" else "mean and covariance"
        return Certificate(checks + [Check.require("solution_shape", None, False,
                                                   f"{what} of the problem's dimension d = {d}", str(exc))])
    try:
        rows, hold = _holdout_rows(solution, settings, n, lim["holdout"])
    except (ValueError, TypeError) as exc:
        return Certificate(checks + [Check.require("holdout_rows", None, False,
                                                   f"a list of distinct rows in [0, {n})", str(exc))])
    checks += hold + validity_checks(est)
    if not checks[-1].holds:
        return Certificate(checks)
    fit = np.setdiff1d(np.arange(n), rows) if rows.size else None  # None: every row, read by slices
    if draws is None:
        draws = draw(problem, est, _membership(problem, settings, oracle), tol=tol, deadline=deadline)
    checks += _alpha_checks(solution, draws, lim)  # alpha_hat and its interval alone with fewer than 10 hits
    if draws.hits < 10:
        return Certificate(checks + [Check.at_least("accepted_draws", draws.hits, 10, "draws of the estimate that "
                                                    f"fell in the set, of {draws.proposals}: too few for its gradient")])
    mom = sample_moments(X, rows=fit, second=est.family != "exponential")
    checks += _gradient_checks(est, draws, mom, statistics_count(est.family, d), tol, n - rows.size)
    checks += _likelihood_checks(problem, est, mom, draws, lim, objective, status)
    if rows.size:
        held = _nll(est, sample_moments(X, rows=rows, second=est.family != "exponential")) + math.log(draws.alpha)
        checks.append(Check.info("holdout_nll", held, f"truncated NLL of the {rows.size} held-out samples"))
    return Certificate(checks)


def _alpha_checks(solution: dict, draws: Draws, lim: dict) -> list[Check]:
    """alpha_hat and its interval from the certificate's draws, and the reported ones against them (within
    NOISE_Z standard errors of log alpha_hat)."""
    hits, proposals, a_hat = draws.hits, draws.proposals, draws.alpha
    note = f"p_hat(S) from {proposals} fresh proposals ({hits} in the set)"
    if draws.cut:
        note += f"; the draws were cut by the time limit before the {draws.wanted} wanted"
    checks = [Check.info("alpha_hat", a_hat, note),
              Check.info("alpha_interval", list(clopper_pearson(hits, proposals)) if proposals else None,
                         "exact (Clopper-Pearson) 95% interval")]
    if hits < 10:
        return checks
    allowance = NOISE_Z * draws.log_alpha_se + float(lim["objective_rtol"])
    interval = solution.get("alpha_interval")
    if interval is not None:  # a reported interval is a claim: its ends are those of p_hat's, within the noise
        lo_hi = clopper_pearson(hits, proposals)
        try:
            diff = max(abs(math.log(float(c)) - math.log(float(r))) for c, r in zip(interval, lo_hi, strict=True))
        except (TypeError, ValueError, ArithmeticError):
            diff = math.inf
        checks.append(Check.at_most("alpha_interval_difference", diff, allowance,
                                    "largest |log reported end - log end from these draws| of the 95% interval"))
    reported = solution.get("alpha_hat")
    if reported is not None:
        diff = abs(math.log(reported) - math.log(a_hat)) if _finite(reported) and reported > 0 else math.inf
        checks.append(Check.at_most("alpha_hat_difference", diff, allowance,
                                    f"|log reported alpha_hat ({reported!r}) - log alpha_hat of these draws|; the "
                                    f"limit is {NOISE_Z:g} standard errors of the latter"))
    return checks


def _gradient_checks(est: Estimate, draws: Draws, mom: SampleMoments, p: int, tol: float, m: int) -> list[Check]:
    """The truncated NLL's gradient at the estimate (p statistics), g' F^-1 g, against its noise plus tol p / m."""
    Nc = draws.hits
    G, g, trace, solved = _gradient_statistic(est, draws, mom)
    limit = gradient_limit(p, Nc, tol, m)
    note = (f"g' F^-1 g of the truncated NLL's gradient at the estimate, F the covariance of T over {Nc} fresh draws "
            f"in the set (p = {p}); the limit is their noise plus tol p / m (tol = {tol:g}, m = {m} fitted samples)")
    if solved is None or solved.converged:
        checks = [Check.at_most("gradient_statistic", G, limit, note + (
            f"; F^-1 g by {solved.iterations} conjugate-gradient steps (relative residual {solved.residual:.2g})"
            if solved is not None else ""))]
    else:
        checks = [Check.require("gradient_statistic", None, False, f"at most {limit:.6g}: " + note,
                                f"not computed: {solved.reason}")]
    checks.append(Check.info("gradient_norm", float(np.linalg.norm(g)),
                             "Euclidean norm of the gradient, in coordinates whitened by the estimate"))
    checks.append(Check.info("gradient_standard_error", float(np.sqrt(max(trace, 0.0) / Nc)),
                             "of that norm, from the draws"))
    return checks


def _likelihood_checks(problem, est: Estimate, mom: SampleMoments, draws: Draws, lim: dict, objective,
                       status) -> list[Check]:
    """The reported objective against the truncated NLL (its normaliser from the draws), and the estimate inside
    the region L(theta) <= L(theta0) + R of the samples' own fit theta0."""
    checks = []
    L1 = _nll(est, mom)
    nll = L1 + math.log(draws.alpha)
    rtol, atol = float(lim["objective_rtol"]), float(lim["objective_atol"])
    if objective is not None or status == "optimal":
        diff = abs(float(objective) - nll) if _finite(objective) else math.inf
        checks.append(Check.at_most("objective_difference", diff,
                                    rtol * abs(nll) + atol + NOISE_Z * draws.log_alpha_se,
                                    f"|reported objective - truncated NLL of the fitted samples ({nll:.10g}, the "
                                    f"normaliser from these draws)|; the limit is objective_rtol |NLL| + "
                                    f"objective_atol + {NOISE_Z:g} standard errors of log alpha_hat"))
    m0 = _naive(est.family, mom, np.asarray(problem["cov"], dtype=float) if "cov" in problem else None)
    L0 = _nll(m0, mom)
    if lim["radius"] is None:
        checks.append(Check.info("region_excess", L1 - L0, "L(estimate) - L(theta0): the least R of a region "
                                 "L(theta) <= L(theta0) + R that holds the estimate (judged with --radius)"))
    else:
        R = float(lim["radius"])
        checks.append(Check.at_least("region_slack", L0 + R - L1, -rtol * (1.0 + abs(L0)) - atol,
                                     f"L(theta0) + R - L(estimate), at least 0 inside the region (R = {R:.6g})"))
    return checks


def _gradient_statistic(est: Estimate, draws: Draws, mom: SampleMoments):
    """(G, g, trace of F, the conjugate-gradient :class:`fisher.Solve` or None where F was solved densely)."""
    if draws.kept is not None:
        ubar, M = _whitened(est, mom)
        workers = block_workers()
        with one_blas_thread(workers):
            g, trace, solved = gaussian_statistic(draws.kept, draws.sums, ubar, M, workers)
        return solved.value, g, trace, solved
    Nc = draws.hits
    draw_mean = draws.s1 / Nc
    F = draws.s2 / Nc - np.outer(draw_mean, draw_mean)
    g = draw_mean - _mean_stats(est, mom)
    G = float(g @ np.linalg.lstsq(F, g, rcond=1e-12)[0])
    return G, g, float(np.maximum(np.diag(F), 0.0).sum()), None


def _finite(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
