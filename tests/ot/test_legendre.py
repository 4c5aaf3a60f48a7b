"""c-transforms of the squared Euclidean cost by a walk on a convex hull (optsolve.ot.legendre),
against the dense minimum, on random, degenerate and transport-dual weights."""

from __future__ import annotations

import numpy as np
import ot as pot
import pytest

from optsolve.ot import legendre
from optsolve.ot.legendre import Envelope, lifted_query, weight_spread
from optsolve.ot.problems import cost_matrix


def _dense(P, w, Q):
    diff = P[:, None, :] - Q[None, :, :]  # by differences: exact enough at any offset
    return ((diff * diff).sum(-1) - w[:, None]).min(0)


def _grid(k):
    return np.stack(np.meshgrid(np.arange(k), np.arange(k)), -1).reshape(-1, 2).astype(float)


def _mixture_duals(n, seed):
    """Exact duals of a 2-D Gaussian-mixture transport problem: weights that vary fast in space."""
    rng = np.random.default_rng(seed)
    centres = rng.random((6, 2))
    x = centres[rng.integers(0, 6, n)] + 0.04 * rng.standard_normal((n, 2))
    y = centres[rng.integers(0, 6, n)][:, ::-1] + 0.04 * rng.standard_normal((n, 2))
    a = np.full(n, 1 / n)
    _, log = pot.emd(a, a, cost_matrix(x, y, "sqeuclidean"), log=True)
    return x, y, log["u"], log["v"]


CASES = {
    "random 1-d": lambda r: (r.standard_normal((400, 1)), r.standard_normal(400) * 3, r.random((300, 1))),
    "random 2-d": lambda r: (r.standard_normal((400, 2)), r.standard_normal(400) * 3, r.random((300, 2))),
    "random 3-d": lambda r: (r.standard_normal((400, 3)), r.standard_normal(400) * 3, r.random((300, 3))),
    "zero weights": lambda r: (r.random((500, 2)), np.zeros(500), r.random((200, 2)) * 3 - 1),
    "grid": lambda r: (_grid(20), np.zeros(400), _grid(20) + 0.5),
    "duplicated points": lambda r: (np.vstack([_grid(15)] * 3), r.random(675), _grid(15)),
    "tiny weights on a grid": lambda r: (_grid(20), r.random(400) * 1e-9, _grid(20)),
    "huge coordinates": lambda r: (r.random((300, 2)) * 1e6 + 1e8, r.random(300) * 1e10, r.random((100, 2)) * 1e6 + 1e8),
    "weights that cancel |P|^2": lambda r: (r.random((300, 2)), (r.random((300, 2)) ** 2).sum(1) * 0, r.random((50, 2))),
    "points on a line": lambda r: ((lambda t: np.c_[t, 2 * t])(r.random(300)), r.random(300), r.random((100, 2))),
    "one point": lambda r: (r.random((1, 2)), r.random(1), r.random((20, 2))),
    "three points in 2-d": lambda r: (r.random((3, 2)), r.random(3), r.random((20, 2))),
}


@pytest.mark.parametrize("hull", [True, False, None])
@pytest.mark.parametrize("case", sorted(CASES))
def test_ctransform_equals_the_dense_minimum(case, hull):
    P, w, Q = CASES[case](np.random.default_rng(len(case)))
    got = Envelope(P, w, hull=hull).ctransform(Q)
    dense = _dense(P, w, Q)
    scale = max(1.0, float(np.abs(dense).max()))
    np.testing.assert_allclose(got, dense, rtol=0, atol=1e-12 * scale)


def test_walk_on_transport_duals_where_the_weights_spread():
    x, y, u, v = _mixture_duals(1500, 3)
    assert weight_spread(x, u) > legendre.TREE_SPREAD  # the case the hull is for
    for P, w, Q in ((x, u, y), (y, v, x)):
        env = Envelope(P, w)
        assert env.graph is not None
        np.testing.assert_allclose(env.ctransform(Q), _dense(P, w, Q), rtol=0, atol=1e-13)
        np.testing.assert_allclose(env.ctransform(Q + 0.01), _dense(P, w, Q + 0.01), rtol=0, atol=1e-13)


def test_flat_weights_use_the_lifted_tree():
    rng = np.random.default_rng(1)
    P = rng.random((2000, 2))
    assert weight_spread(P, np.zeros(2000)) == 0.0
    assert Envelope(P, np.zeros(2000)).graph is None


@pytest.mark.parametrize("k", [1, 3, 8, 16])
@pytest.mark.parametrize("hull", [True, False])
def test_nearest_puts_the_minimiser_first_and_returns_valid_indices(k, hull):
    x, y, u, _ = _mixture_duals(800, 5)
    idx = Envelope(x, u, hull=hull).nearest(y, k)
    assert idx.shape == (800, k) and idx.min() >= 0 and idx.max() < 800
    values = cost_matrix(x, y, "sqeuclidean") - u[:, None]
    np.testing.assert_allclose(values[idx[:, 0], np.arange(800)], values.min(0), rtol=0, atol=1e-13)
    if k > 1:  # near the k least: most of the lifted tree's exact k least are found
        exact = lifted_query(x, u, y, k)
        overlap = np.mean([len(set(idx[j]) & set(exact[j])) for j in range(800)])
        assert overlap >= 0.6 * k


def test_walks_cut_short_are_finished_by_the_lifted_tree(monkeypatch):
    x, y, u, _ = _mixture_duals(1200, 8)
    monkeypatch.setattr(legendre, "WALK_STEPS", 1)
    env = Envelope(x, u + np.random.default_rng(0).random(1200) * 0.5, hull=True)  # far starts
    w = env.w
    np.testing.assert_allclose(env.ctransform(y), _dense(x, w, y), rtol=0, atol=1e-13)
