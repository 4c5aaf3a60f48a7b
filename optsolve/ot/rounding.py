"""Rounding entropic potentials onto the transport polytope.

Altschuler, Weed and Rigollet (2017), Algorithm 2, in the log domain: potentials are
lowered where a marginal is exceeded (rows, then columns); the remaining deficit is the
rank-one term ``err_a err_b^T / |err_a|_1``. The rounded plan is exactly feasible and is
determined by the rounded potentials, so the certificate can recompute it.

Everything is computed block by block, so the plan is never formed unless asked for: a
cost matrix in host memory in three fused passes over row blocks on threads
(:class:`optsolve.ot.rowblocks.RowBlocks`: sums, column log-sum-exp, sums and cost), other
costs column block by column block (:meth:`OTProblem.blocks`, also on a GPU). Images on a
grid are rounded with the separable log-domain products of :mod:`optsolve.ot.grid`, in O(n^1.5).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsolve.core.backend import exp_flush
from optsolve.ot.problems import OTProblem


@dataclass
class Rounded:
    f: np.ndarray  # rounded potentials, cost units
    g: np.ndarray
    reg: float
    objective: float  # <C, P> of the rounded plan
    marginal_error_before: float  # L1 error of the unrounded Gibbs plan
    err_a: np.ndarray
    err_b: np.ndarray

    def plan_blocks(self, ot: OTProblem):
        """Yield ``(j0, j1, P[:, j0:j1])``: the rounded plan, column block by column block."""
        s = self.err_a.sum()
        for j0, j1, Cb in ot.blocks():
            Pb = gibbs_block(self.f, self.g[j0:j1], Cb, self.reg)
            if s > 0:
                Pb += np.outer(self.err_a, self.err_b[j0:j1]) / s
            yield j0, j1, Pb

    def plan(self, ot: OTProblem) -> np.ndarray:
        """The dense rounded plan (n x m)."""
        P = np.empty((ot.n, ot.m))
        for j0, j1, Pb in self.plan_blocks(ot):
            P[:, j0:j1] = Pb
        return P

    def sparse_plan(self, ot: OTProblem, threshold: float):
        """The rounded plan's entries above ``threshold`` as a CSR matrix, built block by block.

        Raises InputError (:mod:`optsolve.core.memory`) once the entries kept pass the memory budget."""
        import scipy.sparse as sp

        from optsolve.core import memory

        rows, cols, vals, kept = [], [], [], 0
        for j0, _, Pb in self.plan_blocks(ot):
            i, j = np.nonzero(Pb > threshold)
            kept += i.size
            memory.require(ot.label, f"the plan's entries above --plan-threshold {threshold:g} ({kept} of "
                                     f"{ot.n} x {ot.m} so far, 24 bytes each)", 24 * kept)
            rows.append(i)
            cols.append(j + j0)
            vals.append(Pb[i, j])
        return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))),
                             shape=(ot.n, ot.m))


def gibbs_block(f, g, C, reg, out=None, xp=np):
    """exp((f_i + g_j - C_ij) / reg), computed in place in ``out`` (a new array by default)."""
    out = xp.empty(C.shape) if out is None else out
    with np.errstate(over="ignore", invalid="ignore"):
        xp.multiply(C, -1.0 / reg, out=out)
        out += (f / reg)[:, None]
        out += (g / reg)[None, :]
        return exp_flush(xp, out, out=out)


def round_problem(ot: OTProblem, f, g, reg, xp=np) -> Rounded:
    """Round potentials (cost units; -inf where the mass is zero) for problem ``ot``.

    ``xp``: the array namespace the blocks are computed in (cupy: on the GPU, streamed); the
    result holds numpy arrays.
    """
    if ot.C is None and ot.grid is not None:
        return _round_grid(ot, f, g, reg)
    if ot.C is not None and xp is np:
        return _round_matrix(ot, np.asarray(f, dtype=np.float64), np.asarray(g, dtype=np.float64), reg)
    from optsolve.core.backend import to_numpy

    a, b = xp.asarray(ot.a), xp.asarray(ot.b)
    f, g = xp.asarray(f), xp.asarray(g)

    def sums(f_, g_, weighted=False):
        r, c, U = xp.zeros(ot.n), xp.zeros(ot.m), 0.0
        for j0, j1, Cb in ot.blocks(xp=xp):
            Kb = gibbs_block(f_, g_[j0:j1], Cb, reg, xp=xp)
            r += Kb.sum(1)
            c[j0:j1] = Kb.sum(0)
            if weighted:
                U += float((Cb * Kb).sum())
        return r, c, U

    r, c, _ = sums(f, g)
    before = float(xp.abs(r - a).sum() + xp.abs(c - b).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        f = f + xp.where(r > a, reg * (xp.log(a) - xp.log(r)), 0.0)
    _, c, _ = sums(f, g)
    with np.errstate(divide="ignore", invalid="ignore"):
        g = g + xp.where(c > b, reg * (xp.log(b) - xp.log(c)), 0.0)
    r, c, U = sums(f, g, weighted=True)
    err_a, err_b = a - r, b - c
    s = float(err_a.sum())
    if s > 0:
        for j0, j1, Cb in ot.blocks(xp=xp):
            U += float(err_a @ (Cb @ err_b[j0:j1])) / s
    host = [to_numpy(v) for v in (f, g, err_a, err_b)]
    return Rounded(host[0], host[1], reg, U, before, host[2], host[3])


def _round_matrix(ot: OTProblem, f, g, reg) -> Rounded:
    """:func:`round_problem` for a cost matrix in host memory: three fused passes over its row blocks
    (sums, column log-sum-exp after the row update, sums and cost), the kernel never stored."""
    from optsolve.ot.rowblocks import RowBlocks

    a, b, C = ot.a, ot.b, ot.C
    rows = RowBlocks(np.asarray(C, dtype=np.float64))
    gamma = 1.0 / reg
    r, c, _ = rows.sums(f / reg, g / reg, gamma)
    before = float(np.abs(r - a).sum() + np.abs(c - b).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        f = f + np.where(r > a, reg * (np.log(a) - np.log(r)), 0.0)
        log_c = g / reg + rows.log_cols(None, f / reg, gamma)[0]
        g = g + np.where(log_c > np.log(b), reg * (np.log(b) - log_c), 0.0)
    r, c, U = rows.sums(f / reg, g / reg, gamma, weighted=True)
    err_a, err_b = a - r, b - c
    s = float(err_a.sum())
    if s > 0:
        U += float(err_a @ (C @ err_b)) / s
    return Rounded(f, g, reg, U, before, err_a, err_b)


def _round_grid(ot: OTProblem, f, g, reg) -> Rounded:
    """:func:`round_problem` for images: log row and column sums by nested LSEs, never the n x n kernel."""
    from optsolve.ot.grid import bilinear, gibbs_sums, log_cost_kernels, lse_apply

    C1, C2 = ot.axis_costs()
    L1, L2, _, _ = log_cost_kernels(C1, C2, reg)
    a, b = ot.a, ot.b
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        log_a, log_b = np.log(a), np.log(b)
        log_r = f / reg + lse_apply(g / reg, L1, L2)
        log_c = g / reg + lse_apply(f / reg, L1, L2)
        before = float(np.abs(np.exp(log_r) - a).sum() + np.abs(np.exp(log_c) - b).sum())
        f = f + np.where(log_r > log_a, reg * (log_a - log_r), 0.0)
        log_c = g / reg + lse_apply(f / reg, L1, L2)
        g = g + np.where(log_c > log_b, reg * (log_b - log_c), 0.0)
    r, c, U = gibbs_sums(f / reg, g / reg, C1, C2, reg)
    err_a, err_b = a - r, b - c
    s = err_a.sum()
    if s > 0:
        U += bilinear(err_a, err_b, C1, C2) / s
    return Rounded(f, g, reg, U, before, err_a, err_b)
