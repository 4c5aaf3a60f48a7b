"""Independent checks of an OT solution, recomputed from the problem and the solution only.

The plan is rebuilt from the solution document: a sparse list of entries
(``plan.format == "coo"``), or the rounded Gibbs plan of entropic methods
(``plan.format == "gibbs_rounded"``): ``K = exp((f_i + g_j - C_ij)/reg)`` plus the
rank-one term ``err_a err_b^T / |err_a|_1`` with ``err_a = a - K 1``,
``err_b = b - K^T 1`` (Altschuler, Weed and Rigollet 2017).

Checks: L1 marginal error and nonnegativity of the plan; its cost ``U = <C, P>``
against the reported objective; an LP dual lower bound ``D`` from the potentials by
c-transforms (``g~_j = min_i C_ij - f_i`` makes ``(f, g~)`` dual feasible for any f,
and ``f~_i = min_j C_ij - g~_j >= f_i`` keeps it so: ``D = <f~, a> + <g~, b>`` is a
valid lower bound) against the reported ``dual_bound``; the certified gap ``U - D``. For the exact method, also the LP
optimality conditions of the reported pair (f, g): dual feasibility and
complementary slackness.
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.core.backend import exp_flush
from optsolve.core.result import Certificate, Check, solution_vector
from optsolve.ot.problems import prepare

MARGINAL_LIMIT = 1e-8
NONNEG_LIMIT = 1e-12
MATCH_RTOL = 1e-9
EXACT_GAP_RTOL = 1e-9  # methods that claim the LP optimum


def _coo_plan(spec: dict, n: int, m: int):
    import scipy.sparse as sp

    row = np.asarray(spec["row"], dtype=np.int64)
    col = np.asarray(spec["col"], dtype=np.int64)
    val = np.asarray(spec["value"], dtype=np.float64)
    if not (row.shape == col.shape == val.shape):
        raise ValueError("plan 'row', 'col' and 'value' differ in length")
    if row.size and (row.min() < 0 or row.max() >= n or col.min() < 0 or col.max() >= m):
        raise ValueError("plan indices out of range")
    return sp.csc_matrix((val, (row, col)), shape=(n, m))


def _gibbs(f, g, Cb, reg, xp):
    with np.errstate(over="ignore", invalid="ignore"):
        return exp_flush(xp, (f[:, None] + g[None, :] - Cb) / reg)


def plan_blocks(ot, solution: dict, f, g, xp=np):
    """Yield ``(j0, j1, C block, plan block)``: the plan rebuilt from the solution, block by block, in ``xp``."""
    spec = solution.get("plan")
    if not isinstance(spec, dict):
        raise KeyError("solution has no 'plan' object")
    fmt = spec.get("format")
    if fmt == "coo":
        P = _coo_plan(spec, ot.n, ot.m)
        for j0, j1, Cb in ot.blocks(xp=xp):
            yield j0, j1, Cb, xp.asarray(P[:, j0:j1].toarray())
        return
    if fmt != "gibbs_rounded":
        raise ValueError(f"unknown plan format {fmt!r}")
    reg = float(spec["reg"])
    if not reg > 0:
        raise ValueError("plan 'reg' must be positive")
    fz = xp.asarray(np.where(np.isnan(f), -np.inf, f))
    gz = xp.asarray(np.where(np.isnan(g), -np.inf, g))
    r, c = xp.zeros(ot.n), xp.zeros(ot.m)
    for j0, j1, Cb in ot.blocks(xp=xp):
        K = _gibbs(fz, gz[j0:j1], Cb, reg, xp)
        r += K.sum(1)
        c[j0:j1] = K.sum(0)
    err_a, err_b = xp.asarray(ot.a) - r, xp.asarray(ot.b) - c
    total = float(err_a.sum())
    for j0, j1, Cb in ot.blocks(xp=xp):
        K = _gibbs(fz, gz[j0:j1], Cb, reg, xp)
        if total > 0:
            K += xp.outer(err_a, err_b[j0:j1]) / total
        yield j0, j1, Cb, K


def _block_measures(ot, solution: dict, f, g, exact: bool, xp=np):
    """Row and column sums, cost, largest negative entry, max C and, for ``exact``, LP optimality residuals."""
    from optsolve.core.backend import to_numpy

    ia, ib = xp.asarray(ot.a > 0), xp.asarray(ot.b > 0)
    fx, gx = xp.asarray(f), xp.asarray(g)
    rows, cols = xp.zeros(ot.n), xp.zeros(ot.m)
    U, neg, cmax = 0.0, 0.0, 0.0
    infeasible, cs = 0.0, 0.0
    for j0, j1, Cb, Pb in plan_blocks(ot, solution, f, g, xp):
        rows += Pb.sum(1)
        cols[j0:j1] = Pb.sum(0)
        U += float((Cb * Pb).sum())
        if Pb.size:
            neg = max(neg, float(-Pb.min()))
            cmax = max(cmax, float(Cb.max()))
        if exact:
            keep = ib[j0:j1]
            with np.errstate(invalid="ignore"):
                slack = Cb[ia][:, keep] - fx[ia][:, None] - gx[j0:j1][keep][None, :]
            if slack.size:
                finite = bool(xp.all(xp.isfinite(slack)))
                infeasible = max(infeasible, float(-xp.nanmin(slack)) if finite else math.inf)
                cs += float(xp.abs(Pb[ia][:, keep] * slack).sum())
    return to_numpy(rows), to_numpy(cols), U, neg, cmax, infeasible, cs


def _grid_measures(ot, solution: dict, f, g, exact: bool, xp=np):
    """:func:`_block_measures` for images on a grid, by separable passes (O(n^1.5)), without the n x n plan.

    The rounded Gibbs plan's sums and cost use log-domain nested sums (:mod:`optsolve.ot.grid`);
    its largest negative entry is bounded by that of the rank-one term (the Gibbs part is
    positive). Dual feasibility is ``max_j g_j - min_i (C_ij - f_i)``, a min-plus pass.
    """
    from optsolve.ot.grid import bilinear, gibbs_sums, min_apply

    C1, C2 = ot.axis_costs()
    k2 = ot.grid[1]
    a, b = ot.a, ot.b
    ia, ib = a > 0, b > 0
    cmax = float(C1.max() + C2.max())
    spec = solution.get("plan")
    if not isinstance(spec, dict):
        raise KeyError("solution has no 'plan' object")
    fmt = spec.get("format")
    infeasible, cs = 0.0, 0.0
    if fmt == "coo":
        P = _coo_plan(spec, ot.n, ot.m).tocoo()
        i, j, p = P.row, P.col, P.data
        Cij = C1[i // k2, j // k2] + C2[i % k2, j % k2]
        rows = np.bincount(i, weights=p, minlength=ot.n)
        cols = np.bincount(j, weights=p, minlength=ot.m)
        U = float(Cij @ p)
        neg = float(-p.min()) if p.size else 0.0
        if exact:
            with np.errstate(invalid="ignore"):
                gt = min_apply(np.where(ia, -f, np.inf), C1, C2)
                slack = (g - gt)[ib]
                infeasible = float(np.max(slack, initial=0.0)) if np.all(np.isfinite(slack)) else math.inf
                on = ia[i] & ib[j]
                cs = float(np.abs(p[on] * (Cij[on] - f[i[on]] - g[j[on]])).sum())
        return rows, cols, U, neg, cmax, infeasible, cs
    if fmt != "gibbs_rounded":
        raise ValueError(f"unknown plan format {fmt!r}")
    reg = float(spec["reg"])
    if not reg > 0:
        raise ValueError("plan 'reg' must be positive")
    u = np.where(np.isnan(f), -np.inf, f) / reg
    v = np.where(np.isnan(g), -np.inf, g) / reg
    r, c, U = gibbs_sums(u, v, C1, C2, reg)
    err_a, err_b = a - r, b - c
    total = err_a.sum()
    rows, cols, neg = r, c, 0.0
    if total > 0:
        rows = r + err_a * (err_b.sum() / total)
        cols = c + err_b * (err_a.sum() / total)
        U += bilinear(err_a, err_b, C1, C2) / total
        corners = np.outer([err_a.min(), err_a.max()], [err_b.min(), err_b.max()]) / total
        neg = max(0.0, float(-corners.min()))
    return rows, cols, U, neg, cmax, infeasible, cs


def dual_bound_of(ot, f, xp=np) -> float:
    """The LP dual bound of f by two c-transforms over the supports; -inf when f is not finite there.

    ``g~ = f^c`` makes (f, g~) feasible; ``f~ = (g~)^c >= f`` keeps it feasible, so
    ``<f~, a> + <g~, b>`` is a lower bound at least as tight as ``<f, a> + <g~, b>``.
    Cost blocks are computed in ``xp`` (numpy, or cupy on a GPU).
    """
    ia, ib = ot.a > 0, ot.b > 0
    fs = f[ia]
    if not np.all(np.isfinite(fs)):
        return -math.inf
    if ot.C is None and ot.grid is not None:  # min-plus passes along each axis
        from optsolve.ot.grid import min_apply

        C1, C2 = ot.axis_costs()
        gt = min_apply(np.where(ia, -f, np.inf), C1, C2)
        ft = min_apply(np.where(ib, -gt, np.inf), C1, C2)
        return float(ft[ia] @ ot.a[ia] + gt[ib] @ ot.b[ib])
    full = bool(ia.all())
    ia_x, fs, b = xp.asarray(ia), xp.asarray(fs), xp.asarray(ot.b)
    ft = xp.full(fs.shape, xp.inf)
    total_g = 0.0
    for j0, j1, Cb in ot.blocks(xp=xp):
        keep = ib[j0:j1]
        Cs = Cb if full and keep.all() else Cb[ia_x][:, xp.asarray(keep)]
        if Cs.shape[1] == 0:
            continue
        gt = (Cs - fs[:, None]).min(0)
        total_g += float(gt @ b[j0:j1][xp.asarray(keep)])
        xp.minimum(ft, (Cs - gt[None, :]).min(1), out=ft)
    return float(ft @ xp.asarray(ot.a[ia])) + total_g


def _rel(x: float, scale: float) -> float:
    return abs(x) / scale


def entropy(p: np.ndarray) -> float:
    q = p[p > 0]
    return float(-(q * np.log(q)).sum())


def _namespace(device):
    """cupy when the solution was computed on a GPU and one is usable here, else numpy."""
    if device != "gpu":
        return np
    from optsolve.core.backend import cupy_status, get_namespace

    return get_namespace("gpu") if cupy_status()[0] else np


def check(problem, solution: dict, *, method: str | None, objective, settings: dict) -> Certificate:
    settings = settings or {}
    xp = _namespace(settings.get("device"))
    same_device = (xp is np) == (settings.get("device") != "gpu")  # else the solver's block size does not fit here
    ot = prepare(problem, normalize=bool(settings.get("normalize", False)), low_memory=settings.get("low_memory"),
                 block_size=settings.get("block_size") if same_device else None)
    a, b = ot.a, ot.b
    f = solution_vector(solution, "f", ot.n)
    g = solution_vector(solution, "g", ot.m)
    exact = method == "emd"
    measure = _grid_measures if (ot.C is None and ot.grid is not None) else _block_measures
    rows, cols, U, neg, cmax, infeasible, cs = measure(ot, solution, f, g, exact, xp)
    D = dual_bound_of(ot, f, xp)
    scale = max(cmax, 1e-300)
    marg = float(np.abs(rows - a).sum() + np.abs(cols - b).sum())
    checks = [
        Check.at_most("marginal_l1", marg, MARGINAL_LIMIT, "||P 1 - a||_1 + ||P^T 1 - b||_1 (unit mass)"),
        Check.at_most("nonnegativity", max(neg, 0.0), NONNEG_LIMIT, "largest negative entry of the plan"),
    ]
    claimed = None if objective is None else float(objective)
    mismatch = math.inf if claimed is None else _rel(U - claimed, max(abs(U), scale * 1e-12))
    checks.append(Check.at_most("objective_matches", mismatch, MATCH_RTOL,
                                f"relative difference between <C, P> = {U:.12g} and the reported objective"))
    claimed_d = solution.get("dual_bound")
    d_mismatch = math.inf if claimed_d is None or not math.isfinite(D) else _rel(D - float(claimed_d),
                                                                                 max(abs(D), scale * 1e-12))
    checks.append(Check.at_most("dual_bound_matches", d_mismatch, MATCH_RTOL,
                                f"relative difference between the c-transform bound D = {D:.12g} and the "
                                "reported dual_bound"))
    gap = U - D if math.isfinite(D) else math.inf
    rel_gap = gap / max(abs(U), scale * 1e-12)
    if exact:
        # LP optimality conditions for the reported pair (f, g) on the supports
        checks.append(Check.at_most("dual_feasibility", infeasible / scale, EXACT_GAP_RTOL,
                                    "max(f_i + g_j - C_ij, 0) / max C"))
        checks.append(Check.at_most("complementary_slackness", cs / scale, EXACT_GAP_RTOL,
                                    "sum P_ij |C_ij - f_i - g_j| / max C"))
        checks.append(Check.at_most("relative_gap", rel_gap, EXACT_GAP_RTOL,
                                    "(U - D) / U: certified distance to the LP optimum"))
    else:
        # any value is a valid certificate; a bound above the cost would mean an error
        checks.append(Check("relative_gap", rel_gap if math.isfinite(rel_gap) else None, None,
                            math.isfinite(rel_gap) and rel_gap >= -MATCH_RTOL,
                            "(U - D) / U: certified distance to the LP optimum"))
    checks.append(Check.info("gap_upper_bound", gap if math.isfinite(gap) else None,
                             "U - D >= true gap, in cost units"))
    checks.append(Check.info("dual_lower_bound", D if math.isfinite(D) else None, "D <= optimal cost"))
    reg = (solution.get("plan") or {}).get("reg")
    if reg is not None:
        checks.append(Check.info("entropic_bias_bound", float(reg) * min(entropy(a), entropy(b)),
                                 "min(H(a), H(b)) / gamma in cost units: bound on the entropic optimum's bias"))
    return Certificate(checks)
