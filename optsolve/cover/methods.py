"""The methods of ``optsolve cover``: ``METHODS[name]`` is the method's entry
(:class:`optsolve.core.solve.Entry`): its function of the job, which runs convert-fair with its FSM
subroutine (:mod:`optsolve.cover.greedy`, :mod:`optsolve.cover.continuous`), the exact MILP
(:mod:`optsolve.cover.milp`) or the unfair baseline, and returns the selected set as a
:class:`~optsolve.core.solve.MethodOutput` (:func:`set_solution`: ``selected`` and ``group_counts``);
its help line; its defaults (``time_limit``); and its tags: ``unfair`` (it solves the problem without
proportions, ``--unfair``).
"""

from __future__ import annotations

import time

import numpy as np

from optsolve.core.result import Status
from optsolve.core.solve import Job, MethodOutput, entry
from optsolve.cover.problems import fairness_violation


def _convert(method):
    def solve_with(job: Job) -> MethodOutput:
        from optsolve.cover.greedy import convert_fair

        settings = job.settings
        finish, reports = _improver(job)
        found = convert_fair(job.data, _function(job), method=method, eps=settings["eps"], alpha=settings["alpha"],
                             beta=settings["beta"], bicriteria=settings["bicriteria"], deadline=job.deadline.at,
                             max_rounds=settings["max_iter"], finish=finish, progress=job.progress)
        return _output(job, found, reports)
    return solve_with


def _continuous(job: Job) -> MethodOutput:
    from optsolve.cover.continuous import continuous_fair

    settings = job.settings
    finish, reports = _improver(job)
    found = continuous_fair(job.data, _function(job), eps=settings["eps"], alpha=settings["alpha"],
                            beta=settings["beta"], bicriteria=settings["bicriteria"], deadline=job.deadline.at,
                            max_rounds=settings["max_iter"], seed=settings["seed"], finish=finish,
                            progress=job.progress)
    return _output(job, found, reports)


def _improver(job: Job):
    """convert-fair's ``finish`` that improves the repaired cover (:mod:`optsolve.cover.improve`), and the
    list its report goes to; (None, []) with ``improve`` off."""
    reports = []
    if not job.settings["improve"]:
        return None, reports
    from optsolve.cover.improve import improve

    started = time.perf_counter()

    def finish(fn, S, target):
        S, report = improve(job.data, fn, S, target, built_s=time.perf_counter() - started, deadline=job.deadline.at)
        reports.append(report)
        return S
    return finish, reports


def _unfair(job: Job) -> MethodOutput:
    from optsolve.cover.greedy import unfair_greedy

    return _output(job, unfair_greedy(job.data, _function(job), job.deadline.at))


def _milp(job: Job) -> MethodOutput:
    from optsolve.cover.milp import solve_milp

    cp, settings = job.data, job.settings
    remaining = None if job.deadline.at is None else max(0.05, job.deadline.at - time.perf_counter())
    found = solve_milp(cp, time_limit=remaining, tau=(1 - settings["eps"]) * cp.tau if settings["bicriteria"] else None,
                       label=job.problem.source)
    stats = dict(job.context["stats"], dual_bound=found.dual_bound)
    # iterations: branch-and-bound nodes
    if found.status == "infeasible":
        return MethodOutput(Status.INFEASIBLE, {"certificate_kind": "infeasible", "reason": found.message},
                            f"Infeasible: {found.message}", iterations=found.nodes, evaluations=0, stats=stats)
    out = MethodOutput(found.status, None, found.message, iterations=found.nodes, evaluations=0, stats=stats)
    if found.selected is not None:  # even empty: an optimum HiGHS got wrong is then judged (and downgraded)
        set_solution(out, cp, found.selected)
    return out


def _function(job: Job):
    from optsolve.cover.functions import make_function

    return make_function(job.data)


def _output(job: Job, found, reports=()) -> MethodOutput:
    """A greedy, threshold, continuous or unfair-greedy run (:class:`optsolve.cover.greedy.CoverRun`) as a
    method's output; ``reports``: what the improvement of its cover did."""
    stats = dict(job.context["stats"], kappa=found.kappa, beta=found.beta, repaired=found.repaired,
                 guesses_skipped=found.skipped)
    if reports:
        stats["improved"] = reports[-1].as_stats()
        stats["time_s"] = {"improve": reports[-1].time_s, "improve_milp": reports[-1].milp_s}
    out = MethodOutput(found.status, None, found.message, iterations=found.rounds, evaluations=int(found.calls),
                       stats=stats)
    if found.selected:
        set_solution(out, job.data, found.selected)
    return out


METHODS = {
    "greedy": entry(_convert("greedy"), "convert-fair with greedy-fairness-bi (lazy evaluations)"),
    "threshold": entry(_convert("threshold"), "convert-fair with threshold-fairness-bi"),
    "continuous": entry(_continuous, "convert-fair with continuous greedy on the multilinear extension, greedy "
                        "rounding on its support, repair and removals (--seed)"),
    "milp": entry(_milp, "the exact optimum by HiGHS (small instances; --time-limit, default 60 s)",
                  defaults={"time_limit": 60.0}),
    "unfair-greedy": entry(_unfair, "the classic greedy cover, no fairness (a baseline)", tags=("unfair",)),
}


def set_solution(out: MethodOutput, cp, selected) -> None:
    S = [int(i) for i in selected]
    counts = np.bincount(cp.groups[S], minlength=cp.G)
    out.solution = {"selected": S, "group_counts": cp.counts_by_label(counts)}
    out.objective = len(S)
    out.stats["size"] = len(S)
    out.stats["fairness_violation"] = fairness_violation(counts, cp.p, cp.q)
