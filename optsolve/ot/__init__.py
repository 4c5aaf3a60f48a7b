"""``optsolve ot``: optimal transport between two histograms.

Methods (:mod:`optsolve.ot.methods`): ``auto`` (the default, :func:`choose_method`), ``exact``
(the LP on candidate pairs priced over all pairs, to a certified target gap), ``tnt`` (MDOT-TNT,
truncated Newton on the entropic dual, numpy or cupy), ``emd`` (POT's network simplex on the
dense cost) and ``sinkhorn`` (POT's log-domain Sinkhorn). Entropic solutions are rounded onto
the transport polytope.
Each solution carries dual potentials ``f``, ``g`` and a certificate of its gap to
the LP optimum (see :mod:`optsolve.ot.certificate`).

    >>> import numpy as np, optsolve.ot
    >>> res = optsolve.ot.solve([0.5, 0.5], [0.5, 0.5], np.array([[0.0, 1.0], [1.0, 0.0]]), method="emd")
    >>> res.status.value, res.objective
    ('optimal', 0.0)
"""

from __future__ import annotations

import importlib

from optsolve.core import memory
from optsolve.core.backend import get_backend
from optsolve.core.errors import ParameterError
from optsolve.core.progress import SILENT, Progress, get_logger
from optsolve.core.result import Result
from optsolve.core.clock import Deadline
from optsolve.core.options import Option, check, count, positive
from optsolve.core.solve import Job, Solver, run, tagged
from optsolve.ot import defaults, repeats
from optsolve.ot.methods import METHODS
from optsolve.ot.problems import SCHEMA, is_grid, prepare

DEFAULT_METHOD = "auto"
# Heavy modules a batch worker imports ahead of its first file (optsolve.core.cluster.preload).
PRELOAD = ("ot", "optsolve.ot.tnt", "optsolve.ot.certificate")
DEFAULT_GAMMA = 1024.0  # gamma_f = max(C) / reg
DEFAULT_TARGET_GAP = defaults.TARGET_GAP
FLOAT32_MAX_GAMMA = 2.0 ** 10
GAMMA_RANGE = (2.0 ** -20, 2.0 ** 40)  # exponents of gamma * C / max C that float64 resolves
PCG_MODES = ("plain", "discounted")
DEFAULT_PCG = "plain"  # see solve_problem's Notes
DTYPES = ("auto", "float32", "float64")



def choose_method(problem, *, reg=None, gamma=None, target_gap=None, gpu: bool = False) -> str:
    """What ``--method auto`` runs: the faster method that meets the target gap asked for.

    ``exact`` meets every target (it stops pricing once the certified gap does, or at the LP optimum), so
    ``target_gap`` never moves the choice: on point clouds and matrices on the CPU ``exact`` is the faster
    route at any target (``bin/bench-ot --clouds N --cloud-runs '' '--target-gap 1e-3' '--method tnt
    --target-gap 1e-3'``), and it stops at ``DEFAULT_TARGET_GAP`` unless ``--target-gap`` is given.
    ``tnt`` runs where an entropic temperature (``reg``, ``gamma``) asks for the entropic problem, on a GPU
    (``exact`` is CPU-only), and on images on a grid with a cost other than squared Euclidean, where it
    is the faster route to the target (its separable kernel; the L1 cost's many equal pairs slow the
    network simplex)."""
    if reg is not None or gamma is not None or gpu or (is_grid(problem) and problem["cost"] != "sqeuclidean"):
        return "tnt"
    return "exact"


OPTIONS = (positive("reg"), positive("gamma"), positive("target_gap"), positive("tol"), count("max_iter"),
           Option("pcg", "choice", choices=PCG_MODES), Option("dtype", "choice", choices=DTYPES), count("block_size"),
           Option("plan_threshold", low=0), positive("feas_tol"), positive("objective_rtol"),
           positive("objective_atol"), positive("lp_tol"))


def resolve_settings(method, cmax, *, reg, gamma, target_gap, tol, max_iter, time_limit, pcg, dtype, backend,
                     feas_tol=None, objective_rtol=None, objective_atol=None, lp_tol=None):
    """Check the options and fill in defaults that depend on the problem (max C) and the device.

    The certificate's limits (:data:`optsolve.ot.certificate.LIMITS`) are recorded with the rest, so
    that ``optsolve verify`` can tell a document judged by looser ones."""
    from optsolve.ot.certificate import LIMITS

    if reg is not None and gamma is not None:
        raise ParameterError("Give at most one of '--reg' and '--gamma' (reg = max(C) / gamma).")
    entry, stoppers = METHODS[method], " and ".join(f"'--method {m}'" for m in tagged(METHODS, "target_gap"))
    if target_gap is not None and "target_gap" not in entry.tags:
        raise ParameterError(f"The '--target-gap' option applies to {stoppers} only.")
    if "exact_lp" in entry.tags and (reg is not None or gamma is not None):
        raise ParameterError(f"Method {method!r} solves the unregularised LP: '--gamma' and '--reg' do not apply.")
    scale = cmax if cmax > 0 else 1.0
    if reg is None and gamma is None and target_gap is None:
        target_gap = entry.default("target_gap")  # tnt: right by default, a certified gap, not a temperature
    entropic = "entropic" in entry.tags
    if entropic:
        given = gamma
        if gamma is None:
            gamma = scale / reg if reg is not None else DEFAULT_GAMMA
        if not GAMMA_RANGE[0] <= gamma <= GAMMA_RANGE[1]:
            what = (f"'--gamma' {given:g}" if given is not None
                    else f"'--reg' {reg:g}, gamma = max(C)/reg = {gamma:.3g},")
            raise ParameterError(f"The option {what} is outside [2^-20, 2^40]: the entropic plan would be the "
                                 "product of the masses, or beyond the precision of float64.")
        reg = scale / gamma
    if dtype == "auto":
        dtype = "float32" if ("float32" in entry.tags and backend.device == "gpu" and target_gap is None
                              and gamma <= FLOAT32_MAX_GAMMA) else "float64"
    elif dtype == "float32" and "float32" not in entry.tags:
        raise ParameterError(f"The '--dtype float32' option applies to '--method tnt' only; {method} runs in "
                             "float64.")
    elif dtype == "float32" and (target_gap is not None or gamma > FLOAT32_MAX_GAMMA):
        get_logger().warning(f"float32 beyond gamma = {FLOAT32_MAX_GAMMA:g} may fail the line search; the solver "
                             "then falls back to the last stage that succeeded.")
    given = {"feas_tol": feas_tol, "objective_rtol": objective_rtol, "objective_atol": objective_atol,
             "lp_tol": lp_tol}
    limits = {lim.name: given[lim.name] or lim.default
              for lim in LIMITS if lim.name in given}
    return {"method": method, "reg": reg, "gamma": gamma if entropic else None,
            "target_gap": target_gap, "tol": tol or entry.default("tol"),
            "max_iter": int(max_iter) if max_iter is not None else entry.default("max_iter"),
            "time_limit": time_limit, "pcg": pcg if "float32" in entry.tags else None,
            "dtype": dtype, "device": backend.device, **limits}


class OTSolver(Solver):
    blas_threads = 1  # its default thread count: see "BLAS threads" in docs/benchmarks.md
    command = "ot"
    methods = METHODS
    aliases = ("auto",)  # resolved by choose_method in setup
    alias_help = {"auto": "tnt given --gamma or --reg, on images on a grid and on a GPU, else exact to --target-gap "
                          "(1e-3 unless given)"}
    default_method = DEFAULT_METHOD
    cpu_only = False

    def setup(self, problem, method, options, deadline, progress) -> Job:
        from optsolve.ot.deadline import FINISH_PASSES

        o = check(OPTIONS, options)
        device = o["device"]
        backend = get_backend(device)
        chosen = method == "auto"
        if chosen:
            method = choose_method(problem, reg=o["reg"], gamma=o["gamma"], target_gap=o["target_gap"],
                                   gpu=backend.device == "gpu")
        entry = METHODS[method]
        for name in entry.imports:  # POT's import takes about a second: setup, like reading the file, not solving
            importlib.import_module(name)
        deadline = Deadline(deadline.end, FINISH_PASSES, start=deadline.start)  # time kept for the finish
        if "cpu" in entry.tags and device in (None, "auto") and backend.device != "cpu":
            backend = get_backend("cpu")
        block_size, plan_threshold, low_memory = o["block_size"], o["plan_threshold"], o["low_memory"]
        streams = "low_memory" in entry.tags
        if low_memory and not streams:
            raise ParameterError(f"Method {method!r} needs the dense n x m cost; in low-memory mode use "
                                 f"{' or '.join(repr('--method ' + m) for m in tagged(METHODS, 'low_memory'))}.")
        if "exact_lp" in entry.tags and low_memory is None:  # point clouds are costed where needed, not as a matrix
            low_memory = "C" not in problem and not is_grid(problem)
        merge = repeats.find(problem) if "merged" in entry.tags else None  # equal points solved as one
        ot = prepare(problem if merge is None else merge.problem, normalize=o["normalize"],
                     low_memory=low_memory if streams else False, block_size=block_size, use=method)
        n, m = (merge.n, merge.m) if merge is not None else (ot.n, ot.m)
        if ot.low_memory and block_size is None and backend.device == "gpu":
            from optsolve.ot.problems import auto_block

            ot.block = auto_block(ot.n, ot.m, xp=backend.xp)
        if "dense" in entry.tags and ot.grid is not None:
            ot.C = ot.dense_cost(method)  # POT's solvers take the matrix
        if o["plan_needed"] and plan_threshold is None and (ot.C is None or merge is not None):
            memory.require(problem.source, f"the dense {n} x {m} plan for --plan/--arrays (--plan-threshold T "
                                           "writes only its entries above T)", 8 * n * m)
        settings = resolve_settings(method, ot.max_cost(), reg=o["reg"], gamma=o["gamma"], target_gap=o["target_gap"],
                             tol=o["tol"], max_iter=o["max_iter"], time_limit=o["time_limit"], pcg=o["pcg"],
                             dtype=o["dtype"], backend=backend, feas_tol=o["feas_tol"],
                             objective_rtol=o["objective_rtol"], objective_atol=o["objective_atol"],
                             lp_tol=o["lp_tol"])
        settings.update(normalize=bool(o["normalize"]), low_memory=ot.low_memory,
                 block_size=ot.block if ot.low_memory else None, plan_threshold=plan_threshold)
        if chosen:
            settings["method_rule"] = "auto"
            if method == "exact" and settings["target_gap"] is None:  # right by default: the default target, as tnt's
                settings["target_gap"] = DEFAULT_TARGET_GAP
        return Job(method, ot, settings, problem.info(n=n, m=m), deadline=deadline, progress=progress,
                   context={"backend": backend, "plan_needed": o["plan_needed"], "merge": merge})

    def finish(self, job, out):
        merge = job.context["merge"]
        return out if merge is None else repeats.expand_output(merge, job, out)

    def certify(self, job, result, out):
        from optsolve.ot import certificate

        settings = job.settings
        limits = {lim.name: settings.get(lim.name) for lim in certificate.LIMITS}
        return certificate.check(job.problem, result.solution, method=job.method, objective=result.objective,
                                 settings=settings, limits=limits, status=result.status.value)

    def judge(self, job, result):
        from optsolve.ot import certificate

        if result.certificate is not None:  # an entropic answer says so, with its certified LP gap
            result.qualifier = certificate.qualifier(result.solution, job.settings, result.certificate)
        clock = job.deadline
        stopped_s = result.stats.pop("solver_stopped_s", None)
        if clock.end is not None:
            result.stats["deadline"] = dict(clock.report(), solver_stopped_s=stopped_s, finished_s=clock.elapsed())


SOLVER = OTSolver()


def solve_problem(problem, *, method: str | None = None, reg: float | None = None, gamma: float | None = None,
                  target_gap: float | None = None, tol: float | None = None, pcg: str = DEFAULT_PCG,
                  dtype: str = "auto", normalize: bool = False, low_memory: bool | None = None,
                  block_size: int | None = None, plan_threshold: float | None = None,
                  feas_tol: float | None = None, objective_rtol: float | None = None,
                  objective_atol: float | None = None, lp_tol: float | None = None,
                  max_iter: int | None = None, time_limit: float | None = None, device: str = "auto",
                  plan_needed: bool = False, progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.ot.problems.SCHEMA`); the certificate is attached.

    ``result.arrays["plan"]`` is the dense plan, or with ``plan_threshold`` a scipy CSR matrix of
    its entries above the threshold (in low-memory mode computed only when written).
    ``low_memory``: never build the n x m cost (point clouds; None: when the dense path
    would not fit in memory), reading it in blocks of ``block_size`` columns.
    ``feas_tol``, ``objective_rtol``, ``objective_atol``, ``lp_tol``, ``target_gap``, ``normalize``:
    the limits the certificate is judged by (:data:`optsolve.ot.certificate.LIMITS`).
    ``time_limit`` bounds the whole call, rounding and certificate included
    (:mod:`optsolve.ot.deadline`); ``emd`` runs in a child process stopped at the deadline (:mod:`optsolve.ot.emd`).
    ``plan_needed``: the plan will be written (``--plan``/``--arrays``): a dense plan that the cost does not
    already bound is checked against the memory budget before the solve, a sparse one is built within it.

    Notes
    -----
    ``pcg="plain"`` is the default: on ``bin/bench-ot``'s problems it took fewer CG iterations and less time
    than ``"discounted"``.
    """
    return run(SOLVER, problem, method=method, device=device, time_limit=time_limit, progress=progress, reg=reg,
               gamma=gamma, target_gap=target_gap, tol=tol, pcg=pcg, dtype=dtype, normalize=normalize,
               low_memory=low_memory, block_size=block_size, plan_threshold=plan_threshold, feas_tol=feas_tol,
               objective_rtol=objective_rtol, objective_atol=objective_atol, lp_tol=lp_tol, max_iter=max_iter,
               plan_needed=plan_needed)


def solve(a, b, C=None, *, x=None, y=None, cost=None, method: str = DEFAULT_METHOD, reg: float | None = None,
          gamma: float | None = None, target_gap: float | None = None, tol: float | None = None,
          pcg: str = DEFAULT_PCG, dtype: str = "auto", normalize: bool = False, low_memory: bool | None = None,
          block_size: int | None = None, plan_threshold: float | None = None, feas_tol: float | None = None,
          objective_rtol: float | None = None, objective_atol: float | None = None, lp_tol: float | None = None,
          max_iter: int | None = None, time_limit: float | None = None,
          device: str = "auto", progress: Progress = SILENT) -> Result:
    """Optimal transport between masses ``a`` and ``b`` with cost ``C`` (or points ``x``, ``y`` and ``cost``).

    Parameters
    ----------
    a, b : array_like of shape (n,) and (m,)
        Nonnegative masses with equal sums (or any sums with ``normalize=True``).
    C : array_like of shape (n, m), optional
        The cost matrix; or give ``x`` (n x d), ``y`` (m x d) and ``cost`` (``"sqeuclidean"``, ``"euclidean"``,
        ``"l1"``).
    method : str, default="auto"
        ``auto``, ``exact``, ``tnt``, ``emd`` or ``sinkhorn`` (see ``optsolve ot --help``).
    reg, gamma : float, optional
        The entropic regularisation in cost units, or the final temperature max(C) / reg (``tnt``, ``sinkhorn``).
    target_gap : float, optional
        Stop once the certified relative gap is at most this (``auto`` and ``exact``: 1e-3 by default).
    tol, pcg, dtype, low_memory, block_size, plan_threshold
        The methods' settings, as the command's options of the same names.
    feas_tol, objective_rtol, objective_atol, lp_tol : float, optional
        The certificate's limits.
    max_iter, time_limit, device, progress
        Limits, the array backend (``"auto"``, ``"cpu"``, ``"gpu"``) and a progress reporter.

    Returns
    -------
    optsolve.core.result.Result
        Status, objective, certificate, stats and settings, as every command's; its ``solution`` holds
        the potentials ``f``, ``g``, ``dual_bound`` and the plan's entries; ``arrays["plan"]`` is the plan.

    Raises
    ------
    optsolve.core.errors.InputError, optsolve.core.errors.ParameterError
        Bad data (the message names the field) or an option the method does not accept.
    """
    raw = {k: v for k, v in dict(a=a, b=b, C=C, x=x, y=y, cost=cost).items() if v is not None}
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, reg=reg, gamma=gamma, target_gap=target_gap, tol=tol, pcg=pcg,
                         dtype=dtype, normalize=normalize, low_memory=low_memory, block_size=block_size,
                         plan_threshold=plan_threshold, feas_tol=feas_tol, objective_rtol=objective_rtol,
                         objective_atol=objective_atol, lp_tol=lp_tol, max_iter=max_iter, time_limit=time_limit,
                         device=device, progress=progress)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
