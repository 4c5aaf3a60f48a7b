"""Independent checks of a fair-cover answer, recomputed from the problem and the solution only.

What is judged comes from :data:`LIMITS` (the threshold, the proportions, the bicriteria
shortfall, whether fairness is required, the rounding tolerance): the solver passes its own
options, ``optsolve verify`` its options, else the problem file's values, else the defaults. The
document's method and settings are never read: a claim solved with a looser setting fails
unless verify is given that setting.

For a returned set S (``solution.selected``): the indices are distinct elements; f(S)
recomputed from scratch (the union of the covered items' weights, or the clients' best
similarities); f(S) against tau (or (1 - eps) tau with ``bicriteria``) within ``value_rtol``
times max(tau, f(U)); every group's count against ceil(p_c |S|) and floor(q_c |S|); the
objective against |S|.

Then, for information, a lower bound on the size of a fair optimum, the largest of:

* the LP relaxation (min sum x, x in [0, 1]^n, the coverage reaching tau through item (or
  client) variables bounded by the elements covering them, and the proportions as linear
  constraints sum_{i in U_c} x_i >= p_c sum x, <= q_c sum x), rounded up; solved by HiGHS;
* the number of groups with p_c > 1e-9 (each needs an element as soon as |S| >= 1; smaller p_c
  round to a zero minimum count);
* the submodularity bound: for any set T, f(OPT) <= f(T) + the sum of OPT's gains w.r.t. T,
  so if f(T) plus the k largest gains w.r.t. T stays below tau then |OPT| > k (T: the empty
  set and prefixes of S);

and the resulting bound on |S| / |OPT|. A claim of infeasibility is re-derived from the problem
(:func:`infeasibility_checks`), whatever the solution says.
"""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from optsolve.core.errors import ParameterError
from optsolve.core.result import Certificate, Check, Limit
from optsolve.cover.problems import CoverProblem, fair_sizes, file_threshold, function_of, prepare

LP_MAX_NONZEROS = 1_000_000  # the LP bound is skipped above this many constraint-matrix entries
LP_TIME_LIMIT = 10.0  # seconds HiGHS may spend on the LP bound (information, not a check)
LP_SETUP_S_PER_ENTRY = 2e-6  # time kept under a deadline for building the LP and handing it to HiGHS
EXACT_MAX_ENTRIES = 20_000  # an infeasibility claim is re-derived by the exact MILP up to this size
EXACT_TIME_LIMIT = 10.0  # seconds the exact re-derivation may take
PREFIXES = 40  # prefixes of S the submodularity bound tries
BOUND_MIN_S = 2.0  # the lower bounds may take this long however short the solve (a small LP solves in it)
BOUND_SHARE = 0.25  # ... and, when a solver certifies its answer, this share of its solve's time
BOUND_RTOL = 1e-9  # a prefix within this of tau gives no submodularity bound (its shortfall is rounding)
VALUE_RTOL = 1e-9
SMALLEST_COEF = 1e-8  # nonzero coefficients of the LP's threshold row are raised to this (a relaxation)

LIMITS = (
    Limit("tau", None, "smaller", "the threshold f(S) >= tau; unset: the file's tau, or its tau_frac times f(U)"),
    Limit("tau_frac", None, "smaller", "the threshold as a fraction of f(U); unset: the file's"),
    Limit("balance", None, "larger",
          "DELTA: the proportions p_c = (1 - DELTA)/G, q_c = (1 + DELTA)/G; unset: the file's p and q or balance"),
    Limit("eps", 0.1, "larger", "with bicriteria, the accepted shortfall: f(S) >= (1 - eps) tau"),
    Limit("bicriteria", False, "larger", "accept f(S) >= (1 - eps) tau instead of tau"),
    Limit("unfair", False, "larger", "the problem without proportions (unfair-greedy's): fairness reported, "
          "not required"),
    Limit("value_rtol", VALUE_RTOL, "larger",
          "rounding tolerance of f(S) >= tau (and of f(U) < tau for infeasibility), relative to max(tau, f(U))"),
)
# Cover's "optimal" is a fair set reaching the threshold (the methods approximate the smallest);
# "infeasible" is re-derived from the problem.
CLAIMS = ("optimal", "infeasible")


def set_value(cp: CoverProblem, selected) -> float:
    """f(S) from scratch."""
    rows = cp.M[np.asarray(selected, dtype=np.int64)]
    if cp.kind == "coverage":
        covered = np.zeros(cp.M.shape[1], dtype=bool)  # M's columns are at most a few per entry
        covered[rows.indices] = True
        return float(cp.weights[covered].sum())
    if rows.nnz == 0:
        return 0.0
    return float(rows.max(axis=0).toarray().sum())


def lp_system(cp: CoverProblem, tau: float | None = None):
    """(c, A_ub, b_ub, bounds, n_x) of the LP relaxation ``min sum x`` over x (elements), the item /
    client variables and t = sum x, in scipy.optimize's form (A_ub v <= b_ub); threshold ``tau``
    (default the problem's).

    The threshold row is written relative to tau, ``sum_j min(v_j / tau, 1) y_j >= 1``, with nonzero
    coefficients at least SMALLEST_COEF: a value reaching tau alone does so capped at 1 (for 0/1
    choices the same sets reach tau), and raising a tiny coefficient only relaxes the row, so the
    optimum stays a lower bound and infeasibility a proof, whatever the scale of the values
    (HiGHS treats coefficients below 1e-9 as zero)."""
    n, G = cp.n, cp.G
    M = cp.M.tocsc()
    tau = cp.tau if tau is None else tau
    if cp.kind == "coverage":
        used = np.flatnonzero(np.diff(M.indptr) > 0)
        Mu = M[:, used]
        k = used.size
        coef = _row_coefficients(cp.weights[used], tau)
        # y_j <= sum_{i covers j} x_i ; -w'y <= -tau
        link = sp.hstack([-Mu.T, sp.eye(k), sp.csr_matrix((k, 1))])
        reach = sp.hstack([sp.csr_matrix((1, n)), sp.csr_matrix(-coef[None, :]), sp.csr_matrix((1, 1))])
        extra, b_link = k, np.zeros(k)
    else:
        coo = cp.M.tocoo()
        e = coo.nnz
        clients = cp.M.shape[1]
        coef = _row_coefficients(coo.data, tau)
        # z_e <= x_i for entry e = (i, j); sum_{e in column j} z_e <= 1; -sum sim_e z_e <= -tau
        link = sp.hstack([-sp.csr_matrix((np.ones(e), (np.arange(e), coo.row)), shape=(e, n)), sp.eye(e),
                          sp.csr_matrix((e, 1))])
        col = sp.hstack([sp.csr_matrix((clients, n)),
                         sp.csr_matrix((np.ones(e), (coo.col, np.arange(e))), shape=(clients, e)),
                         sp.csr_matrix((clients, 1))])
        link = sp.vstack([link, col])
        reach = sp.hstack([sp.csr_matrix((1, n)), sp.csr_matrix(-coef[None, :]), sp.csr_matrix((1, 1))])
        extra, b_link = e, np.concatenate([np.zeros(e), np.ones(clients)])
    member = sp.csr_matrix((np.ones(n), (cp.groups, np.arange(n))), shape=(G, n))
    t_col = sp.csr_matrix(np.ones((G, 1)))
    zeros = sp.csr_matrix((G, extra))
    lower = sp.hstack([-member, zeros, sp.diags(cp.p) @ t_col])  # p_c t - sum_{U_c} x <= 0
    upper = sp.hstack([member, zeros, -(sp.diags(cp.q) @ t_col)])  # sum_{U_c} x - q_c t <= 0
    ones = sp.csr_matrix(np.ones((1, n)))
    total = sp.vstack([sp.hstack([ones, sp.csr_matrix((1, extra)), sp.csr_matrix([[-1.0]])]),
                       sp.hstack([-ones, sp.csr_matrix((1, extra)), sp.csr_matrix([[1.0]])])])  # t = sum x
    A = sp.vstack([link, reach, lower, upper, total], format="csr")
    b = np.concatenate([b_link, [-1.0], np.zeros(2 * G + 2)])
    c = np.concatenate([np.ones(n), np.zeros(extra + 1)])
    bounds = [(0.0, 1.0)] * (n + extra) + [(0.0, float(n))]
    return c, A, b, bounds, n


def _row_coefficients(values: np.ndarray, tau: float) -> np.ndarray:
    """min(v / tau, 1), nonzero ones raised to at least SMALLEST_COEF (see :func:`lp_system`)."""
    with np.errstate(over="ignore"):
        coef = np.minimum(np.asarray(values, dtype=float) / tau, 1.0)
    return np.where(coef > 0, np.maximum(coef, SMALLEST_COEF), 0.0)


def lp_entries(cp: CoverProblem) -> int:
    """About how many constraint-matrix entries :func:`lp_system` has."""
    return int(cp.M.nnz * (2 if cp.kind == "coverage" else 4) + 4 * cp.n + 4 * cp.G + 2)


def _remaining(deadline: float | None) -> float | None:
    return None if deadline is None else deadline - time.perf_counter()


def lp_bound(cp: CoverProblem, deadline: float | None = None, tau: float | None = None) -> tuple[float | None, str]:
    """ceil of the LP relaxation's optimum (a lower bound on |OPT|; ``tau``: the threshold, default
    the problem's), or None with the reason."""
    from scipy.optimize import linprog

    size = lp_entries(cp)
    if size > LP_MAX_NONZEROS:
        return None, f"skipped: about {size} LP matrix entries (limit {LP_MAX_NONZEROS})"
    left = _remaining(deadline)
    allowed = LP_TIME_LIMIT if left is None else min(LP_TIME_LIMIT, left - LP_SETUP_S_PER_ENTRY * size)
    if allowed <= 0:
        return None, "skipped: the time limit leaves no time for it"
    c, A, b, bounds, _ = lp_system(cp, tau)
    options = {"time_limit": allowed}
    res = linprog(c, A_ub=A, b_ub=b, bounds=bounds, method="highs", options=options)
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
        left[rows.indices] = 0.0  # repeated items set twice: no need to make them unique first
        return float(cp.weights.sum() - left.sum()), np.asarray(cp.M @ left).ravel()
    best = rows.max(axis=0).toarray().ravel() if rows.nnz else np.zeros(cp.M.shape[1])
    coo = cp.M.tocoo()
    gain = np.bincount(coo.row, weights=np.maximum(coo.data - best[coo.col], 0.0), minlength=cp.n)
    return float(best.sum()), gain


def submodularity_bound(cp: CoverProblem, selected, deadline: float | None = None) -> tuple[int, int]:
    """The largest k + 1 such that some prefix T of S has f(T) + (top k gains w.r.t. T) < tau, and
    how many prefixes were tried (the empty one always, the others until ``deadline``)."""
    S = list(selected)
    cuts = sorted(set(np.linspace(0, len(S), num=min(PREFIXES, len(S) + 1)).astype(int).tolist()))
    best = tried = 0
    for t in cuts:
        left = _remaining(deadline)
        if t and left is not None and left <= 0:
            break
        tried += 1
        value, g = _gains(cp, S[:t])
        top = np.cumsum(np.sort(g)[::-1])
        need = cp.tau - value
        if need <= BOUND_RTOL * abs(cp.tau):  # T reaches tau (to rounding): no bound from it
            continue
        k = int(np.searchsorted(top, need * (1 - 1e-12), side="left"))  # top[k-1] < need <= top[k]
        best = max(best, k + 1 if k < top.size else cp.n + 1)
    return best, tried


def lower_bounds(cp: CoverProblem, selected, deadline: float | None = None, seconds: float | None = None) -> dict:
    """The lower bounds on |OPT| (see the module), within ``deadline`` and, given ``seconds``, within
    that many seconds from now: the group count and the empty prefix's submodularity bound always,
    the other prefixes and the LP relaxation as the time allows."""
    if seconds is not None:
        own = time.perf_counter() + seconds
        deadline = own if deadline is None else min(deadline, own)
    groups_bound = int(np.count_nonzero(cp.p > 1e-9))  # ceil(p_c m - 1e-9) >= 1 for every m >= 1
    sub, tried = submodularity_bound(cp, selected, deadline)
    lp, lp_note = lp_bound(cp, deadline)
    out = {"groups": groups_bound, "submodularity": sub, "lp": lp, "lp_note": lp_note, "prefixes": tried}
    candidates = {"groups": groups_bound, "submodularity": sub}
    if lp is not None and math.isfinite(lp):
        candidates["lp"] = int(lp)
    which = max(candidates, key=lambda k: candidates[k])
    out["best"], out["which"] = max(1, candidates[which]), which
    return out


def resolve_limits(limits: dict | None) -> dict:
    """Every limit of :data:`LIMITS`: the given values, the defaults for the rest; out of range: an error
    naming the option."""
    out = {lim.name: lim.default for lim in LIMITS}
    out.update({k: v for k, v in (limits or {}).items() if k in out and v is not None})

    def number(name, ok, expected):
        v = out[name]
        if v is None:
            return
        try:
            x = float(v)
        except (TypeError, ValueError):
            x = math.nan
        if isinstance(v, bool) or not (math.isfinite(x) and ok(x)):
            raise ParameterError(f"The '--{name.replace('_', '-')}' option must be {expected}; got {v!r}.")
        out[name] = x

    number("tau", lambda x: x > 0, "a positive number")
    number("tau_frac", lambda x: 0 < x <= 1, "a number in (0, 1]")
    number("balance", lambda x: 0 <= x <= 1, "a number in [0, 1]")
    number("eps", lambda x: 0 < x < 1, "a number in (0, 1)")
    number("value_rtol", lambda x: 0 <= x < 1, "a number in [0, 1)")
    for flag in ("bicriteria", "unfair"):
        out[flag] = bool(out[flag])
    return out


def limits_from_problem(problem) -> dict:
    """The limits the problem file sets: its balance, and its threshold (tau; tau_frac and the
    absolute tau it gives when the file sets a fraction)."""
    tau, tau_frac = file_threshold(problem)
    out = {"tau": tau, "tau_frac": tau_frac}
    if "balance" in problem and "p" not in problem:
        out["balance"] = float(problem["balance"])
    return out


def _threshold(problem, lim: dict) -> tuple[float | None, float | None]:
    """(tau, tau_frac) to judge by: values that differ from the file's were given as options and take
    precedence (the stricter when both were); otherwise the file's own threshold."""
    file_tau, file_frac = file_threshold(problem)
    t = lim["tau"] if lim["tau"] is not None and lim["tau"] != file_tau else None
    fr = lim["tau_frac"] if lim["tau_frac"] is not None and lim["tau_frac"] != file_frac else None
    if t is not None and fr is not None:
        _, _, _, f_all = function_of(problem)
        return max(t, fr * f_all), None
    if t is not None or fr is not None:
        return t, fr
    return None, None  # the file's (prepare reads it)


def check(problem, solution: dict, *, method: str | None = None, objective=None, settings: dict | None = None,
          limits: dict | None = None, status: str | None = None, deadline: float | None = None,
          bound_seconds: float | None = None, **extra) -> Certificate:
    """The certificate of ``solution`` for ``problem``, judged against ``limits`` (see :data:`LIMITS`).

    ``settings`` and ``method`` (the document's, untrusted) are not used: the limits decide the
    threshold, the proportions and whether they are required; the claimed ``status`` decides
    whether a set or the problem's infeasibility is checked. ``deadline`` (a perf_counter time)
    cuts the lower bounds on the optimum short, never a check; so does ``bound_seconds``, the time
    the whole certificate may take, at least BOUND_MIN_S (a solver passes BOUND_SHARE of its solve's
    time, so that its check costs less than the solve).
    """
    started = time.perf_counter()
    lim = resolve_limits(limits)
    tau, tau_frac = _threshold(problem, lim)
    cp = prepare(problem, balance=lim["balance"], tau=tau, tau_frac=tau_frac)
    if status == "infeasible":
        return Certificate(infeasibility_checks(cp, lim, deadline))
    if not isinstance(solution, dict):
        solution = {}
    raw = solution.get("selected")
    expected = f"a list of distinct element indices in 0..{cp.n - 1}"
    if not isinstance(raw, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in raw):
        what = ("the solution holds no set (an infeasibility certificate)"
                if solution.get("certificate_kind") == "infeasible" else "solution.selected is not a list of integers")
        return Certificate([Check.require("selected_indices", None, False, expected, what)])
    valid = all(0 <= i < cp.n for i in raw) and len(set(raw)) == len(raw)
    checks = [Check.require("selected_indices", len(raw), valid, expected,
                            "" if valid else "duplicate or out-of-range indices")]
    if not valid:
        return Certificate(checks)
    S = np.asarray(raw, dtype=np.int64)
    m = int(S.size)
    f = set_value(cp, S) if m else 0.0
    need = (1 - lim["eps"]) * cp.tau if lim["bicriteria"] else cp.tau
    tol = lim["value_rtol"] * max(cp.tau, cp.f_all)
    checks.append(Check.at_most("threshold_shortfall", max(0.0, need - f), tol,
                                f"f(S) = {f:.10g} against {'(1 - eps) tau' if lim['bicriteria'] else 'tau'} = "
                                f"{need:.10g}; limit: value_rtol times max(tau, f(U))"))
    checks.append(Check.info("f_over_tau", f / cp.tau))
    counts = np.bincount(cp.groups[S], minlength=cp.G)
    lo, hi = np.ceil(cp.p * m - 1e-9), np.floor(cp.q * m + 1e-9)
    short = int(max(0.0, (lo - counts).max(initial=0.0), (counts - hi).max(initial=0.0)))
    note = "largest count outside [ceil(p_c |S|), floor(q_c |S|)] over the groups"
    if lim["unfair"]:  # the problem without proportions (unfair-greedy's): reported, not required
        checks.append(Check.info("fairness_excess", short, note + " (unfair: not required)"))
    else:
        checks.append(Check.at_most("fairness_excess", short, 0.0, note))
    recount = cp.counts_by_label(counts)
    checks.append(Check.info("group_counts", recount))
    if "group_counts" in solution:  # a reported count is a claim: it must be the set's
        same = _plain(solution["group_counts"]) == _plain(recount)
        checks.append(Check.require("group_counts_match", None if same else str(solution["group_counts"])[:200],
                                    same, "the counts of the selected set", "the solution's group_counts"))
    same = (isinstance(objective, (int, float)) and not isinstance(objective, bool) and math.isfinite(objective)
            and float(objective) == m)
    checks.append(Check.require("objective_matches", objective, same, f"|S| = {m}", "the objective is the set's size"))
    seconds = None if bound_seconds is None else max(BOUND_MIN_S, bound_seconds) - (time.perf_counter() - started)
    bounds = lower_bounds(cp, S, deadline, seconds)
    checks.append(Check.info("lower_bound_opt", bounds["best"], f"from the {bounds['which']} bound; lp: "
                             f"{bounds['lp_note']}; groups with p > 0: {bounds['groups']}; submodularity: "
                             f"{bounds['submodularity']} ({bounds['prefixes']} prefixes of S)"))
    if m:
        checks.append(Check.info("size_over_opt_at_most", m / bounds["best"], "|S| / lower_bound_opt"))
    return Certificate(checks)


def infeasibility_checks(cp: CoverProblem, lim: dict | None = None, deadline: float | None = None) -> list[Check]:
    """A claim that no fair set (no set at all with ``unfair``) reaches tau, re-derived from the
    problem: the proportions' sums, f(U) against tau, the set sizes that admit fair counts, the
    singleton values of the largest fair size, the LP relaxation, and on small instances the exact
    MILP. A set counts as reaching tau within the value_rtol tolerance of an optimal claim."""
    lim = resolve_limits(lim)
    f_all = set_value(cp, np.arange(cp.n))
    reach = cp.tau - lim["value_rtol"] * max(cp.tau, f_all)  # a set reaching this passes the threshold check
    reasons = []
    if f_all < reach:
        reasons.append(f"tau = {cp.tau:.6g} > f(U) = {f_all:.6g}")
    if not lim["unfair"] and not reasons:
        if cp.p_sum > 1 + 1e-12:
            reasons.append(f"the lower proportions sum to {cp.p_sum:.6g} > 1")
        if cp.q_sum < 1 - 1e-12:
            reasons.append(f"the upper proportions sum to {cp.q_sum:.6g} < 1")
        ok = fair_sizes(cp.group_sizes(), cp.p, cp.q, cp.n)
        if not ok.any():
            reasons.append("no set size admits fair counts")
        else:
            largest = int(np.flatnonzero(ok).max())
            if cp.kind == "coverage":  # f({i}), row by row
                single = np.asarray((cp.M != 0).astype(float) @ cp.weights).ravel()
            else:
                single = np.asarray(cp.M.sum(axis=1)).ravel()
            if np.sort(single)[::-1][:largest].sum() < reach:
                reasons.append(f"fair sets have at most {largest} elements, whose singleton values cannot reach tau")
        if not reasons:
            lp, note = lp_bound(cp, deadline, tau=reach)
            if lp == math.inf:
                reasons.append(note)
            elif lp_entries(cp) <= EXACT_MAX_ENTRIES:
                proof = _milp_proof(cp, reach, deadline)
                if proof:
                    reasons.append(proof)
    return [Check.require("infeasibility_reason", "; ".join(reasons) or None, bool(reasons),
                          "a reason no fair set reaches tau, re-derived from the problem",
                          "" if reasons else "none found: the problem may be feasible")]


def _milp_proof(cp: CoverProblem, tau: float, deadline: float | None) -> str | None:
    """HiGHS's proof that no fair set reaches ``tau`` (the exact MILP), within the time left."""
    from scipy.optimize import Bounds, LinearConstraint, milp

    left = _remaining(deadline)
    limit = EXACT_TIME_LIMIT if left is None else min(EXACT_TIME_LIMIT, left)
    if limit <= 0:
        return None
    c, A, b, bounds, n = lp_system(cp, tau)
    lo, hi = np.array([bd[0] for bd in bounds]), np.array([bd[1] for bd in bounds])
    integrality = np.concatenate([np.ones(n), np.zeros(c.size - n)])
    res = milp(c, constraints=LinearConstraint(A, -np.inf, b), integrality=integrality, bounds=Bounds(lo, hi),
               options={"disp": False, "time_limit": float(limit)})
    return "the exact MILP (HiGHS) has no solution" if res.status == 2 else None


def _plain(value):
    """A JSON-like value with numpy scalars and arrays turned into Python ones, for comparison."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value
