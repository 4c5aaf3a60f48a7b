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

BLOCK_BYTES = 1 << 21  # about this many bytes of the matrix per block of rows
_POOLS: dict[int, ThreadPoolExecutor] = {}


def blas_threads() -> int:
    """The threads the BLAS libraries may use now (every core where none is loaded)."""
    from threadpoolctl import threadpool_info

    counts = [int(lib["num_threads"]) for lib in threadpool_info() if lib.get("user_api") == "blas"]
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
