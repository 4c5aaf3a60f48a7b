"""``optsolve kmeans``: k-means with predicted labels (Huang et al., ICLR 2025).

Given points and labels predicted by an oracle with error rate alpha, estimate one centre per
predicted cluster robustly (see :mod:`optsolve.kmeans.estimators`), refine them by Lloyd steps that
read only the points whose centre can change (:mod:`optsolve.kmeans.lloyd`), and assign every point
to its nearest centre. Methods: ``sample-centre`` (default), ``sample-window``, ``sort-window``,
``crdest``, ``labels`` (plain centroids) and ``lloyd`` (scikit-learn's KMeans, k-means++ with
n_init = 10, the reference).
"""

from __future__ import annotations

import os

import numpy as np

from optsolve.core import threads
from optsolve.core.errors import ParameterError
from optsolve.core.history import trace
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.core.options import Option, check, count
from optsolve.core.solve import Job, Solver, run, tagged
from optsolve.kmeans.methods import KMEANS_MEASURE, METHODS
from optsolve.kmeans.problems import SCHEMA, prepare

DEFAULT_METHOD = "sample-centre"
# Heavy modules a batch worker imports ahead of its first file (optsolve.core.cluster.preload).
PRELOAD = ("optsolve.kmeans.estimators", "optsolve.kmeans.lloyd", "optsolve.kmeans.certificate")
LLOYD_STEPS = 10  # Lloyd steps at most after an estimator's centres (refine, the default)


OPTIONS = (Option("alpha", low=0, high=0.5, high_open=True, words=("auto",)), count("lloyd_steps", 0),
           count("max_iter"), count("seed", 0), Option("cost_rtol", low=0), Option("cost_atol", low=0),
           Option("assign_tol", low=0), Option("label_cost_slack", low=0))


def _limits(**given) -> dict:
    """The certificate's limits (:data:`optsolve.kmeans.certificate.LIMITS`): the given values, else the defaults."""
    from optsolve.kmeans.certificate import LIMITS

    return {lim.name: float(lim.default if given.get(lim.name) is None else given[lim.name]) for lim in LIMITS}


def _block_workers() -> int:
    """Threads of the passes over the points (blocks of rows, each in one thread, its BLAS calls on one):
    the user's ``--threads``, else every core. Unlike BLAS threads that share one product, they did not
    slow the command on a busy machine (see "BLAS threads" in docs/benchmarks.md)."""
    asked = threads.choose(None)
    return (os.cpu_count() or 1) if asked == threads.ALL else asked


class KMeansSolver(Solver):
    blas_threads = 1  # its default thread count: see "BLAS threads" in docs/benchmarks.md
    command = "kmeans"
    methods = METHODS
    default_method = DEFAULT_METHOD

    def setup(self, problem, method, options, deadline, progress) -> Job:
        o = check(OPTIONS, options)
        alpha = "auto" if o["alpha"] is None else o["alpha"]
        limits = _limits(cost_rtol=o["cost_rtol"], cost_atol=o["cost_atol"], assign_tol=o["assign_tol"],
                         label_cost_slack=o["label_cost_slack"])
        refine, lloyd_steps = o["refine"], o["lloyd_steps"]
        if not isinstance(refine, (bool, np.bool_)):
            raise ParameterError(f"The 'refine' option is True or False (the number of Lloyd steps is "
                                 f"'lloyd_steps'); got {refine!r}.")
        if o["max_iter"] is not None and "iterative" not in METHODS[method].tags:
            takers = " and ".join(f"'--method {m}'" for m in tagged(METHODS, "iterative"))
            raise ParameterError(f"The '--max-iter' option applies to {takers} (KMeans's iteration limit); "
                                 f"{method} is not iterative: '--lloyd-steps N' sets the Lloyd steps after it.")
        allowed = int(lloyd_steps) if refine else 0  # the Lloyd steps allowed after the estimate
        kp = prepare(problem)
        seed = 0 if o["seed"] is None else int(o["seed"])
        settings = {"alpha": alpha, "refine": allowed > 0, "lloyd_steps": int(lloyd_steps), "seed": seed, **limits}
        if o["time_limit"] is not None:
            settings["time_limit"] = float(o["time_limit"])
        context = {"allowed": allowed, "max_iter": o["max_iter"], "limits": limits, "workers": _block_workers()}
        return Job(method, kp, settings, problem.info(m=kp.m, d=kp.d, k=kp.k), deadline=deadline,
                   progress=progress, context=context)

    def finish(self, job, out):
        """Every point assigned to its nearest centre; what the time limit cut short said."""
        from optsolve.kmeans.estimators import assign

        from optsolve.kmeans.methods import KMeansOutput

        typed = out if isinstance(out, KMeansOutput) else KMeansOutput(out.status)  # a plain output: no extras
        kp, empty, timed_out, used = job.data, typed.empty, typed.cut_short, typed.alpha_used
        centres = np.asarray(out.solution["centres"], dtype=float)
        if empty:
            out.add_message(f"Predicted clusters {empty} are empty: their centres are dropped ({centres.shape[0]} "
                            "centres).")
        if timed_out and out.status is Status.OPTIMAL:
            out.status = Status.TIME_LIMIT
            out.add_message(f"Time limit of {job.settings['time_limit']:g} s reached: " + "; ".join(timed_out) + ".")
        if "assignment" in out.solution:
            assignment = out.solution["assignment"]
        else:  # interrupted before the assignment
            assignment, dist = assign(kp.X, centres)
            out.objective = float(dist.sum())
        cost = out.objective
        trace(out.iterations, cost, measure=KMEANS_MEASURE, stage="final")
        job.progress.update(out.iterations, cost=cost, alpha_used=used)
        job.settings["alpha_used"] = used  # the document records the alpha the guarantee is stated for
        out.evaluations = out.stats.pop("distance_rows", None)  # the k-means work: a point against every centre
        out.stats = {"evaluations_of": "distance rows (a point's distances to every centre)", "m": kp.m, "d": kp.d,
                     "k": kp.k, "dtype": str(kp.X.dtype), "block_threads": job.context["workers"], **out.stats,
                     "alpha_used": used, "empty_clusters": empty, "sizes": np.bincount(assignment,
                                                                                       minlength=centres.shape[0])}
        out.solution = {"centres": centres.tolist(), "assignment": assignment}
        return out

    def certify(self, job, result, out):
        from optsolve.kmeans import certificate

        return certificate.check(job.problem, result.solution, method=job.method, objective=result.objective,
                                 settings=job.settings, limits=job.context["limits"], status=result.status.value,
                                 workers=job.context["workers"],
                                 deadline=job.deadline.at)


SOLVER = KMeansSolver()


def solve_problem(problem, *, method: str | None = None, alpha="auto", refine: bool = True,
                  lloyd_steps: int = LLOYD_STEPS, seed: int | None = None,
                  max_iter: int | None = None, time_limit: float | None = None, device: str = "auto",
                  cost_rtol: float | None = None, cost_atol: float | None = None, assign_tol: float | None = None,
                  label_cost_slack: float | None = None, progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.kmeans.problems.SCHEMA`); the certificate is attached.

    ``alpha``: the error rate the estimators trim for, or ``'auto'`` (the grid 0, 0.05, ..., 0.45,
    crdest's 0, 0.02, ..., 0.18: centres estimated from at most 1,000 points of each predicted
    cluster, their cost on at most 20,000 of the points; each cluster's alpha chosen by
    :func:`optsolve.kmeans.methods.choose_alphas`; without Lloyd steps to follow, the clusters with
    more points estimated again on all of them at their alpha, kept when they cost no more on those
    20,000 points);
    ``refine``: at most ``lloyd_steps`` Lloyd steps after the estimate (:func:`optsolve.kmeans.lloyd.lloyd`:
    the predicted labels tried first, bounds that skip the points whose centre cannot change, the points
    in their own precision; they stop when no point changes centre). A Lloyd step never raises the cost,
    so the estimator's guarantee holds for the refined centres too; ``refine=False`` returns the
    estimator's centres (every point then assigned to its nearest);
    ``time_limit``: seconds for the whole solve, certificate included. Past it, the clusters not
    yet estimated get their plain centroid, the alpha grid stops at the values done, the Lloyd
    steps stop, the certificate leaves out what it has no time for (see
    :func:`optsolve.kmeans.certificate.check`), and the status is ``time_limit`` (lloyd: the
    k-means++ starts run one at a time, :func:`optsolve.kmeans.estimators.lloyd_restarts`, the
    cheapest kept);
    ``cost_rtol``, ``cost_atol``, ``assign_tol``, ``label_cost_slack``: the certificate's limits
    (:data:`optsolve.kmeans.certificate.LIMITS`), recorded in the settings.
    """
    return run(SOLVER, problem, method=method, device=device, time_limit=time_limit, progress=progress, alpha=alpha,
               refine=refine, lloyd_steps=lloyd_steps, seed=seed, max_iter=max_iter, cost_rtol=cost_rtol,
               cost_atol=cost_atol, assign_tol=assign_tol, label_cost_slack=label_cost_slack)


def solve(X, labels, *, k: int | None = None, method: str = DEFAULT_METHOD, progress: Progress = SILENT,
          **options) -> Result:
    """k-means from points and their predicted labels.

    Parameters
    ----------
    X : array_like of shape (m, d)
        The points.
    labels : array_like of shape (m,)
        Predicted cluster labels in 0 .. k - 1, wrong for a fraction of the points.
    k : int, optional
        The number of clusters (default ``max(labels) + 1``).
    method : str, default="sample-centre"
        ``sample-centre``, ``sample-window``, ``sort-window``, ``crdest``, ``labels`` or ``lloyd``.
    **options
        Any option of :func:`solve_problem`: ``alpha``, ``refine``, ``lloyd_steps``, ``seed``, ``time_limit``, ...

    Returns
    -------
    optsolve.core.result.Result
        Status, objective, certificate, stats and settings, as every command's; its ``solution`` holds
        ``centres`` and every point's ``assignment``.

    Raises
    ------
    optsolve.core.errors.InputError, optsolve.core.errors.ParameterError
        Bad data (the message names the field) or an option the method does not accept.
    """
    raw = {"X": X, "labels": labels}
    if k is not None:
        raw["k"] = k
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, progress=progress, **options)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
