"""Passes over a dense matrix by blocks of rows that stay in cache, shared among threads.

A whole-array numpy expression over an n x m matrix reads and writes all n m entries once per
operation, and each temporary it creates is another n m array. Run on a block of rows of about
``BLOCK_BYTES`` (a core's L2 cache) instead, the operations after the first find the block in
cache, and a block-sized temporary replaces each matrix-sized one. numpy releases the GIL inside
its loops, so blocks run in parallel on a thread pool.

The number of threads follows the BLAS libraries' own limit (``threadpoolctl``), so that
``OMP_NUM_THREADS`` and ``threadpool_limits`` bound this code as they bound the BLAS.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

BLOCK_BYTES = 1 << 21  # about this many bytes of the matrix per block of rows
_POOLS: dict[int, ThreadPoolExecutor] = {}


def blas_threads() -> int:
    """The threads the BLAS libraries may use now (every core where none is loaded)."""
    from optsolve.core.threads import blas_counts

    counts = blas_counts()
    return max(1, min(counts) if counts else (os.cpu_count() or 1))


def row_blocks(n: int, row_bytes: int, block_bytes: int | None = None) -> list[tuple[int, int]]:
    """``[(start, stop), ...]`` covering rows 0..n, each about ``block_bytes`` (default ``BLOCK_BYTES``)."""
    step = max(1, (BLOCK_BYTES if block_bytes is None else block_bytes) // max(row_bytes, 1))
    return [(s, min(s + step, n)) for s in range(0, n, step)]


def map_blocks(fn, blocks: list[tuple[int, int]], threads: int | None = None) -> list:
    """``[fn(start, stop) for each block]``, in order, on up to ``threads`` threads (default: :func:`blas_threads`)."""
    threads = max(1, min(threads or blas_threads(), len(blocks)))
    if threads == 1:
        return [fn(s, e) for s, e in blocks]
    pool = _POOLS.get(threads)
    if pool is None:
        pool = _POOLS[threads] = ThreadPoolExecutor(threads, thread_name_prefix="optsolve-blocks")
    return list(pool.map(lambda b: fn(*b), blocks))


def fold_blocks(fn, n: int, rows: int, combine, threads: int | None = None, per_task: int = 32):
    """``fn(start, stop)`` over blocks of ``rows`` rows covering 0..n, folded with ``combine(a, b)``;
    tasks of ``per_task`` consecutive blocks run on :func:`map_blocks`'s threads, each folding its own
    blocks as it goes (the blocks' results are never all held at once). None where n is 0."""
    span = max(1, rows) * per_task

    def task(lo, hi):
        out = None
        for start in range(lo, hi, max(1, rows)):
            part = fn(start, min(hi, start + max(1, rows)))
            out = part if out is None else combine(out, part)
        return out

    out = None
    for part in map_blocks(task, [(s, min(n, s + span)) for s in range(0, n, span)], threads):
        out = part if out is None else combine(out, part)
    return out


def _hugepage_switch():
    """numpy's switch for advising the kernel to back new arrays with transparent huge pages (None where
    this numpy has none)."""
    for module in ("numpy._core.multiarray", "numpy.core.multiarray"):
        try:
            return getattr(__import__(module, fromlist=["_set_madvise_hugepage"]), "_set_madvise_hugepage")
        except (ImportError, AttributeError):
            continue
    return None


def empty_base_pages(shape, dtype=np.float64) -> np.ndarray:
    """``np.empty`` for a large array that passes by blocks will fill, in base-size (4 KB) pages.

    numpy advises the kernel to back large arrays with transparent huge pages. Where the kernel
    compacts memory to find them on the first write (``defrag`` set to ``madvise``, a common
    default), that write stalls.

    Notes
    -----
    On a 2-core virtual machine, the first pass over each new 134 MB array took 0.5-0.7 s with huge
    pages and 35-55 ms without; a solve on a 4096 x 4096 cost took 5.1 s instead of 6.4 s in a new
    process, and about 5% longer when repeated in one process (after the first, huge pages come
    without compaction).
    """
    switch = _hugepage_switch()
    previous = switch(False) if switch is not None else None
    try:
        return np.empty(shape, dtype=dtype)
    finally:
        if switch is not None:
            switch(previous)
