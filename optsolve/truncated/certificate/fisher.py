"""The certificate's statistics by blocks: no n x p or p x p array where the Gaussian's structure gives O(d^2).

The certificate's own kernels, used by :mod:`optsolve.truncated.certificate` and by nothing of the solver
(their sizes are the problem reader's, where the memory guard,
:func:`optsolve.truncated.problems.certificate_bytes`, reads them). Three pieces:

* :func:`sample_moments`: the mean and the scatter (biased covariance) of rows of the samples, two
  passes of blocks of rows (O(n d^2) time, O(d^2) memory), in float64 whatever the samples' dtype;
* :class:`KeptDraws`: the certificate's accepted draws, in coordinates whitened by the estimate, kept by
  blocks up to :data:`KEEP_BYTES` and past that re-drawn, when a product needs them, from the block's
  own seed and its acceptance mask (:func:`block_normals`: block k of proposals has a generator of its
  own, so blocks are drawn on any thread, in any order, with the same numbers);
* :func:`gaussian_statistic`: G = g' F^-1 g for the Gaussian's statistics T(u) = (u, u_i u_j for
  i <= j), F the covariance of T over the draws, by preconditioned conjugate gradients on products
  F v formed from the draws (never F itself), with its convergence checked on the true residual.

Passes over blocks run on :func:`block_workers` threads, each block's BLAS calls on one thread (as
kmeans's passes over its points); partial sums are added in block order, so results do not depend on
the number of threads.

Notes
-----
A direction v = (a, v_ij for i <= j) acts on T as T(u) . v = a'u + u'Bu with B_ii = v_ii and
B_ij = B_ji = v_ij / 2. Over N draws with means ubar = mean u and Mbar = mean uu', put
c_k = (T(u_k) - Tbar) . v = a'u_k + u_k'Bu_k - a'ubar - <Mbar, B>; then

    F v = (1/N) sum_k (T(u_k) - Tbar) c_k = ((1/N) U'c - ubar cbar,  upper((1/N) U' diag(c) U - Mbar cbar)),

two products of an N x d block with a d x d matrix per block (4 N d^2 flops per product).

Preconditioner: F of a Gaussian N(m, C) with the draws' own mean and covariance (the exact F when
the draws are Gaussian). With x = m + y, T . v - E = (a + 2Bm)'y + y'By - tr(BC) and Gaussian third
moments vanish, so v'Fw = (a + 2Bm)'C(a_w + 2B_w m) + 2 tr(BCB_wC) (Isserlis' theorem for the fourth
moments: Isserlis, Biometrika 12, 1918). Solving F v = r, with R the symmetric matrix R_ij = R_ji = r_ij:

    C a~ = r_x,  B = (1/2) C^-1 (R - r_x m' - m r_x') C^-1,  a = a~ - 2 B m,  v_ii = B_ii,  v_ij = 2 B_ij,

O(d^3) per application. Conjugate gradients: Hestenes and Stiefel, J. Res. NBS 49 (1952); the
preconditioned form is Algorithm 9.1 of Saad, Iterative Methods for Sparse Linear Systems (2nd ed.,
SIAM 2003). Started at 0, the iterate x_k satisfies g'x_k = x_k'F x_k, so G - g'x_k = r_k'F^-1 r_k:
the error of G is quadratic in the residual r_k = g - F x_k, which is recomputed at the end.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass

import numpy as np

from optsolve.core import threads
from optsolve.core.blocks import fold_blocks, map_blocks
from optsolve.truncated.problems import KEEP_BYTES, STAT_BLOCK, block_workers

CG_RTOL = 1e-6  # relative residual ||g - F x|| / ||g|| at which the iterations stop
CG_CHECK_RTOL = 1e-5  # largest relative true residual accepted (G's relative error: at most cond(F) times its square)
CG_MAX_ITER = 200


@contextlib.contextmanager
def one_blas_thread(workers: int):
    """Within: BLAS on one thread where ``workers`` threads share the blocks (never two levels of threads)."""
    if workers <= 1:
        yield
        return
    with threads.limited(1):
        yield


def block_normals(seed: np.random.SeedSequence, k: int, rows: int, d: int) -> np.ndarray:
    """Standard normal proposals of block k: ``rows`` x ``d``, from the k-th child of ``seed``."""
    child = np.random.SeedSequence(seed.entropy, spawn_key=(*seed.spawn_key, k))
    return np.random.Generator(np.random.PCG64(child)).standard_normal((rows, d))


@dataclass
class SampleMoments:
    count: int
    mean: np.ndarray  # d
    scatter: np.ndarray | None  # d x d: mean of (x - mean)(x - mean)'; None when not asked for


def sample_moments(X, rows=None, *, second: bool = True, block: int = STAT_BLOCK) -> SampleMoments:
    """The mean and (with ``second``) the scatter of the rows of X, by blocks: the mean in a first pass,
    the scatter about it in a second (as ``np.cov(..., bias=True)`` centres, never from raw second moments)."""
    count = X.shape[0] if rows is None else rows.size
    workers = block_workers()

    def part(lo, hi):
        return np.asarray(X[lo:hi] if rows is None else X[rows[lo:hi]], dtype=np.float64)

    def scatter(lo, hi):
        Xc = part(lo, hi) - mean  # a block of all rows is a view of the samples: never changed in place
        return Xc.T @ Xc

    with one_blas_thread(workers):
        mean = fold_blocks(lambda lo, hi: part(lo, hi).sum(axis=0), count, block, np.add, workers) / count
        S = fold_blocks(scatter, count, block, np.add, workers) / count if second else None
    return SampleMoments(count, mean, S)


class KeptDraws:
    """Accepted draws (rows u, whitened by the estimate) by blocks of proposals, each kept in memory while the kept
    bytes stay within ``budget``, otherwise recorded as (block number, acceptance mask) and re-drawn by
    ``normals(k)`` (:func:`block_normals`) when needed."""

    def __init__(self, d: int, normals, budget: int | None = None):
        self.d = d
        self.normals = normals
        self.budget = KEEP_BYTES if budget is None else budget
        self.kept_bytes = 0
        self.count = 0
        self.blocks: list = []

    def add(self, U: np.ndarray, k: int, mask: np.ndarray) -> None:
        """``U`` = ``normals(k)[mask]``."""
        self.count += U.shape[0]
        if self.kept_bytes + U.nbytes <= self.budget:
            self.blocks.append(U)
            self.kept_bytes += U.nbytes
        else:
            self.blocks.append((k, mask.size, np.packbits(mask)))

    def block(self, i: int) -> np.ndarray:
        """The accepted draws of the i-th block of proposals."""
        item = self.blocks[i]
        if not isinstance(item, tuple):
            return item
        k, rows, packed = item
        return self.normals(k)[np.unpackbits(packed, count=rows).astype(bool)]

    def fold(self, fn, workers: int):
        """The sum over the blocks of ``fn(U)`` for chunks U of at most STAT_BLOCK rows (a tuple of arrays or
        numbers), blocks on ``workers`` threads, added in the order drawn."""
        def one(i, _):
            U = self.block(i)
            out = None
            for a in range(0, U.shape[0], STAT_BLOCK):
                part = fn(U[a:a + STAT_BLOCK])
                out = part if out is None else tuple(x + y for x, y in zip(out, part))
            return out

        total = None
        for part in map_blocks(one, [(i, i + 1) for i in range(len(self.blocks))], workers):
            if part is not None:
                total = part if total is None else tuple(x + y for x, y in zip(total, part))
        return total

    def __iter__(self):
        """The accepted draws again, in chunks of at most STAT_BLOCK rows, in the order drawn."""
        for i in range(len(self.blocks)):
            U = self.block(i)
            for a in range(0, U.shape[0], STAT_BLOCK):
                yield U[a:a + STAT_BLOCK]


@dataclass
class DrawSums:
    """Sums over the accepted draws u: of u, of uu', and of (u∘u)(u∘u)' (for the variances of the u_i u_j)."""

    s_u: np.ndarray
    s_uu: np.ndarray
    s_4: np.ndarray

    @classmethod
    def zeros(cls, d: int) -> DrawSums:
        return cls(np.zeros(d), np.zeros((d, d)), np.zeros((d, d)))

    def add(self, U: np.ndarray) -> None:
        for a in range(0, U.shape[0], STAT_BLOCK):
            Ub = U[a:a + STAT_BLOCK]
            self.s_u += Ub.sum(axis=0)
            self.s_uu += Ub.T @ Ub
            U2 = Ub * Ub
            self.s_4 += U2.T @ U2


def upper(S: np.ndarray) -> np.ndarray:
    """The entries i <= j of a d x d matrix, row by row (the order of the statistics u_i u_j)."""
    return S[np.triu_indices(S.shape[0])]


def symmetric(v: np.ndarray, d: int) -> np.ndarray:
    """The symmetric d x d matrix with entries (i, j) and (j, i) equal to v's entry for i <= j."""
    S = np.zeros((d, d))
    S[np.triu_indices(d)] = v
    return S + np.triu(S, 1).T


@dataclass
class Solve:
    value: float  # g' x
    converged: bool
    iterations: int
    residual: float  # ||g - F x|| / ||g||, recomputed with one more product
    reason: str = ""


def gaussian_statistic(draws: KeptDraws, sums: DrawSums, data_mean: np.ndarray, data_second: np.ndarray,
                       workers: int = 1) -> tuple:
    """(g, trace of F, :class:`Solve` of G = g' F^-1 g) for the Gaussian's statistics: g = mean T over the draws -
    mean T over the samples (``data_mean`` of u, ``data_second`` the mean of uu', both whitened by the estimate);
    products with F on ``workers`` threads."""
    d, N = draws.d, draws.count
    ubar, Mbar = sums.s_u / N, sums.s_uu / N
    g = np.concatenate([ubar - data_mean, upper(Mbar - data_second)])
    var_u = np.diag(Mbar) - ubar * ubar
    var_uu = upper(sums.s_4 / N - Mbar * Mbar)
    trace = float(np.maximum(var_u, 0.0).sum() + np.maximum(var_uu, 0.0).sum())
    if N <= g.size:
        return g, trace, Solve(math.nan, False, 0, math.nan, f"{N} accepted draws for p = {g.size} statistics: "
                               "their covariance F is singular")
    try:
        precondition = gaussian_preconditioner(ubar, Mbar - np.outer(ubar, ubar))
    except np.linalg.LinAlgError:
        return g, trace, Solve(math.nan, False, 0, math.nan, "the draws' covariance of u is not positive definite")

    def product(v):
        a = v[:d]
        B = symmetric(v[d:], d)
        B = 0.5 * (B + np.diag(np.diag(B)))
        shift = a @ ubar + float((Mbar * B).sum())

        def chunk(U):
            c = U @ a + ((U @ B) * U).sum(axis=1) - shift
            return U.T @ c, (U * c[:, None]).T @ U, float(c.sum())

        out_u, out_uu, c_sum = draws.fold(chunk, workers)
        cbar = c_sum / N
        return np.concatenate([out_u / N - ubar * cbar, upper(out_uu / N - Mbar * cbar)])

    return g, trace, conjugate_gradients(product, precondition, g, max_iter=CG_MAX_ITER)


def gaussian_preconditioner(m: np.ndarray, C: np.ndarray):
    """r -> F^-1 r for F the covariance of T under N(m, C) (see the module's notes); LinAlgError where C is not
    positive definite."""
    d = m.size
    C_inv = np.linalg.inv(np.linalg.cholesky(0.5 * (C + C.T)))
    C_inv = C_inv.T @ C_inv

    def precondition(r):
        r_x = r[:d]
        B = 0.5 * C_inv @ (symmetric(r[d:], d) - np.outer(r_x, m) - np.outer(m, r_x)) @ C_inv
        B = 0.5 * (B + B.T)
        return np.concatenate([C_inv @ r_x - 2.0 * B @ m, upper(2.0 * B - np.diag(np.diag(B)))])

    return precondition


def conjugate_gradients(product, precondition, g: np.ndarray, *, rtol: float = CG_RTOL,
                        check_rtol: float = CG_CHECK_RTOL, max_iter: int = CG_MAX_ITER) -> Solve:
    """g' x with F x = g by preconditioned conjugate gradients (see the module's notes); ``converged`` only when
    the true residual, recomputed at the end, is within ``check_rtol`` of ||g||."""
    norm_g = float(np.linalg.norm(g))
    if norm_g == 0.0:
        return Solve(0.0, True, 0, 0.0)
    if not np.isfinite(norm_g):
        return Solve(math.nan, False, 0, math.nan, "the gradient is not finite")
    x = np.zeros_like(g)
    r = g.copy()
    z = precondition(r)
    s = z.copy()
    rz = float(r @ z)
    it = 0
    reason = ""
    while it < max_iter:
        Fs = product(s)
        curvature = float(s @ Fs)
        if not curvature > 0.0:
            reason = f"the draws' covariance F of T is not positive definite (s'Fs = {curvature:.3g} at iteration {it + 1})"
            break
        step = rz / curvature
        x += step * s
        r -= step * Fs
        it += 1
        if np.linalg.norm(r) <= rtol * norm_g:
            break
        z = precondition(r)
        rz, previous = float(r @ z), rz
        s = z + (rz / previous) * s
    residual = float(np.linalg.norm(g - product(x))) / norm_g
    converged = not reason and residual <= check_rtol
    if not converged and not reason:
        reason = (f"conjugate gradients reached a relative residual of {residual:.3g} after {it} iterations, "
                  f"above {check_rtol:g}")
    return Solve(float(g @ x), converged, it, residual, reason)
