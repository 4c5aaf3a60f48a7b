"""The submodular functions of ``optsolve cover``, with vectorised marginal gains.

Both keep the state of a growing set S and count oracle calls: one call is the marginal gain
of one element (a vectorised pass over all elements counts n).

* :class:`Coverage`: f(S) = sum of the weights of the items covered by S. The gain of i is the
  weight of its still-uncovered items: for all elements at once ``M @ (w * uncovered)``.
* :class:`FacilityLocation`: f(S) = sum_j max_{i in S} sim[i, j]. The gain of i is
  ``sum_j max(sim[i, j] - best_j, 0)``, computed on the stored entries of the CSR rows.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp


def positions(indptr: np.ndarray, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The positions of the rows (CSR; columns of a CSC) ``idx`` in a compressed matrix of index pointer
    ``indptr``, and the index into ``idx`` of each position's row."""
    idx = np.asarray(idx, dtype=np.int64)
    starts = indptr[idx].astype(np.int64)
    lens = indptr[idx + 1] - starts
    total = int(lens.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64)
    rel = np.repeat(np.arange(idx.size), lens)
    offs = np.arange(total) - np.repeat(np.cumsum(lens) - lens, lens)
    return np.repeat(starts, lens) + offs, rel


class _Function:
    def __init__(self, M: sp.csr_matrix):
        self.M = M
        self.n = M.shape[0]
        self.calls = 0
        self.value = 0.0
        self._row_nnz = np.diff(M.indptr)

    def gains(self, idx=None) -> np.ndarray:
        """Marginal gains of the elements ``idx`` (all when None) with respect to the current set."""
        if idx is None:
            self.calls += self.n
            return self._all_gains()
        idx = np.atleast_1d(np.asarray(idx, dtype=np.int64))
        self.calls += idx.size
        return self._some_gains(idx)

    def gain(self, i: int) -> float:
        self.calls += 1
        return self._gain(int(i))

    def _rows(self, idx):
        return positions(self.M.indptr, idx)


class Coverage(_Function):
    def __init__(self, M: sp.csr_matrix, weights: np.ndarray):
        super().__init__(M)
        self.w = np.asarray(weights, dtype=float)
        self.reset()

    def reset(self):
        if getattr(self, "live", None) is None:
            self.live = self.w.copy()  # weight of items not yet covered, 0 once covered
        else:
            np.copyto(self.live, self.w)  # no new pages: a reset per guess of convert-fair
        self.value = 0.0

    def _all_gains(self):
        return self.M @ self.live

    def _some_gains(self, idx):
        pos, rel = self._rows(idx)
        return np.bincount(rel, weights=self.live[self.M.indices[pos]], minlength=idx.size)

    def _gain(self, i):
        cols = self.M.indices[self.M.indptr[i]:self.M.indptr[i + 1]]
        return float(self.live[cols].sum())

    def add(self, i: int) -> float:
        cols = self.M.indices[self.M.indptr[i]:self.M.indptr[i + 1]]
        g = float(self.live[cols].sum())
        self.live[cols] = 0.0
        self.value += g
        return g

    def covering(self) -> tuple[np.ndarray, np.ndarray]:
        """(indptr, elements): the elements covering each item, column by column (CSC), built once."""
        if getattr(self, "_covering", None) is None:
            M = self.M
            pattern = sp.csr_matrix((np.zeros(M.nnz, dtype=np.int8), M.indices, M.indptr), shape=M.shape).tocsc()
            self._covering = (pattern.indptr, pattern.indices)
        return self._covering

    def add_updating(self, i: int, gains: np.ndarray) -> float:
        """Add element i and lower ``gains`` (every element's gain at the current set) by the weight
        of the items i newly covers, for each element covering them; counts one oracle call per
        gain updated."""
        cols = self.M.indices[self.M.indptr[i]:self.M.indptr[i + 1]]
        w = self.live[cols]
        fresh = w > 0
        items, w = cols[fresh], w[fresh]
        g = float(w.sum())
        self.live[items] = 0.0
        self.value += g
        if items.size:
            self.calls += self.spread(gains, items, -1.0)
        return g

    def spread(self, values: np.ndarray, items: np.ndarray, sign: float, keep=None) -> int:
        """Add ``sign`` times each item's weight to ``values`` at every element covering the item (those
        ``keep(elements)`` marks, when given); returns how many entries changed."""
        indptr, elements = self.covering()
        pos, rel = positions(indptr, items)
        who, amount = elements[pos], sign * self.w[items][rel]
        if keep is not None:
            mask = keep(who)
            who, amount = who[mask], amount[mask]
        np.add.at(values, who, amount)
        return who.size


class FacilityLocation(_Function):
    def __init__(self, M: sp.csr_matrix):
        super().__init__(M)
        self.reset()

    def reset(self):
        if getattr(self, "best", None) is None:
            self.best = np.zeros(self.M.shape[1])
        else:
            self.best.fill(0.0)
        self.value = 0.0

    def _all_gains(self):
        M = self.M
        excess = np.maximum(M.data - self.best[M.indices], 0.0)
        out = np.zeros(self.n)
        nz = self._row_nnz > 0
        out[nz] = np.add.reduceat(excess, M.indptr[:-1][nz])
        return out

    def _some_gains(self, idx):
        pos, rel = self._rows(idx)
        excess = np.maximum(self.M.data[pos] - self.best[self.M.indices[pos]], 0.0)
        return np.bincount(rel, weights=excess, minlength=idx.size)

    def _gain(self, i):
        a, b = self.M.indptr[i], self.M.indptr[i + 1]
        return float(np.maximum(self.M.data[a:b] - self.best[self.M.indices[a:b]], 0.0).sum())

    def add(self, i: int) -> float:
        a, b = self.M.indptr[i], self.M.indptr[i + 1]
        cols, vals = self.M.indices[a:b], self.M.data[a:b]
        g = float(np.maximum(vals - self.best[cols], 0.0).sum())
        self.best[cols] = np.maximum(self.best[cols], vals)
        self.value += g
        return g


def make_function(cp) -> _Function:
    """The oracle of a :class:`optsolve.cover.problems.CoverProblem`."""
    return Coverage(cp.M, cp.weights) if cp.kind == "coverage" else FacilityLocation(cp.M)
