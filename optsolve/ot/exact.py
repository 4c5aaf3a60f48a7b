"""The transport LP solved exactly on a set of candidate pairs, and proven optimal over all pairs.

An optimal plan of an n x m transport problem uses at most n + m - 1 pairs, most of them
between near points. The LP is solved by POT's network simplex on a sparse cost holding only
candidate pairs (POT >= 0.9.7 takes a sparse cost); its dual potentials (u, v) are then
priced over *every* pair: a pair with reduced cost ``C_ij - u_i - v_j < 0`` could improve the
plan, and joins the candidates, and the LP is solved again. When no pair's reduced cost is
below ``-tol max C``, the plan is an optimum of the full LP and (u, v) a dual solution: the
certified gap is the network simplex's own accuracy. This is the shielding idea of Schmitzer,
"A sparse multiscale algorithm for dense optimal transport" (J. Math. Imaging Vis. 2016): a
small candidate set, with a proof that nothing outside it matters.

Candidates, always with the support of one feasible plan (the north-west corner rule along an
ordering of the points), so that the restricted LP is feasible:

* squared Euclidean clouds in low dimension, coarse to fine (Merigot 2011; Schmitzer 2016):
  the points are grouped into cells of a few points, the cells' problem is solved the same
  way, and the pairs of points whose cells its plan links (or neighbouring cells) are the
  candidates, with each point's pairs of least reduced cost under the coarse duals;
* other clouds in low dimension: each point's nearest neighbours (``scipy.spatial.cKDTree``);
* a matrix, or potentials given (an entropic solution's): each row's and each column's pairs
  of least cost, or reduced cost, by a pass over the cost in column blocks.

Pricing: for the squared Euclidean cost, min_i |x_i - y_j|^2 - u_i is a walk on a convex hull
(:mod:`optsolve.ot.legendre`, no O(n m) pass); for other costs, a reserve of further near pairs
first, then a pass over the cost in column blocks.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from optsolve.core.history import trace
from optsolve.core.progress import stdout_to_stderr
from optsolve.ot.certificate import OBJECTIVE_ATOL, target_measure
from optsolve.ot.problems import pair_costs

KD_MAX_DIM = 8  # k-d trees beyond this dimension are slower than a blocked pass
NEIGHBOURS = 16  # candidates per point: nearest points, or pairs of least reduced cost
CHEAPEST = 12  # candidates per row and per column from a blocked pass
POOL = 4  # the reserve: POOL times as many near pairs, priced before any pass over all pairs
COARSE_MIN = 400  # squared Euclidean clouds with at least this many points start from a coarser problem
COARSE_RATIO = 4  # points per cell of the coarser problem
COARSE_ROUNDS = 2  # pricing rounds of a coarser problem (its plan only guides the finer one)
CELL_NEIGHBOURS = 3  # a coarse link's cells and this many nearest cells of each end (1: the cells alone)
DENSE_PAIRS = 200_000  # problems with at most this many pairs are solved on all of them at once
PRICE_ADD = 8  # per violated column or row: pairs of least reduced cost added
PRICE_TOL = 1e-10  # reduced costs above -PRICE_TOL max C count as nonnegative
MAX_ROUNDS = 60
# a dense cost whose full pricing pass finds at least this fraction of the last one's violations:
# the next round solves over every pair (POT's dense network simplex)
STALL_RATIO = 0.5
WORKERS = -1  # threads of the k-d tree queries (-1: every core)
NETWORK_SIMPLEX_ITER = 10 ** 10


@dataclass
class ExactResult:
    rows: np.ndarray  # plan entries, in the full problem's indices
    cols: np.ndarray
    values: np.ndarray
    f: np.ndarray  # duals, cost units (0 where a mass is 0)
    g: np.ndarray
    status: str
    message: str
    stats: dict = field(default_factory=dict)


class Subproblem:
    """The rows and columns with positive mass, their masses, and costs of index pairs."""

    def __init__(self, ot):
        self.ot = ot
        self.I = np.flatnonzero(ot.a > 0)
        self.J = np.flatnonzero(ot.b > 0)
        self.a = ot.a[self.I]
        self.b = ot.b[self.J] * (self.a.sum() / ot.b[self.J].sum())
        self.n, self.m = self.I.size, self.J.size
        self.x = None if ot.x is None else np.asarray(ot.x, dtype=np.float64)[self.I]
        self.y = None if ot.y is None else np.asarray(ot.y, dtype=np.float64)[self.J]
        self.scale = ot.max_cost() or 1.0

    def pair_costs(self, r: np.ndarray, c: np.ndarray) -> np.ndarray:
        """C for the pairs (r, c) of the subproblem's indices."""
        return pair_costs(self.ot, self.I[r], self.J[c])

    def blocks(self):
        """(j0, j1, C block over the subproblem's rows and its columns j0:j1)."""
        yield from self.ot.blocks(rows=None if self.n == self.ot.n else self.I,
                                  cols=None if self.m == self.ot.m else self.J)

    def use_tree(self) -> bool:
        return self.x is not None and self.ot.cost is not None and self.x.shape[1] <= KD_MAX_DIM


# --------------------------------------------------------------------------- candidates

def _order(points: np.ndarray) -> np.ndarray:
    """An ordering of points along their first principal direction (ties by the next)."""
    centred = points - points.mean(0)
    if points.shape[1] == 1:
        return np.argsort(centred[:, 0], kind="stable")
    _, _, vt = np.linalg.svd(centred[: min(len(points), 20000)], full_matrices=False)
    proj = centred @ vt.T
    return np.lexsort((proj[:, 1], proj[:, 0]))  # by the first coordinate, then the second


def north_west_pairs(a: np.ndarray, b: np.ndarray, order_a=None, order_b=None):
    """The support of the north-west corner plan (at most n + m - 1 pairs) along the given orderings."""
    order_a = np.arange(a.size) if order_a is None else order_a
    order_b = np.arange(b.size) if order_b is None else order_b
    ca, cb = np.cumsum(a[order_a]), np.cumsum(b[order_b])
    cb[-1] = ca[-1] = max(ca[-1], cb[-1])
    # the plan's k-th entry covers the mass interval between consecutive breakpoints of both sums
    points = np.unique(np.concatenate([ca, cb]))
    mids = np.concatenate([[0.0], points[:-1]]) + np.diff(np.concatenate([[0.0], points])) / 2
    i = np.minimum(np.searchsorted(ca, mids, side="right"), a.size - 1)
    j = np.minimum(np.searchsorted(cb, mids, side="right"), b.size - 1)
    return order_a[i], order_b[j]


def _cheapest_pairs(sub: Subproblem, k: int, u=None, v=None):
    """Each row's and each column's k cheapest pairs, by a blocked pass over the cost (less the
    potentials u, v where given), with their rank (0 the cheapest) in their row or column."""
    n, m = sub.n, sub.m
    kr, kc = min(k, m), min(k, n)
    best_val = np.full((n, kr), np.inf)
    best_idx = np.zeros((n, kr), dtype=np.int64)
    rows, cols, ranks = [], [], []
    for j0, j1, Cb in sub.blocks():
        Cb = np.asarray(Cb)
        if u is not None:
            Cb = Cb - u[:, None] - v[None, j0:j1]
        w = j1 - j0
        part = np.argpartition(Cb, kc - 1, axis=0)[:kc] if kc < n else np.broadcast_to(np.arange(n)[:, None], (n, w))
        order = np.argsort(np.take_along_axis(Cb, part, 0), axis=0)
        part = np.take_along_axis(part, order, 0)
        rows.append(part.ravel())
        cols.append(np.broadcast_to(np.arange(j0, j1)[None, :], part.shape).ravel())
        ranks.append(np.broadcast_to(np.arange(part.shape[0])[:, None], part.shape).ravel())
        kb = min(kr, w)
        local = np.argpartition(Cb, kb - 1, axis=1)[:, :kb] if kb < w else np.broadcast_to(np.arange(w), (n, w))
        vals = np.take_along_axis(Cb, local, 1)
        merged_val = np.concatenate([best_val, vals], 1)
        merged_idx = np.concatenate([best_idx, local + j0], 1)
        keep = np.argpartition(merged_val, kr - 1, axis=1)[:, :kr] if merged_val.shape[1] > kr else \
            np.broadcast_to(np.arange(merged_val.shape[1]), merged_val.shape)
        best_val = np.take_along_axis(merged_val, keep, 1)
        best_idx = np.take_along_axis(merged_idx, keep, 1)
    order = np.argsort(best_val, axis=1)
    best_val, best_idx = np.take_along_axis(best_val, order, 1), np.take_along_axis(best_idx, order, 1)
    finite = np.isfinite(best_val)
    rows.append(np.broadcast_to(np.arange(n)[:, None], best_idx.shape)[finite])
    cols.append(best_idx[finite])
    ranks.append(np.broadcast_to(np.arange(best_idx.shape[1]), best_idx.shape)[finite])
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(ranks)


def _neighbour_pairs(sub: Subproblem, k: int):
    """Each point's k nearest points of the other side (k-d trees)."""
    from scipy.spatial import cKDTree

    p = 1 if sub.ot.cost == "l1" else 2
    kr, kc = min(k, sub.m), min(max(k // 3, 1), sub.n)
    _, near = cKDTree(sub.y).query(sub.x, k=kr, p=p, workers=WORKERS)
    near = near.reshape(sub.n, kr)
    _, back = cKDTree(sub.x).query(sub.y, k=kc, p=p, workers=WORKERS)
    back = back.reshape(sub.m, kc)
    rows = [np.repeat(np.arange(sub.n), kr), back.ravel()]
    cols = [near.ravel(), np.repeat(np.arange(sub.m), kc)]
    ranks = [np.tile(np.arange(kr), sub.n), 3 * np.tile(np.arange(kc), sub.m)]
    return np.concatenate(rows), np.concatenate(cols), np.concatenate(ranks)


def cheap_pricing(sub: Subproblem) -> bool:
    """Whether a pass of :func:`violations` over all pairs costs about as little as pricing a pool."""
    return sub.use_tree() and sub.ot.cost == "sqeuclidean"


def initial_candidates(sub: Subproblem, potentials=None, neighbours: int = NEIGHBOURS):
    """Candidate pairs (subproblem indices), near pairs and the support of one feasible plan, and a
    reserve pool of further near pairs (None where pricing all pairs is cheap). With
    ``potentials`` (u, v on the subproblem), the pairs of least reduced cost C_ij - u_i - v_j
    (``neighbours`` per point on squared Euclidean clouds)."""
    pool_k = 1 if cheap_pricing(sub) else POOL
    if potentials is not None and cheap_pricing(sub):  # least reduced costs by hull walks
        u, v = potentials
        per_col = _lifted_min(sub.x, u, sub.y, neighbours)
        per_row = _lifted_min(sub.y, v, sub.x, neighbours)
        nr, nc = north_west_pairs(sub.a, sub.b, _order(sub.x), _order(sub.y))
        return (np.concatenate([per_col.ravel(), np.repeat(np.arange(sub.n), per_row.shape[1]), nr]),
                np.concatenate([np.repeat(np.arange(sub.m), per_col.shape[1]), per_row.ravel(), nc]), None)
    if potentials is not None:
        r, c, rank = _cheapest_pairs(sub, CHEAPEST * pool_k, *potentials)
        nr, nc = north_west_pairs(sub.a, sub.b)
        first = rank < CHEAPEST
        pool = None if pool_k == 1 else (r[~first], c[~first])
        return np.concatenate([r[first], nr]), np.concatenate([c[first], nc]), pool
    if sub.use_tree():
        r, c, rank = _neighbour_pairs(sub, NEIGHBOURS * pool_k)
        order_a, order_b = _order(sub.x), _order(sub.y)
        first = rank < NEIGHBOURS
    else:
        r, c, rank = _cheapest_pairs(sub, CHEAPEST * pool_k)
        order_a = order_b = None
        if sub.x is not None and sub.y is not None:
            order_a, order_b = _order(sub.x), _order(sub.y)
        first = rank < CHEAPEST
    nr, nc = north_west_pairs(sub.a, sub.b, order_a, order_b)
    pool = None if pool_k == 1 else (r[~first], c[~first])
    return np.concatenate([r[first], nr]), np.concatenate([c[first], nc]), pool


def balanced_cells(points: np.ndarray, size: int) -> np.ndarray:
    """Each point's cell in a balanced k-d partition: cells are split at the median of their widest
    coordinate until they hold at most ``size`` points (cells adapt to the density)."""
    n = points.shape[0]
    label = np.zeros(n, dtype=np.int64)
    cells = 1
    while n > size * cells:
        lo = np.full((cells, points.shape[1]), np.inf)
        hi = np.full((cells, points.shape[1]), -np.inf)
        np.minimum.at(lo, label, points)
        np.maximum.at(hi, label, points)
        axis = (hi - lo).argmax(1)[label]
        order = np.lexsort((points[np.arange(n), axis], label))
        counts = np.bincount(label, minlength=cells)
        start = np.concatenate([[0], np.cumsum(counts)[:-1]])
        rank = np.empty(n, dtype=np.int64)
        rank[order] = np.arange(n) - start[label[order]]
        label = 2 * label + (rank >= (counts[label] + 1) // 2)
        cells *= 2
    _, label = np.unique(label, return_inverse=True)
    return label


def _coarse(points: np.ndarray, masses: np.ndarray, label: np.ndarray):
    """The cells' masses and barycentres."""
    mass = np.bincount(label, weights=masses)
    centre = np.stack([np.bincount(label, weights=masses * points[:, k]) for k in range(points.shape[1])], 1)
    return centre / np.maximum(mass, 1e-300)[:, None], mass


def cell_pairs(lab_x: np.ndarray, lab_y: np.ndarray, cx: np.ndarray, cy: np.ndarray):
    """Every pair of points (i, j) with i in cell cx[k] and j in cell cy[k], for each link k of the
    cells' labels ``lab_x``, ``lab_y``: (rows, cols, link)."""
    members_x = np.argsort(lab_x, kind="stable")
    members_y = np.argsort(lab_y, kind="stable")
    start_x = np.concatenate([[0], np.cumsum(np.bincount(lab_x))])
    start_y = np.concatenate([[0], np.cumsum(np.bincount(lab_y))])
    size_x, size_y = np.diff(start_x)[cx], np.diff(start_y)[cy]
    total = size_x * size_y
    link = np.repeat(np.arange(cx.size), total)
    offset = np.arange(total.sum()) - np.repeat(np.cumsum(total) - total, total)
    return (members_x[start_x[cx][link] + offset // size_y[link]],
            members_y[start_y[cy][link] + offset % size_y[link]], link)


def coarse_problem(sub: Subproblem):
    """The cells' problem (:func:`balanced_cells` of at most COARSE_RATIO points, masses summed,
    points at the barycentres) and each point's cell, (coarse, lab_x, lab_y)."""
    from optsolve.ot.problems import OTProblem

    lab_x, lab_y = balanced_cells(sub.x, COARSE_RATIO), balanced_cells(sub.y, COARSE_RATIO)
    xc, ac = _coarse(sub.x, sub.a, lab_x)
    yc, bc = _coarse(sub.y, sub.b, lab_y)
    coarse = OTProblem(a=ac / ac.sum(), b=bc / bc.sum(), C=None, mass=1.0, x=xc, y=yc, cost=sub.ot.cost,
                       block=sub.ot.block, label=sub.ot.label)
    return coarse, lab_x, lab_y


def coarse_candidates(sub: Subproblem, deadline=None):
    """Candidate pairs from the exact solution of a coarser problem (Merigot 2011; Schmitzer 2016):
    the points are grouped into cells of at most COARSE_RATIO points (:func:`balanced_cells`), the
    cells' problem is solved (coarsened again where it is large), and every pair of points whose
    cells the coarse plan links is a candidate. Those pairs hold a feasible plan (each cell's
    mass spread in proportion over its coarse pairs). None below COARSE_MIN points, or off the
    squared Euclidean cost in low dimension."""
    if min(sub.n, sub.m) < COARSE_MIN or not cheap_pricing(sub):
        return None
    coarse, lab_x, lab_y = coarse_problem(sub)
    xc, yc = coarse.x, coarse.y
    res = solve_exact(coarse, deadline=deadline, max_rounds=COARSE_ROUNDS, record=False)  # a guide: not exact
    if res.status not in ("optimal", "max_iter"):
        return None
    cx, cy = res.rows, res.cols
    if CELL_NEIGHBOURS > 1:  # each link widened to the nearest cells of either end
        from scipy.spatial import cKDTree

        ky, kx = min(CELL_NEIGHBOURS, yc.shape[0]), min(CELL_NEIGHBOURS, xc.shape[0])
        near_y = cKDTree(yc).query(yc, k=ky)[1].reshape(yc.shape[0], -1)
        near_x = cKDTree(xc).query(xc, k=kx)[1].reshape(xc.shape[0], -1)
        # the links themselves too: where cells' barycentres coincide, a cell need not be among its own
        # nearest, and without its links the candidates would hold no feasible plan
        cx, cy = (np.concatenate([cx, np.repeat(cx, ky), near_x[cx].ravel()]),
                  np.concatenate([cy, near_y[cy].ravel(), np.repeat(cy, kx)]))
        cx, cy = _unique_pairs(cx, cy, yc.shape[0])
    r, c, _ = cell_pairs(lab_x, lab_y, cx, cy)
    rows, cols = [r], [c]
    # and each point's pairs of least reduced cost under the coarse duals (v from its cell, u = v^c)
    v = res.g[lab_y]
    per_row = _lifted_min(sub.y, v, sub.x, NEIGHBOURS)
    near = per_row[:, 0]
    u = sub.pair_costs(np.arange(sub.n), near) - v[near]
    per_col = _lifted_min(sub.x, u, sub.y, NEIGHBOURS)
    rows += [per_col.ravel(), np.repeat(np.arange(sub.n), per_row.shape[1])]
    cols += [np.repeat(np.arange(sub.m), per_col.shape[1]), per_row.ravel()]
    return np.concatenate(rows), np.concatenate(cols), res.stats


# --------------------------------------------------------------------------- pricing

def _lifted_min(P: np.ndarray, w: np.ndarray, Q: np.ndarray, k: int):
    """For each q in Q, k indices i of small |P_i - q|^2 - w_i, the least first
    (:meth:`optsolve.ot.legendre.Envelope.nearest`)."""
    from optsolve.ot.legendre import Envelope

    return Envelope(P, w).nearest(Q, k)


def violations(sub: Subproblem, u: np.ndarray, v: np.ndarray, tol: float):
    """Pairs (r, c) with reduced cost below ``-tol`` (several per column and row at most), the most
    negative reduced cost over all pairs, and each column's and each row's least reduced cost."""
    if cheap_pricing(sub):
        per_col = _lifted_min(sub.x, u, sub.y, PRICE_ADD)  # columns' best rows
        per_row = _lifted_min(sub.y, v, sub.x, PRICE_ADD)
        r = np.concatenate([per_col.ravel(), np.repeat(np.arange(sub.n), per_row.shape[1])])
        c = np.concatenate([np.repeat(np.arange(sub.m), per_col.shape[1]), per_row.ravel()])
        reduced = sub.pair_costs(r, c) - u[r] - v[c]
        worst = float(reduced.min(initial=0.0))
        bad = reduced < -tol
        split = per_col.size
        col_min = reduced[:split].reshape(sub.m, -1).min(1)  # each first answer is the exact least
        row_min = reduced[split:].reshape(sub.n, -1).min(1)
        return r[bad], c[bad], worst, col_min, row_min
    rows, cols = [], []
    row_min = np.full(sub.n, np.inf)
    row_arg = np.zeros(sub.n, dtype=np.int64)
    col_min = np.zeros(sub.m)
    worst = 0.0
    for j0, j1, Cb in sub.blocks():
        R = np.asarray(Cb) - u[:, None] - v[None, j0:j1]
        arg = R.argmin(0)
        cmin = R[arg, np.arange(j1 - j0)]
        col_min[j0:j1] = cmin
        bad = np.flatnonzero(cmin < -tol)
        rows.append(arg[bad])
        cols.append(bad + j0)
        worst = min(worst, float(cmin.min(initial=0.0)))
        barg = R.argmin(1)
        bmin = R[np.arange(sub.n), barg]
        better = bmin < row_min
        row_min[better] = bmin[better]
        row_arg[better] = barg[better] + j0
    bad = np.flatnonzero(row_min < -tol)
    rows.append(bad)
    cols.append(row_arg[bad])
    return np.concatenate(rows), np.concatenate(cols), worst, col_min, row_min


def certified_gap(sub: Subproblem, G, u: np.ndarray, v: np.ndarray, col_min: np.ndarray, row_min: np.ndarray):
    """(U, U - D, f, g): the plan's cost, its distance to a dual bound D <= OPT, and feasible
    potentials (f, g) whose value is D.

    ``col_min`` and ``row_min`` are each column's and each row's least reduced cost. On squared
    Euclidean clouds ``g = v + col_min`` is u's c-transform and f is g's (:mod:`optsolve.ot.legendre`),
    the bound of two c-transforms. Otherwise each v_j is lowered by its column's most negative
    reduced cost, or each u_i by its row's, whichever bounds better (no further pass over the cost).
    """
    U = float(sub.pair_costs(G.row, G.col) @ G.data)
    if cheap_pricing(sub):
        from optsolve.ot.legendre import Envelope

        g = v + col_min
        f = Envelope(sub.y, g).ctransform(sub.x)
        return U, U - float(sub.a @ f + sub.b @ g), f, g
    lower_cols = float(sub.b @ np.minimum(col_min, 0.0))
    lower_rows = float(sub.a @ np.minimum(row_min, 0.0))
    D = float(sub.a @ u + sub.b @ v) + max(lower_cols, lower_rows)
    if lower_rows > lower_cols:
        return U, U - D, u + np.minimum(row_min, 0.0), v
    return U, U - D, u, v + np.minimum(col_min, 0.0)


# --------------------------------------------------------------------------- the loop

def _network_simplex(sub: Subproblem, r: np.ndarray | None, c: np.ndarray | None):
    """POT's network simplex on the candidate pairs (None: every pair of the cost matrix in memory),
    costs divided by max C: (plan coo, u, v, code)."""
    import ot as pot
    import scipy.sparse as sp

    if r is None:  # every pair of a cost in memory: the dense solver
        C = sub.ot.C
        M = (C if sub.n == C.shape[0] and sub.m == C.shape[1] else C[np.ix_(sub.I, sub.J)]) / sub.scale
    elif r.size == sub.n * sub.m:  # every pair: the dense solver
        M = np.zeros((sub.n, sub.m))
        M[r, c] = sub.pair_costs(r, c) / sub.scale
    else:
        M = sp.coo_matrix((sub.pair_costs(r, c) / sub.scale, (r, c)), shape=(sub.n, sub.m))
    with stdout_to_stderr(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        G, log = pot.emd(sub.a, sub.b, M, numItermax=NETWORK_SIMPLEX_ITER, log=True)
    G = sp.coo_matrix(G)
    return G, np.asarray(log["u"], dtype=np.float64) * sub.scale, np.asarray(log["v"], dtype=np.float64) * \
        sub.scale, int(log.get("result_code", 1))


def _unique_pairs(r, c, m):
    key = r.astype(np.int64) * m + c.astype(np.int64)
    key.sort()
    key = key[np.concatenate([[True], key[1:] != key[:-1]])] if key.size else key
    return key // m, key % m


def solve_exact(ot, potentials=None, *, deadline=None, tol: float = PRICE_TOL, max_rounds: int = MAX_ROUNDS,
                target: float | None = None, atol: float = OBJECTIVE_ATOL, pairs=None, neighbours: int = NEIGHBOURS,
                progress=None, record: bool = True) -> ExactResult:
    """The exact optimum of the transport LP of ``ot`` (an :class:`optsolve.ot.problems.OTProblem`).

    ``potentials``: (f, g) in cost units, e.g. an entropic solution's: the first candidates are the
    pairs of least reduced cost under them (None: near pairs, see the module's notes); the
    support of a feasible plan is always added. ``deadline``: an
    :class:`optsolve.core.clock.Deadline`; the loop stops between rounds when it has passed, and
    the plan is then the last round's (feasible, optimal on its candidates; status ``time_limit``).
    ``target``: stop as soon as the plan's certified gap (:func:`certified_gap`) is within
    ``--target-gap`` as the certificate judges it (:func:`optsolve.ot.certificate.target_gap_limit` with
    ``atol``: relative to U, absolute at rounding where U is about 0); the potentials returned are then
    the feasible ones of that bound (None: run until no reduced cost is below ``-tol max C``).
    ``pairs``: (rows, cols) that join the first candidates, e.g. a feasible plan's support;
    ``neighbours``: the pairs of least reduced cost per point taken under ``potentials``.
    ``record``: each round is a row of ``--history`` (not for the coarser problems).
    """
    t0 = time.perf_counter()
    sub = Subproblem(ot)
    stats = {"rounds": 0, "candidates": [], "violations": [], "network_simplex_s": 0.0, "pricing_s": 0.0}
    r, c, pool = _first_candidates(ot, sub, potentials, pairs, neighbours, deadline, stats)
    stats["candidates_s"] = time.perf_counter() - t0
    status, message, worst = "optimal", "", 0.0
    G = u = v = None
    last_full, stalled = np.inf, False
    for round_ in range(1, max_rounds + 1):
        r, c = _unique_pairs(r, c, sub.m)
        G, u, v, code = _timed_simplex(sub, r, c, stats)
        stats["rounds"] = round_
        stats["candidates"].append(int(r.size))
        if code != 1:
            status = "numerical_error"
            message = (f"The network simplex on {r.size} candidate pairs ended with POT result code {code} "
                       "(not optimal).")
            break
        t = time.perf_counter()
        vr = np.zeros(0, dtype=np.int64)
        if pool is not None:  # the reserve first: a pass over all pairs only once it has nothing to add
            vr, vc, worst, pool = _price_pool(sub, pool, u, v, tol, stats)
        met = False
        if vr.size == 0:
            vr, vc, worst, col_min, row_min = violations(sub, u, v, tol * sub.scale)
            stats["full_pricing_passes"] = stats.get("full_pricing_passes", 0) + 1
            if (sub.ot.C is not None and not cheap_pricing(sub) and vr.size
                    and vr.size >= STALL_RATIO * last_full and r.size < sub.n * sub.m):
                stalled = True  # the candidates' duals stay far off: every pair, by the dense solver
            last_full = vr.size
            if target is not None and vr.size:
                met, u, v = _target_met(sub, G, u, v, col_min, row_min, target, atol, stats)
        stats["pricing_s"] += time.perf_counter() - t
        stats["violations"].append(int(vr.size))
        stats.setdefault("most_negative", []).append(worst / sub.scale)
        _report(round_, worst / sub.scale, int(r.size), int(vr.size), record, progress)
        if met:
            message = (f"Certified gap {stats['certified_gap']:.3g} (target {target:g}) after {round_} rounds: "
                       f"{vr.size} pairs still price below zero, by at most {-worst / sub.scale:.3g} max C.")
            break
        if vr.size == 0:
            break
        if deadline is not None and deadline.expired():
            status = "time_limit"
            message = (f"Time limit reached after {round_} rounds of the exact solve: the plan is optimal on its "
                       f"{r.size} candidate pairs, but {vr.size} other pairs still have negative reduced costs.")
            break
        if stalled:  # the LP over every pair; nothing is left to price
            stats["dense_after_round"] = round_
            G, u, v, code = _timed_simplex(sub, None, None, stats)
            if code != 1:
                status, message = "numerical_error", (f"POT's network simplex over all {sub.n} x {sub.m} pairs ended "
                                                      f"with result code {code}.")
            break
        r, c = np.concatenate([r, vr]), np.concatenate([c, vc])
    else:
        status, message = "max_iter", (f"{max_rounds} rounds of the exact solve ran without every reduced cost "
                                       f"reaching {-tol:g} max C (most negative {worst / sub.scale:.3g} max C).")
    stats["most_negative_reduced_cost"] = worst
    f, g = np.zeros(ot.n), np.zeros(ot.m)
    f[sub.I], g[sub.J] = u, v
    return ExactResult(sub.I[G.row], sub.J[G.col], G.data.astype(np.float64), f, g, status, message, stats)


def _timed_simplex(sub, r, c, stats: dict):
    """:func:`_network_simplex` on the candidates (r, c) (None: every pair), its time added to the stats."""
    t = time.perf_counter()
    out = _network_simplex(sub, r, c)
    stats["network_simplex_s"] += time.perf_counter() - t
    return out


def _first_candidates(ot, sub, potentials, pairs, neighbours: int, deadline, stats: dict):
    """(rows, cols, reserve): the first round's candidate pairs (a coarser problem's plan spread to its
    cells' points, every pair of a small problem, or the near pairs and those of least reduced cost under
    ``potentials``, with a reserve priced before any pass over all pairs), and ``pairs`` joined."""
    sub_potentials = None
    if potentials is not None:
        sub_potentials = (np.asarray(potentials[0], dtype=np.float64)[sub.I],
                          np.asarray(potentials[1], dtype=np.float64)[sub.J])
    coarse = None if potentials is not None else coarse_candidates(sub, deadline)
    if coarse is not None:
        r, c, stats["coarse"] = coarse
        pool = None
    elif potentials is None and sub.n * sub.m <= DENSE_PAIRS:  # small: every pair is a candidate
        r = np.repeat(np.arange(sub.n), sub.m)
        c = np.tile(np.arange(sub.m), sub.n)
        pool = None
    else:
        r, c, pool = initial_candidates(sub, sub_potentials, neighbours)
    if pairs is not None:
        keep = (sub.ot.a[pairs[0]] > 0) & (sub.ot.b[pairs[1]] > 0)
        back_x = np.full(ot.n, -1)
        back_x[sub.I] = np.arange(sub.n)
        back_y = np.full(ot.m, -1)
        back_y[sub.J] = np.arange(sub.m)
        r = np.concatenate([r, back_x[pairs[0][keep]]])
        c = np.concatenate([c, back_y[pairs[1][keep]]])
    return r, c, pool


def _price_pool(sub, pool, u, v, tol: float, stats: dict):
    """The reserve's pairs of reduced cost below -tol max C (priced in), its most negative reduced cost, and
    the reserve left."""
    pr, pc = pool
    reduced = sub.pair_costs(pr, pc) - u[pr] - v[pc]
    bad = reduced < -tol * sub.scale
    stats["pool_rounds"] = stats.get("pool_rounds", 0) + 1
    return pr[bad], pc[bad], float(reduced.min(initial=0.0)), (pr[~bad], pc[~bad])


def _target_met(sub, G, u, v, col_min, row_min, target: float, atol: float, stats: dict):
    """Whether the plan's certified gap meets ``target`` (as the certificate measures it), and the potentials:
    the feasible ones of that bound where it does."""
    U, gap, f_b, g_b = certified_gap(sub, G, u, v, col_min, row_min)
    stats["certified_gap"] = target_measure(gap, U, sub.scale, target, atol)
    met = stats["certified_gap"] <= target
    return (met, f_b, g_b) if met else (met, u, v)


def _report(round_: int, reduced: float, candidates: int, priced_in: int, record: bool, progress) -> None:
    """A round of the exact solve in ``--history`` (``record``) and the progress line."""
    if record:
        trace(round_, max(-reduced, 0.0), evaluations=candidates, measure="most negative reduced cost over all "
              "pairs / max C", evaluations_of="candidate pairs of the round's network simplex", priced_in=priced_in)
    if progress is not None:
        progress.update(round_, candidates=candidates, priced_in=priced_in, reduced=reduced)
