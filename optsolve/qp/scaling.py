"""Ruiz equilibration of a QP with cost scaling, as OSQP does it.

Stellato, Banjac, Goulart, Bemporad and Boyd (2020), "OSQP: an operator splitting solver for
quadratic programs", Math. Prog. Comp. 12, section 5.1; Ruiz (2001), "A scaling algorithm to
equilibrate both rows and columns norms in matrices", RAL-TR-2001-034. Each pass divides every
row and column of the KKT matrix ``[P A'; A 0]`` by the square root of its largest entry, then
scales the cost so that the mean column maximum of P (or the largest |q|) is one.

The passes read only the entries' magnitudes, so they run on one vector of them per matrix
(A's entries are then those magnitudes with their signs; P is written once, from the
accumulated factors, so that it stays exactly symmetric).
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from optsolve.qp.ldl import columns
from optsolve.qp.problems import QPProblem

MIN_SCALING, MAX_SCALING = 1e-4, 1e4  # osqp's: a maximum below counts as 1, one above as MAX_SCALING
SCALING_FIXED = 4 * np.finfo(float).eps  # Ruiz factors this close to 1: the equilibration has converged
AT_SLOW = 10e-9  # seconds an entry: np.maximum.at slower than this on A's rows hands over to _RowMax's other way
AT_PROBE = 4096  # entries on which it is timed (fewer: not timed)


@dataclass
class Scaled:
    """The equilibrated problem: P~ = c D P D, q~ = c D q, A~ = E A D, bounds E l, E u."""

    P: sp.csc_matrix
    q: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray
    D: np.ndarray
    E: np.ndarray
    c: float


def _limit(v):
    v = np.where(v < MIN_SCALING, 1.0, v)
    return np.minimum(v, MAX_SCALING)


def segments(counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(starts, full)`` of segments of lengths ``counts`` laid end to end: where each non-empty one begins,
    and which are non-empty (the arguments of :func:`segment_max`)."""
    full = counts > 0
    return (np.cumsum(counts) - counts)[full], full


def segment_max(w: np.ndarray, starts: np.ndarray, full: np.ndarray) -> np.ndarray:
    """The maximum of each segment of ``w`` (:func:`segments`; an empty segment's maximum is 0)."""
    out = np.zeros(full.size)
    if starts.size:
        out[full] = np.maximum.reduceat(w, starts)
    return out


# the maxima of short segments by a padded table: where the table holds at most PAD_SHARE times the entries and the
# segments average at most PAD_MEAN entries (np.maximum.reduceat costs about 20 ns a segment, whatever its length)
PAD_SHARE, PAD_MEAN = 4, 16


class _Padded:
    """The maximum of each of ``count`` segments of a vector of magnitudes (entries >= 0), the segment of each entry
    given by ``seg``, by a table of ``count`` columns and as many rows as the longest segment has entries: each
    entry written to its own slot (its rank within its segment), the others 0, and the maximum taken down the
    columns. On a KKT matrix whose rows and columns hold a few entries each (the LISWET files: four a column) this
    costs a third of ``np.maximum.reduceat``'s time, and the maxima are the same exactly. ``of`` answers None where
    the table would be too large (:data:`PAD_SHARE`, :data:`PAD_MEAN`)."""

    def __init__(self, flat: np.ndarray, shape: tuple[int, int]):
        self.flat, self.table = flat, np.zeros(shape)

    @classmethod
    def of(cls, seg: np.ndarray, count: int, adjacent: bool) -> "_Padded | None":
        """``adjacent``: each segment's entries lie together in order of their segments (CSC columns)."""
        nnz = seg.size
        if nnz == 0 or count == 0 or nnz > PAD_MEAN * count:
            return None
        lengths = np.bincount(seg, minlength=count)
        longest = int(lengths.max())
        if longest * count > PAD_SHARE * nnz:
            return None
        starts = np.cumsum(lengths) - lengths
        if adjacent:
            rank = np.arange(nnz) - starts[seg]
        else:
            order = np.argsort(seg, kind="stable")
            rank = np.empty(nnz, dtype=np.intp)
            rank[order] = np.arange(nnz) - starts[seg[order]]
        return cls(rank * count + seg, (longest, count))

    def __call__(self, w: np.ndarray) -> np.ndarray:
        self.table.ravel()[self.flat] = w  # the same slots at every call: the others stay 0
        return self.table.max(axis=0)


class _RowMax:
    """The maximum of each row of A's entry magnitudes ``w`` (stored by column, rows ``rows``).

    ``np.maximum.at`` needs no copy and takes 1.4-3.6 ns an entry on the generated families, but
    27-39 ns on some row patterns (LISWET1, HUESTIS, AUG2DCQP, CVXQP1_L), where gathering the
    entries into row order and taking ``np.maximum.reduceat`` takes 2-8 ns. The first call times
    the former on the first ``AT_PROBE`` entries (44-52 ns an entry there where the whole takes
    43-47 ns, 1.4-5.7 ns where it takes 1.3-1.9 ns) and goes on with it unless that was slower than
    ``AT_SLOW`` an entry; both give the same maxima exactly. With fewer entries than that, untimed, the rows'
    order at once: the sort is cheap there, and ``np.maximum.at`` can be slow (116 us a call on DPKLO1's 1,708
    entries, against 5 by the rows' order; about the same, 4-5 us, on the generated families)."""

    def __init__(self, rows: np.ndarray, m: int):
        self.rows, self.m, self.order = rows, m, None

    def _by_rows(self):
        self.order = np.argsort(self.rows, kind="stable")
        self.starts, self.full = segments(np.bincount(self.rows, minlength=self.m))

    def __call__(self, w: np.ndarray) -> np.ndarray:
        out = np.zeros(self.m)
        if self.order is None and self.rows.size < AT_PROBE:
            self._by_rows()
        if self.order is None:
            k = AT_PROBE
            start = time.perf_counter()
            np.maximum.at(out, self.rows[:k], w[:k])
            if time.perf_counter() - start <= AT_SLOW * k + 1e-5:
                np.maximum.at(out, self.rows[k:], w[k:])
                return out
            self._by_rows()
        if self.starts.size:
            out[self.full] = np.maximum.reduceat(w[self.order], self.starts)
        return out


def _column_max(cols: np.ndarray, n: int):
    """The maximum of each column's magnitudes, the entries stored by column (``cols``: each one's column), as a
    function of the magnitudes."""
    padded = _Padded.of(cols, n, adjacent=True)
    if padded is not None:
        return padded
    starts, full = segments(np.bincount(cols, minlength=n))
    return lambda w: segment_max(w, starts, full)


def ruiz_scale(qp: QPProblem, passes: int) -> Scaled:
    """Ruiz equilibration of the KKT matrix [P A'; A 0] with cost scaling, as osqp does it.

    The column maxima of P are those of its stored upper triangle, as osqp 1.x computes them
    (with the full matrix's the iterates leave osqp's after a few steps). The passes scale the
    magnitudes of the entries of P's upper triangle and of A, each pass's factors applied in turn
    (as osqp rounds them: ADMM's later decisions, such as when rho changes, can turn on the last
    bit); P is computed once at the end, from the accumulated factors, so that it stays symmetric.
    """
    P, A, q = qp.P.tocsc(copy=True), qp.A.tocsc(copy=True), qp.q.copy()
    P.sort_indices()
    A.sort_indices()
    n, m = qp.n, qp.m
    # intp indices: numpy gathers by int32 ones convert them first (3x slower)
    p_rows, p_cols = P.indices.astype(np.intp), columns(P)
    a_rows, a_cols = A.indices.astype(np.intp), columns(A)
    upper = p_rows <= p_cols
    u_rows, u_cols = p_rows[upper], p_cols[upper]
    wu, wa = np.abs(P.data[upper]), np.abs(A.data)
    u_max_of, a_max_of = _column_max(u_cols, n), _column_max(a_cols, n)
    D, E, c = np.ones(n), np.ones(m), 1.0
    row_max = _Padded.of(a_rows, m, adjacent=False) or _RowMax(a_rows, m)
    u_max = u_max_of(wu)
    for _ in range(passes):
        dn = _limit(np.maximum(u_max, a_max_of(wa)))
        en = _limit(row_max(wa))
        dt, et = 1.0 / np.sqrt(dn), 1.0 / np.sqrt(en)
        wu *= dt[u_rows] * dt[u_cols]
        wa *= et[a_rows] * dt[a_cols]
        q = q * dt
        D, E = D * dt, E * et
        u_max = u_max_of(wu)
        mean_col = float(u_max.mean()) if n else 0.0
        ct = 1.0 / float(_limit(max(mean_col, float(_limit(float(np.abs(q).max()) if n else 0.0)))))
        wu *= ct  # in the entries too: each pass rounds as osqp's does, in the same order
        u_max *= ct
        q = q * ct
        c *= ct
        if max(float(np.abs(dt - 1.0).max(initial=0.0)), float(np.abs(et - 1.0).max(initial=0.0)), abs(ct - 1.0)) \
                <= SCALING_FIXED:
            break  # a fixed point: further passes change nothing but rounding
    P.data *= D[p_rows] * D[p_cols] * c  # exactly symmetric
    A.data = np.copysign(wa, A.data)  # A's entries as scaled pass by pass (|a| f rounds as |a f| for f > 0)
    return Scaled(P=P, q=q, A=A, l=qp.l * E, u=qp.u * E, D=D, E=E, c=c)
