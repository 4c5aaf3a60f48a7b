"""The certificate's own kernels: c-transforms of the squared Euclidean cost between point clouds, and the
separable sums and minima of an additive cost on an image grid.

They are written apart from the solvers' (:mod:`optsolve.ot.legendre`, :mod:`optsolve.ot.grid`), so that
one bug cannot pass both a solve and its check; ``tests/ot/test_certificate.py`` compares each with the
solver's on random inputs.

* :func:`sq_ctransform`: ``min_i |P_i - q|^2 - w_i``. With ``z_i = |P_i|^2 - w_i`` the minimiser over i
  maximises the linear function ``(2q, -1) . (P_i, z_i)`` over the lifted points, so it is a vertex of
  their convex hull, and on the hull's edge graph a vertex no neighbour improves on is the maximiser
  (Lucet 1997, the discrete Legendre transform; Aurenhammer 1987, power diagrams). The walk starts at a
  vertex of the lower facet whose slope dz/dP is nearest to 2q (where the minimiser usually is, since on
  that facet's plane the linear function is flat); where no hull is built (d > 3, too few or flat points) or a
  walk is still moving after :data:`WALK_LIMIT` steps, the minimiser is the nearest neighbour of
  ``(q, 0)`` among the points ``(P_i, sqrt(max w - w_i))`` (exact, slower where the weights spread).
* :func:`grid_min_plus`, :func:`grid_gibbs`, :func:`grid_bilinear`: on a k1 x k2 grid with
  ``C[(i1, i2), (j1, j2)] = C1[i1, j1] + C2[i2, j2]`` a reduction over ``j`` is one reduction per axis
  (O(n^1.5)); the Gibbs sums are log-sum-exps, so nothing overflows.
"""

from __future__ import annotations

import numpy as np

HULL_DIMS = (1, 2, 3)  # dimensions where Qhull's hull is cheap enough
WALK_LIMIT = 256  # steps of a walk before the lifted nearest-neighbour query answers instead
BLOCK = 1 << 22  # entries of a temporary of the grid reductions


def distinct(points: np.ndarray):
    """``(first, label)``: an index per distinct row and each row's distinct row; None where all differ."""
    _, first, label = np.unique(points, axis=0, return_index=True, return_inverse=True)
    return (first, label.ravel()) if first.size < points.shape[0] else None


def sq_ctransform(P: np.ndarray, w: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``min_i |P_i - Q_j|^2 - w_i`` for every row ``Q_j``, the value recomputed at the minimiser."""
    P, w, Q = (np.asarray(v, dtype=np.float64) for v in (P, w, Q))
    idx = _argmin(P, w, Q)
    diff = P[idx] - Q
    return (diff * diff).sum(1) - w[idx]


def _argmin(P, w, Q) -> np.ndarray:
    n, d = P.shape
    graph = _hull_graph(P, w) if d in HULL_DIMS and n >= d + 2 and np.all(np.isfinite(w)) else None
    if graph is None:
        return _lifted_nearest(P, w, Q)
    return _walk(P, w, Q, *graph)


def _lifted_nearest(P, w, Q) -> np.ndarray:
    from scipy.spatial import cKDTree

    height = np.sqrt(np.maximum(w.max() - w, 0.0))
    tree = cKDTree(np.column_stack([P, height]))
    _, idx = tree.query(np.column_stack([Q, np.zeros(Q.shape[0])]), workers=-1)
    return np.asarray(idx, dtype=np.int64)


def _hull_graph(P, w):
    """(indptr, indices, half-slopes of the lower facets, a vertex of each): the edge graph of the hull of
    the lifted points, or None where Qhull cannot build one. The lifted height is taken less its best
    affine fit in P and scaled, a shear that keeps the hull's edges and gives Qhull coordinates of one size."""
    from scipy.spatial import ConvexHull, QhullError

    lo, hi = P.min(0), P.max(0)
    scale = float((hi - lo).max()) or 1.0
    X = (P - (lo + hi) / 2) / scale
    z = (P * P).sum(1) - w
    basis = np.column_stack([X, np.ones(P.shape[0])])
    fit, *_ = np.linalg.lstsq(basis, z, rcond=None)
    height = z - basis @ fit
    spread = float(np.abs(height).max())
    if not spread > 0:
        return None
    try:
        hull = ConvexHull(np.column_stack([X, height / spread]), qhull_options="Qt")
    except (QhullError, ValueError):
        return None
    s = hull.simplices
    n, k = P.shape[0], s.shape[1]
    src = np.repeat(s, k, axis=1).ravel().astype(np.int64)
    dst = np.tile(s, (1, k)).ravel().astype(np.int64)
    key = np.unique((src * n + dst)[src != dst])  # each edge once, grouped by its first end
    indptr = np.searchsorted(key // n, np.arange(n + 1))
    normal = hull.equations[:, :-1]
    lower = normal[:, -1] < 0
    if not lower.any():
        return None
    # the facet's plane in the original units: dz/dP = (spread * dh/dX + fit) / scale; its queries q = dz/dP / 2
    slopes = (spread * (-normal[lower, :-1] / normal[lower, -1:]) + fit[:-1]) / scale
    return indptr, key % n, slopes / 2, s[lower, 0].astype(np.int64)


def _walk(P, w, Q, indptr, indices, slopes, corner) -> np.ndarray:
    from scipy.spatial import cKDTree

    def value(i, q):
        diff = P[i] - q
        return (diff * diff).sum(1) - w[i]

    _, near = cKDTree(slopes).query(Q, workers=-1)
    cur = corner[np.asarray(near, dtype=np.int64)]
    best = value(cur, Q)
    active = np.arange(Q.shape[0])
    for _ in range(WALK_LIMIT):
        if active.size == 0:
            return cur
        at = cur[active]
        degree = indptr[at + 1] - indptr[at]
        owner = np.repeat(np.arange(active.size), degree)
        first = np.repeat(indptr[at], degree)
        offset = np.arange(owner.size) - np.repeat(np.cumsum(degree) - degree, degree)
        neighbour = indices[first + offset]
        vals = value(neighbour, Q[active[owner]])
        low = np.minimum.reduceat(vals, np.cumsum(degree) - degree)  # each walker's best neighbour (degree >= 1)
        hit = np.flatnonzero(vals == low[owner])
        head = hit[np.concatenate([[True], owner[hit][1:] != owner[hit][:-1]])]  # its first position
        better = vals[head] < best[active]
        moved = active[better]
        cur[moved], best[moved] = neighbour[head][better], vals[head][better]
        active = moved
    if active.size:  # still moving: answered exactly by the lifted query
        cur[active] = _lifted_nearest(P, w, Q[active])
    return cur


def _nested(W, A1, A2, reduce):
    """``R[i1, i2] = reduce_{j1, j2} (W[j1, j2] + A1[i1, j1] + A2[i2, j2])``, one axis after the other."""
    k1, k2 = W.shape
    inner = np.empty((k1, A2.shape[0]))  # inner[j1, i2] = reduce_j2 (W[j1, j2] + A2[i2, j2])
    step = max(1, BLOCK // max(1, A2.shape[0] * k2))
    for s in range(0, k1, step):
        inner[s:s + step] = reduce(W[s:s + step, None, :] + A2[None, :, :], 2)
    out = np.empty((A1.shape[0], A2.shape[0]))
    step = max(1, BLOCK // max(1, k1 * A2.shape[0]))
    for s in range(0, A1.shape[0], step):
        out[s:s + step] = reduce(inner[None, :, :] + A1[s:s + step, :, None], 1)
    return out


def _minimum(A, axis):
    return A.min(axis=axis)


def _log_sum_exp(A, axis):
    top = A.max(axis=axis, keepdims=True)
    top = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", under="ignore"):
        return np.log(np.exp(A - top).sum(axis=axis)) + np.squeeze(top, axis=axis)


def grid_min_plus(wts: np.ndarray, C1: np.ndarray, C2: np.ndarray) -> np.ndarray:
    """``R_i = min_j (wts_j + C_ij)`` on the grid (flat vectors; +inf entries of ``wts`` are never the min)."""
    W = wts.reshape(C1.shape[1], C2.shape[1])
    return _nested(W, C1, C2, _minimum).ravel()


def grid_gibbs(u: np.ndarray, v: np.ndarray, C1: np.ndarray, C2: np.ndarray, reg: float):
    """Row sums, column sums and ``<C, K>`` of ``K_ij = exp(u_i + v_j - C_ij / reg)`` on the grid (u, v may
    hold -inf). The cost splits as ``C_ij = C1 + C2``: each part is a Gibbs sum with that axis's kernel
    weighted by its cost, ``log C1 - C1 / reg`` in the log domain."""
    with np.errstate(divide="ignore"):
        L1, L2 = -C1 / reg, -C2 / reg
        M1, M2 = np.log(C1) + L1, np.log(C2) + L2
    k1, k2 = C1.shape[0], C2.shape[0]

    def lse(x, A1, A2):
        return _nested(x.reshape(k1, k2), A1, A2, _log_sum_exp).ravel()

    with np.errstate(over="ignore", invalid="ignore"):
        rows = np.exp(u + lse(v, L1, L2))
        cols = np.exp(v + lse(u, L1, L2))  # C is symmetric on the grid
        cost = float(np.exp(u + lse(v, M1, L2)).sum() + np.exp(u + lse(v, L1, M2)).sum())
    return rows, cols, cost


def grid_bilinear(x: np.ndarray, y: np.ndarray, C1: np.ndarray, C2: np.ndarray) -> float:
    """``x' C y`` on the grid from the vectors' sums along each axis, in O(k1^2 + k2^2)."""
    X, Y = x.reshape(C1.shape[0], C2.shape[0]), y.reshape(C1.shape[0], C2.shape[0])
    return float(X.sum(1) @ C1 @ Y.sum(1) + X.sum(0) @ C2 @ Y.sum(0))
