"""Large squared Euclidean clouds to a target gap: coarse to fine, each level solved block by block.

One network simplex over every candidate pair of a large level costs time that grows faster
than the square of its size (see the Notes). Above ``DIRECT_MAX`` points a level is solved by
domain decomposition instead (Benamou, "A domain decomposition method for the polar
factorization of vector-valued mappings", SIAM J. Numer. Anal. 1995; Bonafini and Schmitzer,
"Domain decomposition for entropy regularized optimal transport", Numer. Math. 2021):

1. the cells' problem (cells of 4 points, masses summed) is solved the same way, and its plan,
   each link's mass spread over the pairs of its two cells, is a feasible plan of the level;
2. the source points are cut into blocks of about ``BLOCK`` points, by two balanced k-d
   partitions whose cuts differ (the second is of the points turned by 45 degrees); a sweep
   solves, for every block, the transport from its points to the mass the plan now sends them
   to, exactly (:func:`optsolve.ot.exact.solve_exact`), which never raises the plan's cost;
3. after each sweep the blocks' dual potentials, each fixed up to a constant of its own (and, on
   degenerate plans, up to a tilt and a bend on the block's scale), are joined into one vector:
   on each block, the quadratic polynomial of the coordinates nearest to the cells' potentials
   carried to its points by a c-transform, less the block's potentials, is added to them; two
   c-transforms of that vector over all pairs (:mod:`optsolve.ot.legendre`) bound the optimum
   from below. The sweeps alternate partitions until the gap is within the target of U itself,
   SWEEPS at most; the result claims the target when the gap is within it as --target-gap
   measures it (:func:`optsolve.ot.certificate.target_gap_limit`);
4. where it is not, and the level is not too large, one network simplex over all its points on
   few pairs (the plan's, and those the joined potentials price lowest) finishes, as the exact
   method does, with potentials of one piece.

The plan is feasible after every sweep, and the gap is certified over all pairs, as the
certificate recomputes it.

Notes
-----
The level below a decomposed one guides it, so a level is solved directly up to ``DIRECT_MAX`` points;
the measurements behind ``DIRECT_MAX`` and the finishing network simplex are in docs/benchmarks.md
("Measurements behind the code").
"""

from __future__ import annotations

import time

import numpy as np

from optsolve.core.history import trace
from optsolve.ot.certificate import OBJECTIVE_ATOL, target_measure
from optsolve.ot.exact import (MAX_ROUNDS, ExactResult, Subproblem, balanced_cells, cell_pairs,
                               cheap_pricing, coarse_problem, solve_exact)
from optsolve.ot.legendre import Envelope
from optsolve.ot.problems import OTProblem

# levels up to this many points (the smaller side): one network simplex over all candidates (see the
# module's Notes)
DIRECT_MAX = 70_000
BLOCK = 5_000  # source points per block of a sweep
SWEEPS = 3  # at most
GUIDE_SWEEPS = 2  # on a coarser level
BLOCK_TARGET = 0.25  # a block is solved to this fraction of the target gap, from the plan's pairs
# where the sweeps' bound falls short of the target: one network simplex over all points, on the plan's
# pairs and POLISH_NEIGHBOURS more per point, up to this many points and this many pricing rounds (see
# the module's Notes)
POLISH_MAX = 200_000
POLISH_NEIGHBOURS = 2
POLISH_ROUNDS = 6


def partitions(points: np.ndarray, size: int):
    """Two balanced k-d partitions into blocks of about ``size`` points whose cuts differ: of the
    points, and of the points turned by 45 degrees in the plane of their first two coordinates
    (on a line: the same blocks moved by half a block)."""
    first = balanced_cells(points, size)
    if points.shape[1] < 2:
        rank = np.empty(points.shape[0], dtype=np.int64)
        rank[np.argsort(points[:, 0], kind="stable")] = np.arange(points.shape[0])
        width = -(-points.shape[0] // (int(first.max()) + 1))
        return [first, (rank + width // 2) // width]
    turned = points.copy()
    turned[:, 0], turned[:, 1] = points[:, 0] - points[:, 1], points[:, 0] + points[:, 1]
    return [first, balanced_cells(turned, size)]


def _spread(lab_x, lab_y, rows, cols, values, a, b, ac, bc):
    """A coarse plan's links, each spread over the pairs of its two cells in proportion to the masses."""
    r, c, link = cell_pairs(lab_x, lab_y, rows, cols)
    return r, c, values[link] * (a[r] / ac[lab_x[r]]) * (b[c] / bc[lab_y[c]])


def groups(label: np.ndarray) -> list[np.ndarray]:
    """The points of each block, block by block (indices, ascending)."""
    members = np.argsort(label, kind="stable")
    first = np.searchsorted(label[members], np.arange(int(label.max()) + 2))
    return [members[first[k]:first[k + 1]] for k in range(first.size - 1)]


def _join(points: np.ndarray, u: np.ndarray, blocks: list[np.ndarray], anchor: np.ndarray) -> np.ndarray:
    """Each point's correction to its block's potentials ``u``: on each block (``blocks``, as
    :func:`groups` gives them), the quadratic polynomial of the coordinates nearest (least squares)
    to ``anchor - u``.

    Notes
    -----
    A block's potentials are fixed up to a constant, and, where its plan is degenerate (uniform
    masses: each point sends its mass to one point), they may also tilt and bend on the block's
    scale. On 250,000 uniform points with a decomposed guide, matching constants alone left a
    bound at 96 % of U; the quadratic, 45 %. On 1,000,000 points, 124 % and 29 %.
    """
    d = points.shape[1]
    out = np.empty(u.size)
    for X in blocks:
        P = points[X] - points[X].mean(0)
        P /= float(np.abs(P).max()) or 1.0
        terms = [np.ones((X.size, 1)), P] + [P[:, i:i + 1] * P[:, i:] for i in range(d)]
        A = np.hstack(terms)
        coef, *_ = np.linalg.lstsq(A, anchor[X] - u[X], rcond=None)
        out[X] = A @ coef
    return out


def _bound(sub: Subproblem, f: np.ndarray):
    """(D, f, g): the dual bound of two c-transforms of f over all pairs, and its potentials."""
    g = Envelope(sub.x, f).ctransform(sub.y)
    f = Envelope(sub.y, g).ctransform(sub.x)
    return float(sub.a @ f + sub.b @ g), f, g


def solve_large(ot, *, target: float | None, deadline=None, progress=None, record: bool = True,
                guide: bool = False, max_rounds: int = MAX_ROUNDS, atol: float = OBJECTIVE_ATOL) -> ExactResult:
    """:func:`optsolve.ot.exact.solve_exact` to ``target`` (the same measure), by domain
    decomposition on levels of more than DIRECT_MAX points (see the module's notes); the network
    simplex over all candidates where the problem is smaller, has no target (the LP optimum), or
    is not a squared Euclidean cloud in low dimension. ``guide``: a coarser level, whose plan only
    starts the finer one: GUIDE_SWEEPS sweeps at most."""
    t0 = time.perf_counter()
    sub = Subproblem(ot)
    if target is None or min(sub.n, sub.m) <= DIRECT_MAX or not cheap_pricing(sub):
        return solve_exact(ot, target=target, deadline=deadline, progress=progress, record=record,
                           max_rounds=max_rounds, atol=atol)
    coarse, lab_x, lab_y = coarse_problem(sub)
    cres = solve_large(coarse, target=target, deadline=deadline, record=False, guide=True, atol=atol)
    stats = {"coarse": cres.stats, "sweeps": 0, "blocks": 0, "gaps": [], "block_solve_s": 0.0, "bound_s": 0.0}
    if cres.status not in ("optimal", "max_iter", "time_limit"):
        return solve_exact(ot, target=target, deadline=deadline, progress=progress, record=record,
                           max_rounds=max_rounds, atol=atol)
    ac = np.bincount(lab_x, weights=sub.a)
    bc = np.bincount(lab_y, weights=sub.b)
    rows, cols, values = _spread(lab_x, lab_y, cres.rows, cres.cols, cres.values * sub.a.sum(), sub.a, sub.b, ac, bc)
    parts = partitions(sub.x, BLOCK)
    parts_blocks = [groups(label) for label in parts]  # the two partitions alternate: grouped once
    anchor = Envelope(coarse.y, cres.g).ctransform(sub.x)  # the coarse potentials carried to the points
    scale = sub.scale
    status, message = "max_iter", ""
    f = g = None
    stats["start_s"] = time.perf_counter() - t0
    sweeps = GUIDE_SWEEPS if guide else SWEEPS
    for sweep in range(1, sweeps + 1):
        label, blocks = parts[(sweep - 1) % 2], parts_blocks[(sweep - 1) % 2]
        t = time.perf_counter()
        rows, cols, values, u = _sweep(ot, sub, label, blocks, rows, cols, values, target, deadline)
        stats["block_solve_s"] += time.perf_counter() - t
        stats["sweeps"], stats["blocks"] = sweep, len(blocks)
        t = time.perf_counter()
        U = float(sub.pair_costs(rows, cols) @ values)
        if not np.isnan(u).any():  # every block solved
            D, f, g = _bound(sub, u + _join(sub.x, u, blocks, anchor))
            gap = target_measure(U - D, U, scale, target, atol)
        else:
            gap = np.inf
        stats["bound_s"] += time.perf_counter() - t
        stats["gaps"].append(gap)
        if record:
            trace(sweep, gap, evaluations=int(rows.size), measure="certified gap U - D as --target-gap measures it",
                  evaluations_of="plan entries after the sweep", blocks=len(blocks))
        if progress is not None:
            progress.update(sweep, gap=gap, blocks=len(blocks))
        if gap <= target:
            status = "optimal"
            message = (f"Certified gap {gap:.3g} (target {target:g}) after {sweep} sweeps of {len(blocks)} "
                       f"blocks (domain decomposition over {sub.n} points).")
            break
        if deadline is not None and deadline.expired():
            status = "time_limit"
            break
    if f is None:  # no sweep with every block solved: the coarse potentials carried to the points
        _, f, g = _bound(sub, anchor)
    if status == "max_iter" and sub.n <= POLISH_MAX and not guide:
        # the bound of joined potentials is short: one network simplex over all points, on the plan's
        # pairs and the few each point's joined potentials price lowest, gives potentials of one piece
        res = solve_exact(ot, (_full(f, sub.I, ot.n), _full(g, sub.J, ot.m)), target=target, deadline=deadline,
                          pairs=(sub.I[rows[values > 0]], sub.J[cols[values > 0]]), neighbours=POLISH_NEIGHBOURS,
                          max_rounds=POLISH_ROUNDS, progress=progress, record=record, atol=atol)
        stats["time_s"] = time.perf_counter() - t0
        res.stats = {"rounds": stats["sweeps"] + res.stats["rounds"], "decomposition": stats, "finish": res.stats}
        return res
    if status != "optimal":
        message = (message or "") + (f"{'Time limit reached' if status == 'time_limit' else f'{sweeps} sweeps ran'}"
                                     f" with a certified gap of {stats['gaps'][-1]:.3g} (target {target:g}); "
                                     "the plan is feasible.")
    keep = values > 0
    stats["time_s"] = time.perf_counter() - t0
    return ExactResult(sub.I[rows[keep]], sub.J[cols[keep]], values[keep], _full(f, sub.I, ot.n),
                       _full(g, sub.J, ot.m), status, message, {"rounds": stats["sweeps"], "decomposition": stats})


def _sweep(ot, sub, label, blocks, rows, cols, values, target: float, deadline):
    """One sweep of the blocks of a partition (``label``: each source point's block, ``blocks``: their points):
    each block's transport to the mass it now sends, solved exactly on its plan's pairs and priced over its
    points. Returns the plan's entries after the sweep and the blocks' potentials u (NaN where a block kept its
    part of the plan, unsolved)."""
    by_block = np.argsort(label[rows], kind="stable")
    rows, cols, values = rows[by_block], cols[by_block], values[by_block]
    edges = np.searchsorted(label[rows], np.arange(label.max() + 2))
    u = np.zeros(sub.n)
    new = []
    for k, X in enumerate(blocks):
        r, c, val = rows[edges[k]:edges[k + 1]], cols[edges[k]:edges[k + 1]], values[edges[k]:edges[k + 1]]
        J, inv = np.unique(c, return_inverse=True)
        nu = np.bincount(inv, weights=val, minlength=J.size)
        mass = float(sub.a[X].sum())
        local = OTProblem(a=sub.a[X] / mass, b=nu / nu.sum(), C=None, mass=1.0, x=sub.x[X], y=sub.y[J],
                          cost=ot.cost, block=ot.block, label=ot.label)
        res = solve_exact(local, target=target * BLOCK_TARGET, pairs=(np.searchsorted(X, r), inv),
                          deadline=deadline, record=False)
        if res.status != "optimal":  # the block keeps its part of the plan
            new.append((r, c, val))
            u[X] = np.nan
            continue
        new.append((X[res.rows], J[res.cols], res.values * mass))
        u[X] = res.f
    return (np.concatenate([n_[0] for n_ in new]), np.concatenate([n_[1] for n_ in new]),
            np.concatenate([n_[2] for n_ in new]), u)


def _full(values: np.ndarray, index: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros(size)
    out[index] = values
    return out
