"""Fused passes over a dense cost matrix on the CPU: row blocks that stay in cache, over threads.

Written whole-array in numpy, ``exp(u_i + v_j - gamma C_ij)`` is six or seven passes through
memory (the product by -gamma, two broadcast sums, the floor, exp, the zeroing of what
underflowed, a reduction), each reading and writing all n m entries. Here each pass runs on a
block of rows small enough to stay in the cache (``BLOCK_BYTES``) before the next block is
touched, so the matrix leaves memory about once per pass of the solver; the blocks are shared
among threads (:mod:`optsolve.core.blocks`). Every entry is computed by the operations of the
whole-array code, except that what falls below exp's range is raised to a floor instead of
zeroed (:func:`_exp_raised`); sums over columns add the blocks' partial sums, and the column
log-sum-exp shifts each block by its own maxima before bringing them together.
"""

from __future__ import annotations

import numpy as np

from optsolve.core.backend import EXP_FLOOR, exp_flush
from optsolve.core.blocks import BLOCK_BYTES, blas_threads, map_blocks, row_blocks


def raised_floor(dtype) -> float:
    """The log of the smallest value the passes write: half the exponent range, so that the value,
    its square (the products by P o P) and a product of two of them all stay normal."""
    return EXP_FLOOR.get(np.dtype(dtype), -700.0) / 2.0


def _exp_raised(b: np.ndarray) -> np.ndarray:
    """``exp(b)`` in place, arguments below :func:`raised_floor` raised to it first.

    Subnormal results take vectorised exp off its fast path (4-60x slower), and products that
    underflow take the multiplications off theirs. Raised instead of zeroed (one pass fewer), an
    entry below the floor counts as exp(floor), about 1e-152 in float64 (2e-19 in float32):
    a sum of n m entries moves by at most n m exp(floor), and no kept entry is that small (the
    truncation threshold is at least 1e-3 tol / (n m))."""
    np.maximum(b, raised_floor(b.dtype), out=b)
    return np.exp(b, out=b)


class RowBlocks:
    """Fused passes over the rows of an (n, m) matrix ``C``, in blocks, on ``threads`` threads."""

    def __init__(self, C: np.ndarray, threads: int | None = None):
        self.C = C
        n, m = C.shape
        self.blocks = row_blocks(n, m * C.itemsize, BLOCK_BYTES)
        self.threads = max(1, min(threads or blas_threads(), len(self.blocks)))

    def _map(self, fn):
        return map_blocks(fn, self.blocks, self.threads)

    def _block(self, scratch, s, e):
        """Rows s..e of ``scratch``, or a new block-sized array where there is none."""
        return np.empty((e - s, self.C.shape[1]), dtype=self.C.dtype) if scratch is None else scratch[s:e]

    def _exponent(self, out, s, e, u, v, gamma):
        np.multiply(self.C[s:e], -gamma, out=out)
        if u is not None:
            out += u[s:e, None]
        if v is not None:
            out += v[None, :]
        return out

    def gibbs(self, out: np.ndarray, u, v, gamma: float, threshold: float | None = None, collect: bool = False):
        """``out = exp(u_i + v_j - gamma C_ij)`` (raised to ``exp(raised_floor)``); with ``threshold``,
        the number of entries above it, counted in the same pass (None without), and with ``collect``
        also those entries: (count, (data, indices, indptr)), as :meth:`above` gives them."""
        def block(s, e):
            o = out[s:e]
            _exp_raised(self._exponent(o, s, e, u, v, gamma))
            return _look(o, threshold, collect)
        return _gather(self._map(block), threshold, collect)

    def rescale(self, out: np.ndarray, source: np.ndarray, factors: np.ndarray, threshold: float | None = None,
                collect: bool = False):
        """``out = source * factors[k][None, :]`` on each block k, raised to ``exp(raised_floor)``; with
        ``threshold`` and ``collect``, what :meth:`gibbs` returns with them.

        ``source`` holds what a pass left (at least ``exp(raised_floor)``); factors below that floor are
        raised to it, so no product underflows (an entry moves by at most ``exp(raised_floor)``)."""
        floor = np.exp(raised_floor(out.dtype))
        factors = np.maximum(factors, floor)
        index = {s: k for k, (s, _) in enumerate(self.blocks)}

        def block(s, e):
            o = out[s:e]
            np.multiply(source[s:e], factors[index[s]][None, :], out=o)
            np.maximum(o, floor, out=o)
            return _look(o, threshold, collect)
        return _gather(self._map(block), threshold, collect)

    def sq_matvec(self, P: np.ndarray, w: np.ndarray) -> np.ndarray:
        """``(P o P) w``, the squares of a block in cache at a time (one thread: the BLAS may use more)."""
        out = np.empty(P.shape[0], dtype=np.result_type(P, w))
        for s, e in self.blocks:
            out[s:e] = np.square(P[s:e]) @ w
        return out

    def above(self, P: np.ndarray, threshold: float):
        """The entries of ``P`` above ``threshold`` in CSR form, (data, indices, indptr)."""
        return _gather(self._map(lambda s, e: _entries_above(P[s:e], threshold)), threshold, True)[1]

    def sums(self, u, v, gamma: float, weighted: bool = False):
        """Row sums, column sums and, with ``weighted``, ``sum_ij C_ij K_ij`` (else None) of
        ``K = exp(u_i + v_j - gamma C_ij)``, flushed (:func:`optsolve.core.backend.exp_flush`: what
        falls below exp's normal range counts as 0, so rows or columns at -inf add nothing), without
        storing K."""
        def block(s, e):
            b = self._exponent(self._block(None, s, e), s, e, u, v, gamma)
            with np.errstate(invalid="ignore"):  # -inf potentials
                exp_flush(np, b, out=b)
            rows, cols = b.sum(axis=1), b.sum(axis=0)
            # in the block, not np.vdot: BLAS would start threads of its own inside this one
            return rows, cols, float(np.multiply(b, self.C[s:e], out=b).sum()) if weighted else None
        parts = self._map(block)
        return (np.concatenate([p[0] for p in parts]), sum(p[1] for p in parts),
                sum(p[2] for p in parts) if weighted else None)

    def log_rows(self, scratch: np.ndarray | None, v, gamma: float) -> np.ndarray:
        """``LSE_j(v_j - gamma C_ij)`` for each row i (``scratch``: an n x m buffer to use, or None)."""
        def block(s, e):
            b = self._exponent(self._block(scratch, s, e), s, e, None, v, gamma)
            mx = b.max(axis=1)
            b -= mx[:, None]
            return mx + np.log(_exp_raised(b).sum(axis=1))
        return np.concatenate(self._map(block))

    def log_cols(self, scratch: np.ndarray | None, u, gamma: float):
        """(``LSE_i(u_i - gamma C_ij)`` for each column j, each block's column maxima (blocks x m)).

        One pass: each block's sums are taken below its own maxima, then brought to the overall
        ones. ``scratch`` (or None) is left holding ``exp(u_i - gamma C_ij - M_kj)`` on block k, with
        M_k the block's maxima."""
        def block(s, e):
            b = self._exponent(self._block(scratch, s, e), s, e, u, None, gamma)
            mx = b.max(axis=0)
            b -= mx[None, :]
            return mx, _exp_raised(b).sum(axis=0)
        parts = self._map(block)
        maxima = np.stack([p[0] for p in parts])
        top = maxima.max(axis=0)
        total = sum(p[1] * np.exp(p[0] - top) for p in parts)
        return top + np.log(total), maxima


def _entries_above(o: np.ndarray, threshold: float):
    """A block's entries above ``threshold``: (values, columns, count per row)."""
    flat = np.flatnonzero(o > threshold)
    rows, cols = np.divmod(flat, o.shape[1])
    return o.ravel()[flat], cols, np.bincount(rows, minlength=o.shape[0])


def _look(o: np.ndarray, threshold: float | None, collect: bool):
    """What a pass reports of its block: nothing, the count above ``threshold``, or those entries."""
    if threshold is None:
        return None
    return _entries_above(o, threshold) if collect else int(np.count_nonzero(o > threshold))


def _gather(parts: list, threshold: float | None, collect: bool):
    """The blocks' reports brought together: None, a count, or (count, (data, indices, indptr))."""
    if threshold is None:
        return None
    if not collect:
        return sum(parts)
    indptr = np.zeros(sum(p[2].size for p in parts) + 1, dtype=np.int64)
    np.cumsum(np.concatenate([p[2] for p in parts]), out=indptr[1:])
    return int(indptr[-1]), (np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), indptr)
