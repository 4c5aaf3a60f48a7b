"""``optsolve truncated``: estimation from truncated samples (Karatapanis, Kontonis and Tzamos,
ICLR 2025).

Samples of p* are seen only where they fall in a survival set S, known through a membership
oracle. Methods: ``newton`` (default: Newton / Fisher-scoring steps inside the paper's region
L(theta) <= L(theta0) + R, rejection draws reused by importance weights, see
:mod:`optsolve.truncated.newton`), ``psgd`` (the paper's projected SGD), ``dgtz`` (Daskalakis
et al. 2018, tuned; see :mod:`optsolve.truncated.sgd`) and ``naive`` (the empirical moments).
Every method works in coordinates whitened by the empirical moments and reports the
estimate in the original ones, with alpha_hat = p_theta(S) at the estimate (a fresh batch of
proposals, Clopper-Pearson interval) and the oracle calls spent.
"""

from __future__ import annotations

import math
import time

import numpy as np

from optsolve.core.errors import ParameterError
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.truncated.problems import SCHEMA, prepare

DEFAULT_METHOD = "newton"
METHODS = ("newton", "psgd", "dgtz", "naive")
STOPS = {"converged": Status.OPTIMAL, "budget": Status.MAX_ITER, "max_batches": Status.MAX_ITER,
         "time_limit": Status.TIME_LIMIT, "collapse": Status.NUMERICAL_ERROR, "interrupted": Status.INTERRUPTED}


def _check_options(method, tol, radius, max_oracle_calls, bootstrap, holdout, max_iter):
    if method not in METHODS:
        raise ParameterError(f"Unknown method {method!r}; expected one of {sorted(METHODS)}")
    if tol is not None and not 0 < tol <= 1:
        raise ParameterError(f"The '--tol' option must be a number in (0, 1]; got {tol!r}.")
    if radius is not None and not radius > 0:
        raise ParameterError(f"The '--radius' option must be a positive number; got {radius!r}.")
    if max_oracle_calls is not None and max_oracle_calls < 1:
        raise ParameterError(f"The '--max-oracle-calls' option must be a positive integer; got {max_oracle_calls!r}.")
    if bootstrap is not None and bootstrap < 0:
        raise ParameterError(f"The '--bootstrap' option must be a nonnegative integer; got {bootstrap!r}.")
    if holdout is not None and not 0 < holdout < 1:
        raise ParameterError(f"The '--holdout' option must be a fraction in (0, 1); got {holdout!r}.")
    if max_iter is not None:
        raise ParameterError("The '--max-iter' option does not apply to optsolve truncated: its work is oracle calls; "
                             "use '--max-oracle-calls N'.")


def estimate(tp, Z, method, rng, *, tol, radius, max_calls, deadline, progress, oracle):
    """One run of ``method`` on whitened samples Z: a dict with theta, stop, reason and counts."""
    from optsolve.truncated import newton, sgd

    if method == "naive":
        n = Z.shape[0]
        theta0 = tp.family.from_moments(tp.family.moments(Z, np.full(n, 1.0 / n)))
        return {"theta": theta0, "theta0": theta0, "stop": "converged", "reason": "", "samples_drawn": 0}
    if method == "newton":
        return newton.fit(tp.family, Z, oracle, rng, max_calls=max_calls, radius=radius,
                          final_ess=None if tol is None else 1.0 / tol, deadline=deadline, progress=progress)
    return sgd.run(method, tp.family, Z, oracle, rng, max_calls=max_calls, radius=radius, deadline=deadline,
                   progress=progress)


def solve_problem(problem, *, method: str | None = None, tol: float | None = None, radius: float | None = None,
                  max_oracle_calls: int | None = None, bootstrap: int | None = None, holdout: float | None = None,
                  oracle: str | None = None, seed: int | None = None, max_iter: int | None = None,
                  time_limit: float | None = None, device: str = "auto", progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.truncated.problems.SCHEMA`); the certificate is attached.

    ``tol``: the Monte-Carlo error allowed in the newton estimate, as a fraction of the data's
    own statistical error (the final importance-weighted draws have an effective size n / tol;
    default 0.125); ``radius``: R (default log(1/alpha_0) + 2); ``max_oracle_calls``: the oracle
    budget (status max_iter when spent, the estimate so far returned); ``bootstrap``: B
    resamples of the data, each estimated again, for 95% intervals; ``holdout``: a fraction of
    the samples kept out of the fit, for the certificate's held-out NLL; ``oracle``:
    ``module:function``, a vectorised membership function used instead of the file's set.
    """
    from optsolve.truncated import certificate
    from optsolve.truncated.sampling import clopper_pearson, survival_mass

    if device == "gpu":
        raise ParameterError("optsolve truncated runs on the CPU; use '--device cpu' (or auto).")
    method = method or DEFAULT_METHOD
    _check_options(method, tol, radius, max_oracle_calls, bootstrap, holdout, max_iter)
    t0 = time.perf_counter()
    deadline = None if time_limit is None else time.monotonic() + float(time_limit)
    tp = prepare(problem, oracle)
    seed = 0 if seed is None else int(seed)
    rng = np.random.default_rng(seed)
    fit_rows = np.arange(tp.n)
    held = None
    if holdout:
        perm = rng.permutation(tp.n)
        k = max(1, int(round(holdout * tp.n)))
        held, fit_rows = np.sort(perm[:k]), np.sort(perm[k:])
        if fit_rows.size < tp.d + 2:
            raise ParameterError(f"The '--holdout' option leaves {fit_rows.size} samples to fit; too few for d = {tp.d}.")
    Z = tp.Z[fit_rows]
    counter = tp.oracle()
    run = estimate(tp, Z, method, rng, tol=tol, radius=radius, max_calls=max_oracle_calls, deadline=deadline,
                   progress=progress, oracle=counter)
    theta = run["theta"]
    guess = run.get("alpha0", 0.1)
    hits, proposals = survival_mass(tp.family, theta, counter, rng, guess=guess, max_calls=max_oracle_calls)
    alpha_hat = hits / proposals if proposals else None
    interval = list(clopper_pearson(hits, proposals)) if proposals else None
    params = tp.to_original(theta)
    solution = {k: np.asarray(v).tolist() for k, v in params.items()}
    solution["alpha_hat"] = alpha_hat
    solution["alpha_interval"] = interval
    if held is not None:
        solution["holdout_rows"] = held.tolist()
    objective = None
    if alpha_hat:
        n = Z.shape[0]
        Tbar = tp.family.moments(Z, np.full(n, 1.0 / n))
        logdet = float(np.log(np.abs(np.diag(tp.scale))).sum())
        objective = float(-theta @ Tbar + tp.family.A(theta) - tp.family.log_h(Z).mean() + logdet + math.log(alpha_hat))
    status = STOPS[run["stop"]]
    messages = [text[0].upper() + text[1:] + "." for text in run.get("notes", []) + [run["reason"]] if text]
    stats = {"n": tp.n, "d": tp.d, "family": tp.family.name, "oracle_calls": counter.calls,
             "samples_drawn": int(run.get("samples_drawn", 0)), "survival_proposals": proposals}
    for key in ("alpha0", "radius", "radius_doublings", "ess", "steps"):
        if key in run:
            stats[key] = run[key]
    if "batches" in run:
        stats["batches"] = run["batches"]
    if bootstrap:
        solution.update(_bootstrap(tp, fit_rows, method, rng, int(bootstrap), tol=tol, radius=radius,
                                   deadline=deadline, oracle=counter))
        stats["oracle_calls"] = counter.calls
    stats["time_s"] = {"solve": time.perf_counter() - t0}
    settings = {"tol": tol, "radius": run.get("radius", radius), "max_oracle_calls": max_oracle_calls, "seed": seed,
                "bootstrap": bootstrap, "holdout": holdout, "oracle": oracle}
    result = Result("truncated", method, status, " ".join(messages), problem=problem.info(n=tp.n, d=tp.d),
                    objective=objective, solution=solution, stats=stats, settings=settings)
    t = time.perf_counter()
    result.attach_certificate(certificate.check(problem, result.solution, method=method, objective=objective,
                                                settings=settings, oracle=oracle))
    stats["time_s"]["certificate"] = time.perf_counter() - t
    return result


def _bootstrap(tp, rows, method, rng, B, *, tol, radius, deadline, oracle) -> dict:
    """95% percentile intervals of the parameters over B resamples of the fitted rows."""
    draws = []
    for _ in range(B):
        pick = rows[rng.integers(0, rows.size, size=rows.size)]
        run = estimate(tp, tp.Z[pick], method, rng, tol=tol, radius=radius, max_calls=None, deadline=deadline,
                       progress=None, oracle=oracle)
        draws.append(tp.to_original(run["theta"]))
    out = {}
    for key in draws[0]:
        if key == "covariance" and tp.known_cov is not None:
            continue
        vals = np.array([np.diag(dr[key]) if key == "covariance" else dr[key] for dr in draws])
        lo, hi = np.percentile(vals, [2.5, 97.5], axis=0)
        name = "variance_interval" if key == "covariance" else f"{key}_interval"
        out[name] = np.column_stack([lo, hi]).tolist()
    return out


def solve(samples, set=None, *, family: str = "gaussian", cov=None, method: str = DEFAULT_METHOD,
          progress: Progress = SILENT, **options) -> Result:
    """Estimate from ``samples`` (n x d) truncated to ``set`` (a set description, see
    :mod:`optsolve.truncated.sets`). Bad input raises InputError, bad options ParameterError."""
    raw = {"samples": samples, "family": family}
    if set is not None:
        raw["set"] = set
    if cov is not None:
        raw["cov"] = cov
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, progress=progress, **options)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
