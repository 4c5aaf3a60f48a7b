"""Fused passes over a dense cost matrix on the CPU: row blocks that stay in cache, over threads.

Written whole-array in numpy, ``exp(u_i + v_j - gamma C_ij)`` is six or seven passes through
memory (the product by -gamma, two broadcast sums, the floor, exp, the zeroing of what
underflowed, a reduction), each reading and writing all n m entries. Here each pass runs on a
block of rows small enough to stay in the cache (``BLOCK_BYTES``) before the next block is
touched, so the matrix leaves memory about once per pass of the solver; the blocks are shared
among threads (numpy releases the GIL inside its loops). Every entry is computed by the
operations of the whole-array code; sums over columns add the blocks' partial sums, and the
column log-sum-exp shifts each block by its own maxima before bringing them together.

The number of threads follows the BLAS libraries' own limit (``threadpoolctl``), so that
``OMP_NUM_THREADS`` and ``threadpool_limits`` bound this code too.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from optsolve.core.backend import EXP_FLOOR, exp_flush

BLOCK_BYTES = 1 << 21  # rows per block: about this many bytes of the matrix (a core's L2 cache)
_POOLS: dict[int, ThreadPoolExecutor] = {}


def blas_threads() -> int:
    """The threads the BLAS libraries may use now (every core where none is loaded)."""
    from threadpoolctl import threadpool_info

    counts = [int(lib["num_threads"]) for lib in threadpool_info() if lib.get("user_api") == "blas"]
    return max(1, min(counts) if counts else (os.cpu_count() or 1))


class RowBlocks:
    """Fused passes over the rows of an (n, m) matrix ``C``, in blocks, on ``threads`` threads."""

    def __init__(self, C: np.ndarray, threads: int | None = None):
        self.C = C
        n, m = C.shape
        step = max(1, BLOCK_BYTES // max(m * C.itemsize, 1))
        self.blocks = [(s, min(s + step, n)) for s in range(0, n, step)]
        self.threads = max(1, min(threads or blas_threads(), len(self.blocks)))

    def _map(self, fn):
        if self.threads == 1:
            return [fn(s, e) for s, e in self.blocks]
        pool = _POOLS.get(self.threads)
        if pool is None:
            pool = _POOLS[self.threads] = ThreadPoolExecutor(self.threads, thread_name_prefix="optsolve-rows")
        return list(pool.map(lambda b: fn(*b), self.blocks))

    def _exponent(self, out, s, e, u, v, gamma):
        np.multiply(self.C[s:e], -gamma, out=out)
        if u is not None:
            out += u[s:e, None]
        if v is not None:
            out += v[None, :]
        return out

    def gibbs(self, out: np.ndarray, u, v, gamma: float, threshold: float | None = None):
        """``out = exp(u_i + v_j - gamma C_ij)`` (flushed below exp's normal range); with ``threshold``,
        the number of entries above it, counted in the same pass (None without)."""
        def block(s, e):
            o = out[s:e]
            exp_flush(np, self._exponent(o, s, e, u, v, gamma), out=o)
            return None if threshold is None else int(np.count_nonzero(o > threshold))
        return _total(self._map(block))

    def rescale(self, out: np.ndarray, source: np.ndarray, factors: np.ndarray, threshold: float | None = None):
        """``out = source * factors[k][None, :]`` on each block k, what falls below exp's normal range
        set to 0; with ``threshold``, the number of entries above it (None without)."""
        floor = np.exp(EXP_FLOOR.get(out.dtype, -700.0))
        index = {s: k for k, (s, _) in enumerate(self.blocks)}

        def block(s, e):
            o = out[s:e]
            np.multiply(source[s:e], factors[index[s]][None, :], out=o)
            o[o < floor] = 0.0
            return None if threshold is None else int(np.count_nonzero(o > threshold))
        return _total(self._map(block))

    def above(self, P: np.ndarray, threshold: float):
        """The entries of ``P`` above ``threshold`` in CSR form, (data, indices, indptr)."""
        def block(s, e):
            o = P[s:e]
            flat = np.flatnonzero(o > threshold)
            rows, cols = np.divmod(flat, o.shape[1])
            return o.ravel()[flat], cols, np.bincount(rows, minlength=o.shape[0])
        parts = self._map(block)
        indptr = np.zeros(P.shape[0] + 1, dtype=np.int64)
        np.cumsum(np.concatenate([p[2] for p in parts]), out=indptr[1:])
        return np.concatenate([p[0] for p in parts]), np.concatenate([p[1] for p in parts]), indptr

    def log_rows(self, scratch: np.ndarray, v, gamma: float) -> np.ndarray:
        """``LSE_j(v_j - gamma C_ij)`` for each row i."""
        def block(s, e):
            b = self._exponent(scratch[s:e], s, e, None, v, gamma)
            mx = b.max(axis=1)
            b -= mx[:, None]
            exp_flush(np, b, out=b)
            return mx + np.log(b.sum(axis=1))
        return np.concatenate(self._map(block))

    def log_cols(self, scratch: np.ndarray, u, gamma: float):
        """(``LSE_i(u_i - gamma C_ij)`` for each column j, each block's column maxima (blocks x m)).

        One pass: each block's sums are taken below its own maxima, then brought to the overall
        ones. ``scratch`` is left holding ``exp(u_i - gamma C_ij - M_kj)`` on block k, with M_k the
        block's maxima."""
        def block(s, e):
            b = self._exponent(scratch[s:e], s, e, u, None, gamma)
            mx = b.max(axis=0)
            b -= mx[None, :]
            exp_flush(np, b, out=b)
            return mx, b.sum(axis=0)
        parts = self._map(block)
        maxima = np.stack([p[0] for p in parts])
        top = maxima.max(axis=0)
        total = sum(p[1] * np.exp(p[0] - top) for p in parts)
        return top + np.log(total), maxima


def _total(counts: list):
    """The blocks' counts added up; None where none were asked for."""
    return None if counts[0] is None else sum(counts)
