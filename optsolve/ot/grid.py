"""Images on a k1 x k2 grid with an additive ground cost: operations without the n x n matrix.

On the unit grid of :func:`optsolve.ot.problems.grid_points` the L1 and squared Euclidean
costs are Kronecker sums, ``C[(i1, i2), (j1, j2)] = C1[i1, j1] + C2[i2, j2]``, with
``C1``, ``C2`` the one-dimensional costs along each axis. A sum or a minimum over
``j = (j1, j2)`` of ``W_j + C1[i1, j1] + C2[i2, j2]`` then runs as two nested passes, one
per axis, in O(k1 k2 (k1 + k2)) = O(n^1.5) operations (Solomon et al. 2015, "Convolutional
Wasserstein distances", for the kernel product; the min-plus form is the same nesting over
the (min, +) semiring). Weights are in the log domain, so nothing over- or underflows.

The functions are written against an array namespace ``xp`` (numpy or cupy). Temporaries
are capped at about :data:`CHUNK` entries by splitting the outer axis.
"""

from __future__ import annotations

import numpy as np

from optsolve.core.backend import exp_flush

CHUNK = 1 << 22  # entries of a k x k x k temporary handled at once (32 MB in float64)


def axis_costs(grid: tuple[int, int], cost: str, xp=np, dtype=np.float64):
    """The 1-D costs ``C1`` (k1 x k1) and ``C2`` (k2 x k2) of an image grid with pixel side 1/max(k1, k2)."""
    h = 1.0 / max(grid)

    def one(k):
        d = (np.arange(k)[:, None] - np.arange(k)[None, :]) * h
        if cost == "l1":
            return xp.asarray(np.abs(d), dtype=dtype)
        if cost == "sqeuclidean":
            return xp.asarray(d * d, dtype=dtype)
        raise ValueError(f"cost {cost!r} is not separable on a grid")

    return one(grid[0]), one(grid[1])


def _reduce(A, axis, how, xp):
    if how == "min":
        return A.min(axis=axis)
    mx = A.max(axis=axis, keepdims=True)
    mx = xp.where(xp.isfinite(mx), mx, 0.0)
    A -= mx
    s = exp_flush(xp, A, out=A).sum(axis=axis)
    with np.errstate(divide="ignore"):
        return xp.log(s) + xp.squeeze(mx, axis=axis)


def _nested(W, L1, L2, how, xp):
    """``R[i1, i2] = reduce_{j1, j2} (W[j1, j2] + L1[i1, j1] + L2[i2, j2])`` with reduce = LSE or min."""
    k1, k2 = W.shape
    T = xp.empty((k1, L2.shape[0]), dtype=W.dtype)  # T[j1, i2] = reduce_j2 (W[j1, j2] + L2[i2, j2])
    step = max(1, CHUNK // max(1, L2.shape[0] * k2))
    for s in range(0, k1, step):
        T[s:s + step] = _reduce(W[s:s + step, None, :] + L2[None, :, :], 2, how, xp)
    R = xp.empty((L1.shape[0], T.shape[1]), dtype=W.dtype)
    step = max(1, CHUNK // max(1, k1 * T.shape[1]))
    for s in range(0, L1.shape[0], step):
        R[s:s + step] = _reduce(T[None, :, :] + L1[s:s + step, :, None], 1, how, xp)
    return R


def lse_apply(w, L1, L2, xp=np):
    """``R_i = log sum_j exp(w_j + L1[i1, j1] + L2[i2, j2])`` for i, j on the grid (w: flat, may hold -inf).

    With ``L = -C / reg`` this is the log of the Gibbs kernel's product with ``exp(w)``.
    """
    k1, k2 = L1.shape[1], L2.shape[1]
    return _nested(w.reshape(k1, k2), L1, L2, "lse", xp).reshape(-1)


def min_apply(w, C1, C2, xp=np):
    """``R_i = min_j (w_j + C1[i1, j1] + C2[i2, j2])`` (w: flat, +inf entries are skipped).

    ``min_apply(-f, C1, C2)`` is the c-transform ``f^c_j = min_i C_ij - f_i`` (C is symmetric).
    """
    k1, k2 = C1.shape[1], C2.shape[1]
    return _nested(w.reshape(k1, k2), C1, C2, "min", xp).reshape(-1)


def bilinear(x, y, C1, C2) -> float:
    """``x^T C y`` for flat vectors x, y on the grid, in O(k1^2 + k2^2) from their axis sums."""
    k1, k2 = C1.shape[0], C2.shape[0]
    X, Y = x.reshape(k1, k2), y.reshape(k1, k2)
    return float(X.sum(1) @ C1 @ Y.sum(1) + X.sum(0) @ C2 @ Y.sum(0))


def gibbs_sums(u, v, C1, C2, reg):
    """Row sums, column sums and ``<C, K>`` of ``K_ij = exp(u_i + v_j - C_ij / reg)`` on the grid (numpy).

    ``u``, ``v`` may hold -inf (zero rows or columns); every sum is a log-domain pass.
    """
    L1, L2, M1, M2 = log_cost_kernels(C1, C2, reg)
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.exp(u + lse_apply(v, L1, L2))
        c = np.exp(v + lse_apply(u, L1, L2))
        cost = float(np.exp(u + lse_apply(v, M1, L2)).sum() + np.exp(u + lse_apply(v, L1, M2)).sum())
    return r, c, cost


def log_cost_kernels(C1, C2, reg, xp=np):
    """``(L1, L2, M1, M2)``: ``L = -C/reg`` and ``M = log C - C/reg`` per axis (log 0 = -inf).

    ``sum_j C_ij exp(w_j - C_ij/reg) = exp(lse_apply(w, M1, L2)) + exp(lse_apply(w, L1, M2))``:
    the cost-weighted kernel product, in the log domain, used for ``<C, P>``.
    """
    with np.errstate(divide="ignore"):
        return -C1 / reg, -C2 / reg, xp.log(C1) - C1 / reg, xp.log(C2) - C2 / reg


def _geometric_scan(X, rate, xp):
    """``Y[i] = LSE_j (X[j] - rate |i - j|)`` along the first axis, by a forward and a backward recursion.

    ``exp(-rate |i - j|)`` is a geometric (first-order recursive) filter, so each direction is one
    pass of ``F[i] = logaddexp(X[i], F[i - 1] - rate)``: O(k) vector steps instead of a k x k
    product, exact in the log domain at any rate.
    """
    k = X.shape[0]
    F = xp.empty_like(X)
    B = xp.empty_like(X)
    F[0] = X[0]
    for i in range(1, k):
        xp.logaddexp(X[i], F[i - 1] - rate, out=F[i])
    B[k - 1] = -xp.inf
    for i in range(k - 2, -1, -1):
        xp.logaddexp(X[i + 1], B[i + 1], out=B[i])
        B[i] -= rate
    return xp.logaddexp(F, B, out=F)


def lse_apply_l1(w, grid: tuple[int, int], rate: float, xp=np):
    """:func:`lse_apply` for the L1 grid cost ``C_ij = h (|i1 - j1| + |i2 - j2|)`` with ``L = -C/reg``, rate = h/reg.

    Each axis is a geometric filter (:func:`_geometric_scan`), so a pass costs O(n) vector
    operations in 2 (k1 + k2) steps instead of the O(n^1.5) of the generic nesting.
    """
    k1, k2 = grid
    W = w.reshape(k1, k2)
    with np.errstate(invalid="ignore"):  # -inf - (-inf) never occurs: logaddexp(-inf, -inf) is -inf
        T = _geometric_scan(xp.ascontiguousarray(W.T), rate, xp)  # [i2, j1]
        R = _geometric_scan(xp.ascontiguousarray(T.T), rate, xp)  # [i1, i2]
    return R.reshape(-1)
