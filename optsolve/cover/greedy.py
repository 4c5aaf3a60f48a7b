"""Discrete algorithms for fair submodular cover: convert-fair with the greedy and threshold
FSM subroutines, the exact repair to the proportions, and the classic (unfair) greedy cover.

Chen, Xing, Zhou and Crawford, "Fair Submodular Cover" (ICLR 2025): convert-fair guesses the
optimum's size kappa = (1 + alpha), (1 + alpha)^2, ... and solves fair submodular maximisation
(FSM: maximise f(S) with |S| <= k and l_c <= |S n U_c| <= u_c) for each guess, in the
beta-extension of the constraints (k, l_c, u_c multiplied by beta = ceil(1/eps)), until f(S)
reaches the threshold; greedy-fairness-bi and threshold-fairness-bi are its two FSM
subroutines, with bicriteria guarantee (1/eps, 1 - O(eps)). FSM feasibility is the test of
google-research's fair submodular maximisation code: |S n U_c| <= u_c for all c and
sum_c max(|S n U_c|, l_c) <= k.

Ours, where the paper is silent:

* The budget is an integer, k = max(1, floor(kappa)), with l_c = floor(p_c kappa) and
  u_c = ceil(q_c kappa) from the real kappa; a kappa that gives the same (k, l, u) as the
  previous one is skipped.
* ``beta='auto'`` runs with beta = 1 first and with the extension only when that never
  reaches the threshold (the extension fills beta k slots, so small covers came out about
  twice the optimum).
* Each FSM run stops as soon as f(S) reaches the target, or at zero gain.
* An element is admissible only if some fair set of at most the smallest fair size >= k
  contains the counts after its addition (the extended constraints alone let greedy fill a
  group beyond what any fair set near the budget holds, and the repair then doubled the set).
* Repair: to the smallest size at which a fair superset of S exists, adding the element of
  best marginal gain among the groups that may still grow (those below their minimum count
  when the remaining slots are all needed there); the returned set satisfies the proportions
  exactly.
* Lazy evaluations (Minoux's accelerated greedy): a priority queue of stale gains, which
  are upper bounds by submodularity. An element whose group cannot be added is dropped for
  the rest of the run: the FSM constraints only tighten as S grows. For weighted coverage the
  same picks come from gains kept exact, each addition lowering those of the elements that
  share its new items (:func:`optsolve.cover.picks.coverage_steps`).
* A guess whose FSM budget k beta is below the fewest elements whose singleton values sum to
  the target is not run (no set that small reaches it, by submodularity), nor is a run
  continued once f(S) plus its largest remaining upper bounds, one per slot left, falls short:
  both would fail, so the answer is the same.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from optsolve.core.history import trace
from optsolve.core.progress import SILENT, Progress
from optsolve.cover.picks import (GAIN_TOL, FairAdmission, GreedyOrder, RepairAdmission, fair_target, fsm_admissible,
                                  greedy_steps)
from optsolve.cover.problems import CoverProblem, fair_sizes

VALUE_RTOL = 1e-12  # f(S) within this (relative) of the target reaches it: sums of gains round
# Both are relative only: the weights' scale (1e-20 or 1e20) changes no choice.


# What the traces of `--history` record: one point per guess of the optimum's size.
DEFICIT_MEASURE = "coverage deficit max(0, target - f(S)) / target of the guess's set"


def deficit(value: float, target: float) -> float:
    return max(0.0, target - value) / target if target > 0 else 0.0


def reached(value: float, target: float) -> bool:
    return value >= target - VALUE_RTOL * abs(target)


@dataclass
class CoverRun:
    selected: list
    value: float
    calls: int
    status: str = "optimal"  # optimal (f reaches the target, fair), max_iter (no fair set found), time_limit
    message: str = ""
    kappa: float | None = None
    beta: int | None = None
    rounds: int = 0
    repaired: int = 0
    skipped: int = 0  # guesses of the optimum's size below the singleton bound, not run


class _Budget:
    def __init__(self, deadline):
        self.deadline = deadline

    def out(self) -> bool:
        return self.deadline is not None and time.perf_counter() > self.deadline


def lazy_greedy(fn, groups, target: float, admission: FairAdmission | None = None, max_size: int | None = None,
                budget: _Budget | None = None, order: GreedyOrder | None = None, into: list | None = None) -> list:
    """Greedy with lazy evaluations from the empty set: add the admissible element of largest
    marginal gain until f reaches ``target``, ``max_size`` elements, or no positive gain is left
    (``order``: the unconstrained greedy order, replayed while it is admissible; ``into``: an
    empty list the picks are appended to, which the caller keeps when interrupted)."""
    fn.reset()
    if admission is not None:
        admission.reset()
    selected = [] if into is None else into
    max_size = fn.n if max_size is None else max_size

    def done():
        return reached(fn.value, target) or len(selected) >= max_size or (budget is not None and budget.out())

    if order is not None:
        while not done():
            i = order[len(selected)]
            if i is None:
                return selected  # no element has a positive gain left
            if admission is not None:
                if not admission.ok(groups[i]):
                    break
                admission.add(groups[i])
            fn.add(i)
            selected.append(i)
    if done():
        return selected
    bounds = fn.gains()
    every = max(256, max_size // 32)
    for i in greedy_steps(fn, groups, admission, selected, bounds):
        selected.append(i)
        if done() or (len(selected) % every == 0 and _short(fn.value, target, bounds, max_size - len(selected),
                                                                 groups, admission)):
            break
    return selected


def _short(value: float, target: float, bounds: np.ndarray, slots: int, groups, admission) -> bool:
    """Whether a run at ``value`` with ``slots`` picks left cannot reach the target: each pick adds at
    most its queued upper bound (submodularity), and the groups the admission test has closed add
    nothing."""
    if slots >= bounds.size:
        return False
    live = np.maximum(bounds, 0.0)  # taken or refused: -inf (coverage) or 0
    if admission is not None and any(admission.closed):
        live[np.asarray(admission.closed)[groups]] = 0.0
    best = np.partition(live, bounds.size - slots)[bounds.size - slots:]
    return value + float(best.sum()) < target - VALUE_RTOL * abs(target)


def threshold_greedy(fn, groups, target: float, admission: FairAdmission, max_size: int, eps: float,
                     budget: _Budget | None = None) -> list:
    """threshold-fairness-bi's FSM pass: thresholds from the largest singleton gain down by
    (1 - eps) to eps d / max_size; at each, add every admissible element whose gain passes it
    (stale gains, upper bounds by submodularity, pick the candidates to re-evaluate)."""
    fn.reset()
    ub = fn.gains().astype(float)
    d0 = float(ub.max()) if ub.size else 0.0
    tol = GAIN_TOL * d0
    if d0 <= tol:
        return []
    admission.reset()
    taken = np.zeros(fn.n, dtype=bool)
    selected = []
    d, d_min = d0, eps * d0 / max(1, max_size)
    while d >= d_min and not reached(fn.value, target) and len(selected) < max_size:
        if budget is not None and budget.out():
            break
        for i in np.flatnonzero((ub >= d) & ~taken):
            c = groups[i]
            if not admission.ok(c):
                ub[i] = -1.0  # never admissible again in this run
                continue
            g = fn.gain(i)
            ub[i] = g
            if g >= d and g > tol:
                fn.add(i)
                selected.append(int(i))
                taken[i] = True
                admission.add(c)
                if reached(fn.value, target) or len(selected) >= max_size:
                    break
        d = _next_threshold(d, eps, ub[~taken])
    return selected


def _next_threshold(d: float, eps: float, ub: np.ndarray) -> float:
    """The next threshold d (1 - eps)^j, j >= 1: the first at or below the largest stale gain
    ``ub`` left (the levels above it have no candidate), so a tiny eps takes no more levels than
    there are distinct gains; -1 when no candidate is left."""
    top = float(ub.max(initial=-1.0))
    if top <= 0:
        return -1.0
    step = d * (1.0 - eps)
    if top >= step:
        return step
    j = max(1.0, math.ceil(math.log(top / d) / math.log1p(-eps) - 1e-9))
    nxt = d * math.exp(j * math.log1p(-eps))
    return nxt if nxt <= top else top  # where 1 - eps rounds to 1


def repair(fn, cp: CoverProblem, selected: list, budget: _Budget | None = None) -> list | None:
    """Add elements until the set is fair (None when no fair superset exists): the target is the
    smallest size m at which a fair superset exists (the proportions can leave sizes with no
    fair set at all: five groups with p = 0.1, q = 0.3 allow 5 and 10 but not 6 to 9); each
    addition is the element of best marginal gain among the groups below their maximum count,
    restricted to the groups below their minimum when the remaining slots are all needed there
    (lazy evaluations; elements of zero gain last, by index). ``fn`` holds the state of
    ``selected``."""
    groups = cp.groups
    sizes = cp.group_sizes()
    counts = np.bincount(groups[selected], minlength=cp.G) if selected else np.zeros(cp.G, dtype=np.int64)
    found = fair_target(counts, sizes, cp.p, cp.q, len(selected))
    if found is None:
        return None
    m, need, cap = found
    out = list(selected)
    if len(out) >= m:
        return out
    admission = RepairAdmission(counts, need, cap, m)
    for i in greedy_steps(fn, groups, admission, out):
        out.append(i)
        if len(out) >= m:
            return out
        if budget is not None and budget.out():
            return None
    inside = np.zeros(cp.n, dtype=bool)
    inside[out] = True
    for i in np.flatnonzero(~inside):  # no gain left: any element of a group that may grow, by index
        if len(out) >= m:
            break
        if admission.ok(groups[i]):
            fn.add(int(i))
            admission.add(groups[i])
            out.append(int(i))
    return out if len(out) >= m else None


def smallest_reaching(single: np.ndarray, target: float) -> int:
    """The fewest elements whose singleton values ``single`` sum to the target (n + 1 when all of them
    fall short): by submodularity f(S) <= the sum of S's singleton values, so no smaller set reaches
    it. The target is lowered by a relative 1e-9 against the rounding of the sums."""
    top = np.cumsum(np.sort(np.asarray(single, dtype=float))[::-1])
    return int(np.searchsorted(top, target * (1.0 - 1e-9), side="left")) + 1


def _betas(beta, eps: float) -> list:
    ext = int(math.ceil(1.0 / eps - 1e-12))
    if beta in (None, "auto"):
        return [1] if ext == 1 else [1, ext]
    return [int(beta)]


def _next_guess(kappa: float, alpha: float, p: np.ndarray, q: np.ndarray) -> float:
    """The next guess (1 + alpha)^j kappa, j >= 1, skipping the powers that give the same
    (k, l, u) as kappa: the first one at or after the smallest kappa' > kappa where floor(kappa'),
    some floor(p_c kappa') or some ceil(q_c kappa') changes (a small alpha would otherwise take
    about ln(n) / alpha steps)."""
    step = kappa * (1.0 + alpha)
    first = math.floor(kappa + 1e-9) + 1.0
    change = [first if first > kappa else first + 1.0]
    for v, level in ((p, np.floor(p * kappa + 1e-9) + 1.0 - 1e-9), (q, np.ceil(q * kappa - 1e-9) + 1e-9)):
        pos = v > 0
        if pos.any():
            at = level[pos] / v[pos]
            at = np.where(at > kappa, at, at + 1.0 / v[pos])  # kappa sits on a rounding edge: the next one
            change.append(float(at.min()))
    target = min(change)
    if target > step:
        j = max(1.0, math.ceil(math.log(target / kappa) / math.log1p(alpha) - 1e-9))
        step = max(target, kappa * math.exp(j * math.log1p(alpha)))
    return max(step, float(np.nextafter(kappa, math.inf)))  # always forward, also where 1 + alpha rounds to 1


def _default_fsm(cp: CoverProblem, method: str, eps: float, aux: list):
    """(fsm, singleton gains or None): threshold-fairness-bi for ``method='threshold'``, else greedy-fairness-bi
    with lazy evaluations, whose order keeps an oracle of its own (added to ``aux``, whose calls count)."""
    groups = cp.groups
    if method == "threshold":
        def threshold_fsm(fn, admissible, k, target, budget):
            return threshold_greedy(fn, groups, target, admissible, k, eps, budget)

        return threshold_fsm, None
    from optsolve.cover.functions import make_function

    order_fn = make_function(cp)
    single = order_fn.gains()
    order = GreedyOrder(order_fn, groups, single.copy())
    aux.append(order_fn)

    def greedy_fsm(fn, admissible, k, target, budget):
        return lazy_greedy(fn, groups, target, admissible, k, budget, order)

    return greedy_fsm, single


def convert_fair(cp: CoverProblem, fn, *, method: str = "greedy", eps: float = 0.1, alpha: float = 0.1,
                 beta="auto", bicriteria: bool = False, deadline: float | None = None, max_rounds: int | None = None,
                 fsm=None, finish=None, oracles=(), progress: Progress = SILENT) -> CoverRun:
    """convert-fair: FSM on guesses kappa = (1 + alpha)^i of the optimum's size until f reaches
    tau (or (1 - eps) tau with ``bicriteria``), then the exact repair.

    ``fsm(fn, admissible, k, target, budget)``: the FSM subroutine (default: lazy
    greedy, or threshold for ``method='threshold'``), leaving ``fn`` at its set;
    ``finish(fn, S, target)``: applied to a repaired cover (``fn`` at S; returns the final set
    with ``fn`` at it); ``oracles``: other objects with ``calls`` the subroutine uses."""
    target = (1.0 - eps) * cp.tau if bicriteria else cp.tau
    budget = _Budget(deadline)
    ok_sizes = fair_sizes(cp.group_sizes(), cp.p, cp.q, cp.n)
    largest = int(np.flatnonzero(ok_sizes).max()) if ok_sizes.any() else 0
    aux = list(oracles)  # other oracles the search uses (their calls count too)

    def total_calls():
        return fn.calls + sum(f.calls for f in aux)

    def stop(status: str, message: str) -> CoverRun:
        run.status, run.message, run.calls = status, message, total_calls()
        return run

    single = None
    if fsm is None:
        fsm, single = _default_fsm(cp, method, eps, aux)
    if single is None:
        fn.reset()
        single = fn.gains()
    smallest = smallest_reaching(single, target)
    run = CoverRun([], 0.0, 0)
    try:
        for b in _betas(beta, eps):
            kappa, seen = 1.0 + alpha, None
            while True:
                kap = min(kappa, float(cp.n))  # a guess above n is the last: no set is larger
                k = max(1, int(math.floor(kap + 1e-9)))
                # extended bounds as floats: beta * k may pass the int64 range (eps = 1e-300), exact below 2^53
                lo = np.floor(cp.p * kap + 1e-9) * float(b)
                hi = np.ceil(cp.q * kap - 1e-9) * float(b)
                key = (k, lo.tobytes(), hi.tobytes())
                if key != seen and k * b < smallest:  # no set of k * b elements reaches the target
                    seen = key
                    run.skipped += 1
                elif key != seen:
                    seen = key
                    run.rounds += 1
                    S = fsm(fn, fsm_admissible(k * b, lo, hi, cp, ok_sizes), k * b, target, budget)
                    trace(run.rounds, deficit(fn.value, target), evaluations=total_calls(), measure=DEFICIT_MEASURE,
                          evaluations_of="f (oracle calls)", kappa=kappa, beta=b, size=len(S))
                    progress.update(run.rounds, deficit=deficit(fn.value, target), oracle_calls=total_calls(),
                                    kappa=kappa, size=len(S))
                    if reached(fn.value, target):
                        before = len(S)
                        fixed = repair(fn, cp, S, budget)
                        if fixed is not None and reached(fn.value, target):
                            run.repaired = len(fixed) - before
                            if finish is not None:
                                fixed = finish(fn, fixed, target)
                            run.selected, run.value, run.kappa, run.beta = fixed, fn.value, kappa, b
                            run.calls = total_calls()
                            return run
                if budget.out():
                    return stop("time_limit", "The time limit stopped the search before a fair cover was found.")
                if max_rounds is not None and run.rounds >= max_rounds:
                    return stop("max_iter", f"{run.rounds} guesses of the optimum's size (--max-iter) found no fair "
                                "cover.")
                if k >= cp.n:  # every fair set fits the constraints of this guess
                    break
                kappa = _next_guess(kappa, alpha, cp.p, cp.q)
    except KeyboardInterrupt:  # Ctrl-C or a signal (optsolve.core.signals): no fair cover yet
        return stop("interrupted", f"Interrupted after {run.rounds} guesses of the optimum's size; no fair cover "
                    "found yet.")
    return stop("max_iter", f"No fair set reaching {'(1 - eps) tau' if bicriteria else 'tau'} = {target:.6g} was "
                f"found (largest fair size {largest}); the threshold may be unreachable with these proportions "
                "('--method milp' decides it exactly on small instances).")


def unfair_greedy(cp: CoverProblem, fn, deadline: float | None = None) -> CoverRun:
    """The classic greedy submodular cover (no fairness), with lazy evaluations."""
    S, interrupted = [], False
    try:
        lazy_greedy(fn, cp.groups, cp.tau, None, cp.n, _Budget(deadline), into=S)
    except KeyboardInterrupt:  # Ctrl-C or a signal (optsolve.core.signals): the set so far is the iterate
        interrupted = True
    run = CoverRun(S, fn.value, fn.calls)
    trace(1, deficit(fn.value, cp.tau), evaluations=fn.calls, measure=DEFICIT_MEASURE, evaluations_of="f (oracle calls)",
          size=len(S))
    if interrupted:
        run.status = "interrupted"
        run.message = f"Interrupted: greedy stopped at {len(S)} elements, f(S) = {fn.value:.6g} (tau = {cp.tau:.6g})."
    elif not reached(fn.value, cp.tau):
        run.status = "time_limit" if _Budget(deadline).out() else "max_iter"
        run.message = f"Greedy stopped at f(S) = {fn.value:.6g} < tau = {cp.tau:.6g}."
    return run
