"""Row blocks and the thread pool that runs passes over them (optsolve.core.blocks)."""

from __future__ import annotations

import threading

import numpy as np
import pytest

from optsolve.core import blocks


@pytest.mark.parametrize("n, row_bytes, block_bytes", [(0, 8, 64), (1, 8, 64), (10, 8, 64), (10, 100, 64),
                                                       (1000, 24, 4096)])
def test_row_blocks_cover_the_rows_once_in_order(n, row_bytes, block_bytes):
    parts = blocks.row_blocks(n, row_bytes, block_bytes)
    covered = [i for s, e in parts for i in range(s, e)]
    assert covered == list(range(n))
    assert all(e > s for s, e in parts)
    assert all(e - s == max(1, block_bytes // row_bytes) for s, e in parts[:-1])


@pytest.mark.parametrize("threads", [1, 2, 5])
def test_map_blocks_keeps_the_order_and_uses_at_most_the_threads(threads):
    parts = blocks.row_blocks(97, 8, 8 * 7)
    seen = set()

    def fn(s, e):
        seen.add(threading.get_ident())
        return np.arange(s, e).sum()

    out = blocks.map_blocks(fn, parts, threads)
    assert out == [np.arange(s, e).sum() for s, e in parts]
    assert 1 <= len(seen) <= threads
    assert (threading.get_ident() in seen) == (threads == 1)  # one thread: in the caller's


@pytest.mark.parametrize("n, rows, per_task, threads", [(0, 4, 2, 1), (1, 4, 2, 2), (97, 7, 3, 2), (97, 7, 100, 1),
                                                        (97, 200, 1, 2)])
def test_fold_blocks_folds_every_block_once(n, rows, per_task, threads):
    seen = []

    def fn(s, e):
        seen.append((s, e))
        assert 0 < e - s <= rows
        return np.arange(s, e).sum(), e - s, [s]

    out = blocks.fold_blocks(fn, n, rows, lambda x, y: (x[0] + y[0], x[1] + y[1], x[2] + y[2]), threads, per_task)
    if n == 0:
        assert out is None and not seen
        return
    assert out[0] == np.arange(n).sum() and out[1] == n
    assert sorted(out[2]) == out[2] == list(range(0, n, rows))  # tasks in order, blocks in order within each
    assert sorted(seen) == [(s, min(n, s + rows)) for s in range(0, n, rows)]


def test_blas_threads_follow_the_limit():
    from threadpoolctl import threadpool_info, threadpool_limits

    if not any(lib.get("user_api") == "blas" for lib in threadpool_info()):
        pytest.skip("no BLAS library is loaded under threadpoolctl")
    with threadpool_limits(limits=1):
        assert blocks.blas_threads() == 1


def test_empty_base_pages_leaves_numpy_advice_as_it_was():
    arr = blocks.empty_base_pages((3, 5), np.float32)
    assert arr.shape == (3, 5) and arr.dtype == np.float32
    switch = blocks._hugepage_switch()
    if switch is None:
        pytest.skip("this numpy has no huge page switch")
    for setting in (True, False):
        previous = switch(setting)
        blocks.empty_base_pages(10)
        assert switch(previous) is setting  # restored after the allocation
