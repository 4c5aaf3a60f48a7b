"""Independent checks of an OT solution, recomputed from the problem and the solution only.

The plan is rebuilt from the solution document: a sparse list of entries
(``plan.format == "coo"``), or the rounded Gibbs plan of entropic methods
(``plan.format == "gibbs_rounded"``): ``K = exp((f_i + g_j - C_ij)/reg)`` plus the
rank-one term ``err_a err_b^T / |err_a|_1`` with ``err_a = a - K 1``,
``err_b = b - K^T 1`` (Altschuler, Weed and Rigollet 2017).

Checks: L1 marginal error and negative mass of the plan; its cost ``U = <C, P>``
against the reported objective; an LP dual lower bound ``D`` from the potentials by
c-transforms (``g~_j = min_i C_ij - f_i`` makes ``(f, g~)`` dual feasible for any f,
and ``f~_i = min_j C_ij - g~_j >= f_i`` keeps it so: ``D = <f~, a> + <g~, b>`` is a
valid lower bound) against the reported ``dual_bound``; weak duality ``D <= U`` up to the
plan's own infeasibility; the certified gap ``U - D``. An explicit (``coo``) plan claimed
optimal is an LP optimum: the reported pair (f, g) must also be dual feasible and
complementary to the plan, and the gap must vanish.

Every tolerance is a :data:`LIMITS` entry (the ``optsolve ot`` option of the same name), and
every comparison of costs has a relative part and an absolute floor of ``objective_atol``
times the cost scale ``max C`` (1 when C = 0), so costs of any magnitude and a zero optimum
are judged alike. What was solved (method, gamma, reg, tol) is reported, never trusted:
which checks apply depends on the plan's format and the claimed status only.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass

import numpy as np

from optsolve.core.backend import exp_flush
from optsolve.core.result import Certificate, Check, Limit, solution_vector
from optsolve.ot.certificate.qualifier import qualifier, qualifier_check  # noqa: F401  (verify and judge read them here)
from optsolve.ot.problems import MASS_RTOL, auto_block, is_grid, prepare

FEAS_TOL = 1e-8
OBJECTIVE_RTOL = 1e-9
OBJECTIVE_ATOL = 1e-12
DEFAULT_TARGET_GAP = 1e-3  # a claimed target gap without its limit is judged at the solvers' default
LP_TOL = 1e-9

LIMITS = (
    Limit("feas_tol", FEAS_TOL, "larger",
          "L1 marginal error plus negative mass of the plan, per unit mass"),
    Limit("objective_rtol", OBJECTIVE_RTOL, "larger",
          "relative tolerance between reported and recomputed costs (objective, dual bound)"),
    Limit("objective_atol", OBJECTIVE_ATOL, "larger",
          "absolute floor of every cost comparison, as a fraction of max C (costs per unit mass)"),
    Limit("lp_tol", LP_TOL, "larger",
          "an explicit (coo) plan claimed optimal with no target gap: dual infeasibility and complementary "
          "slackness relative to max C, and the gap relative to the cost"),
    Limit("target_gap", None, "larger",
          "the certified gap U - D an optimal claim must meet, relative to |U|, or absolute at objective_atol "
          "max C where target_gap |U| is below that (a zero optimum, costs that cancel); unset: the default "
          "target (1e-3) for a document that claims a target gap, else reported, not judged"),
    Limit("normalize", False, "larger",
          "judge the problem with a and b scaled each to unit mass (required when their sums differ)"),
)
# A balanced transport problem with finite costs is feasible (the product plan a b^T) and bounded.
CLAIMS = ("optimal",)

def target_gap_limit(target: float, U: float, scale: float, atol: float = OBJECTIVE_ATOL) -> tuple[float, str]:
    """The most U - D may be, in cost units, under the relative target ``target``: ``target |U|``
    ("relative"), or where that is below float64 rounding of the costs, ``atol max C`` ("absolute").

    ``scale`` is max C (1 when C = 0); ``atol`` the certificate's ``objective_atol``, whose default is
    some 4,500 float64 epsilons of a unit-mass cost: below it, U - D is rounding, not a gap.
    """
    relative, absolute = target * abs(U), atol * scale
    return (relative, "relative") if relative >= absolute else (absolute, "absolute")


def target_measure(gap: float, U: float, scale: float, target: float, atol: float = OBJECTIVE_ATOL) -> float:
    """``gap`` (U - D) as a multiple of the target: at most ``target`` exactly when ``gap`` is within
    :func:`target_gap_limit` (the measure the solvers' stopping tests compare to the target)."""
    return gap * target / target_gap_limit(target, U, scale, atol)[0]


def _indices(values, size: int, what: str) -> np.ndarray:
    idx = np.asarray(values)
    if idx.dtype.kind == "f":
        if not np.all(np.isfinite(idx)) or np.any(idx != np.round(idx)):
            raise ValueError(f"plan {what!r} holds entries that are not integers")
    elif idx.size and idx.dtype.kind not in "iu":
        raise ValueError(f"plan {what!r} must hold integers; found {idx.dtype} values")
    idx = idx.astype(np.int64).ravel()
    if idx.size and (idx.min() < 0 or idx.max() >= size):
        raise ValueError(f"plan {what!r} holds indices outside [0, {size})")
    return idx


def _coo_plan(spec: dict, n: int, m: int):
    import scipy.sparse as sp

    row = _indices(spec["row"], n, "row")
    col = _indices(spec["col"], m, "col")
    val = np.asarray(spec["value"], dtype=np.float64).ravel()
    if not (row.shape == col.shape == val.shape):
        raise ValueError("plan 'row', 'col' and 'value' differ in length")
    return sp.csc_matrix((val, (row, col)), shape=(n, m))


def _plan_reg(spec: dict) -> float:
    reg = float(spec["reg"])
    if not (reg > 0 and math.isfinite(reg)):
        raise ValueError(f"plan 'reg' must be a positive number; found {spec['reg']!r}")
    return reg


def _gibbs(f, g, Cb, reg, xp):
    """exp((f_i + g_j - C_ij) / reg) for a block of C, flushed (exp_flush), in one new array."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = xp.add(f[:, None], g[None, :])
        out -= Cb
        out /= reg
        return exp_flush(xp, out, out=out)


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
    reg = _plan_reg(spec)
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


def _measure_block(Cb, Pb, exact: bool, fb=None, gb=None, ia=None, ib=None, xp=np):
    """One block's part of :func:`_block_measures`: (row sums, column sums, cost, negative mass, max C,
    dual infeasibility, complementary slackness), the last two with ``exact`` only, from the block's
    potentials ``fb``, ``gb`` and supports ``ia``, ``ib``."""
    neg, cmax, infeasible, cs = 0.0, 0.0, 0.0, 0.0
    if Pb.size:
        neg = -float(xp.minimum(Pb, 0.0).sum()) if float(Pb.min()) < 0 else 0.0
        cmax = float(Cb.max())
    if exact:
        with np.errstate(invalid="ignore"):
            slack = Cb[ia][:, ib] - fb[ia][:, None] - gb[ib][None, :]
        if slack.size:
            infeasible = float(-xp.nanmin(slack)) if bool(xp.all(xp.isfinite(slack))) else math.inf
            cs = float(xp.abs(Pb[ia][:, ib] * slack).sum())
    return Pb.sum(1), Pb.sum(0), float(xp.einsum("ij,ij->", Cb, Pb)), neg, cmax, infeasible, cs


def _matrix_on_host(ot, xp) -> bool:
    """A cost matrix in host memory, checked with numpy: passes over row blocks on threads."""
    return xp is np and isinstance(ot.C, np.ndarray)


def _block_measures(ot, solution: dict, f, g, exact: bool, xp=np):
    """Row and column sums, cost, negative mass, max C and, for ``exact``, LP optimality residuals."""
    from optsolve.core.backend import to_numpy

    spec = solution.get("plan")
    if _matrix_on_host(ot, xp) and isinstance(spec, dict) and spec.get("format") == "gibbs_rounded":
        return _gibbs_row_measures(ot, spec, f, g)
    ia, ib = xp.asarray(ot.a > 0), xp.asarray(ot.b > 0)
    fx, gx = xp.asarray(f), xp.asarray(g)
    rows, cols = xp.zeros(ot.n), xp.zeros(ot.m)
    U, neg, cmax = 0.0, 0.0, 0.0
    infeasible, cs = 0.0, 0.0
    for j0, j1, Cb, Pb in plan_blocks(ot, solution, f, g, xp):
        r, c, Ub, negb, cmaxb, infb, csb = _measure_block(Cb, Pb, exact, fx, gx[j0:j1], ia, ib[j0:j1], xp)
        rows += r
        cols[j0:j1] = c
        U, neg, cmax = U + Ub, neg + negb, max(cmax, cmaxb)
        infeasible, cs = max(infeasible, infb), cs + csb
    return to_numpy(rows), to_numpy(cols), U, neg, cmax, infeasible, cs


def _gibbs_row_measures(ot, spec: dict, f, g):
    """:func:`_block_measures` of the rounded Gibbs plan (:func:`plan_blocks`) of a cost matrix in host
    memory: two passes over blocks of rows that stay in cache, on threads (:mod:`optsolve.core.blocks`),
    the plan never stored whole (the first pass sums the Gibbs kernel, the second adds the rank-one
    term and measures)."""
    from optsolve.core.blocks import map_blocks, row_blocks

    reg = _plan_reg(spec)
    C = ot.C
    fz = np.where(np.isnan(f), -np.inf, f)
    gz = np.where(np.isnan(g), -np.inf, g)
    blocks = row_blocks(ot.n, ot.m * C.itemsize)

    def sums(s, e):
        K = _gibbs(fz[s:e], gz, C[s:e], reg, np)
        return K.sum(1), K.sum(0)

    parts = map_blocks(sums, blocks)
    err_a = ot.a - np.concatenate([p[0] for p in parts])
    err_b = ot.b - sum(p[1] for p in parts)
    total = float(err_a.sum())

    def measures(s, e):
        K = _gibbs(fz[s:e], gz, C[s:e], reg, np)
        if total > 0:
            K += np.outer(err_a[s:e], err_b) / total
        return _measure_block(C[s:e], K, False)

    parts = map_blocks(measures, blocks)
    return (np.concatenate([p[0] for p in parts]), sum(p[1] for p in parts), sum(p[2] for p in parts),
            sum(p[3] for p in parts), max(p[4] for p in parts), 0.0, 0.0)


def _grid_measures(ot, solution: dict, f, g, exact: bool, xp=np):
    """:func:`_block_measures` for images on a grid, by separable passes (O(n^1.5)), without the n x n plan.

    The rounded Gibbs plan's sums and cost use log-domain nested sums (:mod:`.kernels`);
    its negative mass is bounded by that of the rank-one term (the Gibbs part is positive), in
    closed form. Dual feasibility is ``max_j g_j - min_i (C_ij - f_i)``, a min-plus pass.
    """
    from optsolve.ot.certificate.kernels import grid_bilinear, grid_gibbs, grid_min_plus

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
        neg = float(-p[p < 0].sum())
        if exact:
            with np.errstate(invalid="ignore"):
                gt = grid_min_plus(np.where(ia, -f, np.inf), C1, C2)
                slack = (g - gt)[ib]
                infeasible = float(np.max(slack, initial=0.0)) if np.all(np.isfinite(slack)) else math.inf
                on = ia[i] & ib[j]
                cs = float(np.abs(p[on] * (Cij[on] - f[i[on]] - g[j[on]])).sum())
        return rows, cols, U, neg, cmax, infeasible, cs
    if fmt != "gibbs_rounded":
        raise ValueError(f"unknown plan format {fmt!r}")
    reg = _plan_reg(spec)
    u = np.where(np.isnan(f), -np.inf, f) / reg
    v = np.where(np.isnan(g), -np.inf, g) / reg
    r, c, U = grid_gibbs(u, v, C1, C2, reg)
    err_a, err_b = a - r, b - c
    total = err_a.sum()
    rows, cols, neg = r, c, 0.0
    if total > 0:
        rows = r + err_a * (err_b.sum() / total)
        cols = c + err_b * (err_a.sum() / total)
        U += grid_bilinear(err_a, err_b, C1, C2) / total
        pa, na = err_a[err_a > 0].sum(), -err_a[err_a < 0].sum()
        pb, nb = err_b[err_b > 0].sum(), -err_b[err_b < 0].sum()
        neg = float(pa * nb + na * pb) / total
    return rows, cols, U, neg, cmax, infeasible, cs


LIFTED_MAX_DIM = 8  # squared Euclidean clouds up to this dimension: c-transforms without the matrix


def _lifted(ot) -> bool:
    """Point clouds with the squared Euclidean cost in low dimension (no matrix, no grid)."""
    return (ot.C is None and ot.grid is None and ot.cost == "sqeuclidean" and ot.x is not None
            and np.asarray(ot.x).shape[1] <= LIFTED_MAX_DIM)


def sq_ctransform(P: np.ndarray, w: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """``min_i |P_i - Q_j|^2 - w_i`` for every row Q_j, without the |P| x |Q| costs: the minimiser is a
    vertex of the convex hull of the lifted points, reached by a walk along its edges
    (:func:`.kernels.sq_ctransform`). The value is recomputed from the points at the minimiser. Equal
    points are taken once (:func:`.kernels.distinct`): of equal P_i the largest w_i, and each distinct
    Q_j answered once; many equal points slow the hull and the k-d tree down."""
    from optsolve.ot.certificate.kernels import distinct, sq_ctransform as transform

    same_p, same_q = distinct(P), distinct(Q)
    if same_p is not None:
        first, label = same_p
        top = np.full(first.size, -np.inf)
        np.maximum.at(top, label, w)
        P, w = P[first], top
    if same_q is None:
        return transform(P, w, Q)
    first, label = same_q
    return transform(P, w, Q[first])[label]


def _first_ctransform(ot, f):
    """f's c-transform min_i (C_ij - f_i) over the supports of a and b (squared Euclidean clouds), or
    None where f is not finite there."""
    ia, ib = ot.a > 0, ot.b > 0
    fs = np.asarray(f[ia], dtype=np.float64)
    if not np.all(np.isfinite(fs)):
        return None
    return sq_ctransform(np.asarray(ot.x, dtype=np.float64)[ia], fs, np.asarray(ot.y, dtype=np.float64)[ib])


def _coo_lifted_measures(ot, solution: dict, f, g, exact: bool, xp=np, first=None):
    """:func:`_block_measures` of an explicit plan on squared Euclidean clouds, from its entries and
    ``first``, f's c-transform (:func:`_first_ctransform`; dual feasibility: max_j g_j - min_i
    (C_ij - f_i)), in O((n + m) log n)."""
    spec = solution["plan"]
    P = _coo_plan(spec, ot.n, ot.m).tocoo()
    i, j, p = P.row, P.col, P.data
    x, y = np.asarray(ot.x, dtype=np.float64), np.asarray(ot.y, dtype=np.float64)
    d = x[i] - y[j]
    Cij = (d * d).sum(1)
    rows = np.bincount(i, weights=p, minlength=ot.n)
    cols = np.bincount(j, weights=p, minlength=ot.m)
    U = float(Cij @ p)
    neg = float(-p[p < 0].sum())
    cmax = ot.max_cost()
    infeasible, cs = 0.0, 0.0
    if exact:
        ia, ib = ot.a > 0, ot.b > 0
        gb = g[ib]
        if first is None or not np.all(np.isfinite(gb)):
            return rows, cols, U, neg, cmax, math.inf, math.inf
        slack = gb - first
        infeasible = float(max(slack.max(initial=0.0), 0.0))
        on = ia[i] & ib[j]
        cs = float(np.abs(p[on] * (Cij[on] - f[i[on]] - g[j[on]])).sum())
    return rows, cols, U, neg, cmax, infeasible, cs


def dual_bound_of(ot, f, xp=np, first=None) -> float:
    """The LP dual bound of f by two c-transforms over the supports; -inf when f is not finite there.

    ``g~ = f^c`` makes (f, g~) feasible; ``f~ = (g~)^c >= f`` keeps it feasible, so
    ``<f~, a> + <g~, b>`` is a lower bound at least as tight as ``<f, a> + <g~, b>``.
    Cost blocks are computed in ``xp`` (numpy, or cupy on a GPU). ``first``: g~ where the caller
    has it already (:func:`_first_ctransform`, squared Euclidean clouds).
    """
    ia, ib = ot.a > 0, ot.b > 0
    fs = f[ia]
    if not np.all(np.isfinite(fs)):
        return -math.inf
    if ot.C is None and ot.grid is not None:  # min-plus passes along each axis
        from optsolve.ot.certificate.kernels import grid_min_plus

        C1, C2 = ot.axis_costs()
        gt = grid_min_plus(np.where(ia, -f, np.inf), C1, C2)
        ft = grid_min_plus(np.where(ib, -gt, np.inf), C1, C2)
        return float(ft[ia] @ ot.a[ia] + gt[ib] @ ot.b[ib])
    if _lifted(ot):  # two c-transforms without the matrix (sq_ctransform)
        gt = _first_ctransform(ot, f) if first is None else first
        ft = sq_ctransform(np.asarray(ot.y, dtype=np.float64)[ib], gt, np.asarray(ot.x, dtype=np.float64)[ia])
        return float(ft @ ot.a[ia] + gt @ ot.b[ib])
    if _matrix_on_host(ot, xp):
        return _dual_bound_rows(ot, f)
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


def _dual_bound_rows(ot, f) -> float:
    """:func:`dual_bound_of` for a cost matrix in host memory (f finite on the support of a): each
    c-transform is one pass over blocks of rows on threads (:mod:`optsolve.core.blocks`)."""
    from optsolve.core.blocks import map_blocks, row_blocks

    ia, ib = ot.a > 0, ot.b > 0
    full = bool(ib.all())
    blocks = row_blocks(ot.n, ot.m * ot.C.itemsize)

    def support(s, e):
        rows = ia[s:e]
        Cb = ot.C[s:e]
        return Cb[rows] if full else Cb[rows][:, ib], f[s:e][rows]

    def column_minima(s, e):
        Cs, fs = support(s, e)
        return (Cs - fs[:, None]).min(0) if Cs.shape[0] else np.full(int(ib.sum()), np.inf)

    gt = np.minimum.reduce(map_blocks(column_minima, blocks))
    ft = np.concatenate(map_blocks(lambda s, e: (support(s, e)[0] - gt[None, :]).min(1), blocks))
    return float(ft @ ot.a[ia] + gt @ ot.b[ib])


def entropy(p: np.ndarray) -> float:
    q = p[p > 0]
    return float(-(q * np.log(q)).sum())


def _namespace(device):
    """cupy when the solution was computed on a GPU and one is usable here, else numpy."""
    if device != "gpu":
        return np
    from optsolve.core.backend import cupy_status, get_namespace

    return get_namespace("gpu") if cupy_status()[0] else np


def resolve(limits: dict | None) -> dict:
    """Every limit of :data:`LIMITS`: the given values, the documented defaults for the rest."""
    out = {lim.name: lim.default for lim in LIMITS}
    out.update({k: v for k, v in (limits or {}).items() if k in out and v is not None})
    for name in ("feas_tol", "objective_rtol", "objective_atol", "lp_tol", "target_gap"):
        if out[name] is not None:
            out[name] = float(out[name])
    out["normalize"] = bool(out["normalize"])
    return out


def _masses_differ(problem) -> float | None:
    """The relative difference of the total masses when it exceeds MASS_RTOL, else None."""
    with np.errstate(over="ignore", invalid="ignore"):
        sa, sb = float(problem["a"].sum()), float(problem["b"].sum())
    diff = abs(sa - sb) / max(sa, sb)
    return diff if diff > MASS_RTOL else None


def _claim_checks(status) -> list[Check]:
    if status in ("infeasible", "unbounded"):
        return [Check.require(f"{status}_certificate", None, False, f"a certificate that the problem is {status}",
                              "a transport problem with equal masses and finite costs is feasible (the product "
                              "plan a b^T) and bounded below by min C: it is never infeasible or unbounded")]
    return []


@dataclass
class _Measures:
    """What the checks compare: the plan's marginals, cost U and negative mass, the dual bound D of f, the
    largest cost, and for an explicit plan its potentials' infeasibility and complementary slackness."""

    a: np.ndarray
    b: np.ndarray
    rows: np.ndarray
    cols: np.ndarray
    U: float
    D: float
    neg: float
    cmax: float
    infeasible: float
    cs: float
    coo: bool  # an explicit plan
    exact: bool  # which claims the LP optimum (no target gap)


def _measure(problem, solution: dict, lim: dict, xp) -> _Measures:
    # point clouds are costed block by block, never as a matrix; a dense C is read in column slices
    ot = prepare(problem, normalize=lim["normalize"], low_memory="C" not in problem and not is_grid(problem))
    if ot.grid is None:
        ot.block = auto_block(ot.n, ot.m, xp=xp)
    f = solution_vector(solution, "f", ot.n)
    g = solution_vector(solution, "g", ot.m)
    spec = solution.get("plan")
    coo = isinstance(spec, dict) and spec.get("format") == "coo"
    measure = _grid_measures if (ot.C is None and ot.grid is not None) else _block_measures
    first = None
    if coo and _lifted(ot):  # f's c-transform serves dual feasibility and the bound alike
        first = _first_ctransform(ot, f)
        measure = functools.partial(_coo_lifted_measures, first=first)
    rows, cols, U, neg, cmax, infeasible, cs = measure(ot, solution, f, g, coo, xp)
    D = dual_bound_of(ot, f, xp, first=first)
    # an explicit plan claims the LP optimum, unless a target gap is claimed: then it claims that
    return _Measures(ot.a, ot.b, rows, cols, U, D, max(neg, 0.0), cmax, infeasible, cs, coo,
                     coo and lim["target_gap"] is None)


def check(problem, solution: dict, *, method: str | None = None, objective=None, settings: dict | None = None,
          limits: dict | None = None, status: str | None = "optimal", **extra) -> Certificate:
    """The certificate of ``solution`` for ``problem``, judged against ``limits`` (see :data:`LIMITS`).

    ``settings`` (the document's, untrusted) picks the device the checks run on, and whether the
    document claims a target gap (``settings.target_gap`` set): such a claim is judged against the
    ``target_gap`` limit, or the default target where that is unset, never the document's value.
    ``method`` is not used: the plan's format, that claim and the claimed ``status`` decide which
    checks apply (an explicit plan without a target claims the LP optimum).
    """
    lim = resolve(limits)
    settings = settings or {}
    claims = _claim_checks(status)
    if not lim["normalize"]:
        diff = _masses_differ(problem)
        if diff is not None:
            return Certificate([Check.require(
                "equal_masses", diff, False, f"relative difference <= {MASS_RTOL:g}",
                "the total masses of 'a' and 'b' differ: the solution can only be of the problem with each scaled "
                "to unit mass; judge it so with --normalize")] + claims)
    if lim["target_gap"] is None and settings.get("target_gap") is not None:
        # the document claims a target gap (which one is not taken from it): judged at the default's
        lim["target_gap"] = DEFAULT_TARGET_GAP
    m = _measure(problem, solution, lim, _namespace(settings.get("device")))
    checks = _value_checks(m, lim, objective, solution.get("dual_bound"))
    checks += _optimality_checks(m, lim, status)
    gap = m.U - m.D if math.isfinite(m.D) else math.inf
    checks.append(Check.info("relative_gap", gap / abs(m.U) if m.U != 0 and math.isfinite(gap) else None,
                             "(U - D) / U: certified distance to the LP optimum"))
    checks.append(Check.info("gap_upper_bound", gap if math.isfinite(gap) else None,
                             "U - D >= true gap, in cost units"))
    checks.append(Check.info("dual_lower_bound", m.D if math.isfinite(m.D) else None, "D <= optimal cost"))
    spec = solution.get("plan")
    reg = spec.get("reg") if isinstance(spec, dict) else None
    if reg is not None:
        checks.append(Check.info("entropic_bias_bound", float(reg) * min(entropy(m.a), entropy(m.b)),
                                 "min(H(a), H(b)) / gamma in cost units: bound on the entropic optimum's bias"))
    return Certificate(checks + claims)


def _value_checks(m: _Measures, lim: dict, objective, dual_bound) -> list[Check]:
    """The plan on the marginals and nonnegative, the reported U and D recomputed, and weak duality."""
    scale = m.cmax if m.cmax > 0 else 1.0
    floor, rtol = lim["objective_atol"] * scale, lim["objective_rtol"]
    marg = float(np.abs(m.rows - m.a).sum() + np.abs(m.cols - m.b).sum())
    checks = [
        Check.at_most("marginal_l1", marg, lim["feas_tol"], "||P 1 - a||_1 + ||P^T 1 - b||_1 (unit mass)"),
        Check.at_most("nonnegativity", m.neg, lim["feas_tol"], "total negative mass of the plan (unit mass)"),
    ]
    for name, recomputed, reported, symbol, what in (
            ("objective_matches", m.U, objective, "U", f"U = <C, P> = {m.U:.12g}"),
            ("dual_bound_matches", m.D, dual_bound, "D", f"D = {m.D:.12g} from c-transforms of f")):
        limit = rtol * abs(recomputed) + floor if math.isfinite(recomputed) else 0.0
        diff = math.inf if reported is None or not math.isfinite(recomputed) else abs(recomputed - float(reported))
        checks.append(Check.at_most(name, diff, limit,
                                    f"|{symbol} - reported| in cost units, {what}; limit objective_rtol |{symbol}| + "
                                    "objective_atol max C"))
    gap = m.U - m.D if math.isfinite(m.D) else math.inf
    # D <= OPT, and a plan off the marginals by e costs at least OPT - e max C
    checks.append(Check.at_most("weak_duality", -gap if math.isfinite(gap) else None,
                                (marg + m.neg) * scale + rtol * abs(m.U) + floor,
                                "D - U: the dual bound may exceed the plan's cost only by the plan's infeasibility"))
    return checks


def _optimality_checks(m: _Measures, lim: dict, status) -> list[Check]:
    """What an optimal claim is judged by: an explicit plan's dual feasibility (and, claiming the LP optimum,
    complementary slackness and the gap within lp_tol), and the gap within a claimed target gap."""
    scale = m.cmax if m.cmax > 0 else 1.0
    floor = lim["objective_atol"] * scale
    optimal = status == "optimal"
    gap = m.U - m.D if math.isfinite(m.D) else math.inf
    checks = []
    # an explicit plan's potentials are feasible when it claims either; complementary slackness is
    # the LP optimum's alone
    lp = [("dual_feasibility", m.infeasible / scale, "max(f_i + g_j - C_ij, 0) / max C", True),
          ("complementary_slackness", m.cs / scale, "sum P_ij |C_ij - f_i - g_j| / max C", m.exact)] if m.coo else []
    for name, value, note, judged in lp:
        checks.append(Check.at_most(name, value, lim["lp_tol"], note) if optimal and judged else
                      Check.info(name, value, f"{note}; not judged: " + (
                          f"status {status!r} claims no optimum" if not optimal else "a target gap is claimed")))
    gap_limits = ([("lp_tol", lim["lp_tol"])] if m.exact else []) + \
        ([("target_gap", lim["target_gap"])] if lim["target_gap"] is not None else [])
    for name, tol in gap_limits:
        if name == "target_gap":
            limit, basis = target_gap_limit(tol, m.U, scale, lim["objective_atol"])
            note = (f"U - D in cost units; limit {basis}: target_gap |U|" if basis == "relative" else
                    f"U - D in cost units; limit absolute: objective_atol max C (target_gap |U| = {tol * abs(m.U):.3g} "
                    "is below float64 rounding of the costs)")
            checks.append(Check.info("target_gap_basis", basis, f"the target gap was judged {basis}ly: U - D <= "
                                     f"{limit:.6g} in cost units"))
        else:
            note = f"U - D in cost units, limit {name} |U| + objective_atol max C"
            limit = tol * abs(m.U) + floor
        checks.append(Check.at_most(f"gap_within_{name}", gap, limit, note) if optimal else
                      Check.info(f"gap_within_{name}", gap, f"{note}; not judged: status {status!r} claims no optimum"))
    return checks
