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

from optsolve.core import memory
from optsolve.core.errors import OptsolveError, ParameterError
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.core.options import Option, check, count, positive
from optsolve.core.solve import Job, Solver, run
from optsolve.truncated.methods import METHODS, bootstrap_intervals
from optsolve.truncated.problems import SCHEMA, prepare

DEFAULT_METHOD = "newton"


class BudgetError(OptsolveError):
    """The oracle budget ends before a first estimate exists."""

    exit_code = 5
    status = "max_iter"


# Share of --time-limit kept for the certificate's draws (the estimate and the bootstrap get the rest).
CERTIFICATE_TIME_SHARE = 0.2


OPTIONS = (Option("tol", low=0, high=1, low_open=True), positive("radius"), count("max_evals"),
           count("bootstrap", 0), Option("holdout", low=0, high=1, low_open=True, high_open=True),
           Option("objective_rtol", low=0), Option("objective_atol", low=0), count("seed", 0))


def _check_max_iter(max_iter):
    if max_iter is not None:
        raise ParameterError("The '--max-iter' option does not apply to optsolve truncated: its work is oracle calls; "
                             "use '--max-evals N'.")


def _check_sizes(tp, method, tol, bootstrap) -> None:
    """Refuse, before any draw, options whose draws or resamples would pass the memory budget."""
    from optsolve.truncated.newton import FINAL_ESS, KEPT_PER_EFFECTIVE, final_target, kept_target, pool_bytes

    if "newton" in METHODS[method].tags:
        target = final_target(tp.family.p, tp.n, None if tol is None else 1.0 / tol)
        kept = KEPT_PER_EFFECTIVE * kept_target(tp.family.p, target)
        if pool_bytes(kept, tp.d) > memory.budget_bytes():
            raise memory.refusal(f"The '--tol' option ({tol if tol is not None else 1.0 / FINAL_ESS:g})",
                                 f"{kept:.3g} kept draws of the estimate in d = {tp.d} (for n / tol = {target:.3g} "
                                 "effective draws)", pool_bytes(kept, tp.d))
    if bootstrap:
        nbytes = 8.0 * bootstrap * (tp.d + tp.d * tp.d)
        memory.require(f"The '--bootstrap' option ({bootstrap})", f"{bootstrap} resampled estimates in d = {tp.d}",
                       nbytes)


def _certificate_limits(job) -> dict:
    """The certificate's limits, as the finish resolved them into the settings (no radius for a method that
    keeps to no region)."""
    from optsolve.truncated import certificate

    limits = {lim.name: job.settings.get(lim.name) for lim in certificate.LIMITS}
    if "region" not in METHODS[job.method].tags:
        limits["radius"] = None
    return limits


class TruncatedSolver(Solver):
    blas_threads = 1  # its default thread count: see "BLAS threads" in docs/benchmarks.md
    command = "truncated"
    methods = METHODS
    default_method = DEFAULT_METHOD

    def setup(self, problem, method, options, deadline, progress) -> Job:
        from optsolve.truncated import certificate

        o = check(OPTIONS, options)
        _check_max_iter(o["max_iter"])
        tp = prepare(problem, o["oracle"])
        _check_sizes(tp, method, o["tol"], o["bootstrap"])
        if o["bootstrap"] and getattr(METHODS[method], "fit", None) is None:
            raise ParameterError(f"The '--bootstrap' option applies to methods with an estimator to run again on "
                                 f"resamples ({', '.join(n for n, e in METHODS.items() if getattr(e, 'fit', None))}); "
                                 f"got method {method!r}.")
        seed = 0 if o["seed"] is None else int(o["seed"])
        rng = np.random.default_rng(seed)
        fit_rows = np.arange(tp.n)
        held = None
        if o["holdout"]:
            perm = rng.permutation(tp.n)  # the certificate redraws these rows from the seed
            k = max(1, int(round(o["holdout"] * tp.n)))
            held, fit_rows = np.sort(perm[:k]), np.sort(perm[k:])
            if fit_rows.size < tp.d + 2:
                raise ParameterError(f"The '--holdout' option leaves {fit_rows.size} samples to fit; too few for "
                                     f"d = {tp.d}.")
        counter = tp.oracle()
        alpha0 = None
        max_evals = o["max_evals"]
        if "measures_alpha0" in METHODS[method].tags:  # by the certificate's seeded draws (verify finds one R_0)
            alpha0 = certificate.initial_mass(problem, tp.membership, most=max_evals)
            counter.calls += alpha0[1]
            if not alpha0[0] and alpha0[1] < sum(certificate.ALPHA0_DRAWS):
                raise BudgetError(f"The oracle budget of {max_evals} calls (--max-evals) ends before "
                                  f"alpha_0 is measured: {alpha0[1]} proposals of the samples' own fit gave no "
                                  f"point in the set, and the next batch has {certificate.ALPHA0_DRAWS[1]}.")
        settings = {"tol": o["tol"], "radius": o["radius"], "holdout": o["holdout"],
                    "objective_rtol": o["objective_rtol"], "objective_atol": o["objective_atol"],
                    "max_evals": max_evals, "seed": seed, "bootstrap": o["bootstrap"], "oracle": o["oracle"]}
        # the estimate and the bootstrap stop at their share of the time limit, the certificate's draws at the limit
        context = {"fit_rows": fit_rows, "held": held, "rng": rng, "counter": counter,
                   "alpha0": alpha0,
                   "estimate_deadline": deadline.share(1.0 - CERTIFICATE_TIME_SHARE)}
        return Job(method, tp, settings, problem.info(n=tp.n, d=tp.d), deadline=deadline, progress=progress,
                   context=context)

    def finish(self, job, out):
        """The bootstrap's intervals, the settings and limits the run's radius completes, and alpha_hat (with the
        objective it completes) from the certificate's seeded draws at the estimate."""
        from optsolve.truncated import certificate
        from optsolve.truncated.methods import TruncatedOutput

        if not isinstance(out, TruncatedOutput):  # a plain output: no theta, so no objective
            out = TruncatedOutput(out.status, out.solution, out.message, out.objective, out.iterations,
                                  out.evaluations, out.stats, out.arrays)

        tp, settings, c = job.data, job.settings, job.context
        resamples = settings["bootstrap"]
        if resamples:
            intervals, done, late = bootstrap_intervals(tp, c["fit_rows"], METHODS[job.method].fit, c["rng"],
                                                        int(resamples), tol=settings["tol"], radius=settings["radius"],
                                                        deadline=c["estimate_deadline"].at, oracle=c["counter"])
            out.solution.update(intervals)
            out.stats["bootstrap_resamples"] = done
            out.evaluations = c["counter"].calls
            if late:
                out.add_message(f"The time limit stopped the bootstrap with {done} of {resamples} resamples estimated.")
                if out.status is Status.OPTIMAL:
                    out.status = Status.TIME_LIMIT
            elif done < resamples:
                out.add_message(f"The bootstrap intervals come from {done} of {resamples} resamples (the others gave "
                                "no estimate).")
        keeps_region = "region" in METHODS[job.method].tags
        radius = getattr(out, "radius", None)
        limits = {"tol": settings["tol"] if settings["tol"] is not None else certificate.DEFAULT_TOL,
                  "radius": (settings["radius"] if radius is None else radius) if keeps_region else None,
                  "holdout": settings["holdout"], "objective_rtol": settings["objective_rtol"],
                  "objective_atol": settings["objective_atol"]}
        limits = certificate.resolved_limits(limits)
        # the settings the run resolved: the certificate's limits, the radius the region ended with
        settings.update(limits, radius=limits["radius"] if keeps_region else settings["radius"])
        if out.solution is not None:
            self._measure_alpha(job, out, limits)  # as _certificate_limits reads them back
        return out

    def _measure_alpha(self, job, out, limits: dict) -> None:
        """alpha_hat and its interval from the certificate's seeded draws (the same draws verify makes), and the
        objective they complete: the truncated NLL of the fitted samples with log alpha_hat as its normaliser."""
        from optsolve.truncated import certificate
        from optsolve.truncated.sampling import clopper_pearson

        tp, c, solution = job.data, job.context, out.solution
        started = time.perf_counter()
        draws = out.draws = certificate.measure(job.problem, solution, limits=limits, settings=job.settings,
                                                oracle=job.settings["oracle"], deadline=job.deadline.at)
        out.stats.setdefault("time_s", {})["alpha_draws"] = time.perf_counter() - started  # stats.time_s
        measured = draws is not None and draws.hits
        solution["alpha_hat"] = draws.alpha if measured else None
        solution["alpha_interval"] = list(clopper_pearson(draws.hits, draws.proposals)) if measured else None
        if measured and out.theta is not None:
            Tbar = out.Tbar if out.Tbar is not None else tp.mean_statistics(c["fit_rows"])
            logdet = float(np.log(np.abs(np.diag(tp.scale))).sum())
            out.objective = float(-out.theta @ Tbar + tp.family.A(out.theta) - tp.mean_log_h(c["fit_rows"]) + logdet
                                  + math.log(draws.alpha))
        if draws is not None:
            out.stats["certificate_proposals"] = draws.proposals
            if draws.cut:
                out.add_message(f"The time limit cut the certificate's draws at {draws.hits} of the {draws.wanted} "
                                "accepted draws wanted.")
                if out.status is Status.OPTIMAL:
                    out.status = Status.TIME_LIMIT

    def certify(self, job, result, out):
        """The checks, on the draws the finish made."""
        from optsolve.truncated import certificate

        return certificate.check(job.problem, result.solution, method=job.method, objective=result.objective,
                                 settings=job.settings, limits=_certificate_limits(job), status=result.status.value,
                                 oracle=job.settings["oracle"], draws=out.draws)


SOLVER = TruncatedSolver()


def solve_problem(problem, *, method: str | None = None, tol: float | None = None, radius: float | None = None,
                  max_evals: int | None = None, bootstrap: int | None = None, holdout: float | None = None,
                  objective_rtol: float | None = None, objective_atol: float | None = None,
                  oracle: str | None = None, seed: int | None = None, max_iter: int | None = None,
                  time_limit: float | None = None, device: str = "auto", progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.truncated.problems.SCHEMA`); the certificate is attached.

    ``tol``: the Monte-Carlo error allowed in the newton estimate, as a fraction of the data's
    own statistical error (the final importance-weighted draws have an effective size n / tol;
    default 0.125); ``radius``: R (default log(1/alpha_0) + 2); ``max_evals``: the oracle
    budget (status max_iter when spent, the estimate so far returned); ``bootstrap``: B
    resamples of the data, each estimated again, for 95% intervals; ``holdout``: a fraction of
    the samples kept out of the fit, for the certificate's held-out NLL; ``objective_rtol``,
    ``objective_atol``: the certificate's tolerances on the reported objective; ``oracle``:
    ``module:function``, a vectorised membership function used instead of the file's set.
    ``time_limit`` holds for the whole solve: the estimate and the bootstrap stop at 80% of it,
    the certificate's draws at the limit (status time_limit when they are cut).
    """
    return run(SOLVER, problem, method=method, device=device, time_limit=time_limit, progress=progress, tol=tol,
               radius=radius, max_evals=max_evals, bootstrap=bootstrap, holdout=holdout,
               objective_rtol=objective_rtol, objective_atol=objective_atol, oracle=oracle, seed=seed,
               max_iter=max_iter)


def solve(samples, truncation_set=None, *, family: str = "gaussian", cov=None, method: str = DEFAULT_METHOD,
          progress: Progress = SILENT, **options) -> Result:
    """Estimate a distribution from samples that were only observed inside a set.

    Parameters
    ----------
    samples : array_like of shape (n, d)
        The observed samples, all inside the set.
    truncation_set : dict, optional
        The set's description (``{"type": "halfspace", "a": [...], "b": ...}``, a box, a ball, ...; see
        :mod:`optsolve.truncated.sets`), whose membership is the oracle.
    family : str, default="gaussian"
        The family estimated: ``gaussian`` (mean and covariance), ``gaussian-mean`` (the mean, with the
        covariance ``cov`` known) or ``exponential`` (independent exponential coordinates).
    cov : array_like of shape (d, d), optional
        The known covariance (family ``gaussian-mean``).
    method : str, default="newton"
        ``newton``, ``psgd``, ``dgtz`` or ``naive``.
    **options
        Any option of :func:`solve_problem` (``tol``, ``max_evals``, ``seed``, ``time_limit``, ...).

    Returns
    -------
    optsolve.core.result.Result
        Status, objective, certificate, stats and settings, as every command's; its ``solution`` holds
        the parameters, ``alpha_hat`` and its interval.

    Raises
    ------
    optsolve.core.errors.InputError, optsolve.core.errors.ParameterError
        Bad data (the message names the field) or an option the method does not accept.
    """
    raw = {"samples": samples, "family": family}
    if truncation_set is not None:
        raw["set"] = truncation_set
    if cov is not None:
        raw["cov"] = cov
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, progress=progress, **options)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
