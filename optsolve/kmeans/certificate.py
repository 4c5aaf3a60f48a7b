"""Independent checks of a k-means answer, recomputed from the problem and the solution only.

What ``optimal`` means for ``optsolve kmeans`` (the only status it certifies, :data:`CLAIMS`):
the document is a k-means clustering of the problem's points whose reported cost is its true
cost, and no worse than what the oracle's labels alone give. Each threshold is a
:data:`LIMITS` entry, named as the ``optsolve kmeans`` option that sets it:

* ``solution_shape``: ``solution.centres`` is a finite L x d array with 1 <= L <= k (more
  centres than k would lower the cost for free), ``solution.assignment`` m centre indices;
* ``assignment_nearest``: every point's assigned centre is a nearest one: its squared distance
  beyond the minimum is at most ``assign_tol`` times the largest squared norm of a (centred)
  point or centre, the scale of the rounding in the distances. A point within half of its
  centre's distance to the nearest other centre is nearest to it (the triangle inequality); the
  others are compared with every centre;
* ``objective_matches``: the reported objective against the cost sum_p min_c ||p - c||^2
  recomputed here, within ``cost_rtol`` times the cost plus ``cost_atol`` times m times that
  scale (an absolute floor: a zero cost, k = m or equal points, is judged too);
* ``cost_within_label_cost``: the cost is at most (1 + ``label_cost_slack``) times the cost of
  the predicted labels' clusters (each point to its own label's centroid), plus the same floor.
  A trimmed estimate of a cluster whose labels are right costs up to 1 / (1 - alpha) < 2 times
  its centroid's, hence the default slack of 1: a sanity bound, not the method's guarantee;
* ``lower_bound_below_cost``: for up to 2,000 points, a lower bound on the optimal cost (exact
  1-D k-means along the top three principal directions, by dynamic programming, when its
  tables fit the memory budget and k m^2 <= 1e8; under the solver's time limit, the directions
  done before it) is at most the cost, within the same tolerances.

All of these come from one pass over the points, in float64 a block of rows at a time.
Reported as information, never as a holding check: the cost, the cluster sizes, the label
clusters' cost and the cost's ratios to it and to the lower bound, and the approximation
guarantee of the method for the alpha it reports (formula and value). That guarantee assumes
the oracle's labels meet the error rate, |P_i n C_i| >= (1 - alpha) max(|P_i|, |C_i|), which
the problem and the solution cannot show; nor can they show that the centres are the output of
the method the document names: a document whose centres were moved and whose objective was
changed to match is judged by the checks above only. The document's settings (method, alpha,
seed, ...) are reported, never used to judge. Claims of ``infeasible`` or ``unbounded`` fail: a
problem with 1 <= k <= m always has a clustering, and its cost is at least zero.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from optsolve.core import memory
from optsolve.core.blocks import fold_blocks
from optsolve.core.errors import ParameterError
from optsolve.core.result import Certificate, Check, Limit, solution_vector
from optsolve.kmeans.problems import largest_coordinate, prepare

BLOCK = 4096  # rows per block: the block and its distances stay in cache
TABLE_ENTRIES = 1 << 22  # ... fewer rows for many centres: a block's distance table stays within 32 MB
COST_RTOL = 1e-9
COST_ATOL = 1e-12
ASSIGN_TOL = 1e-9
LABEL_COST_SLACK = 1.0
LIMITS = (
    Limit("cost_rtol", COST_RTOL, "larger", "relative tolerance between the reported objective and the recomputed cost",
          public="objective_rtol"),
    Limit("cost_atol", COST_ATOL, "larger",
          "absolute floor of the cost comparisons, times m times the largest squared norm of a centred point or centre",
          public="objective_atol"),
    Limit("assign_tol", ASSIGN_TOL, "larger",
          "squared distance to the assigned centre beyond the nearest, times the largest squared norm"),
    Limit("label_cost_slack", LABEL_COST_SLACK, "larger",
          "the cost may exceed the predicted labels' centroids' cost by this fraction"),
)
CLAIMS = ("optimal",)
BOUND_MAX_POINTS = 2000  # the lower bound's dynamic programme is O(k m^2) per direction: small m only
BOUND_MAX_WORK = 1e8  # ... and k m^2 at most this (about a second per direction): k = m = 2,000 would take a minute
BOUND_DIRECTIONS = 3  # ... along this many principal directions


def kmeans_1d(values: np.ndarray, k: int) -> float:
    """The optimal k-means cost of numbers (exact: clusters of sorted values are intervals;
    dynamic programme over the end of the last interval, O(k m^2))."""
    v = np.sort(np.asarray(values, dtype=float))
    v = v - v.mean()
    m = v.size
    k = min(k, m)
    s1 = np.concatenate([[0.0], np.cumsum(v)])
    s2 = np.concatenate([[0.0], np.cumsum(v * v)])
    j = np.arange(m + 1)[:, None]
    i = np.arange(m + 1)[None, :]
    with np.errstate(divide="ignore", invalid="ignore"):
        W = (s2[i] - s2[j]) - (s1[i] - s1[j]) ** 2 / (i - j)  # cost of the interval j..i-1
    W = np.where(i > j, np.maximum(W, 0.0), np.inf)
    dp = W[0].copy()  # one interval covering 0..i-1
    for _ in range(k - 1):
        if dp[m] <= 0.0:  # more intervals cannot lower a zero cost
            break
        dp = np.minimum(dp, (dp[:, None] + W).min(axis=0))
    return float(dp[m])


def lower_bound(X, k: int, deadline: float | None = None) -> tuple[float | None, str]:
    """A lower bound on the optimal k-means cost: for an orthonormal set of directions, any
    clustering's cost is at least the sum over them of the optimal 1-D costs of the projections.
    Along the top principal directions (fewer once ``time.perf_counter()`` passes ``deadline``: any
    subset still gives a bound); loose where the clusters differ in other directions."""
    m, d = X.shape
    if m > BOUND_MAX_POINTS:
        return None, f"not computed: m = {m} > {BOUND_MAX_POINTS} (an O(k m^2) programme per direction)"
    if d == 0:
        return None, "not computed: the points have no coordinates"
    if min(k, m) * float(m + 1) ** 2 > BOUND_MAX_WORK:
        return None, (f"not computed: k m^2 = {min(k, m) * float(m + 1) ** 2:.3g} > {BOUND_MAX_WORK:.0e} (an O(k m^2) "
                      "programme per direction)")
    need = 4 * 8 * (m + 1) ** 2 + 8 * m * d  # the interval-cost table, its temporaries and the centred copy
    if need > memory.budget_bytes():
        return None, f"not computed: its tables need {memory.human_bytes(need)}, more than the memory budget"
    A = np.asarray(X, dtype=float)
    A = A - A.mean(axis=0)
    r = min(BOUND_DIRECTIONS, d, m)
    _, _, Vt = np.linalg.svd(A, full_matrices=False)
    total, done = 0.0, 0
    for t in range(r):
        if deadline is not None and time.perf_counter() >= deadline:
            break
        total += kmeans_1d(A @ Vt[t], k)
        done += 1
    if done == 0:
        return None, "not computed: the time limit was reached"
    return total, (f"sum of exact 1-D k-means costs along the top {done} principal directions (a valid lower bound "
                   "on the optimal cost; loose where the clusters differ along the other directions)")


def _rows(centres: int) -> int:
    """Rows per block of a distance pass against this many centres."""
    return max(1, min(BLOCK, TABLE_ENTRIES // max(1, centres)))


def _distances(B: np.ndarray, Cs: np.ndarray, shift: np.ndarray):
    """Squared distances of the rows of B to the centres less the rows' squared norms,
    ||c||^2 - 2 x'c, with B and the centres Cs shifted by ``shift`` (the centres' mean: less
    cancellation), and the shifted rows' squared norms."""
    Bs = B - shift
    G = Bs @ (-2.0 * Cs.T)
    G += (Cs * Cs).sum(axis=1)
    return G, np.einsum("ij,ij->i", Bs, Bs)


def guarantee(method: str, alpha, m: int) -> tuple[float | None, str]:
    """(factor, statement) of the approximation guarantee for ``method`` at error rate ``alpha``."""
    if method == "lloyd":
        return None, "scikit-learn's KMeans (k-means++, n_init = 10): no guarantee beyond k-means++'s O(log k) in expectation"
    if method == "labels":
        return None, "plain centroids of the predicted labels: no guarantee under label errors"
    if alpha is None or isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or not math.isfinite(alpha):
        return None, "no alpha"
    a = float(alpha)
    if method == "sort-window":
        if a < 0.5:
            f = 1 + (5 * a - 2 * a * a) / ((1 - 2 * a) * (1 - a))
            return f, f"Nguyen et al. 2023: 1 + (5 alpha - 2 alpha^2) / ((1 - 2 alpha)(1 - alpha)) = {f:.4g} at alpha = {a:g}"
        return None, "Nguyen et al. 2023: needs alpha < 1/2"
    if method == "crdest":
        low = 10 * math.log(m) / math.sqrt(m)
        if low < a < 1 / 7:
            return 1 + 20 * a, f"Ergun et al. 2022: 1 + 20 alpha = {1 + 20 * a:.4g} at alpha = {a:g}"
        return None, (f"Ergun et al. 2022: 1 + 20 alpha holds for 10 ln m / sqrt m = {low:.3g} < alpha < 1/7 only "
                      f"(alpha = {a:g}, m = {m}); it does not apply here")
    return None, (f"Huang et al. 2025: 1 + O(alpha) with probability 1 - delta (delta = 0.1) at alpha = {a:g}; "
                  "no explicit constant (ours: about 5 times Nguyen et al.'s)")


def resolve(limits: dict | None) -> dict:
    """Every limit of :data:`LIMITS` as a float: the given values, the documented defaults for the rest."""
    out = {lim.name: lim.default for lim in LIMITS}
    out.update({k: v for k, v in (limits or {}).items() if k in out and v is not None})
    for name, value in out.items():
        try:
            ok = math.isfinite(float(value)) and float(value) >= 0
        except (TypeError, ValueError):
            ok = False
        if not ok:
            option = next(lim.option for lim in LIMITS if lim.name == name)
            raise ParameterError(f"The '{option}' option must be a finite number >= 0; got {value!r}.")
    return {k: float(v) for k, v in out.items()}


def _centres(solution: dict, kp) -> tuple[np.ndarray, np.ndarray]:
    """(centres, assignment) of the solution, or ValueError saying what is wrong."""
    if not isinstance(solution, dict):
        raise ValueError("the solution is not an object")
    raw = solution.get("centres")
    if not isinstance(raw, (list, tuple)) or not raw:
        raise ValueError(f"solution.centres must be a non-empty list of rows; found {type(raw).__name__}")
    try:
        C = np.asarray(raw, dtype=float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError("solution.centres must be a k x d array of numbers") from None
    if C.ndim != 2 or C.shape[1] != kp.d or not 1 <= C.shape[0] <= kp.k:
        raise ValueError(f"solution.centres has shape {C.shape}; expected (L, {kp.d}) with 1 <= L <= k = {kp.k}")
    if not np.isfinite(C).all():
        raise ValueError("solution.centres has non-finite entries")
    most = largest_coordinate(kp.m, kp.d)
    if np.abs(C).max() > most:
        raise ValueError(f"solution.centres has an entry of {np.abs(C).max():.3g}; beyond {most:.3g} the squared "
                         "distances overflow")
    a = solution_vector(solution, "assignment", kp.m)
    if not np.isfinite(a).all() or np.any(a != np.round(a)) or a.min() < 0 or a.max() >= C.shape[0]:
        raise ValueError(f"solution.assignment entries must be centre indices in [0, {C.shape[0]})")
    return C, a.astype(np.int64)


def _half_gaps(Cs: np.ndarray) -> np.ndarray:
    """Lower bounds on half the distance from each centre to the nearest other one: the expansion
    less a bound on its rounding (d + 4 roundings of terms of size ||c_i||^2 + ||c_j||^2, doubled)."""
    L, d = Cs.shape
    if L == 1:
        return np.full(1, np.inf)
    cc = (Cs * Cs).sum(axis=1)
    gamma = 2.0 * (d + 4) * np.finfo(float).eps
    half = np.empty(L)
    for lo in range(0, L, _rows(L)):
        hi = min(L, lo + _rows(L))
        D2 = cc[lo:hi, None] - 2.0 * Cs[lo:hi] @ Cs.T + cc[None, :]
        D2 -= gamma * (cc[lo:hi, None] + cc[None, :])
        D2[np.arange(hi - lo), np.arange(lo, hi)] = np.inf
        half[lo:hi] = np.sqrt(np.maximum(D2.min(axis=1), 0.0)) / 2
    return half


def _pass(kp, C: np.ndarray, a: np.ndarray, workers: int | None = None) -> tuple[float, float, float, float]:
    """One pass over the points, a block of rows at a time, in float64: (the cost of the assignment
    ``a`` to the centres C, the largest squared distance to the assigned centre beyond the nearest, the
    largest squared norm of a shifted point, the cost of the predicted labels' clusters about their
    centroids). A point within half of its centre's distance to the nearest other centre is nearest
    to it (the triangle inequality); only the other points are compared with every centre, for float32
    points first in float32 (and in float64 where its rounding leaves the nearest in doubt). The blocks
    run on the threads of :func:`optsolve.core.blocks.fold_blocks`."""
    shift = C.mean(axis=0)
    Cs = C - shift
    L = Cs.shape[0]
    half = _half_gaps(Cs)
    cmax = float((Cs * Cs).sum(axis=1).max())
    single = None
    if kp.X.dtype == np.float32 and L > 1:
        # float32 distances ||c||^2 - 2 x'c, wrong by at most rounding x (||x||^2 + max ||c||^2): the x'c
        # product's d + 2 roundings, those of the sums and of x's conversion (Higham, Accuracy and
        # Stability of Numerical Algorithms, section 3.1), doubled
        with np.errstate(over="ignore"):
            single = (np.ascontiguousarray(-2.0 * Cs.T, dtype=np.float32),
                      (Cs * Cs).sum(axis=1).astype(np.float32))
        rounding = 2.0 * (kp.d + 8) * float(np.finfo(np.float32).eps)

    def block(start: int, stop: int):
        B = kp.X[start:stop].astype(float)  # a copy, shifted in place (faster than a subtraction that casts)
        B -= shift
        own = B - Cs[a[start:stop]]
        own = np.einsum("ij,ij->i", own, own)
        bb = np.einsum("ij,ij->i", B, B)
        lab = kp.labels[start:stop]
        sums = sp.csc_matrix((np.ones(lab.size), lab, np.arange(lab.size + 1)), shape=(kp.k, lab.size)) @ B
        excess = 0.0
        open_rows = np.flatnonzero(np.sqrt(own) > half[a[start:stop]])
        if open_rows.size and single is not None:  # float32 points: float32 distances first, with their rounding
            with np.errstate(over="ignore", invalid="ignore"):  # beyond float32's range: inf or NaN, judged below
                D = (B[open_rows].astype(np.float32) @ single[0] + single[1]).astype(float) + bb[open_rows, None]
            err = rounding * (bb[open_rows] + cmax)
            rows = np.arange(open_rows.size)
            mine = D[rows, a[start + open_rows]]
            D[rows, a[start + open_rows]] = np.inf
            # nearest for certain: the exact distance to its centre is below every other exact distance (a NaN
            # proves nothing: that row is judged in float64)
            open_rows = open_rows[~(mine + err <= D.min(axis=1) - err)]
        if open_rows.size:
            G, _ = _distances(B[open_rows], Cs, np.zeros(kp.d))
            got = G[np.arange(open_rows.size), a[start + open_rows]]
            excess = float((got - G.min(axis=1)).max())
        return float(own.sum()), excess, float(bb.max()), sums, np.bincount(lab, weights=bb, minlength=kp.k)

    def combine(x, y):
        return x[0] + y[0], max(x[1], y[1]), max(x[2], y[2]), x[3] + y[3], x[4] + y[4]

    cost, excess, norm, label_sums, label_norms = fold_blocks(block, kp.m, _rows(L), combine, workers)
    counts = np.bincount(kp.labels, minlength=kp.k)
    live = counts > 0
    label_cost = label_norms[live] - (label_sums[live] ** 2).sum(axis=1) / counts[live]
    return cost, excess, norm, float(np.maximum(label_cost, 0.0).sum())


def check(problem, solution: dict, *, method: str | None, objective, settings: dict | None = None,
          limits: dict | None = None, status=None, deadline: float | None = None, workers: int | None = None,
          **extra) -> Certificate:
    """The certificate of ``solution`` for ``problem``, judged against ``limits`` (see :data:`LIMITS`;
    the defaults for those not given). ``settings`` (the document's, untrusted) only selects the
    guarantee reported as information; ``status`` is the claimed status. ``deadline`` (a
    ``time.perf_counter()`` value: the solver's time limit): the lower bound is cut short at it. ``workers``:
    threads of the pass over the points (default: :func:`optsolve.core.blocks.fold_blocks`'s)."""
    settings = settings if isinstance(settings, dict) else {}
    lim = resolve(limits)
    kp = prepare(problem)
    status = getattr(status, "value", status)
    claim = []
    if status in ("infeasible", "unbounded"):
        claim.append(Check.require("status_certificate", status, False, "no such claim for k-means",
                                   f"a k-means problem with 1 <= k <= m has a clustering of finite cost: it is "
                                   f"never {status}"))
    try:
        C, a = _centres(solution, kp)
    except (KeyError, ValueError, TypeError, IndexError, OverflowError) as exc:
        return Certificate(claim + [Check.require("solution_shape", None, False,
                                                  f"finite centres (L x {kp.d}, 1 <= L <= {kp.k}) and an assignment "
                                                  f"of the {kp.m} points", str(exc))])
    checks = claim + [Check.require("solution_shape", list(C.shape), True,
                                    f"finite centres (L x {kp.d}, 1 <= L <= {kp.k}) and an assignment of the "
                                    f"{kp.m} points")]
    cost, excess, norm, label_cost = _pass(kp, C, a, workers)
    shift = C.mean(axis=0)
    scale = max(norm, float(((C - shift) ** 2).sum(axis=1).max()))
    floor = lim["cost_atol"] * kp.m * scale  # rounding of a sum of m squared distances of this scale

    def tolerance(value: float) -> float:
        return lim["cost_rtol"] * abs(value) + floor

    checks += [
        Check.at_most("assignment_nearest", excess, lim["assign_tol"] * scale,
                      "largest squared distance to the assigned centre beyond the nearest one"),
        Check.info("cost", cost, "sum over points of the squared distance to the nearest centre"),
    ]
    if objective is None or isinstance(objective, bool) or not isinstance(objective, (int, float)):
        checks.append(Check.require("objective_matches", objective, False, "the cost, a number",
                                    "the document reports no objective"))
    else:
        checks.append(Check.at_most("objective_matches", abs(float(objective) - cost), tolerance(cost),
                                    f"|objective - recomputed cost|; limit cost_rtol x cost + cost_atol x m x "
                                    f"{scale:.3g} (the largest squared norm)"))
    checks.append(Check.info("cluster_sizes", np.bincount(a, minlength=C.shape[0]).tolist()))
    checks.append(Check.info("label_centroids_cost", label_cost,
                             "cost of the predicted labels' clusters, each point to its own label's centroid"))
    bound_on_cost = (1.0 + lim["label_cost_slack"]) * label_cost
    checks.append(Check.at_most("cost_within_label_cost", cost, bound_on_cost + tolerance(bound_on_cost),
                                "the cost against (1 + label_cost_slack) x the predicted labels' clusters' cost (a "
                                "sanity bound: a trimmed estimate costs less than twice the centroid of right labels)"))
    checks.append(Check.info("cost_over_label_cost", cost / label_cost if label_cost > 0 else None))
    bound, note = lower_bound(kp.X, C.shape[0], deadline)
    checks.append(Check.info("lower_bound", bound, note))
    if bound is not None:
        checks.append(Check.at_most("lower_bound_below_cost", bound - cost, tolerance(cost),
                                    "any clustering with this many centres costs at least the bound"))
        checks.append(Check.info("cost_over_lower_bound", cost / bound if bound > 0 else None,
                                 "the approximation factor is at most this"))
    factor, statement = guarantee(method if isinstance(method, str) else "", settings.get("alpha_used"), kp.m)
    checks.append(Check.info("guarantee", factor, statement + "; it assumes the labels' error rate is at most "
                             "alpha in every cluster, which the problem and the solution cannot show"))
    return Certificate(checks)
