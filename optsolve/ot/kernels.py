"""The kernels of MDOT-TNT (:mod:`optsolve.ot.tnt`): the cost as a dense matrix, as point clouds
streamed in column blocks, or as a grid's separable costs; each offers the log-sum-exp passes and the
products with the plan at (u, v), and :class:`Plan` rescales a plan built once per Newton step.

All array code goes through the namespace ``xp`` of :mod:`optsolve.core.backend`, so the same lines
run on numpy and cupy.
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.core.backend import exp_flush
from optsolve.core.blocks import empty_base_pages
from optsolve.ot.grid import axis_costs, lse_apply, lse_apply_l1
from optsolve.ot.problems import available_memory_bytes
from optsolve.ot.rowblocks import RowBlocks

# A truncated plan drops entries below threshold = 1e-3 tol / (n m). Rescaled by exp(du_i) exp(dv_j), they sum to
# at most threshold sum_i exp(du_i) sum_j exp(dv_j) = 1e-3 tol mean(exp(du)) mean(exp(dv)). Where that growth
# factor exceeds SPARSE_GROWTH (the dropped mass could reach 0.1 tol) the plan is rebuilt, and a line search uses
# the whole plan (see Plan.scalings, _line_search).
SPARSE_GROWTH = 100.0


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
