"""MDOT-TNT: entropic optimal transport by a truncated Newton method inside an MDOT schedule.

Kemertas, Farahmand and Jepson, "A Truncated Newton Method for Optimal Transport",
ICLR 2025 (arXiv 2504.02067); the outer temperature schedule is their MDOT
(arXiv 2307.08507). Written from the description in the project's OT spec.

Problem (cost scaled to max 1): marginals r (n), c (m); plan
``P_ij = exp(u_i + v_j - gamma C_ij)`` with dual log-scalings u, v. Potentials in
cost units are ``f = u / gamma * scale``, ``g = v / gamma * scale``.

Outer loop (MDOT): gamma starts at min(16, gamma_f) and grows by a factor q that adapts
to how well the Newton steps did (q -> sqrt(q) when the achieved decrease ratio is
below 0.5, q -> q^2 above 0.9, q >= 2^(1/4)); each stage projects onto the smoothed
marginals r_hat, c_hat to the tolerance H_min / gamma^1.5 / 2 and warm-starts the next by
linear extrapolation of (u, v) in gamma.

Inner projection (truncated Newton on the dual): a column update makes c_P = c_hat;
chi-Sinkhorn sweeps bring the row chi-square error below tol^0.4; then Newton steps on
u with the Schur complement ``S = D_{r_P} - P D_{c_hat}^{-1} P^T``, solved by
preconditioned CG to the forcing term eta * err (``pcg="discounted"``: CG on
``D_{r_P} - rho P D^{-1} P^T`` with rho -> 1 over restarts, or ``pcg="plain"``: Jacobi
PCG on the singular S itself), an Armijo line search on the dual (sigma = 0.01),
then the column update and chi-Sinkhorn again.

The plan is built once per Newton step in one exp pass; CG, the line search, the
marginals and the Sinkhorn sweeps then use products with it, rescaled by
``exp(u - u0)``, ``exp(v - v0)`` (rebuilt when those factors grow large). Log-sum-exp
passes are used where no plan is built (stage starts, the final row update).

Safeguards (counted in ``TNTStats.fallbacks``, reported per stage in the stage log): the line search's test
is evaluated without cancellation; a truncated plan is not trusted for steps that would grow what it dropped
(those use the whole plan); plain CG that meets rounding-level curvature hands over to the discounted loop;
a failed Newton step is followed by a resynchronisation, then Sinkhorn sweeps; a failed stage is retried at a
smaller gamma. A stage that stalls at the rounding floor of the dtype ends there and says so.

The kernel is the dense cost in memory (:class:`DenseKernel`) or, in low-memory mode,
point clouds whose cost is recomputed in column blocks (:class:`StreamedKernel`); both
offer the same log-sum-exp passes and products. All array code goes through the
namespace ``xp`` of :mod:`optsolve.core.backend`, so the same lines run on numpy and cupy.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from optsolve.core.backend import exp_flush
from optsolve.core.blocks import empty_base_pages
from optsolve.core.history import active as history_active
from optsolve.core.history import trace
from optsolve.core.progress import SILENT, Progress, get_logger
from optsolve.ot.deadline import Deadline
from optsolve.ot.grid import axis_costs, lse_apply, lse_apply_l1
from optsolve.ot.problems import available_memory_bytes
from optsolve.ot.rowblocks import RowBlocks

GAMMA_START = 16.0
P_EXPONENT = 1.5
Q_START = 2.0
Q_MIN = 2.0 ** 0.25
GAP_MARGIN = 1.3  # --target-gap: next gamma <= gamma * GAP_MARGIN * gap / target (the gap falls about as 1/gamma)
GAMMA_MAX = 2.0 ** 20  # ceiling for --target-gap
CG_CAP = 5000
CHI_SWEEPS = 100
ARMIJO = 0.99  # 1 - sigma, sigma = 0.01
ALPHA_MIN = 1e-9
STALL_STEPS = 3  # Newton steps without a new lowest error before a fallback
PROGRESS = 0.99  # a new lowest error: below this fraction of the last one
PRECISION_MARGIN = 10.0
NEWTON_CAP = 500  # per stage
# A truncated plan drops entries below threshold = 1e-3 tol / (n m). Rescaled by exp(du_i) exp(dv_j), they sum to
# at most threshold sum_i exp(du_i) sum_j exp(dv_j) = 1e-3 tol mean(exp(du)) mean(exp(dv)). Where that growth
# factor exceeds SPARSE_GROWTH (the dropped mass could reach 0.1 tol) the plan is rebuilt, and a line search uses
# the whole plan (see Plan.scalings, _line_search).
SPARSE_GROWTH = 100.0
# Fallbacks, counted by kind in TNTStats.fallbacks. A failed Newton step (no descent direction, no step
# accepted, STALL_STEPS steps without a new lowest error) is followed by a resynchronisation (exact column
# update, fresh plan), the next ones by FALLBACK_SWEEPS, 2 FALLBACK_SWEEPS, ... Sinkhorn sweeps; FALLBACKS_MAX
# failures without a new lowest error end the stage: at the precision limit when the error is within
# PRECISION_MARGIN of tolerance_floor, else as failed. A failed stage is retried at the geometric mean of its
# gamma and the last completed one (RETREATS_MAX times in a solve, while the two differ by more than the
# factor RETREAT_MIN_RATIO); only then does the solve end on the last completed stage.
FALLBACKS_MAX = 4
FALLBACK_SWEEPS = 10
RETREATS_MAX = 6
RETREAT_MIN_RATIO = 1.01
# Passes over the kernel (products, log-sum-exps) between two looks at the deadline: a loop stops when
# the next stretch would not fit (see optsolve.ot.deadline).
STAGE_START_PASSES = 3  # column update, building the plan, a first sweep
SWEEP_PASSES = 3  # one chi-Sinkhorn sweep: row and column marginals, from products or LSEs
STEP_HEAD_PASSES = 5  # a Newton step before CG: build, r_P, the preconditioner and the first product
CG_ITERATION_PASSES = 2
STEP_TAIL_PASSES = 6  # after CG: the line search's first try, the new marginals, the column update


class StageFailed(Exception):
    """A projection could not make progress (line search or non-finite values)."""


@dataclass
class TNTStats:
    stages: int = 0
    newton_steps: int = 0
    cg_iterations: int = 0
    sinkhorn_sweeps: int = 0
    stage_log: list = field(default_factory=list)
    # what the safeguards did, by kind: "full_plan_search" (a line search on the whole plan, as its truncated
    # copy is trusted only within SPARSE_GROWTH), "discounted_cg" (plain CG met rounding-level curvature and the
    # discounted loop took over), "resync" and "sinkhorn" (fallbacks after a failed Newton step), "lower_gamma"
    # (a failed stage retried at a smaller gamma)
    fallbacks: dict = field(default_factory=dict)

    def count(self, kind: str, k: int = 1):
        self.fallbacks[kind] = self.fallbacks.get(kind, 0) + k


# --------------------------------------------------------------------------- kernels


SPARSE_MAX_DENSITY = 0.2  # products with a truncated plan beat dense ones below about this density
GRID_SPARSE_MAX_DENSITY = 0.05  # against the O(n^1.5) grid products, truncation pays off only when sparser


def _sparse_module(xp):
    if xp is np:
        import scipy.sparse as sparse
    else:  # cupy
        import cupyx.scipy.sparse as sparse
    return sparse


class TruncatedProducts:
    """Products with a plan kept only where its entries exceed a threshold (CSR in ``xp``).

    At high gamma most entries of P underflow far below any tolerance; dropping those below
    ``threshold`` (chosen so that the dropped mass is far below the projection tolerance)
    turns every product into a sparse one. ``passes`` are counted as the stored fraction.
    """

    def __init__(self, xp, rows, cols, vals, shape, csr=None):
        """The entries (rows, cols, vals), or ``csr`` = (data, indices, indptr) with rows and cols None."""
        sparse = _sparse_module(xp)
        if csr is not None:
            self.S = sparse.csr_matrix(csr, shape=shape)
        else:
            self.S = sparse.csr_matrix((vals, (rows, cols)), shape=shape)
        self.density = float(self.S.nnz) / max(1, shape[0] * shape[1])

    def matvec(self, y):
        return self.S @ y

    def rmatvec(self, x):
        return self.S.T @ x  # the transpose is a CSC view: no conversion (a build makes few products)

    def sq_matvec(self, w):
        return self.S.power(2) @ w


# What the traces of `--history` record as the residual at the end of each stage.
TNT_MEASURE = "column marginal L1 error of the stage's plan (rows exact)"

class Kernel:
    """Products with the built plan: from its truncated sparse copy when there is one, else ``_matvec`` etc."""

    sparse = None
    # Looks at the marginals through the whole plan, where the truncated copy is not to be trusted, before the
    # plan is rebuilt instead: worth it where a whole product costs less than a build (DenseKernel).
    whole_looks = 0
    _retry_gamma = 0.0  # no truncation attempt below this gamma (raised when one found the plan too dense)

    def _may_truncate(self, gamma) -> bool:
        return self.threshold is not None and gamma >= self._retry_gamma

    def _too_dense(self, gamma, nnz, entries_seen, budget):
        """An attempt kept ``nnz`` of ``entries_seen`` entries, over ``budget``: skip attempts until gamma has
        grown by the factor the density must fall (it falls about as 1/gamma on 2-D problems; the
        degenerate plans of L1 costs do not thin out at all), and always for the rest of this stage."""
        density = nnz / max(entries_seen, 1)
        self._retry_gamma = gamma * max(density * self.n * self.m / max(budget, 1.0), 1.0 + 1e-9)

    def full_matvec(self, y):
        """P y with the whole built plan, also when a truncated copy exists."""
        return self._matvec(y)

    def full_rmatvec(self, x):
        return self._rmatvec(x)

    def matvec(self, y):
        if self.sparse is not None:
            self.passes += self.sparse.density
            return self.sparse.matvec(y)
        return self._matvec(y)

    def rmatvec(self, x):
        if self.sparse is not None:
            self.passes += self.sparse.density
            return self.sparse.rmatvec(x)
        return self._rmatvec(x)

    def sq_matvec(self, w):
        """(P o P) w, the diagonal of P D P^T for D = diag(w)."""
        if self.sparse is not None:
            self.passes += 2 * self.sparse.density
            return self.sparse.sq_matvec(w)
        return self._sq_matvec(w)


class DenseKernel(Kernel):
    """The cost matrix in memory: log-sum-exp passes and a built plan, in namespace ``xp``.

    ``passes`` counts O(nm) sweeps: a log-sum-exp costs 4, building the plan 2, a product 1.
    """

    whole_looks = 2  # the column update after a long step and the check that follows, at one pass each

    def __init__(self, xp, C, dtype):
        self.xp = xp
        self.C = xp.asarray(C, dtype=dtype)
        self.dtype = self.C.dtype
        self.n, self.m = self.C.shape
        self._buf = None
        self.P = None
        self.passes = 0
        self.rows = RowBlocks(self.C) if xp is np else None  # on the CPU: fused passes over row blocks
        self._cols_left = None  # (u, gamma, blocks' column maxima) of the exp values a column update left

    def _empty(self):
        return empty_base_pages(self.C.shape, self.dtype) if self.rows is not None else self.xp.empty_like(self.C)

    def _scratch(self):
        if self._buf is None:
            self._buf = self._empty()
        return self._buf

    def _exponent(self, out, u, v, gamma):
        xp = self.xp
        xp.multiply(self.C, -gamma, out=out)
        if u is not None:
            out += u[:, None]
        if v is not None:
            out += v[None, :]
        return out

    def log_rows(self, u, v, gamma):
        """log r_P = u + LSE_j(v_j - gamma C_ij)."""
        xp = self.xp
        self.passes += 4
        self._cols_left = None
        if self.rows is not None:
            return u + self.rows.log_rows(self._scratch(), v, gamma)
        b = self._exponent(self._scratch(), None, v, gamma)
        mx = b.max(axis=1)
        b -= mx[:, None]
        exp_flush(xp, b, out=b)
        return u + mx + xp.log(b.sum(axis=1))

    def log_cols(self, u, v, gamma):
        """log c_P = v + LSE_i(u_i - gamma C_ij)."""
        xp = self.xp
        self.passes += 4
        if self.rows is not None:
            lse, maxima = self.rows.log_cols(self._scratch(), u, gamma)
            # the scratch now holds exp(u_i - gamma C_ij - M_kj) on each row block k: a build at the
            # same u and gamma that follows (a column update, then a plan) rescales it instead
            self._cols_left = (u.copy(), gamma, maxima)
            return v + lse
        b = self._exponent(self._scratch(), u, None, gamma)
        mx = b.max(axis=0)
        b -= mx[None, :]
        exp_flush(xp, b, out=b)
        return v + mx + xp.log(b.sum(axis=0))

    threshold = None  # truncate the built plan below this value (None: keep it dense)

    def build(self, u, v, gamma):
        """Build P = exp(u_i + v_j - gamma C_ij) in one fused pass (and its truncation, when sparse enough)."""
        xp = self.xp
        if self.P is None:
            self.P = self._empty()
        self.passes += 2
        truncate = self._may_truncate(gamma)
        # the last build kept a sparse copy: this one will likely too, so its entries are collected in the pass
        collect = truncate and self.sparse is not None and self.rows is not None
        self.sparse = None
        left, self._cols_left = self._cols_left, None
        factor = None
        if left is not None and left[1] == gamma and bool(np.array_equal(left[0], u)):
            with np.errstate(over="ignore"):
                factor = np.exp(left[2] + v[None, :])  # a block's largest entry per column: at most about 1 after
                # a column update
        threshold = self.threshold if truncate else None
        seen = None  # what the pass reports: the count above the threshold, with the entries when collected
        if factor is not None and bool(np.isfinite(factor).all()):
            seen = self.rows.rescale(self.P, self._scratch(), factor, threshold, collect)
        elif self.rows is not None:  # the entries above the threshold are counted in the same pass
            seen = self.rows.gibbs(self.P, u, v, gamma, threshold, collect)
        else:
            self._exponent(self.P, u, v, gamma)
            exp_flush(xp, self.P, out=self.P)
        nnz, csr = seen if collect else (seen, None)
        if truncate:
            if self.rows is None:
                mask = self.P > self.threshold
                nnz = int(xp.count_nonzero(mask))
                self.passes += 1
            if nnz >= SPARSE_MAX_DENSITY * self.n * self.m:
                self._too_dense(gamma, nnz, self.n * self.m, SPARSE_MAX_DENSITY * self.n * self.m)
            elif self.rows is not None:
                csr = csr if csr is not None else self.rows.above(self.P, self.threshold)
                self.sparse = TruncatedProducts(xp, None, None, None, (self.n, self.m), csr=csr)
            else:
                rows, cols = xp.nonzero(mask)
                self.sparse = TruncatedProducts(xp, rows, cols, self.P[rows, cols], (self.n, self.m))
                self.passes += 1

    def _matvec(self, y):
        self.passes += 1
        return self.P @ y

    def _rmatvec(self, x):
        self.passes += 1
        return x @ self.P

    def _sq_matvec(self, w):
        self.passes += 2
        if self.rows is not None:  # block by block: the scratch keeps what a column pass left there
            return self.rows.sq_matvec(self.P, w)
        b = self._scratch()
        self._cols_left = None
        self.xp.multiply(self.P, self.P, out=b)
        return b @ w


class StreamedKernel(Kernel):
    """Low-memory kernel: the cost is recomputed from point clouds in column blocks, never stored.

    Memory is O(n * block) (one preallocated block buffer); each pass fills the buffer with
    ``-gamma C_blk / scale`` plus row and column terms in place, so a product costs one cost
    evaluation, one exponential and one matrix-vector product per entry (counted as three passes).
    """

    def __init__(self, xp, ot, rows, cols, scale, dtype):
        self.xp = xp
        self.dtype = np.dtype(dtype)
        self.x = xp.asarray(ot.x[rows], dtype=self.dtype)
        self.y = xp.asarray(ot.y[cols], dtype=self.dtype)
        self.cost, self.scale = ot.cost, scale
        self.xsq = (self.x * self.x).sum(1)
        self.ysq = (self.y * self.y).sum(1)
        self.n, self.m = self.x.shape[0], self.y.shape[0]
        self.block = max(1, min(ot.block or self.m, self.m))
        self._buf = xp.empty((self.n, self.block), dtype=self.dtype)
        self._tmp = xp.empty((self.n, self.block), dtype=self.dtype) if self.cost == "l1" else None
        self.u0 = self.v0 = None
        self.gamma = None
        self.passes = 0

    def _exponents(self, rowterm, colterm, gamma):
        """Yield ``(j0, j1, B)`` with ``B = rowterm_i + colterm_j - gamma C_ij / scale`` (a view of one buffer)."""
        xp = self.xp
        w = gamma / self.scale
        if self.cost == "sqeuclidean":  # -w |x - y|^2 = (2 w x).y + (rowterm - w |x|^2) + (colterm - w |y|^2)
            x2w = self.x * (2.0 * w)
            row = -w * self.xsq if rowterm is None else rowterm - w * self.xsq
            col = -w * self.ysq if colterm is None else colterm - w * self.ysq
            for j0 in range(0, self.m, self.block):
                j1 = min(j0 + self.block, self.m)
                B = self._buf[:, : j1 - j0]
                xp.matmul(x2w, self.y[j0:j1].T, out=B)
                B += row[:, None]
                B += col[None, j0:j1]
                yield j0, j1, B
            return
        for j0 in range(0, self.m, self.block):
            j1 = min(j0 + self.block, self.m)
            B = self._buf[:, : j1 - j0]
            yb = self.y[j0:j1]
            if self.cost == "l1":
                T = self._tmp[:, : j1 - j0]
                B[...] = 0
                for k in range(self.x.shape[1]):
                    xp.subtract(self.x[:, k, None], yb[None, :, k], out=T)
                    xp.abs(T, out=T)
                    B += T
                B *= -w
            else:  # euclidean
                xp.matmul(self.x, yb.T, out=B)
                B *= -2.0
                B += self.xsq[:, None]
                B += self.ysq[None, j0:j1]
                xp.maximum(B, 0.0, out=B)
                xp.sqrt(B, out=B)
                B *= -w
            if rowterm is not None:
                B += rowterm[:, None]
            if colterm is not None:
                B += colterm[None, j0:j1]
            yield j0, j1, B

    def log_rows(self, u, v, gamma):
        xp = self.xp
        mx = s = None
        for _, _, E in self._exponents(None, v, gamma):
            bm = E.max(axis=1)
            if mx is None:
                E -= bm[:, None]
                mx, s = bm, exp_flush(xp, E, out=E).sum(axis=1)
                continue
            new = xp.maximum(mx, bm)
            E -= new[:, None]
            s = s * xp.exp(mx - new) + exp_flush(xp, E, out=E).sum(axis=1)
            mx = new
        self.passes += 4
        return u + mx + xp.log(s)

    def log_cols(self, u, v, gamma):
        xp = self.xp
        out = xp.empty(self.m, dtype=self.dtype)
        for j0, j1, E in self._exponents(u, None, gamma):
            bm = E.max(axis=0)
            E -= bm[None, :]
            out[j0:j1] = v[j0:j1] + bm + xp.log(exp_flush(xp, E, out=E).sum(axis=0))
        self.passes += 4
        return out

    threshold = None

    def build(self, u, v, gamma):
        """Remember (u, v); with a threshold, also collect the plan's entries above it in one streamed pass."""
        xp = self.xp
        self.u0, self.v0, self.gamma = u.copy(), v.copy(), gamma
        self.sparse = None
        if not self._may_truncate(gamma):
            return
        # at most 20% of the entries, and (low-memory mode) at most 1/32 of the free memory at ~20 bytes each
        budget = min(SPARSE_MAX_DENSITY * self.n * self.m, available_memory_bytes() / 32 / 20)
        parts, nnz = [], 0
        for j0, j1, Pb in self._plan_blocks():
            r, c = xp.nonzero(Pb > self.threshold)
            nnz += int(r.size)
            if nnz > budget:
                self._too_dense(gamma, nnz, self.n * j1, budget)
                return  # too dense: keep streaming
            parts.append((r, c + j0, Pb[r, c]))
        cat = xp.concatenate
        self.sparse = TruncatedProducts(xp, cat([p[0] for p in parts]), cat([p[1] for p in parts]),
                                        cat([p[2] for p in parts]), (self.n, self.m))

    def _plan_blocks(self):
        for j0, j1, B in self._exponents(self.u0, self.v0, self.gamma):
            yield j0, j1, exp_flush(self.xp, B, out=B)
        self.passes += 3

    def _matvec(self, y):
        out = self.xp.zeros(self.n, dtype=self.dtype)
        for j0, j1, Pb in self._plan_blocks():
            out += Pb @ y[j0:j1]
        return out

    def _rmatvec(self, x):
        out = self.xp.empty(self.m, dtype=self.dtype)
        for j0, j1, Pb in self._plan_blocks():
            out[j0:j1] = x @ Pb
        return out

    def _sq_matvec(self, w):
        out = self.xp.zeros(self.n, dtype=self.dtype)
        for j0, j1, Pb in self._plan_blocks():
            Pb *= Pb
            out += Pb @ w[j0:j1]
        return out


class GridKernel(Kernel):
    """Images on a k1 x k2 grid with an L1 or squared-L2 cost: C is a Kronecker sum C1 (+) C2.

    ``LSE_j(w_j - gamma C_ij)`` factors into two nested log-sum-exps, one along each axis,
    so every pass costs O(k1 k2 (k1 + k2)) = O(n^1.5) and C is never built; for the L1 cost
    each axis is a geometric filter, two log-domain recursions, and a pass costs O(n).
    Products with the plan are log-domain passes (on a nonnegative shift of the vector), so
    nothing over- or underflows at any gamma.
    """

    threshold = None  # set by project(): truncate the built plan below it when sparse enough

    def __init__(self, xp, grid, cost, scale, dtype):
        self.xp = xp
        self.dtype = np.dtype(dtype)
        self.k1, self.k2 = grid
        self.C1, self.C2 = (xp.asarray(Ck / scale, dtype=self.dtype) for Ck in axis_costs(grid, cost))
        self.l1_step = 1.0 / max(grid) / scale if cost == "l1" else None  # scaled cost of one pixel step
        self.n = self.m = self.k1 * self.k2
        self.u0 = self.v0 = None
        self.gamma = None
        self.passes = 0.0
        # one nested LSE in units of O(nm) passes
        self._unit = 8.0 / self.m if self.l1_step is not None else 2.0 * (self.k1 + self.k2) / self.n

    def _lse_apply(self, w, gamma):
        """L_i = LSE_j (w_j - gamma C_ij) for i, j on the grid (w may hold -inf)."""
        self.passes += self._unit
        if self.l1_step is not None:
            return lse_apply_l1(w, (self.k1, self.k2), gamma * self.l1_step, self.xp)
        return lse_apply(w, -gamma * self.C1, -gamma * self.C2, self.xp)

    def log_rows(self, u, v, gamma):
        return u + self._lse_apply(v, gamma)

    def log_cols(self, u, v, gamma):  # C is symmetric: the same grid on both sides
        return v + self._lse_apply(u, gamma)

    def build(self, u, v, gamma):
        """Remember (u, v); with a threshold, also collect the plan's entries above it.

        Row blocks i1 skip the columns j1 whose whole block is below the threshold (a bound from
        the largest u and v), so at high gamma the work is close to the number of entries kept.
        """
        xp = self.xp
        self.u0, self.v0, self.gamma = u.copy(), v.copy(), gamma
        self._ones = {}
        self.sparse = None
        if not self._may_truncate(gamma):
            return
        k1, k2 = self.k1, self.k2
        cut = math.log(self.threshold)
        U, V = u.reshape(k1, k2), v.reshape(k1, k2)
        vmax = V.max(axis=1)
        budget = min(GRID_SPARSE_MAX_DENSITY * self.n * self.m, available_memory_bytes() / 8 / 20)
        rows, cols, vals, nnz = [], [], [], 0
        for i1 in range(k1):
            j1s = xp.nonzero(float(U[i1].max()) + vmax - gamma * self.C1[i1] >= cut)[0]
            if j1s.size == 0:
                continue
            E = (U[i1][:, None, None] + V[j1s][None, :, :] - gamma * self.C1[i1, j1s][None, :, None]
                 - gamma * self.C2[:, None, :])  # [i2, j1 in j1s, j2]
            i2, jj, j2 = xp.nonzero(E >= cut)
            nnz += int(i2.size)
            self.passes += float(E.size) / (self.n * self.m)
            if nnz > budget:
                self._too_dense(gamma, nnz, (i1 + 1) * k2 * self.m, budget)
                return  # too dense: keep the log-domain products
            rows.append(i1 * k2 + i2)
            cols.append(j1s[jj] * k2 + j2)
            vals.append(xp.exp(E[i2, jj, j2]))
        if rows:
            cat = xp.concatenate
            self.sparse = TruncatedProducts(xp, cat(rows), cat(cols), cat(vals), (self.n, self.m))

    def _signed(self, outer, inner, z, gamma, factor=1.0):
        """``sum_j exp(factor (outer_i + inner_j - gamma C_ij)) z_j`` by one log-domain pass.

        A vector with negative entries is shifted to ``z + s >= 0`` and ``s`` times the product
        with ones (cached until the next build) is subtracted: the rounding error, ``eps s`` times
        that product, is of the order of a dense product's ``eps sum_ij P_ij |z_j|``.
        """
        xp = self.xp

        def positive_product(w):
            with np.errstate(divide="ignore"):
                return xp.exp(factor * outer + self._lse_apply(factor * inner + xp.log(w), factor * gamma))

        shift = -float(z.min())
        if shift <= 0.0:
            return positive_product(z)
        key = (outer is self.u0, factor)
        if key not in self._ones:
            self._ones[key] = positive_product(xp.ones_like(z))
        return positive_product(z + shift) - shift * self._ones[key]

    def _matvec(self, y):
        return self._signed(self.u0, self.v0, y, self.gamma)

    def _rmatvec(self, x):
        return self._signed(self.v0, self.u0, x, self.gamma)

    def _sq_matvec(self, w):
        return self._signed(self.u0, self.v0, w, self.gamma, factor=2.0)


class Plan:
    """The plan at (u, v) as ``diag(exp(u - u0)) P0 diag(exp(v - v0))`` with P0 built at (u0, v0)."""

    def __init__(self, kernel, gamma: float, shift_limit: float):
        self.K = kernel
        self.gamma = gamma
        self.shift_limit = shift_limit
        self.u0 = self.v0 = None

    def rebuild(self, u, v):
        self.K.build(u, v, self.gamma)
        self.u0, self.v0 = u.copy(), v.copy()
        self.looks = 0

    def scalings(self, u, v):
        """(exp(u - u0), exp(v - v0), whole): whole when the products must use the whole plan, as the rescaling
        grows what the truncated copy dropped beyond SPARSE_GROWTH. A rescaling beyond the shift limit, or more
        such looks than the kernel's ``whole_looks``, rebuild it at (u, v) instead."""
        xp = self.K.xp
        du, dv = u - self.u0, v - self.v0
        if float(xp.abs(du).max()) <= self.shift_limit and float(xp.abs(dv).max()) <= self.shift_limit:
            x, y = xp.exp(du), xp.exp(dv)
            if self.K.sparse is None or _growth(x, y) <= SPARSE_GROWTH:
                return x, y, False
            if self.looks < self.K.whole_looks:
                self.looks += 1
                return x, y, True
        self.rebuild(u, v)
        return xp.exp(u - self.u0), xp.exp(v - self.v0), False

    def log_marginals(self, u, v, rows=True, cols=True):
        """log r_P and log c_P at (u, v) from products; log-sum-exp where a product underflows."""
        xp, K = self.K.xp, self.K
        x, y, whole = self.scalings(u, v)
        matvec, rmatvec = (K.full_matvec, K.full_rmatvec) if whole else (K.matvec, K.rmatvec)
        out = []
        if rows:
            r = x * matvec(y)
            lr = xp.log(r) if bool((r > 0).all()) else K.log_rows(u, v, self.gamma)
            out.append(lr)
        if cols:
            c = y * rmatvec(x)
            lc = xp.log(c) if bool((c > 0).all()) else K.log_cols(u, v, self.gamma)
            out.append(lc)
        return out


def _growth(x, y) -> float:
    """mean(x) mean(y): the factor by which the rescaling diag(x) P diag(y) can raise the mass a truncation dropped."""
    return float(x.mean()) * float(y.mean())


# --------------------------------------------------------------------------- PCG


@dataclass
class PCGState:
    rho: float = 0.0


def _l1(xp, z) -> float:
    return float(xp.abs(z).sum())


def pcg(K, rP, ch, g, target: float, state: PCGState, mode: str, cap: int, expired=None):
    """Approximately solve (D_{rP} - P D_{ch}^{-1} P^T) x = -g to L1 residual <= target.

    Returns (x, iterations, fell_back). x is a descent direction (-g . x > 0) unless none was found.
    ``mode="plain"`` falls back to the discounted loop (fell_back true) when rounding shows S as indefinite
    before the target is met: at high gamma S is so ill-conditioned that plain CG then stalls.
    ``expired(passes)``: true when ``passes`` more passes would run past the time limit; then stop
    with the best iterate so far, leaving time for the rest of the Newton step.
    """
    xp = K.xp
    inv_c = 1.0 / ch
    diag_q = K.sq_matvec(inv_c)

    def Q(p):
        return K.matvec(K.rmatvec(p) * inv_c)

    def precond(rho):
        M = rP - rho * diag_q
        pos = M > 0
        if not bool(pos.all()):
            smallest = float(M[pos].min()) if bool(pos.any()) else 1.0
            M = xp.where(pos, M, smallest)
        return M

    b = -g
    x0 = b / precond(1.0)
    Qx0 = Q(x0)
    best_x, best_res = x0, _l1(xp, rP * x0 - Qx0 - b)
    iterations = 0
    if best_res <= target and float(b @ x0) > 0:
        return x0, 0, False

    def run(rho, own_target):
        """CG on S_rho from x0; returns (best x, best true residual, converged, negative curvature)."""
        nonlocal iterations
        M = precond(rho)
        x, Qx = x0.copy(), Qx0.copy()
        r = b - (rP * x - rho * Qx)
        z = r / M
        p = z.copy()
        rz = float(r @ z)
        bx, bres = x0, _l1(xp, rP * x0 - Qx0 - b)
        while iterations < cap:
            if expired is not None and expired(CG_ITERATION_PASSES + STEP_TAIL_PASSES):
                break
            q = Q(p)
            Sp = rP * p - rho * q
            pSp = float(p @ Sp)
            iterations += 1
            if not pSp > 0:
                return bx, bres, False, True
            a = rz / pSp
            x = x + a * p
            Qx = Qx + a * q
            r = r - a * Sp
            res = _l1(xp, rP * x - Qx - b)
            if res < bres:
                bx, bres = x, res
            if res <= target and float(b @ x) > 0:
                return x, res, True, False
            if _l1(xp, r) <= own_target:
                break
            z = r / M
            rz_new = float(r @ z)
            p = z + (rz_new / rz) * p
            rz = rz_new
        return bx, bres, False, False

    discounted = mode != "plain"
    if not discounted:
        x, res, _, negative = run(1.0, 0.0)
        if res < best_res:
            best_x, best_res = x, res
        if not (negative and best_res > target):
            # x0 = -g / M with M > 0 is always a descent direction: the fallback
            return (best_x if float(b @ best_x) > 0 else x0), iterations, False
        # S is singular and, at high gamma, so ill-conditioned that rounding makes it look indefinite before
        # the target is met: the discounted loop, whose S_rho is definite, takes over (rho persists from its
        # last use, as in the discounted mode)

    while best_res > target and iterations < cap and not (
            expired is not None and expired(CG_ITERATION_PASSES + STEP_TAIL_PASSES)):
        state.rho = 1.0 - (1.0 - state.rho) / 4.0
        x, res, converged, negative = run(state.rho, 0.25 * target)
        if res < best_res:
            best_x, best_res = x, res
        if negative:
            state.rho = 0.0
            return (best_x if float(b @ best_x) > 0 else x0), iterations, not discounted
        if converged:
            break
    state.rho = max(0.0, 1.0 - 4.0 * (1.0 - state.rho))
    return (best_x if float(b @ best_x) > 0 else x0), iterations, not discounted


# --------------------------------------------------------------------------- projection


def _chi_sinkhorn(plan: Plan, log_rh, log_ch, rh, tol, u, v, stats, expired=None):
    """Row/column log updates until sum (r_hat - r_P)^2 / r_P <= tol^0.4, ending on a column update.

    Returns (u, v, log r_P). ``expired(passes)``: when a sweep would pass the time limit, stop after the
    last column update."""
    xp = plan.K.xp
    limit = tol ** 0.4
    for _ in range(CHI_SWEEPS):
        if expired is not None and expired(SWEEP_PASSES):
            break
        (lr,) = plan.log_marginals(u, v, cols=False)
        r = xp.exp(lr)
        if float(((rh - r) ** 2 / r).sum()) <= limit:
            return u, v, lr
        u, v = _sweep(plan, log_rh, log_ch, u, v, stats, lr)
    (lr,) = plan.log_marginals(u, v, cols=False)
    return u, v, lr


def _sweep(plan: Plan, log_rh, log_ch, u, v, stats, lr=None):
    """One log-domain Sinkhorn sweep, rows then columns, from the log row marginals ``lr`` (computed when None)."""
    if lr is None:
        (lr,) = plan.log_marginals(u, v, cols=False)
    u = u + (log_rh - lr)
    (lc,) = plan.log_marginals(u, v, rows=False)
    v = v + (log_ch - lc)
    stats.sinkhorn_sweeps += 1
    return u, v


def tolerance_floor(K, gamma: float = 0.0) -> float:
    """The smallest L1 marginal error worth asking for in the working dtype at temperature gamma.

    Two roundings: of the sums (about sqrt(n) eps), and of the exponents u_i + v_j - gamma C_ij, which are of
    size gamma (C scaled to max 1), so that every entry of the plan carries a relative error of about
    eps gamma; over a row's m entries that averages to eps gamma / sqrt(m) of the row's mass.
    """
    eps = float(np.finfo(K.dtype).eps)
    return 4.0 * eps * (math.sqrt(max(K.n, K.m)) + gamma / math.sqrt(min(K.n, K.m)))


def _timed_lse(K, deadline: Deadline, log_marginal, *args):
    """One log-sum-exp pass, its duration recorded as the deadline's measure of a pass."""
    t = deadline.clock()
    out = log_marginal(*args)
    if out.shape[0]:
        float(out[0])  # on a GPU, waits for the pass to finish
    deadline.measure(deadline.clock() - t)
    return out


def _line_search(K, rh, ch, rP, cP, du, dv, slope, stats, expired):
    """Armijo (sigma = 0.01) on the dual F(u, v) = sum P - r_hat . u - c_hat . v along (du, dv).

    Returns (alpha, a, b, P b, r_P, c_P, rmatvec) with a = expm1(alpha du), b = expm1(alpha dv) and the products
    the accepted trial used, or (reason, None, ...) with reason 'time_limit' or why no step was found.

    The test is written as ``excess <= (1 - sigma) alpha slope`` with
    ``excess = F(alpha) - F(0) + alpha slope = (a - alpha du).r_P + (b - alpha dv).c_P + a.(P b)``, a sum of
    second-order terms: forming sum P(alpha) - sum P(0) instead loses everything below eps * sum P, which is
    where the Newton decrement (about err^2) lies at the end of a stage.

    A truncated plan is trusted only for trial steps whose growth factor (:func:`_growth`) stays within
    SPARSE_GROWTH: beyond, the dropped entries (which couple the blocks of a nearly one-to-one plan, and whose
    absence makes the Newton step huge along them) would grow unseen, and a step that blows the true dual up
    would pass. Such trials use the whole built plan, with its own r_P, c_P and slope.
    """
    xp = K.xp
    full = None  # (r_P, c_P, slope) of the whole plan, once needed
    alpha = 1.0
    while True:
        with np.errstate(over="ignore", invalid="ignore"):
            a, b = xp.expm1(alpha * du), xp.expm1(alpha * dv)
            whole = K.sparse is not None and not (1.0 + float(a.mean())) * (1.0 + float(b.mean())) <= SPARSE_GROWTH
            if whole and full is None:
                stats.count("full_plan_search")
                fr, fc = K.full_matvec(xp.ones(K.m, dtype=K.dtype)), K.full_rmatvec(xp.ones(K.n, dtype=K.dtype))
                full = (fr, fc, float((rh - fr) @ du) + float((ch - fc) @ dv))
                if not full[2] > 0:
                    return "no descent direction on the whole plan", None, None, None, None, None, None
            tr, tc, ts, matvec, rmatvec = ((*full, K.full_matvec, K.full_rmatvec) if whole
                                           else (rP, cP, slope, K.matvec, K.rmatvec))
            Pb = matvec(b)
            excess = float((a - alpha * du) @ tr) + float((b - alpha * dv) @ tc) + float(a @ Pb)
        if math.isfinite(excess) and excess <= ARMIJO * alpha * ts:
            return alpha, a, b, Pb, tr, tc, rmatvec
        alpha /= 2.0
        if alpha < ALPHA_MIN:
            return f"line search failed (step below {ALPHA_MIN:g})", None, None, None, None, None, None
        if expired is not None and expired(1):
            return "time_limit", None, None, None, None, None, None


def _fallback(K, plan, gamma, log_rh, log_ch, rh, tol, u, v, stats, failures, expired):
    """After a failed Newton step: resynchronise first (an exact column update by log-sum-exp and a fresh plan,
    for a plan whose products drifted from the potentials), then Sinkhorn sweeps (each lowers the dual), more
    with every failure in a row. Returns (u, v, log r_P), ending on a column update like the sweeps."""
    xp = K.xp
    v = v + (log_ch - K.log_cols(u, v, gamma))
    plan.rebuild(u, v)
    if failures == 1:
        stats.count("resync")
        return _chi_sinkhorn(plan, log_rh, log_ch, rh, tol, u, v, stats, expired)
    stats.count("sinkhorn")
    for _ in range(FALLBACK_SWEEPS * (failures - 1)):
        if expired is not None and expired(SWEEP_PASSES):
            break
        u, v = _sweep(plan, log_rh, log_ch, u, v, stats)
    (lr,) = plan.log_marginals(u, v, cols=False)
    return u, v, lr


def project(K, gamma, rh, ch, tol, u, v, state: PCGState, stats: TNTStats, opts: dict,
            deadline: Deadline, newton_budget: int | None):
    """Project (u, v) onto the marginals (rh, ch) at temperature gamma to L1 row error <= tol.

    Returns (u, v, deltas, reason) where reason is None, or 'time_limit' / 'max_iter' when a limit
    stopped it early, or 'precision: ...' when the error stalled within PRECISION_MARGIN of the rounding floor
    (:func:`tolerance_floor`) above tol: then (u, v) is the best iterate. A failed Newton step (no descent
    direction, no step accepted, or STALL_STEPS steps without a new lowest error) is followed by a fallback
    (:func:`_fallback`); raises StageFailed after FALLBACKS_MAX of them without a new lowest error, or after
    NEWTON_CAP steps.
    """
    xp = K.xp
    expired = deadline.expired if deadline.end is not None else None
    floor = tolerance_floor(K, gamma)
    tol = max(tol, floor)
    if opts.get("truncate", True):
        # entries below this carry less than 1e-3 tol of mass in all: drop them from the built plan
        K.threshold = max(1e-3 * tol / (K.n * K.m), float(np.finfo(K.dtype).tiny))
    log_rh, log_ch = xp.log(rh), xp.log(ch)
    ones_m = xp.ones(K.m, dtype=K.dtype)
    v = v + (log_ch - _timed_lse(K, deadline, K.log_cols, u, v, gamma))
    plan = Plan(K, gamma, opts["shift_limit"])
    plan.rebuild(u, v)
    u, v, lr = _chi_sinkhorn(plan, log_rh, log_ch, rh, tol, u, v, stats, expired)
    err = _l1(xp, xp.exp(lr) - rh)
    deltas = []
    steps = stalled = failures = 0
    best = (err, u, v)  # the lowest error so far, and its iterate
    while err > tol:
        if not math.isfinite(err):
            raise StageFailed("non-finite marginal error")
        if expired is not None and expired(STEP_HEAD_PASSES + CG_ITERATION_PASSES + STEP_TAIL_PASSES):
            return u, v, deltas, "time_limit"
        if newton_budget is not None and steps >= newton_budget:
            return u, v, deltas, "max_iter"
        if steps >= NEWTON_CAP:
            raise StageFailed(f"no convergence in {NEWTON_CAP} Newton steps, error {err:.2e} > tolerance {tol:.2e}")
        steps += 1
        eta = min(max(err, 0.9 * tol / err), 0.9)
        plan.rebuild(u, v)
        rP = K.matvec(ones_m)  # and c_P = c_hat after the column update (a whole-plan line search measures it)
        g = rP - rh
        x, its, discounted = pcg(K, rP, ch, g, eta * err, state, opts["pcg"], CG_CAP, expired)
        stats.cg_iterations += its
        if discounted:
            stats.count("discounted_cg")
        du = x
        dv = -K.rmatvec(x) / ch
        slope = -float(g @ du)  # -F'(0) of the dual along (du, dv)
        if slope > 0:
            alpha, a, b, Pb, rP, cP, rmatvec = _line_search(K, rh, ch, rP, ch, du, dv, slope, stats, expired)
        else:
            alpha = "no descent direction"
        if alpha == "time_limit":  # (u, v) is still the iterate before this step
            return u, v, deltas, "time_limit"
        if isinstance(alpha, str):
            failure = alpha
            deltas.append(0.0)  # no step: the schedule slows down
        else:
            stats.newton_steps += 1
            u = u + alpha * du
            v = v + alpha * dv
            r_new = (1.0 + a) * (Pb + rP)  # exp(alpha du) * P exp(alpha dv)
            c_new = (1.0 + b) * (rmatvec(a) + cP)
            err_pre = _l1(xp, c_new - ch) + _l1(xp, r_new - rh)
            (lc,) = plan.log_marginals(u, v, rows=False)
            v = v + (log_ch - lc)
            u, v, lr = _chi_sinkhorn(plan, log_rh, log_ch, rh, tol, u, v, stats, expired)
            err_new = _l1(xp, xp.exp(lr) - rh)
            deltas.append((err - err_pre) / ((1.0 - eta) * err))
            err = err_new
            if err < PROGRESS * best[0]:
                best, stalled, failures = (err, u, v), 0, 0
                continue
            stalled += 1
            if stalled < STALL_STEPS:
                continue
            failure, stalled = f"no new lowest error in {STALL_STEPS} Newton steps", 0
        failures += 1
        if failures > FALLBACKS_MAX:
            what = (f"{failure}, also after {FALLBACKS_MAX} fallbacks (resync, Sinkhorn sweeps): lowest error "
                    f"{best[0]:.2e} > tolerance {tol:.2e}; {np.dtype(K.dtype).name} resolves about {floor:.1e} "
                    f"at gamma={gamma:g}")
            if best[0] <= PRECISION_MARGIN * floor:
                return best[1], best[2], deltas, f"precision: {what}"
            raise StageFailed(what)
        u, v, lr = _fallback(K, plan, gamma, log_rh, log_ch, rh, tol, u, v, stats, failures, expired)
        err = _l1(xp, xp.exp(lr) - rh)
        if err < PROGRESS * best[0]:
            best, failures = (err, u, v), 0
    return u, v, deltas, None


# --------------------------------------------------------------------------- outer loop


def entropy(p) -> float:
    q = p[p > 0]
    return float(-(q * np.log(q)).sum())


def _counts_since(counts: dict, before: dict) -> dict:
    return {k: n - before.get(k, 0) for k, n in counts.items() if n > before.get(k, 0)}


@dataclass
class TNTResult:
    f: np.ndarray  # potentials in cost units on the full index sets (-inf where the mass is zero)
    g: np.ndarray
    gamma: float  # of the returned stage
    reg: float  # scale / gamma, in cost units
    status: str
    message: str
    stats: TNTStats
    passes: int
    dtype: str


def _scaled_cost(ot, ia, ib, scale: float, dtype, xp):
    """C on the supports, divided by ``scale``, in ``dtype``: a new array (on the CPU, :func:`empty_base_pages`)."""
    C = ot.dense_cost("tnt")
    sub = C if (ia.size == ot.n and ib.size == ot.m) else C[np.ix_(ia, ib)]
    if xp is np:
        return np.divide(sub, scale, out=empty_base_pages(sub.shape, dtype), casting="same_kind")
    return sub / scale


def solve_tnt(ot, *, gamma_f: float, tol: float | None = None, pcg_mode: str = "plain",
              dtype=np.float64, max_iter: int | None = None, time_limit: float | None = None,
              target_gap=None, gap_fn=None, backend=None, truncate: bool = True, structure: bool = True,
              progress: Progress = SILENT, deadline: Deadline | None = None) -> TNTResult:
    """MDOT-TNT on an :class:`optsolve.ot.problems.OTProblem` (dense cost, or streamed point clouds).

    ``truncate``: products use the built plan's entries above a threshold (sparse) once fewer than
    20% of them are kept. ``structure``: grid problems use the separable :class:`GridKernel`. ``target_gap``/``gap_fn``: when given, ``gap_fn(f, g, reg)`` returns the certified relative
    gap of the rounded plan after each stage, and gamma keeps growing (up to 2^20) until it is
    at most ``target_gap``; ``gamma_f`` is then only where the schedule would otherwise stop.
    ``deadline``: the :class:`optsolve.ot.deadline.Deadline` of the whole solve (default: ``time_limit``
    seconds from now), checked inside every loop; it keeps time for the rounding and the certificate.
    """
    from optsolve.core.backend import get_backend

    backend = backend or get_backend("cpu")
    xp = backend.xp
    log = get_logger()
    if deadline is None:
        deadline = Deadline.after(time_limit)
    a, b = ot.a, ot.b
    ia, ib = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    scale = ot.max_cost()
    if not scale > 0:
        scale = 1.0
    if ot.grid is not None and structure:
        ia, ib = np.arange(ot.n), np.arange(ot.m)  # zeros stay (the grid is kept whole); smoothing covers them
        K = GridKernel(xp, ot.grid, ot.cost, scale, dtype)
    elif ot.low_memory:
        K = StreamedKernel(xp, ot, ia, ib, scale, dtype)
    else:
        K = DenseKernel(xp, _scaled_cost(ot, ia, ib, scale, dtype, xp), dtype)
    n, m = K.n, K.m
    r = xp.asarray(a[ia], dtype=K.dtype)
    c = xp.asarray(b[ib], dtype=K.dtype)
    H_min = min(entropy(a), entropy(b))
    opts = {"pcg": pcg_mode, "shift_limit": 30.0 if K.dtype == np.float64 else 12.0, "truncate": truncate}
    state = PCGState()
    stats = TNTStats()

    ceiling = GAMMA_MAX if target_gap is not None else gamma_f
    gamma = min(GAMMA_START, ceiling)
    gamma_prev = 0.0
    q = Q_START
    u = v = u_prev = v_prev = None
    best = None  # (u, v, gamma) of the last completed stage
    retreats = []  # stages failed since the last completed one: {"gamma", "reason", "time_s", "fallbacks"}

    def finish(u_, v_, gamma_, status_, message_):
        f = np.full(a.shape, -np.inf)
        g = np.full(b.shape, -np.inf)
        f[ia] = backend.to_numpy(u_).astype(np.float64) / gamma_ * scale
        g[ib] = backend.to_numpy(v_).astype(np.float64) / gamma_ * scale
        return TNTResult(f, g, gamma_, scale / gamma_, status_, message_, stats, round(K.passes, 1), str(np.dtype(K.dtype)))

    try:
        while True:
            t_stage = time.perf_counter()
            eps_d = H_min / gamma ** P_EXPONENT if H_min > 0 else 1e-12
            last = gamma >= ceiling * (1 - 1e-12)
            stage_tol = tol if (last and tol is not None) else eps_d / 2.0
            e = min(eps_d / 2.0, 1.0, stage_tol)  # the smoothing stays within the stage's tolerance
            rh = (1.0 - 0.9 * e) * r + 0.9 * e / n
            ch = (1.0 - 0.1 * e) * c + 0.1 * e / m
            if u is None:
                u, v = xp.log(rh), xp.log(ch)
            budget = None if max_iter is None else max(0, max_iter - stats.newton_steps)
            steps0, fallbacks0 = stats.newton_steps, dict(stats.fallbacks)
            try:
                u_new, v_new, deltas, reason = project(K, gamma, rh, ch, stage_tol, u, v, state, stats, opts,
                                                       deadline, budget)
                limited = None  # why the stage ended above its tolerance, where float64 ran out
                if reason is not None and reason.startswith("precision: "):
                    limited, reason = reason[len("precision: "):], None
                if reason is None:
                    u_new = u_new + (xp.log(rh) - _timed_lse(K, deadline, K.log_rows, u_new, v_new, gamma))
                    if not (bool(xp.isfinite(u_new).all()) and bool(xp.isfinite(v_new).all())):
                        raise StageFailed("non-finite potentials")
            except StageFailed as exc:
                msg = f"stage gamma={gamma:g} failed ({exc})"
                if best is None:
                    return finish(u, v, gamma, "numerical_error",
                                  f"The first stage failed ({exc}); the plan is that stage's rounded iterate.")
                retreats.append({"gamma": gamma, "reason": str(exc), "time_s": time.perf_counter() - t_stage,
                                 "fallbacks": _counts_since(stats.fallbacks, fallbacks0)})
                if (stats.fallbacks.get("lower_gamma", 0) < RETREATS_MAX and gamma > best[2] * RETREAT_MIN_RATIO
                        and not deadline.expired(STAGE_START_PASSES)):
                    # a smaller increase from the last completed stage, warm-started with its potentials f = u / gamma
                    retry = math.sqrt(best[2] * gamma)
                    log.info(f"{msg}; retrying at gamma={retry:g}")
                    stats.count("lower_gamma")
                    u, v = best[0] * (retry / best[2]), best[1] * (retry / best[2])
                    gamma, q = retry, Q_MIN
                    continue
                tried = (f" {len(retreats) - 1} retries at smaller gamma did not get past it;"
                         if len(retreats) > 1 else "")
                log.warning(f"{msg}; returning the solution at gamma={best[2]:g}")
                return finish(*best, "optimal_inaccurate" if target_gap is None else "numerical_error",
                              f"The stage at gamma={gamma:g} failed ({exc});{tried} returned the solution of the "
                              f"previous stage, gamma={best[2]:g}.")
            if reason is not None:
                if best is None:
                    return finish(u_new, v_new, gamma, reason,
                                  f"Stopped by the {reason.replace('_', ' ')} inside the first stage.")
                return finish(*best, reason, f"Stopped by the {reason.replace('_', ' ')}; returned the last "
                                             f"completed stage, gamma={best[2]:g}.")
            stats.stages += 1
            best = (u_new, v_new, gamma)
            entry = {"gamma": gamma, "newton_steps": stats.newton_steps - steps0,
                     "time_s": time.perf_counter() - t_stage, "tol": stage_tol}
            used = _counts_since(stats.fallbacks, fallbacks0)
            if retreats:
                used["lower_gamma"] = len(retreats)
                entry["retried_after"] = retreats
                retreats = []
            if used:
                entry["fallbacks"] = used
            if limited is not None:
                entry["precision_limited"] = limited
                log.warning(f"stage gamma={gamma:g} ended at the precision limit: {limited}")
            gap = None
            if target_gap is not None and gap_fn is not None and not last and deadline.expired(deadline.finish_passes):
                stats.stage_log.append(entry)
                return finish(u_new, v_new, gamma, "time_limit", f"Stopped by the time limit after the stage at "
                                                                 f"gamma={gamma:g}, before its gap was evaluated.")
            if target_gap is not None and gap_fn is not None:
                out = finish(u_new, v_new, gamma, "optimal", "")
                gap = gap_fn(out.f, out.g, out.reg)  # None: not evaluated at this stage
                if gap is not None:
                    entry["relative_gap"] = gap
            stats.stage_log.append(entry)
            if history_active():
                passes = round(K.passes, 1)  # before the check's own pass
                col_err = float(xp.abs(xp.exp(K.log_cols(u_new, v_new, gamma)) - ch).sum())
                trace(stats.stages, col_err, evaluations=passes, measure=TNT_MEASURE,
                      evaluations_of="passes over the cost matrix", gamma=gamma, newton_steps=stats.newton_steps,
                      cg_iterations=stats.cg_iterations, relative_gap=gap)
            progress.update(stats.stages, gamma=gamma, newton=stats.newton_steps, cg=stats.cg_iterations,
                            **({} if gap is None else {"gap": gap}))
            log.info(f"stage {stats.stages}: gamma={gamma:g} newton={entry['newton_steps']} tol={stage_tol:.2e} "
                     f"time={entry['time_s']:.3f}s" + ("" if gap is None else f" gap={gap:.3e}"))
            if target_gap is not None and gap is not None and gap <= target_gap:
                return finish(u_new, v_new, gamma, "optimal", "")
            if last:
                if target_gap is not None:
                    reached = "" if gap is None else f" {gap:.3g}"
                    return finish(u_new, v_new, gamma, "max_iter",
                                  f"gamma reached {gamma:g} before the relative gap{reached} met the "
                                  f"target {target_gap:g}.")
                if limited is not None:
                    return finish(u_new, v_new, gamma, "optimal_inaccurate",
                                  f"The last stage ended at the precision limit ({limited}).")
                floor = tolerance_floor(K, gamma)
                if tol is not None and tol < floor:
                    return finish(u_new, v_new, gamma, "optimal",
                                  f"The tolerance {tol:g} is below what {np.dtype(K.dtype).name} resolves at "
                                  f"gamma={gamma:g}; the last stage was solved to {floor:.1e}.")
                return finish(u_new, v_new, gamma, "optimal", "")
            if deadline.expired(STAGE_START_PASSES):
                return finish(u_new, v_new, gamma, "time_limit",
                              f"Stopped by the time limit after the stage at gamma={gamma:g}.")
            d = min(deltas + [1.0])
            if d < 0.5:
                q = max(math.sqrt(q), Q_MIN)
            elif d > 0.9:
                q = q * q
            gamma_next = min(gamma * q, ceiling)
            if gap is not None:  # aim just past the target instead of overshooting it by a factor q
                gamma_next = min(gamma_next, gamma * GAP_MARGIN * gap / target_gap)
            if gamma_next >= ceiling * (1 - 1e-9):
                gamma_next = ceiling
            if u_prev is None:
                u = u_new * (gamma_next / gamma)
                v = v_new * (gamma_next / gamma)
            else:
                w = (gamma_next - gamma) / (gamma - gamma_prev)
                u = u_new + (u_new - u_prev) * w
                v = v_new + (v_new - v_prev) * w
            u_prev, v_prev = u_new, v_new
            gamma_prev, gamma = gamma, gamma_next
    except KeyboardInterrupt:
        if best is None:
            return finish(u, v, gamma, "interrupted", "Interrupted inside the first stage; the plan is the "
                                                      "rounded current iterate.")
        return finish(*best, "interrupted", f"Interrupted; returned the last completed stage, gamma={best[2]:g}.")
