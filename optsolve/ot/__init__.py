"""``optsolve ot``: optimal transport between two histograms.

Methods: ``tnt`` (default: MDOT-TNT, truncated Newton on the entropic dual, numpy or
cupy), ``emd`` (exact, POT's network simplex) and ``sinkhorn`` (entropic, POT's
log-domain Sinkhorn). Entropic solutions are rounded onto the transport polytope.
Each solution carries dual potentials ``f``, ``g`` and a certificate of its gap to
the LP optimum (see :mod:`optsolve.ot.certificate`).

    >>> import numpy as np, optsolve.ot
    >>> res = optsolve.ot.solve([0.5, 0.5], [0.5, 0.5], np.array([[0.0, 1.0], [1.0, 0.0]]), method="emd")
    >>> res.status.value, res.objective
    ('optimal', 0.0)
"""

from __future__ import annotations

import time
from typing import Callable

import numpy as np

from optsolve.core import memory
from optsolve.core.backend import get_backend
from optsolve.core.errors import ParameterError, positive_option
from optsolve.core.progress import SILENT, Progress, get_logger
from optsolve.core.result import LazyArray, Result, Status
from optsolve.core.solve import Job, MethodOutput, Solver, run
from optsolve.ot.problems import SCHEMA, is_grid, pair_costs, prepare

DEFAULT_METHOD = "auto"
# Heavy modules a batch worker imports ahead of its first file (optsolve.core.cluster.preload).
PRELOAD = ("ot", "optsolve.ot.tnt", "optsolve.ot.certificate")
# Libraries a method imports, imported before its solve starts (POT's import takes about a second).
SETUP_IMPORTS = {"emd": ("ot",), "sinkhorn": ("ot",), "exact": ("ot",)}
DEFAULT_GAMMA = 1024.0  # gamma_f = max(C) / reg
DEFAULT_TARGET_GAP = 1e-3  # tnt without --gamma or --reg: the certified relative gap it stops at
FLOAT32_MAX_GAMMA = 2.0 ** 10
GAMMA_RANGE = (2.0 ** -20, 2.0 ** 40)  # exponents of gamma * C / max C that float64 resolves
PCG_MODES = ("plain", "discounted")
DEFAULT_PCG = "plain"  # see solve_problem's Notes
DTYPES = ("auto", "float32", "float64")


def _emd(ot, settings, backend, progress, deadline):
    from optsolve.ot.emd import solve_emd

    if backend.device != "cpu":
        raise ParameterError("Method 'emd' runs on the CPU only; use '--device cpu' or another method.")
    return solve_emd(ot.a, ot.b, ot.C, max_iter=settings["max_iter"], deadline=deadline)


def _exact(ot, settings, backend, progress, deadline):
    from optsolve.ot.decompose import solve_large
    from optsolve.ot.exact import MAX_ROUNDS

    if backend.device != "cpu":
        raise ParameterError("Method 'exact' runs on the CPU only; use '--device cpu' or another method.")
    res = solve_large(ot, deadline=deadline, progress=progress, max_rounds=settings["max_iter"] or MAX_ROUNDS,
                      target=settings["target_gap"])
    return {"coo": (res.rows, res.cols, res.values), "f": res.f, "g": res.g, "status": res.status,
            "message": res.message, "iterations": res.stats["rounds"],
            "evaluations": res.stats.get("full_pricing_passes", 0), "extra": {"exact": res.stats}}


def _sinkhorn(ot, settings, backend, progress, deadline):
    from optsolve.ot.sinkhorn import solve_sinkhorn

    out = solve_sinkhorn(ot.a, ot.b, ot.C, reg=settings["reg"], tol=settings["tol"], max_iter=settings["max_iter"],
                         time_limit=settings["time_limit"], backend=backend, progress=progress, deadline=deadline)
    out["evaluations"] = 2 * out["iterations"]  # two kernel products an iteration
    return out


def _tnt(ot, settings, backend, progress, deadline):
    from optsolve.ot.tnt import solve_tnt

    gap_fn = None
    if settings["target_gap"] is not None:
        gap_fn = _gap_checker(ot, settings["target_gap"], backend.xp)

    res = solve_tnt(ot, gamma_f=settings["gamma"], tol=settings["tol"], pcg_mode=settings["pcg"],
                    dtype=np.dtype(settings["dtype"]), max_iter=settings["max_iter"], time_limit=settings["time_limit"],
                    target_gap=settings["target_gap"], gap_fn=gap_fn, backend=backend, progress=progress,
                    deadline=deadline)
    settings["reg"] = res.reg
    rounded = getattr(gap_fn, "last", None)  # the returned stage was rounded for the gap test: reuse it
    if rounded is not None and not (rounded[2] == res.reg and np.array_equal(rounded[0], res.f)
                                    and np.array_equal(rounded[1], res.g)):
        rounded = None
    return {"f": res.f, "g": res.g, "status": res.status, "message": res.message,
            "rounded": None if rounded is None else rounded[3],
            "entropic_gap": None if rounded is None else rounded[4],  # its gap, when the test measured it
            "iterations": res.stats.newton_steps, "evaluations": res.passes,
            "extra": {"stages": res.stats.stages, "newton_steps": res.stats.newton_steps,
                      "cg_iterations": res.stats.cg_iterations, "sinkhorn_sweeps": res.stats.sinkhorn_sweeps,
                      "fallbacks": res.stats.fallbacks, "final_gamma": res.gamma, "stage_log": res.stats.stage_log}}


SKIP_FACTOR = 1000.0  # see _gap_checker


def _gap_checker(ot, target: float, xp=np):
    """``gap(f, g, reg)``: (U - D) / max(U, GAP_FLOOR max C) of the rounded plan, the quantity
    --target-gap bounds (the floor lets a zero optimum be reached).

    Rounding and the dual bound cost about a dozen O(nm) passes, so a stage is not evaluated
    (None) while the entropic bias bound reg * min(H(a), H(b)) exceeds SKIP_FACTOR * target * U,
    with U the rounded cost at the first stage (an over-estimate of the optimum), or the floor.

    Notes
    -----
    On ``bin/bench-ot``'s problems the certified gaps were 0.03-0.1 times the bias bound relative to the
    cost, so a stage whose bound is 1000 times the target cannot meet it and is not rounded.
    """
    from optsolve.ot.certificate import GAP_FLOOR, dual_bound_of, entropy
    from optsolve.ot.rounding import round_problem

    h_min = min(entropy(ot.a), entropy(ot.b))
    floor = GAP_FLOOR * (ot.max_cost() or 1.0)  # a zero optimum has a gap relative to max C
    first_cost = []

    def gap(f, g, reg):
        bias = reg * h_min
        if first_cost and bias > SKIP_FACTOR * target * first_cost[0]:
            return None
        rd = round_problem(ot, f, g, reg, xp)
        gap.last = (f.copy(), g.copy(), reg, rd, None)
        if not first_cost:
            first_cost.append(max(abs(rd.objective), floor))
            if bias > SKIP_FACTOR * target * first_cost[0]:
                return None
        value = (rd.objective - dual_bound_of(ot, rd.f, xp)) / max(abs(rd.objective), floor)
        gap.last = gap.last[:4] + (value,)
        return value

    gap.last = None
    return gap


ENTROPIC = ("tnt", "sinkhorn")
DEFAULT_TOL = {"emd": None, "sinkhorn": 1e-9, "tnt": None, "exact": None}
DEFAULT_MAX_ITER = {"emd": 1_000_000, "sinkhorn": 100_000, "tnt": None, "exact": None}


def choose_method(problem, *, reg=None, gamma=None, target_gap=None, gpu: bool = False) -> str:
    """What ``--method auto`` runs: ``tnt`` when an entropic temperature is asked for, on a GPU, and on
    images on a grid with a cost other than squared Euclidean (whose separable kernel tnt uses; the
    L1 cost's many equal pairs slow the network simplex); else ``exact`` (CPU), which stops at the
    target gap (``DEFAULT_TARGET_GAP`` unless ``--target-gap`` is given)."""
    if reg is not None or gamma is not None or gpu or (is_grid(problem) and problem["cost"] != "sqeuclidean"):
        return "tnt"
    return "exact"


def _finish_if_short(ot, settings, out, backend, progress, deadline):
    """tnt under a target gap: when the rounded plan's certified gap is still above the target, finish
    exactly (:mod:`optsolve.ot.exact`) from the pairs the entropic potentials make cheapest."""
    from optsolve.ot.certificate import GAP_FLOOR, dual_bound_of
    from optsolve.ot.exact import solve_exact
    from optsolve.ot.rounding import round_problem

    rd = out.get("rounded") or round_problem(ot, out["f"], out["g"], settings["reg"], backend.xp)
    out["rounded"] = rd
    gap = out.get("entropic_gap")
    if gap is None:  # the gap test did not measure this stage
        floor = GAP_FLOOR * (ot.max_cost() or 1.0)
        gap = (rd.objective - dual_bound_of(ot, rd.f, backend.xp)) / max(abs(rd.objective), floor)
    out.setdefault("extra", {})["entropic_certified_gap"] = gap
    if gap <= settings["target_gap"] or out["status"] in ("interrupted", "time_limit") or deadline.expired():
        return out
    if backend.device != "cpu":
        return out  # the network simplex runs on the CPU: the GPU answer stays entropic
    from optsolve.core.backend import to_numpy

    res = solve_exact(ot, potentials=(to_numpy(rd.f), to_numpy(rd.g)), deadline=deadline, progress=progress)
    extra = dict(out["extra"], exact=res.stats)
    before = f"the entropic stage's certified gap was {gap:.3g} (target {settings['target_gap']:g})"
    if res.status != "optimal" and res.status != "time_limit":
        out["message"] = (out.get("message") or "") + f" The exact finish failed ({res.message}); {before}."
        return out
    return {"coo": (res.rows, res.cols, res.values), "f": res.f, "g": res.g, "status": res.status,
            "message": " ".join(m for m in (f"Finished exactly on the pairs the entropic potentials make cheapest: "
                                            f"{before}.", res.message) if m),
            "iterations": out.get("iterations"),
            "evaluations": (out.get("evaluations") or 0) + res.stats.get("full_pricing_passes", 0), "extra": extra}


def _choice(name: str, value, choices):
    if value not in choices:
        raise ParameterError(f"The '--{name}' option must be one of {', '.join(choices)}; got {value!r}.")
    return value


def resolve_settings(method, cmax, *, reg, gamma, target_gap, tol, max_iter, time_limit, pcg, dtype, backend,
                     low_memory=False, feas_tol=None, objective_rtol=None, objective_atol=None, lp_tol=None):
    """Check the options and fill in defaults that depend on the problem (max C) and the device.

    The certificate's limits (:data:`optsolve.ot.certificate.LIMITS`) are recorded with the rest, so
    that ``optsolve verify`` can tell a document judged by looser ones."""
    from optsolve.ot.certificate import LIMITS

    reg, gamma = positive_option("reg", reg), positive_option("gamma", gamma)
    target_gap = positive_option("target-gap", target_gap)
    if reg is not None and gamma is not None:
        raise ParameterError("Give at most one of '--reg' and '--gamma' (reg = max(C) / gamma).")
    if target_gap is not None and method not in ("tnt", "exact"):
        raise ParameterError("The '--target-gap' option applies to '--method tnt' and '--method exact' only.")
    if low_memory and method not in ("tnt", "exact"):
        raise ParameterError(f"Method {method!r} needs the dense n x m cost; in low-memory mode use "
                             "'--method tnt' or '--method exact'.")
    if method == "exact" and (reg is not None or gamma is not None):
        raise ParameterError("Method 'exact' solves the unregularised LP: '--gamma' and '--reg' do not apply.")
    if max_iter is not None and (int(max_iter) != max_iter or max_iter < 1):
        raise ParameterError(f"The '--max-iter' option must be a positive integer; got {max_iter!r}.")
    scale = cmax if cmax > 0 else 1.0
    if method == "tnt" and reg is None and gamma is None and target_gap is None:
        target_gap = DEFAULT_TARGET_GAP  # right by default: a certified gap, not a temperature
    if method in ENTROPIC:
        given = gamma
        if gamma is None:
            gamma = scale / reg if reg is not None else DEFAULT_GAMMA
        if not GAMMA_RANGE[0] <= gamma <= GAMMA_RANGE[1]:
            what = (f"'--gamma' {given:g}" if given is not None
                    else f"'--reg' {reg:g}, gamma = max(C)/reg = {gamma:.3g},")
            raise ParameterError(f"The option {what} is outside [2^-20, 2^40]: the entropic plan would be the "
                                 "product of the masses, or beyond the precision of float64.")
        reg = scale / gamma
    _choice("pcg", pcg, PCG_MODES)
    _choice("dtype", dtype, DTYPES)
    if dtype == "auto":
        dtype = "float32" if (method == "tnt" and backend.device == "gpu" and target_gap is None
                              and gamma <= FLOAT32_MAX_GAMMA) else "float64"
    elif dtype == "float32" and method != "tnt":
        raise ParameterError(f"The '--dtype float32' option applies to '--method tnt' only; {method} runs in "
                             "float64.")
    elif dtype == "float32" and (target_gap is not None or gamma > FLOAT32_MAX_GAMMA):
        get_logger().warning(f"float32 beyond gamma = {FLOAT32_MAX_GAMMA:g} may fail the line search; the solver "
                             "then falls back to the last stage that succeeded.")
    given = {"feas_tol": feas_tol, "objective_rtol": objective_rtol, "objective_atol": objective_atol,
             "lp_tol": lp_tol}
    limits = {lim.name: positive_option(lim.name.replace("_", "-"), given[lim.name]) or lim.default
              for lim in LIMITS if lim.name in given}
    return {"method": method, "reg": reg, "gamma": gamma if method in ENTROPIC else None,
            "target_gap": target_gap, "tol": positive_option("tol", tol) or DEFAULT_TOL[method],
            "max_iter": int(max_iter) if max_iter is not None else DEFAULT_MAX_ITER[method],
            "time_limit": positive_option("time-limit", time_limit), "pcg": pcg if method == "tnt" else None,
            "dtype": dtype, "device": backend.device, **limits}


def _method(found: Callable, name: str) -> Callable:
    """``METHODS[name]``: ``found(ot, settings, backend, progress, deadline) -> dict`` (potentials, a plan or its
    entries, status, counts), tnt finished exactly when short of its target gap, as a method's output: the
    rounded or exact plan, its cost and the potentials."""

    def solve_with(job: Job) -> MethodOutput:
        ot, settings, backend, deadline = job.data, job.settings, job.context["backend"], job.context["deadline"]
        out = found(ot, settings, backend, job.progress, deadline)
        if name == "tnt" and settings["target_gap"] is not None:
            out = _finish_if_short(ot, settings, out, backend, job.progress, deadline)
        job.context["stopped"] = time.perf_counter()
        return _plan_output(job, name, out)

    return solve_with


def _plan_output(job: Job, method: str, out: dict) -> MethodOutput:
    """A method's dict as its output: an entropic answer rounded onto the polytope (its plan built only when
    written), an exact one as the plan's entries."""
    from optsolve.ot.certificate import dual_bound_of
    from optsolve.ot.rounding import round_problem

    ot, settings, backend = job.data, job.settings, job.context["backend"]
    plan_threshold, plan_needed = settings["plan_threshold"], job.context["plan_needed"]
    entropic_plan = method in ENTROPIC and "coo" not in out  # tnt's exact finish answers an explicit plan
    t_round = time.perf_counter()
    stats = {"device": backend.device, "dtype": settings["dtype"]}
    if entropic_plan:
        rd = out.get("rounded") or round_problem(ot, out["f"], out["g"], settings["reg"], backend.xp)
        out["f"], out["g"] = rd.f, rd.g
        objective = rd.objective
        plan = LazyArray((ot.n, ot.m), "float64", lambda: rd.plan(ot))
        if plan_threshold is not None:
            plan = LazyArray((ot.n, ot.m), "float64", lambda: rd.sparse_plan(ot, plan_threshold), "csr")
            if plan_needed:  # built now, so that one over the memory budget is refused before anything is written
                plan = plan()
        solution_plan = {"format": "gibbs_rounded", "shape": [ot.n, ot.m], "reg": settings["reg"]}
        stats["marginal_error_before_rounding"] = rd.marginal_error_before
    else:
        import scipy.sparse as sp

        if "coo" in out:
            row, col, value = out["coo"]
        else:
            row, col = np.nonzero(out["plan"])
            value = out["plan"][row, col]
        objective = float(pair_costs(ot, row, col) @ value)
        solution_plan = {"format": "coo", "shape": [ot.n, ot.m], "row": row, "col": col, "value": value}
        keep = value > (plan_threshold or 0.0)
        sparse = sp.csr_matrix((value[keep], (row[keep], col[keep])), shape=(ot.n, ot.m))
        if plan_threshold is not None:
            plan = sparse
        elif "plan" in out:  # the dense plan the solver made
            plan = out["plan"]
        else:
            plan = LazyArray((ot.n, ot.m), "float64", sparse.toarray)
            if plan_needed:
                plan = plan()
    stats["time_s"] = {"round": time.perf_counter() - t_round}
    stats.update(out.get("extra", {}))
    solution = {"f": out["f"], "g": out["g"], "dual_bound": dual_bound_of(ot, out["f"], backend.xp),
                "plan": solution_plan}
    # evaluations: passes over the cost matrix (kernel products, pricing passes; POT's emd counts none)
    result = MethodOutput(out["status"], solution, out.get("message", ""), objective=objective,
                          iterations=out.get("iterations"), evaluations=out.get("evaluations"), stats=stats,
                          arrays={"plan": plan})
    rounded = "" if method in ("emd", "exact") else "; the plan is the rounded last iterate"
    if method not in ("tnt", "exact"):  # their messages name the stage they returned
        if result.status is Status.MAX_ITER:
            result.add_message(f"Iteration limit {settings['max_iter']} reached{rounded}.")
        elif result.status is Status.TIME_LIMIT:
            result.add_message(f"Time limit {settings['time_limit']:g} s reached{rounded}.")
        elif result.status is Status.INTERRUPTED:
            result.add_message(f"Interrupted{rounded}.")
    return result


# auto is resolved to one of the others before a method runs (choose_method)
METHODS = {name: _method(found, name) for name, found in
           (("auto", None), ("exact", _exact), ("tnt", _tnt), ("emd", _emd), ("sinkhorn", _sinkhorn))}


class OTSolver(Solver):
    command = "ot"
    methods = METHODS
    default_method = DEFAULT_METHOD
    cpu_only = False

    def setup(self, problem, method, options, deadline, progress) -> Job:
        from optsolve.ot.deadline import Deadline

        o = options
        device = o["device"]
        chosen = method == "auto"
        if chosen:
            method = choose_method(problem, reg=o["reg"], gamma=o["gamma"], target_gap=o["target_gap"],
                                   gpu=get_backend(device).device == "gpu")
        if method != "tnt":
            import ot  # noqa: F401  (POT's import takes about a second: setup, like reading the file, not solving)
        clock = Deadline.after(o["time_limit"])
        backend = get_backend(device)
        if method == "emd" and device in (None, "auto") and backend.device != "cpu":
            backend = get_backend("cpu")
        block_size, plan_threshold, low_memory = o["block_size"], o["plan_threshold"], o["low_memory"]
        if block_size is not None and (int(block_size) != block_size or block_size < 1):
            raise ParameterError(f"The '--block-size' option must be a positive integer; got {block_size!r}.")
        if plan_threshold is not None and not (float(plan_threshold) >= 0):
            raise ParameterError(f"The '--plan-threshold' option must be a float >= 0; got {plan_threshold!r}.")
        if low_memory and method not in ("tnt", "exact"):
            raise ParameterError(f"Method {method!r} needs the dense n x m cost; in low-memory mode use "
                                 "'--method tnt' or '--method exact'.")
        if method == "exact" and low_memory is None:  # point clouds are costed where needed, not as a matrix
            low_memory = "C" not in problem and not is_grid(problem)
        ot = prepare(problem, normalize=o["normalize"], low_memory=low_memory if method in ("tnt", "exact") else False,
                     block_size=block_size, use=method)
        if ot.low_memory and block_size is None and backend.device == "gpu":
            from optsolve.ot.problems import auto_block

            ot.block = auto_block(ot.n, ot.m, xp=backend.xp)
        if method in ("emd", "sinkhorn") and ot.grid is not None:
            ot.C = ot.dense_cost(method)  # POT's solvers take the matrix
        if o["plan_needed"] and plan_threshold is None and ot.C is None:
            memory.require(problem.source, f"the dense {ot.n} x {ot.m} plan for --plan/--arrays (--plan-threshold T "
                                           "writes only its entries above T)", 8 * ot.n * ot.m)
        settings = resolve_settings(method, ot.max_cost(), reg=o["reg"], gamma=o["gamma"], target_gap=o["target_gap"],
                             tol=o["tol"], max_iter=o["max_iter"], time_limit=o["time_limit"], pcg=o["pcg"],
                             dtype=o["dtype"], backend=backend, low_memory=ot.low_memory, feas_tol=o["feas_tol"],
                             objective_rtol=o["objective_rtol"], objective_atol=o["objective_atol"],
                             lp_tol=o["lp_tol"])
        settings.update(normalize=bool(o["normalize"]), low_memory=ot.low_memory,
                 block_size=ot.block if ot.low_memory else None, plan_threshold=plan_threshold)
        if chosen:
            settings["method_rule"] = "auto"
            if method == "exact" and settings["target_gap"] is None:  # right by default: the default target, as tnt's
                settings["target_gap"] = DEFAULT_TARGET_GAP
        return Job(method, ot, settings, problem.info(n=ot.n, m=ot.m), deadline=deadline, progress=progress,
                   context={"backend": backend, "deadline": clock, "plan_needed": o["plan_needed"]})

    def certify(self, job, result):
        from optsolve.ot import certificate

        settings = job.settings
        limits = {lim.name: settings.get(lim.name) for lim in certificate.LIMITS}
        return certificate.check(job.problem, result.solution, method=job.method, objective=result.objective,
                                 settings=settings, limits=limits, status=result.status.value)

    def judge(self, job, result):
        clock = job.context["deadline"]
        if clock.end is not None:
            result.stats["deadline"] = dict(clock.report(), solver_stopped_s=job.context["stopped"] - clock.start,
                                            finished_s=clock.elapsed())


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
