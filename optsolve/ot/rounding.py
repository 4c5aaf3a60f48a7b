"""Rounding entropic potentials onto the transport polytope.

Altschuler, Weed and Rigollet (2017), Algorithm 2, in the log domain: potentials are
lowered where a marginal is exceeded (rows, then columns); the remaining deficit is the
rank-one term ``err_a err_b^T / |err_a|_1``. The rounded plan is exactly feasible and is
determined by the rounded potentials, so the certificate can recompute it.

Everything is computed column block by column block (:meth:`OTProblem.blocks`), so the
plan is never formed unless asked for; with a dense cost in one block, the Gibbs kernel
is kept between the passes instead of being recomputed. Images on a grid are rounded with
the separable log-domain products of :mod:`optsolve.ot.grid`, in O(n^1.5).
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
    kernel: np.ndarray | None = None  # exp((f + g - C)/reg) after rounding, when kept (dense)

    def plan_blocks(self, ot: OTProblem):
        """Yield ``(j0, j1, P[:, j0:j1])``: the rounded plan, column block by column block."""
        s = self.err_a.sum()
        for j0, j1, Cb in ot.blocks():
            if self.kernel is not None:
                Pb = self.kernel[:, j0:j1].copy()
            else:
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


def gibbs_dense(ot: OTProblem, f, g, reg) -> np.ndarray:
    out = np.empty((ot.n, ot.m))
    for j0, j1, Cb in ot.blocks():
        gibbs_block(f, g[j0:j1], Cb, reg, out=out[:, j0:j1])
    return out


def round_problem(ot: OTProblem, f, g, reg, xp=np) -> Rounded:
    """Round potentials (cost units; -inf where the mass is zero) for problem ``ot``.

    ``xp``: the array namespace the blocks are computed in (cupy: on the GPU, streamed); the
    result holds numpy arrays.
    """
    if ot.C is None and ot.grid is not None:
        return _round_grid(ot, f, g, reg)
    from optsolve.core.backend import to_numpy

    a, b = xp.asarray(ot.a), xp.asarray(ot.b)
    f, g = xp.asarray(f), xp.asarray(g)
    keep = ot.C is not None and xp is np  # one dense pass in host memory: keep the kernel
    K = gibbs_dense(ot, f, g, reg) if keep else None

    def kernel_blocks(f_, g_):
        if keep:
            yield 0, ot.m, None, K
            return
        for j0, j1, Cb in ot.blocks(xp=xp):
            yield j0, j1, Cb, gibbs_block(f_, g_[j0:j1], Cb, reg, xp=xp)

    r, c = xp.zeros(ot.n), xp.zeros(ot.m)
    for j0, j1, _, Kb in kernel_blocks(f, g):
        r += Kb.sum(1)
        c[j0:j1] = Kb.sum(0)
    before = float(xp.abs(r - a).sum() + xp.abs(c - b).sum())
    with np.errstate(divide="ignore", invalid="ignore"):
        shift = xp.where(r > a, reg * (xp.log(a) - xp.log(r)), 0.0)
    f0, f = f, f + shift
    x = xp.exp(shift / reg)
    for j0, j1, _, Kb in kernel_blocks(f0, g):
        c[j0:j1] = x @ Kb
    with np.errstate(divide="ignore", invalid="ignore"):
        shift_g = xp.where(c > b, reg * (xp.log(b) - xp.log(c)), 0.0)
    g = g + shift_g
    if keep:
        K *= x[:, None]
        K *= np.exp(shift_g / reg)[None, :]
    r[:] = 0.0
    U = 0.0
    for j0, j1, Cb, Kb in kernel_blocks(f, g):
        r += Kb.sum(1)
        c[j0:j1] = Kb.sum(0)
        Cs = ot.C if keep else Cb
        U += float(xp.vdot(Cs, Kb)) if Cs.flags.c_contiguous and Kb.flags.c_contiguous else float((Cs * Kb).sum())
    err_a, err_b = a - r, b - c
    s = float(err_a.sum())
    if s > 0:
        for j0, j1, Cb in ot.blocks(xp=xp):
            U += float(err_a @ (Cb @ err_b[j0:j1])) / s
    host = [to_numpy(v) for v in (f, g, err_a, err_b)]
    return Rounded(host[0], host[1], reg, U, before, host[2], host[3], K)


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
