"""Improvement of a fair cover: redundant elements removed, one-for-one swaps that make room for
more removals (coverage), 2-for-1 exchanges, and an exact polish.

Applied to the repaired cover of convert-fair (:func:`optsolve.cover.greedy.convert_fair`'s
``finish``), it never makes the set larger, and every set it returns is fair at its own size and
reaches the target (``reached`` of :mod:`optsolve.cover.greedy`).

1. Redundancy removal, the drop step of set-covering heuristics (the removal of redundant columns
   in the feasibility operator of Beasley and Chu, "A genetic algorithm for the set covering
   problem", EJOR 94, 1996; here against a threshold and the proportions): the loss of an element,
   f(S) - f(S - i), is the weight of the items only it covers (coverage: a count of the selected
   elements covering each item) or the margin of the clients it serves best over their
   second-best site (facility location). Elements go cheapest loss first; one is dropped when f
   stays at the target and the counts are fair for |S| - 1 (the proportions of the smaller size
   allow removals from some groups only). A pass costs the incidences of S's rows.
2. Coverage: one-for-one swaps, a member of least loss out and an outside element of largest gain
   in, whenever that raises f with the counts fair, each followed by the removals the raised f
   allows (:func:`optsolve.cover.swaps.swap_and_remove`), until no swap among the shortlists raises f or a time budget
   (the time the cover took) runs out. Gains and losses are kept exact through the
   item-to-element incidence the greedy built.
3. 2-for-1 exchanges (local search of the 2-opt kind, ours in detail): two elements out, one in,
   when f stays at the target and the counts are fair for |S| - 1; or two out and none in, where
   the proportions refuse every single removal (two groups held at equal shares allow only even
   sizes). Pairs are drawn from the cheapest losses; the element brought in is the best one among
   those reaching an item or client the pair leaves short (found through a column-major index of
   M's entries at the items the pairs' rows reach, one pass over M's column indices per size of
   S), its gain evaluated exactly on S minus the pair. Under a time budget.
4. Exact polish on small instances: HiGHS's MILP (:func:`optsolve.cover.milp.solve_milp`) asked for
   a fair cover of at most |S| - 1 elements, under a short time limit. Its set replaces the
   heuristic's only after f is recomputed from scratch and the proportions are checked exactly;
   when HiGHS proves there is none, S is optimal.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from optsolve.core import memory
from optsolve.cover.functions import positions
from optsolve.cover.picks import Fairness
from optsolve.cover.problems import CoverProblem
from optsolve.cover.swaps import MOVES_MIN_S, MOVES_SHARE, swap_and_remove

SWAP_SHARE = 0.25  # the exchanges may take this share of the time the cover took to build
SWAP_MIN_S = 0.05  # ... and at least this long
SWAP_PAIRS = 40  # cheapest-loss elements whose pairs are tried per size
SWAP_CANDIDATES = 2000  # elements brought in that a pair tries: those reaching the most of what it leaves short
REMOVAL_PASSES = 8  # passes of the redundancy removal at most
POLISH_MAX_ENTRIES = 200_000  # the MILP polish runs only on systems up to this many constraint entries
POLISH_CAP_S = 3.0  # seconds the MILP polish may take at most
POLISH_SHARE = 20.0  # ... and at most this multiple of the time the cover took to build,
POLISH_MIN_S = 2.0  # ... but at least this long (the optimum of a system of 1e4 entries can take a second)


@dataclass
class Improvement:
    """What :func:`improve` did: elements removed by each step, the MILP's verdict, the time."""

    removed: int = 0
    swapped: int = 0  # one-for-one swaps made (coverage), which leave the size as it is
    exchanged: int = 0
    polished: int = 0
    # skipped; proved (no smaller fair cover exists); optimal or incumbent (HiGHS's set replaced S);
    # time_limit (none found in time); rejected (HiGHS's set failed the exact re-check)
    milp: str = "skipped"
    milp_s: float = 0.0
    time_s: float = 0.0
    interrupted: bool = False  # a signal stopped it: the input cover is returned

    def as_stats(self) -> dict:
        out = {"removed": self.removed, "swapped": self.swapped, "exchanged": self.exchanged,
               "polished": self.polished, "milp": self.milp}
        return dict(out, interrupted=True) if self.interrupted else out


class _CoverageHeld:
    """A selected set of a coverage function: per item, how many selected elements cover it."""

    def __init__(self, cp: CoverProblem, S):
        self.M, self.w = cp.M, np.asarray(cp.weights, dtype=float)
        pos, _ = positions(self.M.indptr, np.asarray(S, dtype=np.int64))
        self.count = np.bincount(self.M.indices[pos], minlength=self.M.shape[1]).astype(np.int64)
        self.value = float(self.w[self.count > 0].sum())

    def _row(self, i):
        return self.M.indices[self.M.indptr[i]:self.M.indptr[i + 1]]

    def _alone(self, idx: np.ndarray, times: int) -> np.ndarray:
        """Per element of ``idx``: the weight of its items that ``times`` selected elements cover."""
        pos, rel = positions(self.M.indptr, idx)
        cols = self.M.indices[pos]
        return np.bincount(rel, weights=self.w[cols] * (self.count[cols] == times), minlength=idx.size)

    def losses(self, idx: np.ndarray) -> np.ndarray:
        return self._alone(idx, 1)

    def loss(self, i: int) -> float:
        cols = self._row(i)
        return float(self.w[cols][self.count[cols] == 1].sum())

    def gains(self, idx: np.ndarray) -> np.ndarray:
        return self._alone(idx, 0)

    def remove(self, i: int) -> None:
        self.value -= self.loss(i)
        self.count[self._row(i)] -= 1

    def add(self, i: int) -> None:
        cols = self._row(i)
        self.value += float(self.w[cols][self.count[cols] == 0].sum())
        self.count[cols] += 1

    def short(self, i: int) -> np.ndarray:
        """The items whose coverage removing i loses (covered by i alone)."""
        cols = self._row(i)
        return cols[self.count[cols] == 1]

    def pair_loss_items(self, a: int, b: int) -> np.ndarray:
        """The items removing both a and b uncovers."""
        ca, cb = self._row(a), self._row(b)
        both = np.intersect1d(ca, cb, assume_unique=True)
        return np.union1d(np.union1d(ca[self.count[ca] == 1], cb[self.count[cb] == 1]),
                          both[self.count[both] == 2])


class _FacilityHeld:
    """A selected set of a facility-location function: per client, the best and second-best
    similarity in S and the element of the best (-1: none). Removing an element recomputes both
    for the clients of its row from the column-major copy of S's rows (rows added since the copy
    are scanned apart)."""

    REBUILD_AFTER = 64  # rows added before the column-major copy of S is rebuilt

    def __init__(self, cp: CoverProblem, S):
        self.M = cp.M
        clients = self.M.shape[1]
        self.alive = np.zeros(cp.n, dtype=bool)
        self.alive[np.asarray(S, dtype=np.int64)] = True
        self.copied = np.zeros(cp.n, dtype=bool)  # the rows of the column-major copy
        self.best, self.second = np.zeros(clients), np.zeros(clients)
        self.arg = np.full(clients, -1, dtype=np.int64)
        self._rebuild()
        self.value = float(self.best.sum())

    def _rebuild(self):
        self.rows = np.flatnonzero(self.alive)
        self.copied[:] = self.alive
        self.sub = sp.csc_matrix(self.M[self.rows])
        self.extra = []
        self._top2(np.arange(self.M.shape[1]))

    def _entries(self, clients: np.ndarray):
        """(element, client, value) of every entry of a selected element at the given clients."""
        sub = self.sub
        pos, rel = positions(sub.indptr, clients)
        rows, cl, vals = self.rows[sub.indices[pos]], clients[rel], sub.data[pos]
        if self.extra:
            mark = np.zeros(self.M.shape[1], dtype=bool)
            mark[clients] = True
            parts = [(rows, cl, vals)]
            for e in self.extra:
                a, b = self.M.indptr[e], self.M.indptr[e + 1]
                c, v = self.M.indices[a:b], self.M.data[a:b]
                keep = mark[c]
                parts.append((np.full(int(keep.sum()), e, dtype=np.int64), c[keep].astype(np.int64), v[keep]))
            rows, cl, vals = (np.concatenate(x) for x in zip(*parts))
        keep = self.alive[rows]
        return rows[keep], cl[keep], vals[keep]

    def _top2(self, clients: np.ndarray):
        clients = np.asarray(clients, dtype=np.int64)
        self.best[clients], self.second[clients], self.arg[clients] = 0.0, 0.0, -1
        rows, cl, vals = self._entries(clients)
        if vals.size == 0:
            return
        o = np.lexsort((-vals, cl))
        rows, cl, vals = rows[o], cl[o], vals[o]
        head = np.flatnonzero(np.concatenate([[True], cl[1:] != cl[:-1]]))
        self.best[cl[head]], self.arg[cl[head]] = vals[head], rows[head]
        nxt = head + 1
        nxt = nxt[nxt < cl.size]
        nxt = nxt[cl[nxt] == cl[nxt - 1]]
        self.second[cl[nxt]] = vals[nxt]

    def _row(self, i):
        a, b = self.M.indptr[i], self.M.indptr[i + 1]
        return self.M.indices[a:b], self.M.data[a:b]

    def losses(self, idx: np.ndarray) -> np.ndarray:
        pos, rel = positions(self.M.indptr, idx)
        cols = self.M.indices[pos]
        lost = np.where(self.arg[cols] == idx[rel], self.best[cols] - self.second[cols], 0.0)
        return np.bincount(rel, weights=lost, minlength=idx.size)

    def loss(self, i: int) -> float:
        cols, _ = self._row(i)
        mine = self.arg[cols] == i
        return float((self.best[cols][mine] - self.second[cols][mine]).sum())

    def gains(self, idx: np.ndarray) -> np.ndarray:
        pos, rel = positions(self.M.indptr, idx)
        excess = np.maximum(self.M.data[pos] - self.best[self.M.indices[pos]], 0.0)
        return np.bincount(rel, weights=excess, minlength=idx.size)

    def remove(self, i: int) -> None:
        cols, vals = self._row(i)
        self.alive[i] = False
        # the clients i serves best, or may be the second-best of: the others keep both
        cols = cols[(self.arg[cols] == i) | (vals >= self.second[cols])].astype(np.int64)
        before = float(self.best[cols].sum())
        self._top2(cols)
        self.value -= before - float(self.best[cols].sum())

    def add(self, i: int) -> None:
        cols, vals = self._row(i)
        b, s = self.best[cols], self.second[cols]
        up = vals > b
        self.value += float(np.maximum(vals - b, 0.0).sum())
        self.second[cols] = np.where(up, b, np.maximum(s, vals))
        self.best[cols] = np.where(up, vals, b)
        self.arg[cols] = np.where(up, i, self.arg[cols])
        self.alive[i] = True
        if self.copied[i] or i in self.extra:  # back in S after a trial removal: its entries are held
            return
        self.extra.append(int(i))
        if len(self.extra) > self.REBUILD_AFTER:
            self._rebuild()

    def short(self, i: int) -> np.ndarray:
        cols, _ = self._row(i)
        mine = (self.arg[cols] == i) & (self.best[cols] > self.second[cols])
        return cols[mine]

    def pair_loss_items(self, a: int, b: int) -> np.ndarray:
        ca, _ = self._row(a)
        cb, _ = self._row(b)
        both = np.union1d(ca, cb)
        mine = (self.arg[both] == a) | (self.arg[both] == b)
        return both[mine]


def held_set(cp: CoverProblem, S):
    """The removal / exchange state of the set S for ``cp``'s function."""
    return _CoverageHeld(cp, S) if cp.kind == "coverage" else _FacilityHeld(cp, S)


def remove_redundant(cp: CoverProblem, held, fair: Fairness, S: list, target: float, reached,
                     budget=None) -> list:
    """Drop elements of S, cheapest loss first, while f stays at ``target`` and the counts stay
    fair; a pass costs the incidences of S's rows. Losses only grow as S shrinks, so another pass
    (at most REMOVAL_PASSES) runs only when the proportions refused an element and a removal may
    since have allowed it. ``held`` and ``fair`` follow S."""
    S = list(S)
    for _ in range(REMOVAL_PASSES):
        idx = np.asarray(S, dtype=np.int64)
        order = idx[np.argsort(held.losses(idx), kind="stable")]
        gone, refused = set(), False
        allowed = fair.removable()
        for i in order.tolist():
            if budget is not None and budget.out():
                break
            c = cp.groups[i]
            if not allowed[c]:
                refused = True
                continue
            if reached(held.value - held.loss(i), target):
                held.remove(i)
                fair.counts[c] -= 1
                gone.add(i)
                allowed = fair.removable()
        S = [i for i in S if i not in gone]
        if not (gone and refused):
            break
    return S


def exchange(cp: CoverProblem, held, fair: Fairness, S: list, target: float, reached, until: float,
             budget=None) -> tuple[list, int]:
    """2-for-1 exchanges, and 2-for-0 where two elements are redundant together (see the module),
    each followed by a redundancy pass, until none of the tried pairs gives one or the time
    ``until`` (a perf_counter time) passes. Returns the set and the number of elements the
    exchanges and their passes removed."""
    pairs = _Pairs(cp, held, fair, S, target, reached)
    start = len(S)
    while len(S) > 2 and time.perf_counter() < until and not (budget is not None and budget.out()):
        idx = np.asarray(S, dtype=np.int64)
        cand = idx[np.argsort(held.losses(idx), kind="stable")][:SWAP_PAIRS].tolist()
        pairs.focus(cand)
        found = None
        for x in range(len(cand)):
            for y in range(x + 1, len(cand)):
                found = pairs.try_pair(cand[x], cand[y])
                if found is not None or time.perf_counter() >= until:
                    break
            if found is not None or time.perf_counter() >= until:
                break
        if found is None:
            break
        a, b, e = found
        out = [a, b]
        if e is not None:
            held.add(e)
            fair.counts[cp.groups[e]] += 1
            pairs.inside[e] = True
        for i in out:
            held.remove(i)
            fair.counts[cp.groups[i]] -= 1
            pairs.inside[i] = False
        S = [i for i in S if i not in out] + ([] if e is None else [e])
        kept = remove_redundant(cp, held, fair, S, target, reached, budget)
        pairs.inside[np.asarray(sorted(set(S) - set(kept)), dtype=np.int64)] = False
        S = kept
    return S, start - len(S)


class _Pairs:
    """The pair trials of :func:`exchange`: S - a - b (+ e) against the target and the proportions."""

    def __init__(self, cp: CoverProblem, held, fair: Fairness, S: list, target: float, reached):
        self.cp, self.held, self.fair, self.target, self.reached = cp, held, fair, target, reached
        self.inside = np.zeros(cp.n, dtype=bool)
        self.inside[np.asarray(S, dtype=np.int64)] = True
        self.reached_by = None  # M's entries at the items of the focus rows, column-major
        self.focus_items = np.zeros(0, dtype=np.int64)
        self.tried = set()

    def focus(self, elements: np.ndarray) -> None:
        """Index, column-major, the entries of M at the items (clients) the rows of ``elements``
        reach: the only ones a pair of them can leave short. One pass over M's column indices,
        holding only the entries found."""
        M = self.cp.M
        pos, _ = positions(M.indptr, np.asarray(elements, dtype=np.int64))
        items = np.unique(M.indices[pos]).astype(np.int64)
        mark = np.zeros(M.shape[1], dtype=bool)
        mark[items] = True
        at = np.flatnonzero(mark[M.indices])
        rows = np.searchsorted(M.indptr, at, side="right") - 1
        local = np.searchsorted(items, M.indices[at])
        self.reached_by = sp.csc_matrix((np.ones(at.size, dtype=np.int8), (rows, local)),
                                        shape=(M.shape[0], items.size))
        self.focus_items = items

    def try_pair(self, a: int, b: int):
        """(a, b, None) when S - a - b is fair and reaches the target; (a, b, e) for the best element
        e that makes S - a - b + e so; else None. A pair is tried once per size of S."""
        cp, fair = self.cp, self.fair
        m = int(fair.counts.sum())
        key = (min(a, b), max(a, b), m)
        if key in self.tried:
            return None
        self.tried.add(key)
        counts = fair.counts.copy()
        counts[cp.groups[a]] -= 1
        counts[cp.groups[b]] -= 1
        lo, hi = fair.bounds(m - 2)
        drop = m > 2 and bool(np.all(counts >= lo) & np.all(counts <= hi))
        lo, hi = fair.bounds(m - 1)
        ok_group = (counts + 1 >= lo) & (counts + 1 <= hi)
        others = (counts >= lo) & (counts <= hi)
        if int((~others).sum()) > 1:
            ok_group[:] = False
        elif not others.all():
            ok_group &= ~others
        if not drop and not ok_group.any():
            return None
        items = self.held.pair_loss_items(a, b)
        cand = np.zeros(0, dtype=np.int64)
        if ok_group.any() and items.size:
            cand = self._candidates(items, ok_group)
        self.held.remove(a)
        self.held.remove(b)
        try:
            if drop and self.reached(self.held.value, self.target):
                return a, b, None
            if cand.size == 0:
                return None
            g = self.held.gains(cand)
            best = int(np.argmax(g))
            ok = self.reached(self.held.value + float(g[best]), self.target)
        finally:
            self.held.add(b)
            self.held.add(a)
        return (a, b, int(cand[best])) if ok else None

    def _candidates(self, items: np.ndarray, ok_group: np.ndarray) -> np.ndarray:
        """Elements outside S, of the groups that may grow, reaching some of ``items`` (at most
        SWAP_CANDIDATES: those reaching the most)."""
        CT = self.reached_by
        pos, _ = positions(CT.indptr, np.searchsorted(self.focus_items, items).astype(np.int64))
        cand, hits = np.unique(CT.indices[pos].astype(np.int64), return_counts=True)
        keep = ok_group[self.cp.groups[cand]] & ~self.inside[cand]
        cand, hits = cand[keep], hits[keep]
        if cand.size > SWAP_CANDIDATES:
            cand = cand[np.argsort(-hits, kind="stable")[:SWAP_CANDIDATES]]
        return cand


def improve(cp: CoverProblem, fn, S: list, target: float, *, built_s: float = 0.0, deadline: float | None = None,
            polish: bool = True, exchanges: bool = True) -> tuple[list, Improvement]:
    """The improved fair cover of ``target`` from the fair cover S (see the module), with ``fn`` left
    at it. ``built_s``: the time S took to build (the exchanges and the polish get time in proportion);
    ``deadline``: a perf_counter time no step passes."""
    from optsolve.cover.greedy import _Budget, reached

    t0 = time.perf_counter()
    budget = _Budget(deadline)
    report = Improvement()
    original = list(S)
    try:
        held, fair = held_set(cp, S), Fairness(cp, S)
        S = remove_redundant(cp, held, fair, S, target, reached, budget)
        report.removed = len(original) - len(S)
        if exchanges and cp.kind == "coverage" and not budget.out():
            until = time.perf_counter() + max(MOVES_MIN_S, MOVES_SHARE * built_s)
            if deadline is not None:
                until = min(until, deadline)
            S, report.swapped, dropped = swap_and_remove(cp, fn, held, fair, S, target, reached, until, budget)
            report.removed += dropped
        if exchanges and not budget.out():
            until = time.perf_counter() + max(SWAP_MIN_S, SWAP_SHARE * built_s)
            if deadline is not None:
                until = min(until, deadline)
            S, report.exchanged = exchange(cp, held, fair, S, target, reached, until, budget)
        if not _holds(cp, fn, S, target, reached):  # rounding of the running value: back to the input
            S = original
            _holds(cp, fn, S, target, reached)
            report.removed = report.exchanged = report.swapped = 0
        if polish:
            S = _polish(cp, fn, S, target, built_s, deadline, report, reached)
    except KeyboardInterrupt:  # Ctrl-C or a signal (optsolve.core.signals): the input cover, still fair
        S = original
        _holds(cp, fn, S, target, reached)
        report = Improvement(interrupted=True)
    report.time_s = time.perf_counter() - t0
    return S, report


def _holds(cp: CoverProblem, fn, S: list, target: float, reached) -> bool:
    """Whether S is fair and f(S), recomputed from scratch on ``fn`` (left at S), reaches the target."""
    fn.reset()
    for e in S:
        fn.add(int(e))
    fn.calls += len(S)
    if not S or len(set(S)) != len(S):
        return False
    counts = np.bincount(cp.groups[np.asarray(S, dtype=np.int64)], minlength=cp.G)
    m = len(S)
    fair = np.all(counts >= np.ceil(cp.p * m - 1e-9)) and np.all(counts <= np.floor(cp.q * m + 1e-9))
    return bool(fair) and reached(fn.value, target)


def _polish(cp: CoverProblem, fn, S: list, target: float, built_s: float, deadline, report: Improvement,
            reached) -> list:
    """The MILP of a fair cover with at most |S| - 1 elements (see the module); ``fn`` is left at the
    returned set."""
    from optsolve.cover.certificate import lp_entries
    from optsolve.cover.milp import MILP_BYTES_PER_ENTRY, solve_milp

    if len(S) <= 1 or lp_entries(cp) > POLISH_MAX_ENTRIES:
        return S
    if lp_entries(cp) * MILP_BYTES_PER_ENTRY > memory.budget_bytes():
        return S
    limit = min(POLISH_CAP_S, max(POLISH_MIN_S, POLISH_SHARE * built_s))
    if deadline is not None:  # half of what is left: the certificate still has to run
        limit = min(limit, 0.5 * (deadline - time.perf_counter()))
    if limit < 0.05:
        return S
    t = time.perf_counter()
    found = solve_milp(cp, time_limit=limit, tau=target, max_size=len(S) - 1)
    report.milp_s = time.perf_counter() - t
    if found.status == "infeasible":
        report.milp = "proved"
        return S
    if found.selected is None or len(found.selected) >= len(S):
        report.milp = "time_limit"
        return S
    if not _holds(cp, fn, found.selected, target, reached):
        report.milp = "rejected"
        _holds(cp, fn, S, target, reached)
        return S
    report.milp = "optimal" if found.status == "optimal" else "incumbent"
    report.polished = len(S) - len(found.selected)
    return list(found.selected)
