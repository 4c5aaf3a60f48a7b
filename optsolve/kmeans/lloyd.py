"""Lloyd steps that read only the points whose nearest centre can change.

Each point keeps an upper bound ``u`` on its distance to its centre and a lower bound ``l`` on its
distance to every other centre (Hamerly, "Making k-means even faster", SDM 2010). When the centres
move, ``u`` grows by its centre's move and ``l`` shrinks by the largest move of another centre; a
point with ``u <= max(l, s / 2)``, ``s`` its centre's distance to the nearest other centre (Elkan,
"Using the triangle inequality to accelerate k-means", ICML 2003), keeps its centre without being
read. The first assignment starts from the predicted labels: a point within ``s / 2`` of its label's
centre is nearest to it, by the triangle inequality, at the cost of one distance.

The points left get their distances to all centres through BLAS (a block of rows times the centres),
in the points' own precision: float32 input stays float32, one block at a time. Each bound computed in
that precision is widened by the rounding of a squared distance (see :func:`_rounding`), so that the
bounds hold for the exact distances; a point whose two nearest centres lie within that rounding is
assigned in float64 at the end. The centres' sums, the points' squared norms and the cost are float64;
the sums are updated by the points that change centre only.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from optsolve.core.blocks import fold_blocks

BLOCK = 4096  # rows per block of a pass over the points: the block and its distance table stay in cache
CANCELLATION = 1e-4  # the cost from the clusters' sums is used while it is at least this share of the sum of
#                      the points' squared norms (below it the subtraction loses digits: a direct pass instead)


@dataclass
class Assignment:
    """The outcome of :func:`lloyd`: the centres, every point's nearest centre among them and the cost."""

    centres: np.ndarray  # L x d, float64
    nearest: np.ndarray  # m, int64
    cost: float  # sum over the points of the squared distance to the nearest centre
    steps: int  # Lloyd steps done (centre updates)
    stopped: bool  # the deadline cut the steps short
    full_rows: int  # distance rows computed against every centre, over all the passes
    start_cost: float  # the cost of the given centres


def _rounding(d: int, dtype) -> float:
    """Bound on the rounding of a squared distance ||x||^2 - 2 x'c + ||c||^2 computed in ``dtype``,
    relative to ||x||^2 + ||c||^2: the dot product's (d + 2) roundings, those of the sums and of
    converting x to ``dtype`` (Higham, Accuracy and Stability of Numerical Algorithms, section 3.1),
    doubled."""
    return 2.0 * (d + 8) * float(np.finfo(dtype).eps)


def _onehot(index: np.ndarray, weights, k: int):
    """The k x n matrix with ``weights[j]`` at (index[j], j): one entry per column, so CSC needs no sort."""
    return sp.csc_matrix((weights, index, np.arange(index.size + 1)), shape=(k, index.size))


class _Points:
    """Rows of X shifted by ``shift``, read a block or a set of rows at a time, in float64 and in the
    working precision."""

    def __init__(self, X, shift: np.ndarray):
        self.X = X
        self.shift = shift
        self.work = np.float32 if X.dtype in (np.float32, np.float16) else np.float64

    def rows(self, index) -> tuple[np.ndarray, np.ndarray]:
        B64 = self.X[index].astype(np.float64)  # a copy (X is never written), then shifted in place
        B64 -= self.shift
        with np.errstate(over="ignore"):
            return B64, (B64.astype(np.float32) if self.work is np.float32 else B64)


class _Lloyd:
    def __init__(self, X, centres: np.ndarray, threads: int | None):
        self.X = X
        self.threads = threads
        self.m, self.d = X.shape
        C = np.array(centres, dtype=np.float64)
        self.k = C.shape[0]
        self.pts = _Points(X, C.mean(axis=0))
        self.C = C - self.pts.shift  # shifted centres: distances of shifted points lose fewer digits
        self.gamma = _rounding(self.d, self.pts.work)
        self.a = np.zeros(self.m, dtype=np.int64)
        self.u = np.empty(self.m)
        self.l = np.empty(self.m)
        self.xx = np.empty(self.m)  # squared norms of the shifted points
        self.sums = np.zeros((self.k, self.d))
        self.norms = np.zeros(self.k)  # per centre, the sum of its points' squared norms
        self.counts = np.zeros(self.k, dtype=np.int64)
        self.full_rows = 0
        self._centres_changed()

    def _centres_changed(self):
        C = self.C
        with np.errstate(over="ignore"):
            self.Cw = C.astype(self.pts.work)
        self.CwT = np.ascontiguousarray(-2.0 * self.Cw.T)
        self.cc = (C * C).sum(axis=1)
        with np.errstate(over="ignore"):  # past float32's range: inf, and the rows it meets are settled in float64
            self.ccw = self.cc.astype(self.pts.work)
        self.cmax = float(self.cc.max())
        if self.k > 1:
            self.half = np.empty(self.k)
            step = max(1, (1 << 22) // self.k)  # rows of the centre-to-centre table at a time
            for lo in range(0, self.k, step):
                hi = min(self.k, lo + step)
                both = self.cc[lo:hi, None] + self.cc[None, :]
                D2 = both - 2.0 * C[lo:hi] @ C.T - _rounding(self.d, np.float64) * both  # below the exact ones
                D2[np.arange(hi - lo), np.arange(lo, hi)] = np.inf
                self.half[lo:hi] = 0.5 * np.sqrt(np.maximum(D2.min(axis=1), 0.0))
        else:
            self.half = np.full(1, np.inf)

    def _full(self, B, xx) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Nearest centre of each row of B (working precision) and rigorous bounds (u, l) on the
        exact distances to it and to every other centre."""
        with np.errstate(over="ignore", invalid="ignore"):  # overflow: the bounds below say nothing, as they should
            G = B @ self.CwT
            G += self.ccw
        rows = np.arange(B.shape[0])
        a = np.argmin(G, axis=1)
        g1 = G[rows, a].astype(np.float64)
        err = self.gamma * (xx + self.cmax)
        u = np.sqrt(np.maximum(g1 + xx, 0.0) + err)
        if self.k > 1:
            G[rows, a] = np.inf
            g2 = G.min(axis=1).astype(np.float64)
            lo = np.sqrt(np.maximum(g2 + xx - err, 0.0))
        else:
            lo = np.full(B.shape[0], np.inf)
        # squares past float32's range: bounds that prove nothing, the point settled in float64 at the end
        return a, np.where(np.isfinite(u), u, np.inf), np.where(np.isfinite(lo), lo, 0.0)

    def _own(self, B, a, xx) -> np.ndarray:
        """Rigorous upper bounds on the exact distances of the rows of B to the centres ``a``."""
        with np.errstate(over="ignore", invalid="ignore"):
            diff = B - self.Cw[a]
            own = np.sqrt(np.einsum("ij,ij->i", diff, diff).astype(np.float64) + self.gamma * (xx + self.cmax))
        return np.where(np.isfinite(own), own, np.inf)

    def _first_block(self, lo: int, hi: int, start: np.ndarray | None):
        """:meth:`first` on rows lo..hi: their slices of the state written, (their sums, norms, full rows) returned."""
        B64, B = self.pts.rows(slice(lo, hi))
        xx = np.einsum("ij,ij->i", B64, B64)
        self.xx[lo:hi] = xx
        a = np.zeros(hi - lo, dtype=np.int64)
        u, low = np.empty(hi - lo), np.empty(hi - lo)
        rest = np.ones(hi - lo, dtype=bool)
        if start is not None:
            cand = start[lo:hi]
            known = cand >= 0
            c = np.where(known, cand, 0)
            du = self._own(B, c, xx)
            ok = known & (du <= self.half[c])
            a[ok], u[ok], low[ok] = c[ok], du[ok], 2.0 * self.half[c[ok]] - du[ok]
            rest = ~ok
        full = int(rest.sum())
        if full:
            a[rest], u[rest], low[rest] = self._full(B[rest], xx[rest])
        self.a[lo:hi], self.u[lo:hi], self.l[lo:hi] = a, u, low
        return _onehot(a, np.ones(a.size), self.k) @ B64, np.bincount(a, weights=xx, minlength=self.k), full

    def first(self, start: np.ndarray | None) -> None:
        """Assign every point, its predicted centre ``start`` first (-1: none), and sum the clusters;
        blocks of rows on the threads of :func:`optsolve.core.blocks.fold_blocks`."""
        def combine(x, y):
            return x[0] + y[0], x[1] + y[1], x[2] + y[2]

        self.sums, self.norms, self.full_rows = fold_blocks(lambda lo, hi: self._first_block(lo, hi, start), self.m,
                                                            BLOCK, combine, self.threads)
        self.counts = np.bincount(self.a, minlength=self.k)

    def cost(self) -> float:
        """The cost of the current centres and assignment, from the clusters' sums."""
        C = self.C
        per = self.norms - 2.0 * np.einsum("ij,ij->i", C, self.sums) + self.counts * self.cc
        return float(max(per.sum(), 0.0))

    def move(self) -> bool:
        """Every centre to the mean of its points (a centre without points stays); the bounds widened
        by the moves. False when no centre moves."""
        live = self.counts > 0
        new = self.C.copy()
        new[live] = self.sums[live] / self.counts[live, None]
        delta = np.sqrt(((new - self.C) ** 2).sum(axis=1))
        if not delta.any():
            return False
        self.C = new
        self._centres_changed()
        self.u += delta[self.a]
        if self.k > 1:
            order = np.argsort(delta)
            top, second = order[-1], order[-2]
            self.l -= np.where(self.a == top, delta[second], delta[top])
        return True

    def reassign(self, exact: bool = False) -> int:
        """Points whose bounds no longer prove their centre: tighten the upper bound, then the full row
        where it still fails (``exact``: the rows in float64, ties taken by the smallest index). Returns
        how many points changed centre."""
        limit = np.maximum(self.l, self.half[self.a])
        idx = np.flatnonzero(self.u > limit)
        moved = 0
        for lo in range(0, idx.size, 8 * BLOCK):
            rows = idx[lo:lo + 8 * BLOCK]
            B64, B = self.pts.rows(rows)
            xx = self.xx[rows]
            old = self.a[rows]
            if exact:
                G = B64 @ (-2.0 * self.C.T)
                G += self.cc
                new = np.argmin(G, axis=1)
                self.u[rows] = self.l[rows] = np.sqrt(np.maximum(G[np.arange(rows.size), new] + xx, 0.0))
                self.full_rows += rows.size
            else:
                u = self._own(B, old, xx)
                self.u[rows] = u
                again = u > limit[rows]
                new = old.copy()
                if again.any():
                    new[again], self.u[rows[again]], self.l[rows[again]] = self._full(B[again], xx[again])
                self.full_rows += int(again.sum())
            change = new != old
            if change.any():
                moved += int(change.sum())
                self.a[rows[change]] = new[change]
                ones = np.ones(int(change.sum()))
                self.sums += _onehot(new[change], ones, self.k) @ B64[change]
                self.sums -= _onehot(old[change], ones, self.k) @ B64[change]
                np.add.at(self.norms, new[change], xx[change])
                np.subtract.at(self.norms, old[change], xx[change])
        if moved:
            self.counts = np.bincount(self.a, minlength=self.k)
        return moved

    def direct_cost(self) -> float:
        """The cost summed point by point in float64 (no cancellation)."""
        total = 0.0
        for lo in range(0, self.m, BLOCK):
            B64, _ = self.pts.rows(slice(lo, min(self.m, lo + BLOCK)))
            diff = B64 - self.C[self.a[lo:lo + BLOCK]]
            total += float(np.einsum("ij,ij->", diff, diff))
        return total


def lloyd(X, centres, steps: int, *, start: np.ndarray | None = None, deadline: float | None = None,
          threads: int | None = None) -> Assignment:
    """At most ``steps`` Lloyd iterations (Lloyd, IEEE Trans. Inf. Theory 28(2), 1982) from ``centres``,
    then every point's nearest centre and the cost. Stops early when no point changes centre, or when
    ``time.perf_counter()`` passes ``deadline`` between steps. ``start``: each point's predicted centre
    (an index into ``centres``, -1 for none), tried first. A centre left without points stays where it is.
    ``X`` is read in blocks of rows (a memory map stays mapped) in its own precision where it is float32;
    the assignment returned is to a nearest centre in float64 arithmetic. ``threads``: for the first pass
    over the points (default: :func:`optsolve.core.blocks.map_blocks`'s, the BLAS limit in effect)."""
    run = _Lloyd(X, centres, threads)
    run.first(start)
    start_cost = run.cost()
    done, stopped = 0, False
    while done < steps:
        if deadline is not None and time.perf_counter() >= deadline:
            stopped = True
            break
        if not run.move():
            break
        done += 1
        if run.reassign() == 0:
            break
    run.reassign(exact=True)
    cost = run.cost()
    total = float(run.norms.sum())
    if cost < CANCELLATION * total:
        cost = run.direct_cost()
    return Assignment(run.C + run.pts.shift, run.a, cost, done, stopped, run.full_rows, start_cost)
