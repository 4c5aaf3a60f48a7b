"""The methods of ``optsolve mvi``: ``METHODS[name]`` is the method's entry (:class:`MviEntry`): its
algorithm, a function ``(evaluator, setup) -> counts`` that calls F only through the
:class:`~optsolve.mvi.evaluator.Evaluator` and ends by raising or returning its
:class:`~optsolve.mvi.evaluator.Stop` (:mod:`optsolve.mvi.ecppa`, :mod:`optsolve.mvi.extragradient`,
:mod:`optsolve.mvi.stochastic`); its function of the job, :func:`optimize` with that algorithm, which
returns the best point evaluated as a :class:`~optsolve.core.solve.MethodOutput`; its help line; and its
tags, which the option checks read: ``inner_loop`` (``--sigma``, ``--inner-solver``), ``proximal``
(``--inner-steps``; ``--gamma`` within (-rho, 1/L)), ``assumes_rho`` (without a rho it assumes
rho = -0.99 gamma / 2), ``stochastic`` (``--batch``, ``--seed``: it samples the terms of an operator given as a
mean), ``secant`` (a step from L, else from the largest secant seen).
"""

from __future__ import annotations

import importlib
import math
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from optsolve.core.errors import SolverError
from optsolve.core.history import active
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Status
from optsolve.core.solve import Entry, Job, MethodOutput
from optsolve.mvi.operators import norm2

DEFAULT_TOL = 1e-6
DEFAULT_MAX_EVALS = 1_000_000


STOPS = {"converged": Status.OPTIMAL, "budget": Status.MAX_ITER, "max_iter": Status.MAX_ITER,
         "time_limit": Status.TIME_LIMIT, "numerical": Status.NUMERICAL_ERROR, "interrupted": Status.INTERRUPTED}
REASONS = {"budget": "the evaluation budget ({max_evals}) is spent", "max_iter": "the iteration limit is reached",
           "time_limit": "the time limit is reached", "interrupted": "interrupted"}


@dataclass(frozen=True)
class MviEntry(Entry):
    """An entry of mvi's ``METHODS``: :class:`~optsolve.core.solve.Entry` with its ``algorithm``."""

    algorithm: Callable | None = None


def algorithm(module: str, name: str, **fixed) -> Callable:
    """``optsolve.mvi.<module>.<name>(ev, setup, **fixed)``, imported when it first runs."""

    def run_algorithm(ev, setup) -> dict:
        return getattr(importlib.import_module(f"optsolve.mvi.{module}"), name)(ev, setup, **fixed)

    return run_algorithm


def optimize(mp, method: str, *, rho: float | None, gamma=None, relax=None, sigma=None, inner_steps=None, inner="auto",
             batch: int | None = None, seed: int = 0, tol: float = DEFAULT_TOL, max_evals: int = DEFAULT_MAX_EVALS,
             max_iter=None, time_limit=None, deadline: float | None = None, history: bool = False,
             progress: Progress = SILENT):
    """Run ``method`` (a name in :data:`METHODS`) on a prepared problem (:func:`optsolve.mvi.problems.prepare`) with the weak-MVI
    constant ``rho`` (None: unknown); returns the evaluator (counts, best point, history), the
    method's counts and its :class:`~optsolve.mvi.evaluator.Stop`. ``deadline`` (a time.perf_counter
    value) takes precedence over ``time_limit`` (seconds from now)."""
    from optsolve.mvi.evaluator import Setup
    from optsolve.mvi.evaluator import Evaluator, Stop
    from optsolve.mvi.problems import reordered

    if deadline is None and time_limit is not None:
        deadline = time.perf_counter() + float(time_limit)
    mp, order = reordered(mp)
    setup = Setup(mp.z0, mp.L, rho, gamma=gamma, lam=1.0 if relax is None else float(relax), sigma=sigma,
                  inner_steps=inner_steps, max_iter=max_iter, inner=inner, batch=batch, seed=seed)
    ev = Evaluator(mp.op, mp.C, tol=tol, max_evals=max_evals, deadline=deadline, history=history, progress=progress)
    try:
        with np.errstate(all="ignore"):  # overflow ends as a non-finite value, which the evaluator reports
            run = METHODS[method].algorithm(ev, setup)
        stop = run.pop("stop")
    except KeyboardInterrupt:
        run, stop = {}, Stop("interrupted")
    except Stop as early:  # stopped while starting (the first evaluation)
        run, stop = {}, early
    if history and (not ev.history or ev.history[-1][0] != ev.evals):
        ev.record(ev.history[-1][2] if ev.history else ev.best_residual)
    if order is not None and ev.best_z is not None:  # back to the file's numbering
        z = np.empty_like(ev.best_z)
        z[order] = ev.best_z
        ev.best_z = z
    run["renumbered"] = order is not None
    elapsed = time.perf_counter() - ev.t0
    run["time_in_F_s"] = ev.f_time
    run["F_time_share"] = ev.f_time / elapsed if elapsed > 0 else None
    return ev, run, stop


def _method(name: str):
    """``METHODS[name]``: ``optimize`` with that method on the job's problem, as a method's output."""

    def solve_with(job: Job) -> MethodOutput:
        mp, settings = job.data, job.settings
        ev, counts, stop = optimize(mp, name, rho=job.context["rho"], gamma=settings["gamma"], relax=settings["relax"],
                                    sigma=settings["sigma"], inner_steps=settings["inner_steps"],
                                    inner=settings.get("inner_solver", "auto"), batch=settings.get("batch"),
                                    seed=settings.get("seed") or 0, tol=settings["tol"],
                                    max_evals=settings["max_evals"], max_iter=job.context["max_iter"],
                                    deadline=job.deadline.at, history=active() is not None, progress=job.progress)
        if ev.best_z is None:
            raise SolverError(f"No iterate: {stop.detail or stop.reason}.")
        z = ev.best_z
        status = STOPS[stop.reason]
        reason = stop.detail or REASONS.get(stop.reason, "").format(max_evals=settings["max_evals"])
        messages = [n[0].upper() + n[1:] + "." for n in (*job.context["notes"], *counts.get("notes", ()))]
        if status is not Status.OPTIMAL:
            messages.append(f"Stopped: {reason}; the best point has natural residual {ev.best_residual:.3g} "
                            f"(tolerance {settings['tol']:g}).")
        solution = {"z": z.tolist(), "residual": ev.best_residual,
                    "u_norm": None if math.isinf(ev.min_u) else ev.min_u}
        if mp.z_star is not None:
            solution["distance_to_z_star"] = norm2(z - mp.z_star)
        stats = {"d": mp.d, "jacobian_evaluations": ev.jacobian_evals, "best_at_evaluation": ev.best_eval,
                 "inner_iterations": counts.get("inner"), "max_inner": counts.get("max_inner"),
                 "L": mp.L, "rho": job.context["rho"], "inner_solver": counts.get("inner_solver"),
                 "gmres_restarts": counts.get("restarts"), "L_estimate": counts.get("L_estimate"),
                 "renumbered": counts.get("renumbered"),
                 "time_in_F_s": counts.get("time_in_F_s"),
                 "F_time_share": counts.get("F_time_share")}
        if "stochastic" in METHODS[name].tags:
            stats.update(batch=settings["batch"], terms=mp.op.terms, term_evaluations=counts.get("term_evaluations"),
                         passes=ev.evals + ev.sampled, L_batch=counts.get("L_batch"))
        if counts.get("gamma_max"):
            stats["gamma"] = [counts["gamma_min"], counts["gamma_max"]]
        return MethodOutput(status, solution, " ".join(messages), iterations=counts.get("outer"),
                            evaluations=ev.evals, stats=stats)

    return solve_with


def mvi_method(name: str, algorithm_of: Callable, help: str, tags=()) -> MviEntry:
    """The entry of method ``name``: its algorithm, run through :func:`optimize` as a method of the job."""
    return MviEntry(_method(name), help, {}, frozenset(tags), (), algorithm_of)


METHODS = {
    "ecppa": mvi_method("ecppa", algorithm("ecppa", "ecppa"), "the error-corrected inexact relaxed proximal point "
                        "method (inner fixed-point or GMRES resolvents, the default)",
                        tags=("inner_loop", "proximal", "assumes_rho")),
    "eg+": mvi_method("eg+", algorithm("extragradient", "eg_plus"), "EG+ (gamma = 1/L, alpha = 1/2)", tags=("secant",)),
    "ceg+": mvi_method("ceg+", algorithm("extragradient", "ceg_plus"), "CEG+", tags=("secant",)),
    "adaptive-eg+": mvi_method("adaptive-eg+", algorithm("extragradient", "adaptive_eg_plus"),
                               "adaptive EG+ (sigma = rho, or -0.99 gamma / 2 without a rho)", tags=("assumes_rho",)),
    "curvature-eg+": mvi_method("curvature-eg+", algorithm("extragradient", "curvature_eg_plus"),
                                "CurvatureEG+ (gamma from ||JF(z)||, backtracking)"),
    "rppa": mvi_method("rppa", algorithm("ecppa", "ecppa", relaxed_ppa=True), "the relaxed proximal point method "
                       "with a fixed number of inner steps", tags=("proximal", "assumes_rho", "secant")),
    "eg": mvi_method("eg", algorithm("extragradient", "eg"), "extragradient (gamma = 0.9/L)", tags=("secant",)),
    "gda": mvi_method("gda", algorithm("extragradient", "gda"), "gradient descent-ascent (gamma = 0.1/L)",
                      tags=("secant",)),
    "bc-seg+": mvi_method("bc-seg+", algorithm("stochastic", "bc_seg_plus"), "the bias-corrected stochastic "
                          "extragradient on sampled terms (--batch)", tags=("stochastic",)),
}
