"""Independent checks of a k-means answer, recomputed from the problem and the solution only.

The cost sum_p min_c ||p - c||^2 recomputed from X and ``solution.centres``; that
``solution.assignment`` sends every point to a nearest centre (its squared distance within
rounding of the minimum); the objective against the recomputed cost; per-cluster sizes; the
cost of the plain centroids of the predicted labels (what the oracle alone gives); and the
approximation guarantee that applies for the alpha used (formula and value), which assumes the
oracle's labels meet that error rate: |P_i n C_i| >= (1 - alpha) max(|P_i|, |C_i|); and for up
to 2,000 points a lower bound on the optimal cost (exact 1-D k-means along the top three
principal directions, by dynamic programming) with the cost's ratio to it.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from optsolve.core.result import Certificate, Check, solution_vector
from optsolve.kmeans.problems import prepare

BLOCK = 4096  # rows per block: the block and its distances stay in cache
COST_RTOL = 1e-9
BOUND_MAX_POINTS = 2000  # the lower bound's dynamic programme is O(k m^2) per direction: small m only
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
        dp = np.minimum(dp, (dp[:, None] + W).min(axis=0))
    return float(dp[m])


def lower_bound(X, k: int) -> tuple[float | None, str]:
    """A lower bound on the optimal k-means cost: for an orthonormal set of directions, any
    clustering's cost is at least the sum over them of the optimal 1-D costs of the projections.
    Along the top principal directions; loose where the clusters differ in other directions."""
    m, d = X.shape
    if m > BOUND_MAX_POINTS:
        return None, f"not computed: m = {m} > {BOUND_MAX_POINTS} (an O(k m^2) programme per direction)"
    A = np.asarray(X, dtype=float)
    A = A - A.mean(axis=0)
    r = min(BOUND_DIRECTIONS, d, m)
    _, _, Vt = np.linalg.svd(A, full_matrices=False)
    total = sum(kmeans_1d(A @ Vt[t], k) for t in range(r))
    return total, (f"sum of exact 1-D k-means costs along the top {r} principal directions (a valid lower bound "
                   "on the optimal cost; loose where the clusters differ along the other directions)")


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
    if alpha is None or not isinstance(alpha, (int, float)):
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


def check(problem, solution: dict, *, method: str | None, objective, settings: dict) -> Certificate:
    settings = settings or {}
    kp = prepare(problem)
    try:
        C = np.asarray(solution.get("centres"), dtype=float)
        if C.ndim != 2 or C.shape[1] != kp.d or C.shape[0] < 1:
            raise ValueError(f"centres of shape {C.shape}, expected (k, {kp.d})")
        a = solution_vector(solution, "assignment", kp.m)
        if np.any(a != np.round(a)) or a.min() < 0 or a.max() >= C.shape[0]:
            raise ValueError("assignment entries must be centre indices")
        a = a.astype(np.int64)
    except (KeyError, ValueError, TypeError) as exc:
        return Certificate([Check("solution_shape", None, None, False, str(exc))])
    cost = 0.0
    excess = 0.0
    norm = 0.0  # largest squared norm of a (shifted) point or centre: the scale of rounding in the distances
    shift = C.mean(axis=0)
    for start in range(0, kp.m, BLOCK):
        stop = min(kp.m, start + BLOCK)
        G, bb = _distances(np.asarray(kp.X[start:stop], dtype=float), C - shift, shift)
        norm = max(norm, float(bb.max()))
        best = G.min(axis=1)
        cost += float(np.maximum(best + bb, 0.0).sum())
        got = G[np.arange(stop - start), a[start:stop]]
        excess = max(excess, float((got - best).max()) if got.size else 0.0)
    scale = max(norm, float(((C - C.mean(axis=0)) ** 2).sum(axis=1).max()), 1e-300)
    checks = [
        Check.at_most("assignment_nearest", excess, 1e-9 * scale,
                      "largest squared distance to the assigned centre beyond the nearest one"),
        Check.info("cost", cost, "sum over points of the squared distance to the nearest centre"),
    ]
    if objective is not None:
        checks.append(Check.at_most("objective_matches", abs(float(objective) - cost) / max(abs(cost), 1e-300),
                                    COST_RTOL, "relative difference of the reported objective from the cost"))
    checks.append(Check.info("cluster_sizes", np.bincount(a, minlength=C.shape[0]).tolist()))
    label_cost = 0.0
    counts = np.bincount(kp.labels, minlength=kp.k)
    sums = np.zeros((kp.k, kp.d))
    for start in range(0, kp.m, BLOCK):
        lab = kp.labels[start:start + BLOCK]
        onehot = sp.csr_matrix((np.ones(lab.size), (lab, np.arange(lab.size))), shape=(kp.k, lab.size))
        sums += onehot @ np.asarray(kp.X[start:start + BLOCK], dtype=float)
    cent = sums[counts > 0] / counts[counts > 0, None]
    shift = cent.mean(axis=0)
    for start in range(0, kp.m, BLOCK):
        G, bb = _distances(np.asarray(kp.X[start:start + BLOCK], dtype=float), cent - shift, shift)
        label_cost += float(np.maximum(G.min(axis=1) + bb, 0.0).sum())
    checks.append(Check.info("label_centroids_cost", label_cost,
                             "cost of the plain centroids of the predicted labels (points to their nearest)"))
    checks.append(Check.info("cost_over_label_cost", cost / label_cost if label_cost > 0 else None))
    bound, note = lower_bound(kp.X, C.shape[0])
    checks.append(Check.info("lower_bound", bound, note))
    if bound:
        checks.append(Check.at_most("lower_bound_below_cost", bound - cost, 1e-9 * max(cost, 1e-300),
                                    "any clustering costs at least the bound"))
        checks.append(Check.info("cost_over_lower_bound", cost / bound, "the approximation factor is at most this"))
    factor, statement = guarantee(method or "", settings.get("alpha_used"), kp.m)
    checks.append(Check.info("guarantee", factor, statement))
    return Certificate(checks)
