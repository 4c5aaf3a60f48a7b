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
  share its new items (:func:`_coverage_steps`).
* A guess whose FSM budget k beta is below the fewest elements whose singleton values sum to
  the target is not run (no set that small reaches it, by submodularity), nor is a run
  continued once f(S) plus its largest remaining upper bounds, one per slot left, falls short:
  both would fail, so the answer is the same.
"""

from __future__ import annotations

import heapq
import math
import time
from dataclasses import dataclass

import numpy as np

from optsolve.core.history import trace
from optsolve.core.progress import SILENT, Progress
from optsolve.cover.functions import Coverage
from optsolve.cover.problems import CoverProblem, fair_counts, fair_sizes

GAIN_TOL = 1e-12  # gains below this, relative to the largest singleton gain (or to f(U)), are zero
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


class FairAdmission:
    """The FSM test of one run, kept with the run's group counts: may one more element of group c be
    added (:meth:`ok`), and the addition (:meth:`add`).

    FSM: |S n U_c| + 1 <= hi_c and sum_c max(|S n U_c|, lo_c) <= k after the addition. With ``cp``
    (ours), also: some fair set of at most the smallest fair size >= k (of any size when there is
    none; ``ok_sizes``: :func:`fair_sizes`, computed when not given) contains the counts after the
    addition, so that the repair finishes the set near the budget instead of at the next, possibly
    twice larger, fair size.

    Every test only tightens as the set grows, so a group refused once stays refused. The smallest
    fair size m containing the counts, with its per-group minimum and maximum counts, is kept: an
    addition that fits them leaves m unchanged, so a test costs no array work unless it needs a
    larger m. ``lo`` and ``hi`` are the extended bounds tested (arrays)."""

    def __init__(self, k: int, lo: np.ndarray, hi: np.ndarray, cp: CoverProblem | None = None,
                 ok_sizes: np.ndarray | None = None):
        self.k, self.lo, self.hi = k, lo, hi
        self._lo, self._hi = lo.tolist(), hi.tolist()
        self.G = lo.shape[0]
        self.sizes = self.limit = None
        if cp is not None:
            self.sizes, self.p, self.q = cp.group_sizes(), cp.p, cp.q
            ok_sizes = fair_sizes(self.sizes, cp.p, cp.q, cp.n) if ok_sizes is None else ok_sizes
            above = np.flatnonzero(ok_sizes[k:]) if k < ok_sizes.size else np.zeros(0, dtype=np.int64)
            self.limit = int(k + above[0]) if above.size else cp.n
        self.reset()

    def reset(self) -> None:
        self.counts = [0] * self.G
        self.total = 0
        self.filled = float(sum(max(v, 0.0) for v in self._lo))  # sum_c max(counts_c, lo_c)
        self.closed = [False] * self.G
        self._plan = None  # [m, need, cap, sum of need] of the current counts; None: not computed
        self._found = None  # (group, fair_target of the counts plus one of it) from the last slow test

    def _current_plan(self):
        if self._plan is None:
            found = fair_target(np.asarray(self.counts, dtype=np.int64), self.sizes, self.p, self.q, self.total)
            if found is None:
                return None
            m, need, cap = found
            self._plan = [m, need.tolist(), cap.tolist(), int(need.sum())]
        return self._plan

    def _fits(self, c: int) -> bool:
        """Whether the counts plus one of group c fit the kept plan (its m within the limit)."""
        plan = self._current_plan()
        if plan is None:
            return False
        m, need, cap, total_need = plan
        after = self.counts[c] + 1
        return m <= self.limit and after <= cap[c] and (after <= need[c] or total_need + 1 <= m)

    def ok(self, c) -> bool:
        c = int(c)
        if self.closed[c]:
            return False
        cc = self.counts[c]
        if cc + 1 > self._hi[c] or self.filled + (1 if cc >= self._lo[c] else 0) > self.k:
            self.closed[c] = True
            return False
        if self.sizes is None or self._fits(c):
            return True
        after = np.asarray(self.counts, dtype=np.int64)
        after[c] += 1
        found = fair_target(after, self.sizes, self.p, self.q, self.total + 1)
        if found is None or found[0] > self.limit:
            self.closed[c] = True
            return False
        self._found = (c, found)
        return True

    def add(self, c) -> None:
        c = int(c)
        cc = self.counts[c]
        if self.sizes is not None:
            if self._plan is not None and self._fits(c):
                plan = self._plan
                if cc + 1 > plan[1][c]:
                    plan[1][c] = cc + 1
                    plan[3] += 1
            elif self._found is not None and self._found[0] == c:
                m, need, cap = self._found[1]
                self._plan = [m, need.tolist(), cap.tolist(), int(need.sum())]
            else:
                self._plan = None
            self._found = None
        if cc >= self._lo[c]:
            self.filled += 1
        self.counts[c] = cc + 1
        self.total += 1


def fsm_admissible(k: int, lo: np.ndarray, hi: np.ndarray, cp: CoverProblem | None = None,
                   ok_sizes: np.ndarray | None = None) -> FairAdmission:
    """The FSM test of a run with budget k and extended bounds lo, hi (see :class:`FairAdmission`)."""
    return FairAdmission(k, lo, hi, cp, ok_sizes)


def _lazy_steps(fn, groups, admission: FairAdmission | None = None, taken=(), gains: np.ndarray | None = None):
    """Greedy picks with lazy evaluations from ``fn``'s current set (``taken``), one per ``next()``;
    stops when no admissible element has a positive gain. Updates ``fn`` and ``admission``
    (``gains``: every element's gain at ``fn``'s current set, when already computed; the array is
    kept as the queue's upper bounds, 0 for the elements taken or dropped).

    Minoux's accelerated greedy: a queue of stale gains, upper bounds by submodularity; the top
    entry is re-evaluated unless it was evaluated at the current set, in which case it is at least
    every other bound and is the greedy choice (ties: the smaller index). An inadmissible element
    is dropped: the FSM constraints only tighten as the set grows."""
    gains = fn.gains() if gains is None else gains
    tol = GAIN_TOL * float(gains.max(initial=0.0))
    gains[list(taken)] = 0.0
    live = np.flatnonzero(gains > tol)
    heap = list(zip((-gains[live]).tolist(), live.tolist()))
    heapq.heapify(heap)
    ok = (lambda c: True) if admission is None else admission.ok
    gain, add, pop, push = fn.gain, fn.add, heapq.heappop, heapq.heapreplace
    evaluated = {}  # element -> the set size at which its queued gain was computed
    size = 0
    while heap:
        _, i = heap[0]
        if evaluated.get(i) == size:
            pop(heap)
            gains[i] = 0.0
            add(i)
            if admission is not None:
                admission.add(groups[i])
            size += 1
            yield i
            continue
        if not ok(groups[i]):
            pop(heap)
            gains[i] = 0.0
            continue
        g = gain(i)
        gains[i] = g
        if g > tol:
            evaluated[i] = size
            push(heap, (-g, i))
        else:
            pop(heap)


CANDIDATES = 4096  # elements of largest gain the coverage greedy searches between two passes over all
TIE_RTOL = 1e-12  # kept gains within this (relative) of the largest are a tie: their sums of updates round


def _coverage_steps(fn, groups, admission: FairAdmission | None = None, taken=(), gains: np.ndarray | None = None):
    """:func:`_lazy_steps` for weighted coverage, same picks: every element's gain is kept exact (an
    addition lowers the gains of the elements covering the items it newly covers, found through the
    item-to-element incidence), so the greedy choice is the largest gain, the smaller index on a tie
    (to TIE_RTOL). It is searched among about CANDIDATES of the largest: every other gain was at most
    the smallest of them when they were chosen (and of larger index when equal to it), and gains only
    fall, so while the candidates' best is at least that level it is the best of all. Taken and
    refused elements get gain -inf (``gains``, when given, is this array, updated in place)."""
    g = fn.gains() if gains is None else gains
    tol = GAIN_TOL * float(g.max(initial=0.0))
    g[list(taken)] = -np.inf
    if admission is not None:
        for c in np.flatnonzero(admission.closed):
            g[groups == c] = -np.inf
    n = g.size
    cand = None
    while True:
        if cand is None:
            top = float(g.max(initial=-np.inf))
            if not top > tol:
                return
            level = float(np.partition(g, n - CANDIDATES)[n - CANDIDATES]) if n > CANDIDATES else -np.inf
            level = min(max(level, tol), top)
            near = TIE_RTOL * abs(level)
            above = np.flatnonzero(g > level + near)
            ties = np.flatnonzero((g >= level - near) & (g <= level + near))
            room = max(1, CANDIDATES - above.size)  # the ties at the level of smallest index (they win a tie)
            first_out = int(ties[room]) if ties.size > room else n  # the smallest index of a tie left out
            cand = np.sort(np.concatenate([above, ties[:room]]))
        vals = g[cand]
        best = float(vals.max())
        j = int(np.argmax(vals >= best - TIE_RTOL * abs(best)))  # gains equal to rounding: the smaller index
        best = float(vals[j])
        if not best > tol:
            cand = None
            continue
        if not (best > level + near or (best >= level - near and int(cand[j]) < first_out)):
            cand = None  # an element left out may now be as good
            continue
        i = int(cand[j])
        if admission is not None and not admission.ok(groups[i]):
            g[groups == groups[i]] = -np.inf  # a refused group stays refused in this run
            continue
        g[i] = -np.inf
        fn.add_updating(i, g)
        if admission is not None:
            admission.add(groups[i])
        yield i


def _greedy_steps(fn, groups, admission=None, taken=(), gains=None):
    """The greedy's picks from ``fn``'s current set (:func:`_coverage_steps` for coverage, else
    :func:`_lazy_steps`)."""
    steps = _coverage_steps if isinstance(fn, Coverage) else _lazy_steps
    return steps(fn, groups, admission, taken, gains)


class GreedyOrder:
    """The unconstrained greedy order, extended on demand (its own oracle). Every FSM round of
    convert-fair starts with it: until the first element the round's constraints refuse, the
    constrained greedy makes the same choices (the global best is admissible), so only the
    rest is searched again. ``gains``: the singleton values, when already computed."""

    def __init__(self, fn, groups, gains: np.ndarray | None = None):
        self.fn, self.order = fn, []
        fn.reset()
        self._steps = _greedy_steps(fn, groups, gains=gains)

    def __getitem__(self, t: int):
        while len(self.order) <= t:
            nxt = next(self._steps, None)
            if nxt is None:
                return None
            self.order.append(nxt)
        return self.order[t]


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
    for i in _greedy_steps(fn, groups, admission, selected, bounds):
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


def fair_target(counts: np.ndarray, sizes: np.ndarray, p: np.ndarray, q: np.ndarray, m0: int):
    """The smallest size m >= m0 (with its per-group minimum and maximum counts) at which a fair
    set containing the given counts exists, or None."""
    end = int(sizes.sum())
    counts = np.asarray(counts)
    with np.errstate(divide="ignore", invalid="ignore"):
        # a count c_g fits floor(q_g m) only from m >= c_g / q_g on: no smaller size needs a look
        reach = np.where(counts > 0, np.ceil((counts - 1e-9) / np.asarray(q, dtype=float)), 0.0)
    first = float(reach.max(initial=0.0))
    if not first <= end:  # some count exceeds every size's upper bound (q_g = 0, or beyond |U|)
        return None
    start = max(m0, 1, int(first) - 2)
    width = 64  # the first sizes first: the answer is almost always close to the start
    while start <= end:
        ms = np.arange(start, min(end, start + width - 1) + 1)
        ok, need, cap = fair_counts(ms, counts, sizes, p, q)
        if ok.any():
            k = int(np.argmax(ok))
            return int(ms[k]), need[k].astype(np.int64), cap[k].astype(np.int64)
        start, width = start + width, width * 4
    return None


class _RepairAdmission:
    """Which groups the repair may grow: all below their maximum count, or only those below their
    minimum once the remaining slots are all needed there. Both only shrink as elements are
    added, so a refused element stays refused (what :func:`_lazy_steps` assumes)."""

    def __init__(self, counts: np.ndarray, need: np.ndarray, cap: np.ndarray, m: int):
        self.counts, self.need, self.cap = counts.tolist(), need.tolist(), cap.tolist()
        self.left = m - int(counts.sum())  # slots still to fill
        self.short = int(np.maximum(need - counts, 0).sum())  # sum of the deficits below the minimum counts
        self.closed = [False] * counts.size  # no group is refused at the start

    def ok(self, c) -> bool:
        c = int(c)
        if self.short >= self.left:
            return self.counts[c] < self.need[c]
        return self.counts[c] < self.cap[c]

    def add(self, c) -> None:
        c = int(c)
        if self.counts[c] < self.need[c]:
            self.short -= 1
        self.counts[c] += 1
        self.left -= 1


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
    admission = _RepairAdmission(counts, need, cap, m)
    for i in _greedy_steps(fn, groups, admission, out):
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
    groups = cp.groups
    ok_sizes = fair_sizes(cp.group_sizes(), cp.p, cp.q, cp.n)
    largest = int(np.flatnonzero(ok_sizes).max()) if ok_sizes.any() else 0
    aux = list(oracles)  # other oracles the search uses (their calls count too)

    def total_calls():
        return fn.calls + sum(f.calls for f in aux)

    single = None
    if fsm is None:
        if method == "threshold":
            def fsm(fn, admissible, k, target, budget):
                return threshold_greedy(fn, groups, target, admissible, k, eps, budget)
        else:
            from optsolve.cover.functions import make_function

            order_fn = make_function(cp)
            single = order_fn.gains()
            order = GreedyOrder(order_fn, groups, single.copy())
            aux.append(order_fn)

            def fsm(fn, admissible, k, target, budget):
                return lazy_greedy(fn, groups, target, admissible, k, budget, order)
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
                    run.status = "time_limit"
                    run.message = "The time limit stopped the search before a fair cover was found."
                    run.calls = total_calls()
                    return run
                if max_rounds is not None and run.rounds >= max_rounds:
                    run.status = "max_iter"
                    run.message = f"{run.rounds} guesses of the optimum's size (--max-iter) found no fair cover."
                    run.calls = total_calls()
                    return run
                if k >= cp.n:  # every fair set fits the constraints of this guess
                    break
                kappa = _next_guess(kappa, alpha, cp.p, cp.q)
    except KeyboardInterrupt:  # Ctrl-C or a signal (optsolve.core.signals): no fair cover yet
        run.status = "interrupted"
        run.message = f"Interrupted after {run.rounds} guesses of the optimum's size; no fair cover found yet."
        run.calls = total_calls()
        return run
    run.status = "max_iter"
    run.message = (f"No fair set reaching {'(1 - eps) tau' if bicriteria else 'tau'} = {target:.6g} was found "
                   f"(largest fair size {largest}); the threshold may be unreachable with these proportions "
                   "('--method milp' decides it exactly on small instances).")
    run.calls = total_calls()
    return run


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
