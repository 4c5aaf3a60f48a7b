"""c-transforms of the squared Euclidean cost, ``min_i |P_i - q|^2 - w_i``, through a convex hull.

``|P_i - q|^2 - w_i = |q|^2 - 2 (P_i . q - z_i)`` with ``z_i = (|P_i|^2 - w_i) / 2``, so the
minimiser over i maximises the linear function ``(q, -1) . (P_i, z_i)`` over the lifted points:
it is a vertex of their convex hull (the discrete Legendre transform; Lucet, "Faster than the
fast Legendre transform", Numer. Algorithms 1997; the power diagram of Aurenhammer, SIAM J.
Comput. 1987). A linear function's local maximum over the vertices of a polytope, along its
edges, is the global one, so a walk along the hull's edges from any vertex ends at the
minimiser. The hull is Qhull's (``scipy.spatial.ConvexHull``), built once per weight vector in
O(n log n); each walk starts at a vertex of the lower facet whose slope is nearest to q (a k-d
tree over the slopes), where the minimiser usually is, and takes a few steps.

Unlike a k-d tree over the points lifted to ``(P_i, sqrt(W - w_i))``, whose queries slow down as
the weights spread (the transport moves mass far), the walk's cost does not depend on how the
weights vary. Points the hull leaves out lie above it and are never the minimiser; Qhull's
"coplanar" points, within its rounding of a facet (duplicates, say), are looked at from the
vertex where the walk ends. The lifted k-d tree answers instead where the hull cannot be built
(fewer than d + 2 points, points in a lower-dimensional flat, d = 0 or d > 3), where the weights vary
little between neighbouring points (:func:`weight_spread`: the tree is the faster there), and
for walks still moving after WALK_STEPS steps. The measurements behind ``TREE_SPREAD`` are in
docs/benchmarks.md ("Measurements behind the code").
"""

from __future__ import annotations

import numpy as np

HULL_MAX_DIM = 3  # Qhull's hulls grow fast with the dimension; beyond this the lifted k-d tree
# the lifted k-d tree is the faster where the weights vary little between neighbouring points:
# |w_i - w_j| / |P_i - P_j| below this many nearest-neighbour distances (median over a sample; see the
# module's Notes)
TREE_SPREAD = 20.0
SPREAD_SAMPLE = 1000
WALK_STEPS = 64  # a walk still moving after this many steps is answered by the lifted k-d tree
RING = 8  # :meth:`Envelope.nearest` looks at the minimiser's neighbours for up to this many, and theirs beyond


def lifted_query(P: np.ndarray, w: np.ndarray, Q: np.ndarray, k: int = 1, workers: int = -1) -> np.ndarray:
    """The k indices i of least ``|P_i - q|^2 - w_i`` for each q in Q (shape (len(Q), k)), by one k-d
    tree query among the lifted points ``(P_i, sqrt(W - w_i))``, W = max w."""
    from scipy.spatial import cKDTree

    top = float(w.max())
    lifted = np.hstack([P, np.sqrt(np.maximum(top - w, 0.0))[:, None]])
    _, idx = cKDTree(lifted).query(np.hstack([Q, np.zeros((Q.shape[0], 1))]), k=min(k, P.shape[0]),
                                   workers=workers)
    return np.asarray(idx).reshape(Q.shape[0], -1)


def _csr(a: np.ndarray, b: np.ndarray, n: int):
    """The pairs (a, b), without repeats, as CSR rows over 0..n-1: (indptr, indices)."""
    key = a.astype(np.int64) * n + b
    key.sort()
    key = key[np.concatenate([[True], key[1:] != key[:-1]])] if key.size else key
    return np.concatenate([[0], np.cumsum(np.bincount(key // n, minlength=n))]), key % n


def _expand(indptr: np.ndarray, indices: np.ndarray, rows: np.ndarray):
    """The CSR rows ``rows`` laid end to end: (owner: position in ``rows``, entry, each row's start)."""
    deg = indptr[rows + 1] - indptr[rows]
    start = np.concatenate([[0], np.cumsum(deg)[:-1]]).astype(np.int64)
    owner = np.repeat(np.arange(rows.size), deg)
    return owner, indices[np.repeat(indptr[rows] - start, deg) + np.arange(owner.size)], start


def weight_spread(P: np.ndarray, w: np.ndarray) -> float:
    """Median of |w_i - w_j| / |P_i - P_j| over points and their nearest neighbours (a sample), in
    units of the median nearest-neighbour distance."""
    from scipy.spatial import cKDTree

    pick = np.random.default_rng(0).choice(P.shape[0], min(P.shape[0], SPREAD_SAMPLE), replace=False)
    dist, near = cKDTree(P).query(P[pick], k=2)
    dist, near = dist[:, 1], near[:, 1]
    scale = float(np.median(dist))
    if not scale > 0:
        return np.inf
    return float(np.median(np.abs(w[pick] - w[near]) / np.maximum(dist, scale * 1e-9))) / scale


class Envelope:
    """The hull of the points ``(P_i, (|P_i|^2 - w_i) / 2)``: :meth:`argmin` answers c-transform queries.

    ``hull``: True builds it, False answers by the lifted k-d tree, None chooses by
    :func:`weight_spread` (the tree up to ``TREE_SPREAD``)."""

    def __init__(self, P: np.ndarray, w: np.ndarray, hull: bool | None = None):
        self.P = np.ascontiguousarray(P, dtype=np.float64)
        self.w = np.asarray(w, dtype=np.float64)
        self.graph = None
        n, d = self.P.shape
        if hull is False or d == 0 or d > HULL_MAX_DIM or n < d + 2 or not np.all(np.isfinite(self.w)):
            return
        if hull is None and weight_spread(self.P, self.w) <= TREE_SPREAD:
            return
        from scipy.spatial import ConvexHull, QhullError, cKDTree

        # the hull's vertices and edges are unchanged by adding an affine function of P to z: take
        # out the best one and scale, so that Qhull sees well-conditioned coordinates
        mu = self.P.mean(0)
        sigma = float(np.abs(self.P - mu).max()) or 1.0
        X = (self.P - mu) / sigma
        z = ((self.P * self.P).sum(1) - self.w) / 2
        design = np.hstack([X, np.ones((n, 1))])
        coef, *_ = np.linalg.lstsq(design, z, rcond=None)
        resid = z - design @ coef
        tau = float(np.abs(resid).max())
        if not tau > 0:  # every lifted point on one hyperplane: no hull
            return
        try:
            hull = ConvexHull(np.hstack([X, (resid / tau)[:, None]]), qhull_options="Qt Qc")
        except (QhullError, ValueError):
            return
        simp = hull.simplices
        a = np.repeat(simp, d + 1, axis=1).ravel()
        b = np.tile(simp, (1, d + 1)).ravel()
        keep = a != b
        self.indptr, self.indices = _csr(a[keep], b[keep], n)
        # points within Qhull's rounding of a facet: looked at from that facet's vertices, after the walk
        cp, facet = hull.coplanar[:, 0], hull.coplanar[:, 1]
        self.near_indptr, self.near_indices = _csr(simp[facet].ravel(), np.repeat(cp, d + 1), n)
        self.graph = True
        # lower facets (outward normal pointing down): the queries q for which their vertices tie
        eq = hull.equations
        lower = eq[:, d] < 0
        if not lower.any():
            lower = np.ones(eq.shape[0], dtype=bool)
            slopes = np.zeros((eq.shape[0], d))
        else:
            slopes = -eq[lower, :d] / eq[lower, d:d + 1]  # dz'/dX' of the facet's plane
        # back to the original units: z = tau z' + coef . X + c, X = (P - mu) / sigma
        slopes = (tau * slopes + coef[:d]) / sigma
        self.start_vertex = simp[lower, 0]
        self.slope_tree = cKDTree(slopes)

    def values(self, idx: np.ndarray, Q: np.ndarray) -> np.ndarray:
        diff = self.P[idx] - Q
        return (diff * diff).sum(-1) - self.w[idx]

    def argmin(self, Q: np.ndarray, start: np.ndarray | None = None) -> np.ndarray:
        """For each q in Q, the index i of least ``|P_i - q|^2 - w_i``."""
        Q = np.asarray(Q, dtype=np.float64)
        if self.graph is None:
            return lifted_query(self.P, self.w, Q, 1)[:, 0]
        if start is None:
            _, facet = self.slope_tree.query(Q, workers=-1)
            cur = self.start_vertex[facet]
        else:
            cur = np.asarray(start, dtype=np.int64).copy()
            off = self.indptr[cur + 1] == self.indptr[cur]  # not a hull vertex: from the slopes
            if off.any():
                _, facet = self.slope_tree.query(Q[off], workers=-1)
                cur[off] = self.start_vertex[facet]
        val = self.values(cur, Q)
        active = np.arange(Q.shape[0])
        for _ in range(WALK_STEPS):  # each step: to the best neighbour, while it is better
            active = self._step(self.indptr, self.indices, active, cur, val, Q)
            if not active.size:
                break
        if active.size:  # walks still under way (far starts): the lifted k-d tree for those
            cur[active] = lifted_query(self.P, self.w, Q[active], 1)[:, 0]
            val[active] = self.values(cur[active], Q[active])
        if self.near_indices.size:
            self._step(self.near_indptr, self.near_indices, np.arange(Q.shape[0]), cur, val, Q)
        return cur

    def _step(self, indptr, indices, active, cur, val, Q):
        """Move each active query to its current vertex's best neighbour where that is better (in
        place); returns the queries that moved."""
        c = cur[active]
        has = indptr[c + 1] > indptr[c]
        active, c = active[has], c[has]
        if not active.size:
            return active
        owner, nb, start = _expand(indptr, indices, c)
        nv = self.values(nb, Q[active[owner]])
        order = np.lexsort((nv, owner))  # by query, least value first
        head = order[start]
        better = nv[head] < val[active]
        moved = active[better]
        cur[moved] = nb[head[better]]
        val[moved] = nv[head[better]]
        return moved

    def ctransform(self, Q: np.ndarray) -> np.ndarray:
        """``min_i |P_i - q|^2 - w_i`` for each q in Q, recomputed from the points at the minimiser."""
        Q = np.asarray(Q, dtype=np.float64)
        return self.values(self.argmin(Q), Q)

    def nearest(self, Q: np.ndarray, k: int) -> np.ndarray:
        """(len(Q), k) indices of small ``|P_i - q|^2 - w_i`` for each q: the minimiser first, then the
        least among its neighbours on the hull and theirs (the minimiser repeated where fewer). Exact
        for the first column only (the k-d tree's k least where there is no hull)."""
        Q = np.asarray(Q, dtype=np.float64)
        if self.graph is None:
            return lifted_query(self.P, self.w, Q, k)
        best = self.argmin(Q)
        if k == 1:
            return best[:, None]
        owner, cand, _ = _expand(self.indptr, self.indices, best)
        if k > RING:  # and the neighbours' neighbours
            o2, n2, _ = _expand(self.indptr, self.indices, cand)
            owner, cand = np.concatenate([owner, owner[o2]]), np.concatenate([cand, n2])
        owner = np.concatenate([np.arange(Q.shape[0]), owner])
        cand = np.concatenate([best, cand])
        cand_val = self.values(cand, Q[owner])
        cand_val[cand == best[owner]] = -np.inf  # the minimiser first
        order = np.lexsort((cand_val, owner))
        owner, cand = owner[order], cand[order]
        repeat = np.concatenate([[False], (owner[1:] == owner[:-1]) & (cand[1:] == cand[:-1])])
        owner, cand = owner[~repeat], cand[~repeat]  # a point met twice is met with the same value
        start = np.searchsorted(owner, np.arange(Q.shape[0]))
        rank = np.arange(owner.size) - start[owner]
        out = np.repeat(best[:, None], k, axis=1)
        keep = rank < k
        out[owner[keep], rank[keep]] = cand[keep]
        return out
