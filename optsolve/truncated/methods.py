"""The methods of ``optsolve truncated``: ``METHODS[name]`` is the method's entry
(:class:`optsolve.core.solve.Entry`): its function of the job, which runs :func:`estimate` with that
method on the whitened samples (:mod:`optsolve.truncated.newton`, :mod:`optsolve.truncated.sgd`,
or the empirical moments) and returns a :class:`TruncatedOutput`: the estimate in the original
coordinates as the solution, its natural parameters ``theta`` in the whitened ones (the finish and the
certificate start from them); its help line; and its tags: ``region`` (it keeps to the paper's region
of radius R, which the certificate then checks), ``measures_alpha0`` (it needs alpha_0, the samples' own
fit's mass on the set, measured before it starts), ``newton`` (its draws are sized by ``--tol``).
:func:`bootstrap_intervals` estimates again on resamples.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from optsolve.core.errors import SolverError
from optsolve.core.result import Status
from optsolve.core.solve import Job, MethodOutput, entry


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


def estimate(tp, rows, method, rng, *, tol, radius, max_calls, deadline, progress, oracle, alpha0=None):
    """One run of ``method`` on the samples' rows ``rows`` (whitened): a dict with theta, stop, reason and
    counts. ``alpha0``: (accepted, proposals) of the samples' own fit on the set, measured already."""
    from optsolve.truncated import newton, sgd

    if method in ("naive", "newton"):
        every = rows.size == tp.n and bool((rows == np.arange(tp.n)).all())
        Tbar = tp.mean_statistics(None if every else rows)
        if method == "naive":
            theta0 = tp.family.from_moments(Tbar)
            return {"theta": theta0, "theta0": theta0, "Tbar": Tbar, "stop": "converged", "reason": "",
                    "samples_drawn": 0}
        return newton.fit(tp.family, Tbar, rows.size, oracle, rng, max_calls=max_calls, radius=radius,
                          final_ess=None if tol is None else 1.0 / tol, deadline=deadline, progress=progress,
                          alpha0=alpha0)
    return sgd.run(method, tp.family, tp.Z[rows], oracle, rng, max_calls=max_calls, radius=radius,
                   deadline=deadline, progress=progress, alpha0=alpha0)


def _method(name: str):
    """``METHODS[name]``: :func:`estimate` with that method on the job's samples, as a method's output."""

    def solve_with(job: Job) -> MethodOutput:
        tp, settings, c = job.data, job.settings, job.context
        try:
            found = estimate(tp, c["fit_rows"], name, c["rng"], tol=settings["tol"], radius=settings["radius"],
                             max_calls=settings["max_evals"], deadline=c["estimate_deadline"].at, progress=job.progress,
                             oracle=c["counter"], alpha0=c["alpha0"])
        except np.linalg.LinAlgError as exc:
            raise SolverError(f"The {name} estimate failed numerically ({exc}); the samples may be too badly scaled "
                              "or too few for their dimension.") from None
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


METHODS = {
    "newton": entry(_method("newton"), "Newton / Fisher-scoring steps on the truncated NLL inside the paper's region, "
                    "expectations from rejection draws reused by importance weights (the default)",
                    tags=("region", "measures_alpha0", "newton")),
    "psgd": entry(_method("psgd"), "the paper's projected SGD (lr 0.1, batches of 10)",
                  tags=("region", "measures_alpha0")),
    "dgtz": entry(_method("dgtz"), "Daskalakis et al. 2018 projected SGD in its tuned form", tags=("measures_alpha0",)),
    "naive": entry(_method("naive"), "the empirical mean and covariance"),
}


def bootstrap_intervals(tp, rows, method, rng, B, *, tol, radius, deadline, oracle) -> tuple[dict, int, bool]:
    """95% percentile intervals of the parameters over B resamples of the fitted rows (those finished
    before the deadline), how many resamples gave an estimate, and whether the deadline stopped them."""
    draws = []
    late = False
    for _ in range(B):
        if deadline is not None and time.perf_counter() > deadline:
            late = True
            break
        pick = rows[rng.integers(0, rows.size, size=rows.size)]
        try:
            run = estimate(tp, pick, method, rng, tol=tol, radius=radius, max_calls=None, deadline=deadline,
                           progress=None, oracle=oracle)
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
