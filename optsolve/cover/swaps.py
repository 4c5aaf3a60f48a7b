"""One-for-one swaps on a weighted-coverage cover, each followed by the removals it allows: step 2 of
:mod:`optsolve.cover.improve`."""

from __future__ import annotations

import time
import numpy as np

from optsolve.cover.picks import Fairness
from optsolve.cover.problems import CoverProblem

MOVES_SHARE = 1.0  # the one-for-one swaps and their removals (coverage) may take as long as the build took
MOVES_MIN_S = 0.25  # ... and at least this long (they stop earlier when no swap raises f)
SWAP_SHORTLIST = 64  # per group, the members of least loss and the outside elements of largest gain a swap considers
SWAP_REFRESH = 64  # swaps or removals between two choices of the shortlists


class CoverageSwaps:
    """One-for-one swaps on a coverage cover (see :func:`swap_and_remove`): every outside element's
    gain w.r.t. S and every member's loss, kept exact through the item-to-element incidence."""

    def __init__(self, cp: CoverProblem, fn, held, S: list):
        self.cp, self.fn, self.held = cp, fn, held
        self.inside = np.zeros(cp.n, dtype=bool)
        self.inside[np.asarray(S, dtype=np.int64)] = True
        self.gain = np.asarray(cp.M @ (held.w * (held.count == 0))).ravel()
        self.gain[self.inside] = -np.inf
        self.loss = np.full(cp.n, np.inf)
        self.loss[np.asarray(S, dtype=np.int64)] = held.losses(np.asarray(S, dtype=np.int64))
        self.members = [np.flatnonzero(cp.groups == c) for c in range(cp.G)]
        self.added = []  # elements swapped in, in order
        self.calls = 0

    def _shift_losses(self, items: np.ndarray, sign: float, moved: int) -> None:
        """Add ``sign`` times each item's weight to the loss of the members covering it (but ``moved``):
        the items whose coverage by one member alone began or ended."""
        self.fn.spread(self.loss, items, sign, keep=lambda who: self.inside[who] & (who != moved))

    def add(self, e: int) -> None:
        held = self.held
        cols = held._row(e)
        new = cols[held.count[cols] == 0]
        held.add(e)
        self.inside[e] = True
        self.added.append(e)
        self.fn.spread(self.gain, new, -1.0)
        self.gain[e] = -np.inf
        self._shift_losses(cols[held.count[cols] == 2], -1.0, e)  # their other coverer no longer covers them alone
        self.loss[e] = float(held.loss(e))

    def remove(self, i: int) -> None:
        held = self.held
        cols = held._row(i)
        freed = cols[held.count[cols] == 1]
        held.remove(i)
        self.inside[i] = False
        self.loss[i] = np.inf
        self.fn.spread(self.gain, freed, 1.0)  # members stay at -inf
        self.gain[i] = float(held.gains(np.array([i]))[0])
        self._shift_losses(cols[held.count[cols] == 1], 1.0, i)  # now covered by one member alone

    def extremes(self, fresh: bool = False):
        """Per group: the member of least loss and the outside element of largest gain (-1: none), with
        the loss and the gain, among SWAP_SHORTLIST candidates per group chosen again every
        SWAP_REFRESH calls (or when ``fresh``): between two choices a loss or gain outside them may
        pass theirs, so a move is good, not always the best."""
        if fresh or self.calls % SWAP_REFRESH == 0:
            self.short_loss = [_least(self.loss, idx, SWAP_SHORTLIST) for idx in self.members]
            self.short_gain = [_least(-self.gain, idx, SWAP_SHORTLIST) for idx in self.members]
        self.calls += 1
        out = []
        for lidx, gidx in zip(self.short_loss, self.short_gain):
            loss, gain = self.loss[lidx], self.gain[gidx]
            a = int(np.argmin(loss)) if lidx.size else -1
            b = int(np.argmax(gain)) if gidx.size else -1
            i, li = (int(lidx[a]), float(loss[a])) if a >= 0 and np.isfinite(loss[a]) else (-1, np.inf)
            e, ge = (int(gidx[b]), float(gain[b])) if b >= 0 and np.isfinite(gain[b]) else (-1, -np.inf)
            out.append((i, li, e, ge))
        return out


def _least(values: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    """The (about) k entries of ``idx`` of least ``values`` (all when fewer)."""
    if idx.size <= k:
        return idx
    part = np.argpartition(values[idx], k)[:k]
    return idx[part]


def swap_and_remove(cp: CoverProblem, fn, held, fair: Fairness, S: list, target: float, reached,
                    until: float, budget=None) -> tuple[list, int, int]:
    """Coverage only: remove the member of least loss whenever f stays at the target and the counts
    stay fair at |S| - 1; otherwise make the one-for-one swap (a member out, an outside element in,
    the counts fair at |S|) of largest gain minus loss when it raises f: the swap local search of
    maximum coverage (Nemhauser, Wolsey and Fisher, "An analysis of approximations for maximizing
    submodular set functions", Math. Programming 14, 1978), here to make room for removals. Each
    move costs the incidences of the items it changes, and a pass over the elements' losses and
    gains per group. Until the time ``until``. Returns the set, the swaps and the removals."""
    state = CoverageSwaps(cp, fn, held, S)
    swaps = removed = 0
    tol = 1e-9 * max(abs(target), 1e-300)
    refreshed = False
    while time.perf_counter() < until and not (budget is not None and budget.out()):
        best = state.extremes(fresh=refreshed)
        m = int(fair.counts.sum())
        removable = fair.removable()
        out = [(loss, i) for c, (i, loss, _, _) in enumerate(best) if i >= 0 and removable[c]]
        if out:
            _, i = min(out)
            loss = held.loss(i)  # exact: the kept losses are sums of updates
            if reached(held.value - loss, target):
                state.remove(i)
                fair.counts[cp.groups[i]] -= 1
                removed += 1
                continue
        lo, hi = fair.bounds(m)
        move = None
        for a, (i, loss, _, _) in enumerate(best):
            if i < 0:
                continue
            for b, (_, _, e, gain) in enumerate(best):
                if e < 0 or gain - loss <= tol or (move is not None and gain - loss <= move[0]):
                    continue
                counts = fair.counts.copy()
                counts[a] -= 1
                counts[b] += 1
                if np.all(counts >= lo) and np.all(counts <= hi):
                    move = (gain - loss, i, e)
        if move is None:
            if not refreshed:
                refreshed = True  # the shortlists may be stale: choose them again before giving up
                continue
            break
        refreshed = False
        _, i, e = move
        state.remove(i)
        state.add(e)
        fair.counts[cp.groups[i]] -= 1
        fair.counts[cp.groups[e]] += 1
        swaps += 1
    kept = [i for i in S if state.inside[i]]
    seen = set(kept)
    kept += [e for e in state.added if state.inside[e] and not (e in seen or seen.add(e))]
    return kept, swaps, removed
