"""The methods of ``optsolve ot``: ``METHODS[name]`` is the method's entry
(:class:`optsolve.core.solve.Entry`): its function of the job, which calls its solver and returns the
:class:`~optsolve.core.solve.MethodOutput` that :func:`plan_output` makes of its :class:`PlanAnswer` (the
potentials ``f``, ``g`` and the plan or its entries, its cost), its help line, its defaults (``tol``,
``max_iter``, ``target_gap``) and its tags, which the option checks read:

* ``entropic``: it solves the entropic problem at ``--gamma``/``--reg`` (its plan is rounded);
* ``target_gap``: it stops at ``--target-gap`` itself (and its messages name the stage it returned);
* ``exact_lp``: it solves the unregularised LP only (``--gamma``/``--reg`` refused);
* ``low_memory``: it works from point clouds without the n x m cost (``--low-memory``);
* ``dense``: it needs the n x m cost matrix (an image grid's is built for it);
* ``cpu``: it runs on the CPU only (``--device auto`` moves it there);
* ``float32``: ``--dtype float32`` and ``--pcg`` apply;
* ``merged``: equal points are solved as one and its explicit plan expanded back.

A method without tags is given the dense cost and float64, and answers with potentials and a plan
through :func:`plan_output`. ``auto`` is not a method: :func:`optsolve.ot.choose_method` resolves it
before one runs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace

import numpy as np

from optsolve.core.errors import ParameterError
from optsolve.core.result import LazyArray, Status
from optsolve.core.solve import Job, MethodOutput, entry
from optsolve.ot import defaults
from optsolve.ot.problems import pair_costs

SKIP_FACTOR = 1000.0  # see _gap_checker


@dataclass
class PlanAnswer:
    """What an ot solver answers, for :func:`plan_output`: potentials ``f``, ``g`` (cost units); an explicit plan
    as ``coo`` entries (rows, cols, values) or a dense ``plan`` (neither: the entropic plan of f, g, rounded);
    its status and message; its counts; ``extra`` stats; ``rounded``: the entropic plan already rounded (tnt's
    gap test), with its certified ``entropic_gap`` where measured."""

    f: np.ndarray
    g: np.ndarray
    status: str
    message: str = ""
    coo: tuple | None = None
    plan: object = None
    iterations: int | None = None
    evaluations: int | None = None
    extra: dict = field(default_factory=dict)
    rounded: object = None
    entropic_gap: float | None = None


def _answer_of(out: dict, **more) -> PlanAnswer:
    """A POT wrapper's dict (:mod:`optsolve.ot.emd`, :mod:`optsolve.ot.sinkhorn`) as a PlanAnswer."""
    keys = {"f", "g", "status", "message", "plan", "iterations"}
    return PlanAnswer(**{k: v for k, v in out.items() if k in keys}, **more)


def _on_cpu(job: Job, method: str) -> None:
    """Refuse a GPU backend for a method that runs on the CPU only (POT's network simplex)."""
    if job.context["backend"].device != "cpu":
        raise ParameterError(f"Method {method!r} runs on the CPU only; use '--device cpu' or another method.")


def _emd(job: Job) -> MethodOutput:
    """POT's network simplex on the dense cost."""
    from optsolve.ot.emd import solve_emd

    ot = job.data
    _on_cpu(job, "emd")
    out = solve_emd(ot.a, ot.b, ot.C, max_iter=job.settings["max_iter"], deadline=job.deadline)
    return plan_output(job, "emd", _answer_of(out))


def _exact(job: Job) -> MethodOutput:
    """The exact LP on candidate pairs priced over all pairs (:mod:`optsolve.ot.decompose`)."""
    from optsolve.ot.decompose import solve_large
    from optsolve.ot.exact import MAX_ROUNDS

    settings = job.settings
    _on_cpu(job, "exact")
    res = solve_large(job.data, deadline=job.deadline, progress=job.progress,
                      max_rounds=settings["max_iter"] or MAX_ROUNDS, target=settings["target_gap"],
                      atol=settings["objective_atol"])
    out = PlanAnswer(res.f, res.g, res.status, res.message, coo=(res.rows, res.cols, res.values),
                     iterations=res.stats["rounds"], evaluations=res.stats.get("full_pricing_passes", 0),
                     extra={"exact": res.stats})
    return plan_output(job, "exact", out)


def _sinkhorn(job: Job) -> MethodOutput:
    """POT's log-domain Sinkhorn at the settings' reg."""
    from optsolve.ot.sinkhorn import solve_sinkhorn

    ot, settings = job.data, job.settings
    out = solve_sinkhorn(ot.a, ot.b, ot.C, reg=settings["reg"], tol=settings["tol"], max_iter=settings["max_iter"],
                         time_limit=settings["time_limit"], backend=job.context["backend"], progress=job.progress,
                         deadline=job.deadline)
    return plan_output(job, "sinkhorn", _answer_of(out, evaluations=2 * out["iterations"]))  # two products each


def _tnt(job: Job) -> MethodOutput:
    """MDOT-TNT (:mod:`optsolve.ot.tnt`); under a target gap, finished exactly when the rounded plan's certified
    gap is still above it (:func:`_finish_if_short`)."""
    from optsolve.ot.tnt import solve_tnt

    ot, settings, backend = job.data, job.settings, job.context["backend"]
    gap_fn = None
    if settings["target_gap"] is not None:
        gap_fn = _gap_checker(ot, settings["target_gap"], backend.xp, settings["objective_atol"])
    res = solve_tnt(ot, gamma_f=settings["gamma"], tol=settings["tol"], pcg_mode=settings["pcg"],
                    dtype=np.dtype(settings["dtype"]), max_iter=settings["max_iter"],
                    time_limit=settings["time_limit"], target_gap=settings["target_gap"], gap_fn=gap_fn,
                    backend=backend, progress=job.progress, deadline=job.deadline)
    settings["reg"] = res.reg
    rounded = getattr(gap_fn, "last", None)  # the returned stage was rounded for the gap test: reuse it
    if rounded is not None and not (rounded[2] == res.reg and np.array_equal(rounded[0], res.f)
                                    and np.array_equal(rounded[1], res.g)):
        rounded = None
    out = PlanAnswer(res.f, res.g, res.status, res.message, rounded=None if rounded is None else rounded[3],
                     entropic_gap=None if rounded is None else rounded[4],  # its gap, when the test measured it
                     iterations=res.stats.newton_steps, evaluations=res.passes,
                     extra={"stages": res.stats.stages, "newton_steps": res.stats.newton_steps,
                            "cg_iterations": res.stats.cg_iterations, "sinkhorn_sweeps": res.stats.sinkhorn_sweeps,
                            "fallbacks": res.stats.fallbacks, "final_gamma": res.gamma,
                            "stage_log": res.stats.stage_log})
    if settings["target_gap"] is not None:
        out = _finish_if_short(job, out)
    return plan_output(job, "tnt", out)


def _gap_checker(ot, target: float, xp=np, atol: float = 1e-12):
    """``gap(f, g, reg)``: the rounded plan's U - D as the certificate measures it against --target-gap
    (:func:`optsolve.ot.certificate.target_measure`: relative to U, absolute at rounding where U is about 0).

    Rounding and the dual bound cost about a dozen O(nm) passes, so a stage is not evaluated
    (None) while the entropic bias bound reg * min(H(a), H(b)) exceeds SKIP_FACTOR * target * U,
    with U the rounded cost at the first stage (an over-estimate of the optimum), or the absolute floor.

    Notes
    -----
    On ``bin/bench-ot``'s problems the certified gaps were 0.03-0.1 times the bias bound relative to the
    cost, so a stage whose bound is 1000 times the target cannot meet it and is not rounded.
    """
    from optsolve.ot.certificate import dual_bound_of, entropy, target_gap_limit, target_measure
    from optsolve.ot.rounding import round_problem

    h_min = min(entropy(ot.a), entropy(ot.b))
    scale = ot.max_cost() or 1.0
    floor = target_gap_limit(target, 0.0, scale, atol)[0] / target  # the |U| below which the limit is absolute
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
        value = target_measure(rd.objective - dual_bound_of(ot, rd.f, xp), rd.objective, scale, target, atol)
        gap.last = gap.last[:4] + (value,)
        return value

    gap.last = None
    return gap


def _finish_if_short(job: Job, out: PlanAnswer) -> PlanAnswer:
    """tnt under a target gap: when the rounded plan's certified gap is still above the target, finish
    exactly (:mod:`optsolve.ot.exact`) from the pairs the entropic potentials make cheapest."""
    from optsolve.ot.certificate import dual_bound_of, target_measure
    from optsolve.ot.exact import solve_exact
    from optsolve.ot.rounding import round_problem

    ot, settings, backend, deadline = job.data, job.settings, job.context["backend"], job.deadline
    rd = out.rounded or round_problem(ot, out.f, out.g, settings["reg"], backend.xp)
    out.rounded = rd
    gap = out.entropic_gap
    if gap is None:  # the gap test did not measure this stage
        gap = target_measure(rd.objective - dual_bound_of(ot, rd.f, backend.xp), rd.objective, ot.max_cost() or 1.0,
                             settings["target_gap"], settings["objective_atol"])
    out.extra["entropic_certified_gap"] = gap
    if gap <= settings["target_gap"]:  # met, though perhaps only here (the stages' test skips a loose bias bound)
        if out.status == "max_iter":
            out.status, out.message = "optimal", f"The last stage's certified gap {gap:.3g} meets the target."
        return out
    if out.status in ("interrupted", "time_limit") or deadline.expired():
        return out
    if backend.device != "cpu":  # the network simplex runs on the CPU: the GPU answer stays entropic
        out.status = "max_iter" if out.status == "optimal" else out.status
        out.message = " ".join(m for m in (out.message, (
            f"The certified gap {gap:.3g} is above the target {settings['target_gap']:g}, and the exact finish "
            "runs on the CPU only: the target is not claimed.")) if m)
        return out
    from optsolve.core.backend import to_numpy

    res = solve_exact(ot, potentials=(to_numpy(rd.f), to_numpy(rd.g)), deadline=deadline, progress=job.progress,
                      target=settings["target_gap"], atol=settings["objective_atol"])
    extra = dict(out.extra, exact=res.stats)
    before = f"the entropic stage's certified gap was {gap:.3g} (target {settings['target_gap']:g})"
    if res.status != "optimal" and res.status != "time_limit":
        out.message = (out.message or "") + f" The exact finish failed ({res.message}); {before}."
        return out
    return PlanAnswer(res.f, res.g, res.status, " ".join(m for m in (
        f"Finished exactly on the pairs the entropic potentials make cheapest: {before}.", res.message) if m),
        coo=(res.rows, res.cols, res.values), iterations=out.iterations,
        evaluations=(out.evaluations or 0) + res.stats.get("full_pricing_passes", 0), extra=extra)


def explicit_plan(shape, row, col, value, plan_threshold, plan_needed: bool, dense=None):
    """The ``--arrays`` plan of coo entries: a CSR matrix of those above ``plan_threshold`` where one is given,
    else the dense plan (``dense`` where the solver made it; built now where it will be written)."""
    import scipy.sparse as sp

    keep = value > (plan_threshold or 0.0)
    sparse = sp.csr_matrix((value[keep], (row[keep], col[keep])), shape=shape)
    if plan_threshold is not None:
        return sparse
    if dense is not None:
        return dense
    plan = LazyArray(shape, "float64", sparse.toarray)
    return plan() if plan_needed else plan


def plan_output(job: Job, method: str, out: PlanAnswer) -> MethodOutput:
    """A solver's answer (``out``: potentials ``f``, ``g``; an explicit plan as ``coo`` entries or a dense
    ``plan``; ``status``, ``message``, counts and ``extra`` stats) as the method's output: an entropic answer
    rounded onto the polytope (its plan built only when written), an exact one as the plan's entries."""
    stopped_s = job.deadline.elapsed()  # when the solver stopped, for stats.deadline
    from optsolve.ot.certificate import dual_bound_of
    from optsolve.ot.rounding import round_problem

    ot, settings, backend = job.data, job.settings, job.context["backend"]
    plan_threshold, plan_needed = settings["plan_threshold"], job.context["plan_needed"]
    # tnt's exact finish answers an explicit plan
    entropic_plan = "entropic" in METHODS[method].tags and out.coo is None
    t_round = time.perf_counter()
    stats = {"device": backend.device, "dtype": settings["dtype"], "solver_stopped_s": stopped_s}
    if entropic_plan:
        rd = out.rounded or round_problem(ot, out.f, out.g, settings["reg"], backend.xp)
        out = replace(out, f=rd.f, g=rd.g)
        objective = rd.objective
        plan = LazyArray((ot.n, ot.m), "float64", lambda: rd.plan(ot))
        if plan_threshold is not None:
            plan = LazyArray((ot.n, ot.m), "float64", lambda: rd.sparse_plan(ot, plan_threshold), "csr")
            if plan_needed:  # built now, so that one over the memory budget is refused before anything is written
                plan = plan()
        solution_plan = {"format": "gibbs_rounded", "shape": [ot.n, ot.m], "reg": settings["reg"]}
        stats["marginal_error_before_rounding"] = rd.marginal_error_before
    else:
        if out.coo is not None:
            row, col, value = out.coo
        else:
            row, col = np.nonzero(out.plan)
            value = out.plan[row, col]
        objective = float(pair_costs(ot, row, col) @ value)
        solution_plan = {"format": "coo", "shape": [ot.n, ot.m], "row": row, "col": col, "value": value}
        plan = explicit_plan((ot.n, ot.m), row, col, value, plan_threshold, plan_needed, out.plan)
    stats["time_s"] = {"round": time.perf_counter() - t_round}
    stats.update(out.extra)
    solution = {"f": out.f, "g": out.g, "dual_bound": dual_bound_of(ot, out.f, backend.xp),
                "plan": solution_plan}
    # evaluations: passes over the cost matrix (kernel products, pricing passes; POT's emd counts none)
    result = MethodOutput(out.status, solution, out.message or "", objective=objective,
                          iterations=out.iterations, evaluations=out.evaluations, stats=stats,
                          arrays={"plan": plan})
    rounded = "; the plan is the rounded last iterate" if "entropic" in METHODS[method].tags else ""
    if "target_gap" not in METHODS[method].tags:  # those methods' messages name the stage they returned
        if result.status is Status.MAX_ITER:
            result.add_message(f"Iteration limit {settings['max_iter']} reached{rounded}.")
        elif result.status is Status.TIME_LIMIT:
            result.add_message(f"Time limit {settings['time_limit']:g} s reached{rounded}.")
        elif result.status is Status.INTERRUPTED:
            result.add_message(f"Interrupted{rounded}.")
    return result


METHODS = {
    "exact": entry(_exact, "the network simplex (POT) on candidate pairs, priced over all pairs, to the LP optimum "
                   "or --target-gap", tags=("target_gap", "exact_lp", "low_memory", "cpu", "merged"), imports=("ot",)),
    "tnt": entry(_tnt, "MDOT truncated Newton (entropic, rounded)", defaults={"target_gap": defaults.TARGET_GAP},
                 tags=("entropic", "target_gap", "low_memory", "float32")),
    "emd": entry(_emd, "dense network simplex (POT)", defaults={"max_iter": 1_000_000}, tags=("dense", "cpu", "merged"),
                 imports=("ot",)),
    "sinkhorn": entry(_sinkhorn, "log-domain Sinkhorn (POT), rounded", defaults={"tol": 1e-9, "max_iter": 100_000},
                      tags=("entropic", "dense"), imports=("ot",)),
}
