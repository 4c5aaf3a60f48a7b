"""Fused row-block passes (optsolve.ot.rowblocks) against the same quantities computed whole-array."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import logsumexp

from optsolve.ot import rowblocks


@pytest.fixture(params=[1, 2])
def threads(request):
    return request.param


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(rowblocks, "BLOCK_BYTES", 8 * 40)  # blocks of a few rows: many blocks, a short last one


@pytest.mark.parametrize("n, m", [(1, 1), (1, 37), (37, 1), (53, 41)])
@pytest.mark.parametrize("gamma", [1.0, 2.0 ** 12])
def test_passes_match_whole_array(n, m, gamma, threads):
    rng = np.random.default_rng(n * m)
    C = rng.random((n, m))
    u, v = -rng.random(n) * gamma / 4, -rng.random(m) * gamma / 4  # exponents at most 0, as a plan's
    rb = rowblocks.RowBlocks(C, threads)
    exponent = (C * -gamma + u[:, None]) + v[None, :]  # in the order the passes add
    out = np.empty_like(C)
    floor = rowblocks.raised_floor(C.dtype)
    expected = np.exp(np.maximum(exponent, floor))  # what falls below the floor is raised to it
    threshold = float(np.quantile(expected, 0.7))
    count = rb.gibbs(out, u, v, gamma, threshold)
    assert np.array_equal(out, expected)
    assert count == np.count_nonzero(expected > threshold)
    data, indices, indptr = rb.above(out, threshold)
    rows = np.repeat(np.arange(n), np.diff(indptr))
    kept = np.zeros_like(C)
    kept[rows, indices] = data
    assert np.array_equal(kept, np.where(expected > threshold, expected, 0.0))
    assert rb.gibbs(out, u, v, gamma) is None
    count, collected = rb.gibbs(out, u, v, gamma, threshold, collect=True)  # the entries, in the same pass
    assert count == data.size and all(np.array_equal(x, y) for x, y in zip(collected, (data, indices, indptr)))

    scratch = np.empty_like(C)
    assert np.allclose(rb.log_rows(scratch, v, gamma), logsumexp(v[None, :] - gamma * C, axis=1), rtol=1e-13, atol=1e-9)
    lse, maxima = rb.log_cols(scratch, u, gamma)
    assert np.allclose(lse, logsumexp(u[:, None] - gamma * C, axis=0), rtol=1e-13, atol=1e-9)
    assert maxima.shape == (len(rb.blocks), m)
    assert np.array_equal(maxima.max(axis=0), (C * -gamma + u[:, None]).max(axis=0))
    # what the column pass leaves, rescaled by exp(M_k + v) on block k, is the plan at (u, v) after the column update
    v = np.log(np.full(m, 1.0 / m)) - lse
    expected = np.exp(np.maximum((C * -gamma + u[:, None]) + v[None, :], floor))
    rescaled = np.empty_like(C)
    with np.errstate(under="raise"):  # no product underflows
        count = rb.rescale(rescaled, scratch, np.exp(np.maximum(maxima + v[None, :], 2 * floor)), threshold)
    # an entry below the floor may be raised up to exp(floor) by the pass and again by the factor
    assert np.allclose(rescaled, expected, rtol=1e-12, atol=2 * np.exp(floor))
    assert np.allclose(rescaled.sum(axis=0), 1.0 / m, rtol=1e-12)
    assert rescaled.min() >= np.exp(floor)  # nothing below the floor, nothing subnormal
    assert n == 1 or gamma < 1000 or (expected == np.exp(floor)).any()  # at high gamma the floor is reached
    assert count == np.count_nonzero(rescaled > threshold)


def test_threads_follow_the_blas_limit():
    from threadpoolctl import threadpool_info, threadpool_limits

    if not any(lib.get("user_api") == "blas" for lib in threadpool_info()):
        pytest.skip("no BLAS library is loaded under threadpoolctl")
    C = np.zeros((400, 40))
    with threadpool_limits(limits=1):
        assert rowblocks.RowBlocks(C).threads == 1


@pytest.mark.parametrize("n, m", [(1, 1), (37, 1), (53, 41)])
def test_sums_match_whole_array_and_skip_infinite_potentials(n, m, threads):
    rng = np.random.default_rng(n + m)
    C = rng.random((n, m)) * 3.0
    u, v = -rng.random(n) * 500, -rng.random(m) * 500  # some entries below exp's range
    u[::5] = -np.inf  # rows and columns of zero mass
    v[1::4] = -np.inf
    rb = rowblocks.RowBlocks(C, threads)
    with np.errstate(invalid="ignore"):
        exponent = (C * -100.0 + u[:, None]) + v[None, :]
    K = np.where(exponent < -700, 0.0, np.exp(exponent))
    rows, cols, cost = rb.sums(u, v, 100.0, weighted=True)
    np.testing.assert_allclose(rows, K.sum(1), rtol=1e-13, atol=0)
    np.testing.assert_allclose(cols, K.sum(0), rtol=1e-13, atol=0)
    assert cost == pytest.approx(float((C * K).sum()), rel=1e-13, abs=0)
    assert not rows[::5].any() and not cols[1::4].any()  # exactly 0 where a potential is -inf
    assert rb.sums(u, v, 100.0)[2] is None


def test_sq_matvec_matches_whole_array(threads):
    rng = np.random.default_rng(5)
    P, w = rng.random((53, 41)), rng.random(41)
    np.testing.assert_allclose(rowblocks.RowBlocks(P, threads).sq_matvec(P, w), (P * P) @ w, rtol=1e-14)
