"""The greedy's picks in :mod:`optsolve.cover.greedy`: the admission tests of an FSM run and of the
repair, and the two engines that yield the greedy's choices one at a time.

* :func:`lazy_steps`: Minoux's accelerated greedy (M. Minoux, "Accelerated greedy algorithms for
  maximizing submodular set functions", Optimization Techniques, LNCIS 7, 1978), a priority queue of
  stale gains, which are upper bounds by submodularity.
* :func:`coverage_steps`: for weighted coverage, the same picks from gains kept exact.
"""

from __future__ import annotations

import heapq

import numpy as np

from optsolve.cover.functions import Coverage
from optsolve.cover.problems import CoverProblem, fair_counts, fair_sizes

GAIN_TOL = 1e-12  # gains below this, relative to the largest singleton gain (or to f(U)), are zero


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


def lazy_steps(fn, groups, admission: FairAdmission | None = None, taken=(), gains: np.ndarray | None = None):
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


def coverage_steps(fn, groups, admission: FairAdmission | None = None, taken=(), gains: np.ndarray | None = None):
    """:func:`lazy_steps` for weighted coverage, same picks: every element's gain is kept exact (an
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


def greedy_steps(fn, groups, admission=None, taken=(), gains=None):
    """The greedy's picks from ``fn``'s current set (:func:`coverage_steps` for coverage, else
    :func:`lazy_steps`)."""
    steps = coverage_steps if isinstance(fn, Coverage) else lazy_steps
    return steps(fn, groups, admission, taken, gains)


class GreedyOrder:
    """The unconstrained greedy order, extended on demand (its own oracle). Every FSM round of
    convert-fair starts with it: until the first element the round's constraints refuse, the
    constrained greedy makes the same choices (the global best is admissible), so only the
    rest is searched again. ``gains``: the singleton values, when already computed."""

    def __init__(self, fn, groups, gains: np.ndarray | None = None):
        self.fn, self.order = fn, []
        fn.reset()
        self._steps = greedy_steps(fn, groups, gains=gains)

    def __getitem__(self, t: int):
        while len(self.order) <= t:
            nxt = next(self._steps, None)
            if nxt is None:
                return None
            self.order.append(nxt)
        return self.order[t]


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


class RepairAdmission:
    """Which groups the repair may grow: all below their maximum count, or only those below their
    minimum once the remaining slots are all needed there. Both only shrink as elements are
    added, so a refused element stays refused (what :func:`lazy_steps` assumes)."""

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


class Fairness:
    """The group counts of a cover S (of :mod:`optsolve.cover.improve`) and which groups one removal (of
    |S| - 1) or one exchange may touch."""

    def __init__(self, cp: CoverProblem, S):
        self.p, self.q, self.groups = cp.p, cp.q, cp.groups
        self.counts = np.bincount(cp.groups[np.asarray(S, dtype=np.int64)], minlength=cp.G).astype(np.int64)

    def bounds(self, m: int):
        return np.ceil(self.p * m - 1e-9), np.floor(self.q * m + 1e-9)

    def fair(self, counts: np.ndarray) -> bool:
        lo, hi = self.bounds(int(counts.sum()))
        return bool(np.all(counts >= lo) and np.all(counts <= hi))

    def removable(self) -> np.ndarray:
        """Per group: whether removing one of its elements leaves counts fair for |S| - 1."""
        m = int(self.counts.sum())
        out = np.zeros(self.counts.size, dtype=bool)
        if m <= 1:
            return out
        lo, hi = self.bounds(m - 1)
        bad = (self.counts < lo) | (self.counts > hi)
        fits = (self.counts - 1 >= lo) & (self.counts - 1 <= hi)
        nbad = int(bad.sum())
        if nbad == 0:
            return fits
        if nbad == 1:
            out[bad] = fits[bad]
        return out
