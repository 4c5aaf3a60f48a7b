"""The methods of ``optsolve truncated``: ``METHODS[name]`` is the method's entry, a
:class:`TruncatedEntry`: its estimator ``fit`` on rows of the whitened samples (:func:`newton_fit`,
:func:`sgd_fit`'s projected SGDs, or :func:`naive_fit`'s empirical moments); its function of the job,
which runs that estimator on the fitted rows and returns a :class:`TruncatedOutput`: the estimate in the
original coordinates as the solution, its natural parameters ``theta`` in the whitened ones (the finish and
the certificate start from them); its help line; and its tags: ``region`` (it keeps to the paper's region
of radius R, which the certificate then checks), ``measures_alpha0`` (it needs alpha_0, the samples' own
fit's mass on the set, measured before it starts), ``newton`` (its draws are sized by ``--tol``).
:func:`bootstrap_intervals` runs the same estimator again on resamples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from optsolve.core.errors import SolverError
from optsolve.core.result import Status
from optsolve.core.solve import Entry, Job, MethodOutput


STOPS = {"converged": Status.OPTIMAL, "budget": Status.MAX_ITER, "max_batches": Status.MAX_ITER,
         "limit": Status.MAX_ITER, "time_limit": Status.TIME_LIMIT, "collapse": Status.NUMERICAL_ERROR,
         "runoff": Status.NUMERICAL_ERROR, "interrupted": Status.INTERRUPTED}


@dataclass
class TruncatedOutput(MethodOutput):
    """A truncated method's output: ``theta``, the estimate's natural parameters in the whitened coordinates;
    ``Tbar``, the fitted rows' mean statistics where the method computed them (None: recomputed); ``radius``,
    the region's radius R it ended with (None: the setting's); ``draws``: set by the finish."""

    theta: np.ndarray | None = None
    Tbar: np.ndarray | None = None
    radius: float | None = None
    draws: object = None  # the certificate's seeded draws at the estimate, measured by the finish


def _mean_statistics(tp, rows):
    every = rows.size == tp.n and bool((rows == np.arange(tp.n)).all())
    return tp.mean_statistics(None if every else rows)


def naive_fit(tp, rows, rng, **_) -> dict:
    """The empirical moments of the samples' rows ``rows`` (whitened)."""
    Tbar = _mean_statistics(tp, rows)
    theta0 = tp.family.from_moments(Tbar)
    return {"theta": theta0, "theta0": theta0, "Tbar": Tbar, "stop": "converged", "reason": "", "samples_drawn": 0}


def newton_fit(tp, rows, rng, *, tol, radius, max_calls, deadline, progress, oracle, alpha0=None) -> dict:
    """:func:`optsolve.truncated.newton.fit` on the samples' rows ``rows`` (whitened)."""
    from optsolve.truncated import newton

    return newton.fit(tp.family, _mean_statistics(tp, rows), rows.size, oracle, rng, max_calls=max_calls,
                      radius=radius, final_ess=None if tol is None else 1.0 / tol, deadline=deadline,
                      progress=progress, alpha0=alpha0)


def sgd_fit(name: str) -> Callable:
    """:func:`optsolve.truncated.sgd.run` with the method ``name`` ('psgd' or 'dgtz') on the samples' rows."""

    def fit(tp, rows, rng, *, tol, radius, max_calls, deadline, progress, oracle, alpha0=None) -> dict:
        from optsolve.truncated import sgd

        return sgd.run(name, tp.family, tp.Z[rows], oracle, rng, max_calls=max_calls, radius=radius,
                       deadline=deadline, progress=progress, alpha0=alpha0)

    return fit


def _method(fit: Callable):
    """A method of the job: ``fit`` on the job's samples (see :class:`TruncatedEntry`), as a method's output."""

    def solve_with(job: Job) -> MethodOutput:
        tp, settings, c = job.data, job.settings, job.context
        try:
            found = fit(tp, c["fit_rows"], c["rng"], tol=settings["tol"], radius=settings["radius"],
                        max_calls=settings["max_evals"], deadline=c["estimate_deadline"].at, progress=job.progress,
                        oracle=c["counter"], alpha0=c["alpha0"])
        except np.linalg.LinAlgError as exc:
            raise SolverError(f"The {job.method} estimate failed numerically ({exc}); the samples may be too badly "
                              "scaled or too few for their dimension.") from None
        theta = found["theta"]
        messages = [text[0].upper() + text[1:] + "." for text in found.get("notes", []) + [found["reason"]] if text]
        if not tp.family.valid(theta):
            raise SolverError(" ".join(messages + ["The estimate is not a valid distribution of the family."]))
        solution = {k: np.asarray(v).tolist() for k, v in tp.to_original(theta).items()}
        if c["held"] is not None:
            solution["holdout_rows"] = c["held"].tolist()
        # iterations: Newton steps over all batches (newton), SGD steps (psgd, dgtz), none (naive);
        # evaluations: membership-oracle calls, the papers' measure of work
        steps = sum(b["newton_steps"] for b in found["batches"]) if "batches" in found else found.get("steps", 0)
        stats = {"n": tp.n, "d": tp.d, "family": tp.family.name, "samples_drawn": int(found.get("samples_drawn", 0))}
        for key in ("alpha0", "radius", "radius_doublings", "ess"):
            if key in found:
                stats[key] = found[key]
        if "batches" in found:
            stats["batches"] = found["batches"]
        return TruncatedOutput(STOPS[found["stop"]], solution, " ".join(messages), iterations=int(steps),
                               evaluations=c["counter"].calls, stats=stats, theta=theta, Tbar=found.get("Tbar"),
                               radius=found.get("radius"))

    return solve_with


@dataclass(frozen=True)
class TruncatedEntry(Entry):
    """An entry of truncated's ``METHODS``: :class:`~optsolve.core.solve.Entry` with its ``fit``, the estimator
    ``fit(tp, rows, rng, *, tol, radius, max_calls, deadline, progress, oracle, alpha0=None)`` on the samples' rows
    ``rows`` (whitened), returning a dict with theta, stop, reason and counts; the method runs it on the fitted
    rows, and ``--bootstrap`` again on resamples of them."""

    fit: Callable | None = None


def truncated_method(fit: Callable, help: str, tags=()) -> TruncatedEntry:
    """The entry of a method that is the estimator ``fit``."""
    return TruncatedEntry(_method(fit), help, {}, frozenset(tags), (), fit)


METHODS = {
    "newton": truncated_method(newton_fit, "Newton / Fisher-scoring steps on the truncated NLL inside the paper's "
                               "region, expectations from rejection draws reused by importance weights (the default)",
                               tags=("region", "measures_alpha0", "newton")),
    "psgd": truncated_method(sgd_fit("psgd"), "the paper's projected SGD (lr 0.1, batches of 10)",
                             tags=("region", "measures_alpha0")),
    "dgtz": truncated_method(sgd_fit("dgtz"), "Daskalakis et al. 2018 projected SGD in its tuned form",
                             tags=("measures_alpha0",)),
    "naive": truncated_method(naive_fit, "the empirical mean and covariance"),
}


def bootstrap_intervals(tp, rows, fit, rng, B, *, tol, radius, deadline, oracle) -> tuple[dict, int, bool]:
    """95% percentile intervals of the parameters over B resamples of the fitted rows, each estimated by ``fit`` (a
    :class:`TruncatedEntry`'s; the resamples finished before the deadline), how many resamples gave an estimate,
    and whether the deadline stopped them."""
    draws = []
    late = False
    for _ in range(B):
        if deadline is not None and time.perf_counter() > deadline:
            late = True
            break
        pick = rows[rng.integers(0, rows.size, size=rows.size)]
        try:
            run = fit(tp, pick, rng, tol=tol, radius=radius, max_calls=None, deadline=deadline, progress=None,
                      oracle=oracle)
        except np.linalg.LinAlgError:  # a resample with repeated rows can be singular: it is skipped
            continue
        if run["stop"] == "time_limit":
            late = True
            break
        if tp.family.valid(run["theta"]):
            draws.append(tp.to_original(run["theta"]))
    if not draws:
        return {}, 0, late
    out = {}
    for key in draws[0]:
        if key == "covariance" and tp.known_cov is not None:
            continue
        vals = np.array([np.diag(dr[key]) if key == "covariance" else dr[key] for dr in draws])
        lo, hi = np.percentile(vals, [2.5, 97.5], axis=0)
        name = "variance_interval" if key == "covariance" else f"{key}_interval"
        out[name] = np.column_stack([lo, hi]).tolist()
    return out, len(draws), late
