"""Independent checks of a fair-cover answer, recomputed from the problem and the solution only.

For a returned set S (``solution.selected``): the indices are distinct elements; f(S)
recomputed from scratch (the union of the covered items' weights, or the clients' best
similarities); f(S) / tau against the threshold the solve asked for (tau, or (1 - eps) tau
with ``--bicriteria``); every group's count against ceil(p_c |S|) and floor(q_c |S|).

Then a lower bound on the size of a fair optimum, the largest of:

* the LP relaxation (min sum x, x in [0, 1]^n, the coverage reaching tau through item (or
  client) variables bounded by the elements covering them, and the proportions as linear
  constraints sum_{i in U_c} x_i >= p_c sum x, <= q_c sum x), rounded up; solved by HiGHS;
* the number of groups with p_c > 1e-9 (each needs an element as soon as |S| >= 1; smaller p_c
  round to a zero minimum count);
* the submodularity bound: for any set T, f(OPT) <= f(T) + the sum of OPT's gains w.r.t. T,
  so if f(T) plus the k largest gains w.r.t. T stays below tau then |OPT| > k (T: the empty
  set and prefixes of S);

and the resulting bound on |S| / |OPT|. For a claim of infeasibility, the reason is re-derived.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.sparse as sp

from optsolve.core.result import Certificate, Check
from optsolve.cover.problems import CoverProblem, fair_sizes, prepare

LP_MAX_NONZEROS = 1_000_000  # the LP bound is skipped above this many constraint-matrix entries
PREFIXES = 40  # prefixes of S the submodularity bound tries
VALUE_RTOL = 1e-9


def set_value(cp: CoverProblem, selected) -> float:
    """f(S) from scratch."""
    rows = cp.M[np.asarray(selected, dtype=np.int64)]
    if cp.kind == "coverage":
        covered = np.unique(rows.indices)
        return float(cp.weights[covered].sum())
    if rows.nnz == 0:
        return 0.0
    return float(rows.max(axis=0).toarray().sum())


def lp_system(cp: CoverProblem, tau: float | None = None):
    """(c, A_ub, b_ub, bounds, n_x) of the LP relaxation ``min sum x`` over x (elements) and
    the item / client variables, in scipy.optimize's form (A_ub v <= b_ub); threshold ``tau``
    (default the problem's)."""
    n, G = cp.n, cp.G
    M = cp.M.tocsc()
    if cp.kind == "coverage":
        used = np.flatnonzero(np.diff(M.indptr) > 0)
        Mu = M[:, used]
        k = used.size
        # y_j <= sum_{i covers j} x_i ; -w'y <= -tau
        link = sp.hstack([-Mu.T, sp.eye(k)])
        reach = sp.hstack([sp.csr_matrix((1, n)), sp.csr_matrix(-cp.weights[used][None, :])])
        extra, b_link = k, np.zeros(k)
    else:
        coo = cp.M.tocoo()
        e = coo.nnz
        # z_e <= x_i for entry e = (i, j); sum_{e in column j} z_e <= 1; -sum sim_e z_e <= -tau
        link = sp.hstack([-sp.csr_matrix((np.ones(e), (np.arange(e), coo.row)), shape=(e, n)), sp.eye(e)])
        col = sp.hstack([sp.csr_matrix((cp.M.shape[1], n)),
                         sp.csr_matrix((np.ones(e), (coo.col, np.arange(e))), shape=(cp.M.shape[1], e))])
        link = sp.vstack([link, col])
        reach = sp.hstack([sp.csr_matrix((1, n)), sp.csr_matrix(-coo.data[None, :])])
        extra, b_link = e, np.concatenate([np.zeros(e), np.ones(cp.M.shape[1])])
    member = sp.csr_matrix((np.ones(n), (cp.groups, np.arange(n))), shape=(G, n))
    ones = sp.csr_matrix(np.ones((G, n)))
    lower = sp.diags(cp.p) @ ones - member  # p_c sum x - sum_{U_c} x <= 0
    upper = member - sp.diags(cp.q) @ ones  # sum_{U_c} x - q_c sum x <= 0
    fair = sp.hstack([sp.vstack([lower, upper]), sp.csr_matrix((2 * G, extra))])
    A = sp.vstack([link, reach, fair], format="csr")
    b = np.concatenate([b_link, [-(cp.tau if tau is None else tau)], np.zeros(2 * G)])
    c = np.concatenate([np.ones(n), np.zeros(extra)])
    bounds = [(0.0, 1.0)] * (n + extra)
    return c, A, b, bounds, n


def lp_bound(cp: CoverProblem) -> tuple[float | None, str]:
    """ceil of the LP relaxation's optimum (a lower bound on |OPT|), or None with the reason."""
    from scipy.optimize import linprog

    size = cp.M.nnz * (1 if cp.kind == "coverage" else 3) + 2 * cp.G * cp.n
    if size > LP_MAX_NONZEROS:
        return None, f"skipped: about {size} LP matrix entries (limit {LP_MAX_NONZEROS})"
    c, A, b, bounds, _ = lp_system(cp)
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs")
    if res.status == 2:
        return math.inf, "LP infeasible: no fractional fair cover reaches tau"
    if res.status != 0:
        return None, f"LP not solved ({res.message})"
    return float(math.ceil(res.fun - 1e-6)), f"LP relaxation {res.fun:.6g}"


def _gains(cp: CoverProblem, selected) -> tuple[float, np.ndarray]:
    """f(T) and every element's marginal gain w.r.t. T (own arithmetic: no solver state)."""
    rows = cp.M[np.asarray(selected, dtype=np.int64)]
    if cp.kind == "coverage":
        left = cp.weights.copy()
        left[np.unique(rows.indices)] = 0.0
        return float(cp.weights.sum() - left.sum()), np.asarray(cp.M @ left).ravel()
    best = rows.max(axis=0).toarray().ravel() if rows.nnz else np.zeros(cp.M.shape[1])
    coo = cp.M.tocoo()
    gain = np.bincount(coo.row, weights=np.maximum(coo.data - best[coo.col], 0.0), minlength=cp.n)
    return float(best.sum()), gain


def submodularity_bound(cp: CoverProblem, selected) -> int:
    """The largest k + 1 such that some prefix T of S has f(T) + (top k gains w.r.t. T) < tau."""
    S = list(selected)
    cuts = sorted(set(np.linspace(0, len(S), num=min(PREFIXES, len(S) + 1)).astype(int).tolist()))
    best = 0
    for t in cuts:
        value, g = _gains(cp, S[:t])
        top = np.cumsum(np.sort(g)[::-1])
        need = cp.tau - value
        if need <= VALUE_RTOL * abs(cp.tau):  # T reaches tau (to rounding): no bound from it
            continue
        k = int(np.searchsorted(top, need * (1 - 1e-12), side="left"))  # top[k-1] < need <= top[k]
        best = max(best, k + 1 if k < top.size else cp.n + 1)
    return best


def lower_bounds(cp: CoverProblem, selected) -> dict:
    groups_bound = int(np.count_nonzero(cp.p > 1e-9))  # ceil(p_c m - 1e-9) >= 1 for every m >= 1
    lp, lp_note = lp_bound(cp)
    sub = submodularity_bound(cp, selected)
    out = {"groups": groups_bound, "submodularity": sub, "lp": lp, "lp_note": lp_note}
    candidates = {"groups": groups_bound, "submodularity": sub}
    if lp is not None and math.isfinite(lp):
        candidates["lp"] = int(lp)
    which = max(candidates, key=lambda k: candidates[k])
    out["best"], out["which"] = max(1, candidates[which]), which
    return out


def check(problem, solution: dict, *, method: str | None, objective, settings: dict) -> Certificate:
    settings = settings or {}
    cp = prepare(problem, balance=settings.get("balance"), tau=settings.get("tau"),
                 tau_frac=settings.get("tau_frac"))
    if solution.get("certificate_kind") == "infeasible":
        return Certificate(infeasibility_checks(cp))
    raw = solution.get("selected")
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        return Certificate([Check("selected_indices", None, None, False,
                                  "solution.selected must be a list of element indices")])
    S = np.asarray(raw, dtype=np.int64)
    valid = bool(S.size and S.min() >= 0 and S.max() < cp.n and np.unique(S).size == S.size)
    checks = [Check("selected_indices", int(S.size), None, valid,
                    "distinct element indices in range" if valid else "duplicate or out-of-range indices")]
    if not valid:
        return Certificate(checks)
    f = set_value(cp, S)
    eps = float(settings.get("eps") or 0.1)
    need = (1 - eps) * cp.tau if settings.get("bicriteria") else cp.tau
    checks.append(Check.at_most("threshold_shortfall", max(0.0, need - f), VALUE_RTOL * max(1.0, cp.tau),
                                f"f(S) = {f:.10g} against {'(1 - eps) tau' if settings.get('bicriteria') else 'tau'}"
                                f" = {need:.10g}"))
    checks.append(Check.info("f_over_tau", f / cp.tau))
    counts = np.bincount(cp.groups[S], minlength=cp.G)
    m = S.size
    lo, hi = np.ceil(cp.p * m - 1e-9), np.floor(cp.q * m + 1e-9)
    short = int(max(0.0, (lo - counts).max(), (counts - hi).max()))
    note = "largest count outside [ceil(p_c |S|), floor(q_c |S|)] over the groups"
    if method == "unfair-greedy":  # the baseline ignores the proportions: reported, not required
        checks.append(Check.info("fairness_excess", short, note + " (unfair-greedy: not required)"))
    else:
        checks.append(Check.at_most("fairness_excess", short, 0.0, note))
    checks.append(Check.info("group_counts", counts.tolist()))
    if objective is not None:
        checks.append(Check.at_most("objective_matches", abs(float(objective) - m), 0.0, "objective = |S|"))
    bounds = lower_bounds(cp, S)
    checks.append(Check.info("lower_bound_opt", bounds["best"], f"from the {bounds['which']} bound; lp: "
                             f"{bounds['lp_note']}; groups with p > 0: {bounds['groups']}; submodularity: "
                             f"{bounds['submodularity']}"))
    checks.append(Check.info("size_over_opt_at_most", m / bounds["best"], "|S| / lower_bound_opt"))
    return Certificate(checks)


def infeasibility_checks(cp: CoverProblem) -> list[Check]:
    """A claim that no fair set reaches tau, re-derived: the proportions' sums, f(U) against
    tau, and the set sizes that admit fair counts."""
    reasons = []
    if cp.p.sum() > 1 + 1e-12:
        reasons.append("sum p > 1")
    if cp.q.sum() < 1 - 1e-12:
        reasons.append("sum q < 1")
    f_all = set_value(cp, np.arange(cp.n))
    if cp.tau > f_all * (1 + 1e-12):
        reasons.append(f"tau > f(U) = {f_all:.6g}")
    ok = fair_sizes(cp.group_sizes(), cp.p, cp.q, cp.n)
    if not ok.any():
        reasons.append("no size admits fair counts")
    else:
        largest = int(np.flatnonzero(ok).max())
        if cp.kind == "coverage":  # f({i}), row by row
            single = np.asarray((cp.M != 0).astype(float) @ cp.weights).ravel()
        else:
            single = np.asarray(cp.M.sum(axis=1)).ravel()
        if np.sort(single)[::-1][:largest].sum() < cp.tau * (1 - 1e-12):
            reasons.append(f"fair sets have at most {largest} elements, whose singleton values cannot reach tau")
    if not reasons:
        lp, note = lp_bound(cp)
        if lp == math.inf:
            reasons.append(note)
    return [Check("infeasibility_reason", "; ".join(reasons) or None, None, bool(reasons),
                  "re-derived from the problem")]
