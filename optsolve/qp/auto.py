"""The default method, ``auto``: the method is picked by the problem's structure, by a fixed rule.

1. **Equality rows only (or no rows; free rows, with both bounds infinite, do not count): one KKT
   solve.** The optimality conditions are the linear system ``[P A'; A 0] [x; y] = [-q; l]``. It
   is solved on the equilibrated problem (Ruiz, as ADMM scales it) with the factor of the
   quasi-definite regularisation ``[P + delta I, A'; A, -delta I]`` (in reduced form where that
   is dense, :mod:`optsolve.qp.reduced`) and iterative refinement (each refinement step is a
   proximal step, so a singular P or dependent rows still converge where the system is
   consistent). The answer is taken where it passes OSQP's termination test; otherwise (an
   inconsistent system: infeasible or unbounded) the problem goes on to rule 3. Where the file's
   convexity check found P's own factor dear (``KKT_CLARABEL_WORK``), Clarabel runs first: its
   supernodal factorisations outrun the KKT solve's one simplicial factorisation there.
2. **A KKT matrix of at most ``PIQP_FIRST_ENTRIES`` stored entries, or of at most
   ``DENSE_ROW_MAX_ENTRIES`` with a row of A holding more than ``DENSE_ROW_SHARE`` of the
   variables and such dense rows at most ``DENSE_ROWS_MAX`` of the variables, or a tolerance of
   ``PIQP_FIRST_EPS`` or tighter: PIQP first.** PIQP's steps each
   factor the KKT matrix; at that size a factorisation is cheap, and a compiled interior-point
   method answers in a few milliseconds where ADMM's Python iterations take several times as
   long. A dense row couples every variable it holds in each ADMM step, and ADMM (osqp's as well)
   then needs hundreds of iterations or more where an interior-point method needs its usual 10 to
   40 (BOYD1, HUESTIS, Q25FV47, portfolio optimisation; one inactive row summing all the variables,
   added to thirteen problems of the generated families and Maros-Meszaros files that ADMM solves,
   slows it 1.2-5.9x on all but the two mpc ones and hands it over on eight); above
   ``DENSE_ROW_MAX_ENTRIES`` PIQP's factorisations are dear, and ADMM's hand-over bounds the loss
   instead. Where A is dense throughout (its rows are many dense ones), ADMM's one factorisation
   wins: on random dense QPs of 200-500 variables PIQP took 2.0-3.2x osqp's time, ADMM 1.1-1.4x.
   Nor where a small matrix's P has a dear factor, as the file's convexity check found it
   (``P_WORK_ADMM``): PIQP would refactor it at every step, ADMM does once. At a tight tolerance
   ADMM's iteration count grows fast while an interior-point method's barely changes. The rule is
   ``FIRST_RULE`` (:func:`first_by_rule`, on :func:`features`, which cost one pass over the stored
   entries; a rule may also name Clarabel). ``bin/bench-qp --default-record`` times every first
   step on the generated families and the Maros-Meszaros files (``docs/qp-default-record.csv``)
   and ``--default-fit`` fits such rules on that table, checked with each family of problems left
   out of the fit: no rule on these features does better there than this one (see
   ``docs/qp-default.md``). A larger problem sent to PIQP by its tolerance is first probed
   (:func:`by_pace`): PIQP set up and run for one step, and where that step is dear, Clarabel
   too; the solver whose steps are faster enough to pay for the probes runs (Clarabel's
   supernodal factorisation is several times faster where the factor fills in: CVXQP*_L); where
   Clarabel's answer fails, PIQP runs next if the time left holds ``PIQP_AFTER_PROBES`` of its
   probes, and where PIQP's fails, Clarabel (:func:`next_tries`, :func:`fits`). Each answer that fails
   the termination test is first finished by polishing (:func:`optsolve.qp.peers.finished`). An
   answer that is not optimal, or a claim that fails its check, goes on to rule 3. A problem rule 2 leaves to
   ADMM, or to PIQP by a dense row, goes to Clarabel first where ADMM's KKT factor would fill in and be dear, as the
   symbolic step counts it before any numeric work (:func:`fills_in`; the step runs where the file's convexity check
   found P's own factor filling in: CVXQP*_L).
3. **Otherwise ADMM, handed over to PIQP once its iterations have cost its setup and
   ``SWITCH_AFTER`` numeric factorisations of its KKT matrix** (a ski-rental rule: an
   interior-point solve costs about a setup and that many factorisations of the same matrix).
   Problems where ADMM converges in few iterations keep its single factorisation; slow ones
   (portfolio optimisation: thousands of iterations) pay at most about twice PIQP's time, the
   deterministic ski-rental bound (Karlin, Manasse, Rudolph and Sleator, "Competitive snoopy
   caching", Algorithmica 1988). From the second termination check on, the run also hands over
   where the pace at which its distance to the tolerances has fallen since the first check
   predicts more time than that cost, or where it has not fallen
   (:func:`optsolve.qp.handover.too_slow`): the ski-rental rule with a prediction, which on the
   runs where PIQP is several times faster (AUG2DCQP, CONT-101/200, portfolio optimisation) hands
   over at the second check; a run whose residuals are still at the scale of the data at the first
   check (:func:`optsolve.qp.handover.far`: BOYD1/2, CONT-101/200/201/300, HUESTIS, UBH1) hands over
   there; to Clarabel instead, at the first check, where ADMM's factorisation was dear and its factor
   fills in (:func:`optsolve.qp.handover.to_clarabel`: CVXQP*_L). Under a time limit the hand-over
   to PIQP waits for the time left to hold twice PIQP's expected
   cost, unless that pace says the iterations would not end in the time left either. This ADMM gives
   each inequality row its own rho at early adaptive-rho steps (``ROW_SPREAD`` times the common rho
   on rows whose bound is active, a ``ROW_SPREAD``-th of it elsewhere;
   :func:`optsolve.qp.admm.active_row_factors`), and takes a new rho only once the iterations since
   the last factorisation have cost ``REFACTOR_SHARE`` of one (:mod:`optsolve.qp.admm`), so its
   iterates are not osqp's (``--method admm`` keeps those); and it checks termination between the
   regular checks where the pace predicts the end there (:func:`optsolve.qp.termination.next_check`).

The thresholds are measured with ``bin/bench-qp`` (``--default-table`` times the default against
osqp, PIQP and Clarabel): see ``docs/qp-default.md``. A warm start goes straight to ADMM, the only
method that takes one.
"""

from __future__ import annotations

import functools
import importlib.util
import time

import numpy as np
import scipy.sparse as sp

from optsolve.qp.ldl import kkt_entries
from optsolve.qp.problems import QPProblem

PIQP_FIRST_ENTRIES = 40_000  # stored entries of the KKT matrix (P's upper triangle, A, and both diagonals)
DENSE_ROW_SHARE = 0.18  # a row of A holding at least this share of the variables: PIQP first (QSHELL's longest row
# holds 0.144 of them and ADMM is 1.5x faster there; Q25FV47's 0.216, BOYD1's, HUESTIS's and portfolio optimisation's
# about 1, and PIQP is 2x faster)
DENSE_ROW_MAX_ENTRIES = 1_000_000  # up to this many KKT entries: above, PIQP's factorisations are dear (mpc 10,000
# with a row summing all its variables: PIQP 25 s, ADMM 8.7 s), and ADMM's hand-over bounds the loss instead
DENSE_ROWS_MAX = 0.05  # dense rows (each above DENSE_ROW_SHARE of the variables) at most this share of the variables:
# a few rows coupling a sparse problem (portfolio optimisation: 0.0101, BOYD1, HUESTIS, Q25FV47 below 0.001); a dense
# A (0.5 where it has n/2 rows) is no such case: PIQP refactors it at every step, ADMM once (2.0-3.2x; see the docs)
FIRST_RULE = ("entries", PIQP_FIRST_ENTRIES, "piqp",  # rule 2: see first_by_rule
              ("entries", DENSE_ROW_MAX_ENTRIES,
               ("row_share", DENSE_ROW_SHARE, "admm", ("dense_rows", DENSE_ROWS_MAX, "piqp", "admm")), "admm"))
PACE_GATE = 0.5  # seconds: a PIQP probe (setup and a step) longer than this has dear steps, and Clarabel is probed
CLARABEL_PACE = 3.4  # Clarabel is taken where this many of its probes take less than PIQP's probe: it takes about
# 1.7 times PIQP's steps (25 and 15 on CVXQP2_L at 1e-6), and it must be twice as fast to pay for the probes
PIQP_AFTER_PROBES = 10.0  # where Clarabel's answer fails, PIQP runs next if the time left holds this many of its
# probes (a probe is about two of its steps; it takes 15-30)
NEXT_AFTER_SPENT = 2.0  # unprobed, the second interior-point solver runs where the time left holds this many times
# the first one's time (Clarabel takes about 1.7 times PIQP's steps)
PIQP_FIRST_EPS = 1e-5  # at this tolerance or tighter, PIQP first at any size (ADMM's iterations grow fast there)
P_WORK_ADMM = 3e6  # P's factor this dear (the file's convexity check: the sum of its squared column counts): ADMM
# first where the rule names PIQP, since PIQP refactors at every step and ADMM once (box-constrained QPs with
# P = MM' + 0.1 I, M sparse random: P's work 1.2e7-3e8 at 1,000-3,000 variables, PIQP 3.2-4.9x ADMM's time; 7.5e5
# on CVXQP1/2/3_M, where PIQP takes 0.5-1.1x ADMM's time); not for a dense row, where ADMM's iterations are many
# (Q25FV47: P's work 3e7, PIQP 0.16 s, ADMM 0.48 s)
SWITCH_AFTER = 10.0  # ADMM hands over to PIQP after iterations costing its setup and this many factorisations
ROW_SPREAD = 3.0  # ADMM's rho per row from its active set: x this on rows at a bound, / this on the others
FILL_CLARABEL = 25.0  # a KKT factor with this many times the matrix's entries, and dear: Clarabel (see fills_in)
P_FILL_GATE = 4.0  # the KKT matrix's symbolic step runs where P's own factor holds this many times P's entries
# (8.5 on CVXQP*_L; STCQP1/2, at 2.7, paid the step's 30-48 ms for a KKT fill of 1.8)
SYMBOLIC_MAX_ENTRIES = 1_000_000  # and where the KKT matrix has at most this many entries (about 1 s of the step)
DEAR_WORK = 1e9  # the sum of the factor's squared column counts (its multiply-adds, twice) above which a
# factorisation is dear: 0.7 s in QDLDL here (4.7e9 on CVXQP3_L: 3.4 s; 1.4e9 on flow 20,000: 0.49 s)
KKT_DELTA = 1e-7  # the regularisation of the equality-only KKT solve (on the equilibrated problem)
KKT_CLARABEL_WORK = 3e7  # P's factor this dear (P_WORK_ADMM's measure): an equality-only problem goes to Clarabel
# first, whose supernodal factorisations beat the KKT solve's one simplicial factorisation (P = MM' + I, M sparse
# random, with n/10 equality rows: Clarabel 0.53x its time at 1,500 variables, work 3.7e7; 0.22x at 3,000, 3e8;
# 0.11x unconstrained at 5,000); then the KKT solve
KKT_REFINE = 25  # at most this many refinement steps
KKT_SCALING = 10  # Ruiz passes, as ADMM's default


def equality_rows(qp: QPProblem) -> np.ndarray:
    return np.isfinite(qp.l) & (qp.l == qp.u)


def equality_only(qp: QPProblem) -> bool:
    """Every row an equality (``l = u``, finite) or free (both bounds infinite), or no rows."""
    return qp.m == 0 or bool(np.all(equality_rows(qp) | (np.isinf(qp.l) & np.isinf(qp.u))))


def features(qp: QPProblem, names=None) -> dict:
    """What the problem shows for the cost of O(its stored entries): sizes, the KKT matrix's stored entries, the
    shares of equality rows and of rows that bound one variable, the longest row of A (its entries, and their share
    of the variables), the dense rows (those holding more than ``DENSE_ROW_SHARE`` of the variables) over the
    variables, and the mean entries per column of P (off its diagonal); only those in ``names`` where it is
    given."""
    m = max(qp.m, 1)

    @functools.cache
    def degree():  # each row's entries, counted once for the features that read them
        if not qp.m:
            return np.zeros(1, dtype=np.int64)
        A = qp.A
        return np.bincount(A.indices, minlength=qp.m) if A.format == "csc" else np.diff(A.tocsr().indptr)

    def box_share():
        single = (degree() == 1) & ~equality_rows(qp) & ~(np.isinf(qp.l) & np.isinf(qp.u))
        return float(np.sum(single)) / m

    def p_offdiag_per_col():
        return (int(qp.P.nnz) - int(np.count_nonzero(qp.P.diagonal()))) / max(qp.n, 1)

    compute = {"n": lambda: qp.n, "m": lambda: qp.m, "entries": lambda: kkt_entries(qp.P, qp.A),
               "eq_only": lambda: int(equality_only(qp)), "eq_share": lambda: float(equality_rows(qp).sum()) / m,
               "box_share": box_share, "row_max": lambda: int(degree().max()),
               "row_share": lambda: compute["row_max"]() / max(qp.n, 1),
               "dense_rows": lambda: float(np.count_nonzero(degree() > DENSE_ROW_SHARE * qp.n)) / max(qp.n, 1),
               "p_offdiag_per_col": p_offdiag_per_col}
    return {name: compute[name]() for name in (compute if names is None else names)}


def rule_features(rule) -> set:
    """The features a rule of :func:`first_by_rule` reads."""
    if isinstance(rule, str):
        return set()
    feature, _, below, above = rule
    return {feature} | rule_features(below) | rule_features(above)


def has_piqp() -> bool:
    return importlib.util.find_spec("piqp") is not None


def has_clarabel() -> bool:
    return importlib.util.find_spec("clarabel") is not None


def first_by_rule(found: dict, rule=None) -> str:
    """The first step that ``rule`` (default ``FIRST_RULE``) gives for the features ``found``: a rule is a method's
    name, or ``(feature, threshold, rule where the feature is at most the threshold, rule where above)``."""
    rule = FIRST_RULE if rule is None else rule
    while not isinstance(rule, str):
        feature, threshold, below, above = rule
        rule = below if found[feature] <= threshold else above
    return rule


def by_pace(qp: QPProblem, settings: dict) -> tuple[str, dict]:
    """PIQP or Clarabel for a problem above ``PIQP_FIRST_ENTRIES`` sent to an interior-point method by its
    tolerance: each set up and run for one step (:func:`optsolve.qp.peers.probe`), Clarabel only where PIQP's
    probe took more than ``PACE_GATE`` seconds, and Clarabel where its probe, times ``CLARABEL_PACE``, is still the
    shorter. Returns the name and the probes' seconds."""
    from optsolve.qp import peers

    paces = {"piqp": peers.probe("piqp", qp, settings)}
    if paces["piqp"] <= PACE_GATE or not has_clarabel():
        return "piqp", paces
    paces["clarabel"] = peers.probe("clarabel", qp, settings)
    return ("clarabel" if CLARABEL_PACE * paces["clarabel"] < paces["piqp"] else "piqp"), paces


def next_tries(first: str) -> list[str]:
    """The interior-point solvers rule 2 runs in turn from ``first``: the other after it, where it is installed
    (Clarabel answers STADAT1 at 1e-6, where PIQP stops at its iteration cap; PIQP, CVXQP3_L where Clarabel's
    answer fails the test)."""
    other = "clarabel" if first == "piqp" else "piqp"
    return [first] + ([other] if (has_clarabel() if other == "clarabel" else has_piqp()) else [])


def fits(name: str, left: float, paces: dict | None, spent: dict) -> bool:
    """Whether ``name`` runs after the first interior-point solver's answer failed, with ``left`` seconds: where
    the time left holds ``PIQP_AFTER_PROBES`` of its probe where it was probed, else ``NEXT_AFTER_SPENT`` times the
    first solver's time (``spent``: seconds by name)."""
    if paces is not None and name in paces:
        return left >= PIQP_AFTER_PROBES * paces[name]
    return left >= NEXT_AFTER_SPENT * max(spent.values(), default=0.0)


def fills_in(qp: QPProblem) -> bool:
    """Whether ADMM's KKT factor would fill in and be dear, by the symbolic step alone
    (:func:`optsolve.qp.symbolic.column_counts`): at least ``FILL_CLARABEL`` times the KKT matrix's entries, and
    work of at least ``DEAR_WORK``. The step costs about a microsecond an entry, so it runs only on KKT matrices of
    at most ``SYMBOLIC_MAX_ENTRIES`` entries (larger ones are left to ADMM's hand-over,
    :func:`optsolve.qp.handover.to_clarabel`) and where the file's convexity check found that P's own factor fills
    in (``qp.P_fill`` at least ``P_FILL_GATE``: 8.5 on CVXQP*_L, at most 0.92 on every other problem of the
    default table whose check factors P as a sparse matrix).
    There Clarabel's supernodal factorisation runs several times faster a step than the simplicial ones of ADMM and
    PIQP (CVXQP1/2/3_L: fill 37-44, Clarabel 2.4-5.5 s, ADMM's factorisation alone 2-3.4 s)."""
    if qp.P_fill is None or qp.P_fill < P_FILL_GATE or not has_clarabel() or \
            kkt_entries(qp.P, qp.A) > SYMBOLIC_MAX_ENTRIES:
        return False
    from optsolve.qp.ldl import upper_kkt
    from optsolve.qp.symbolic import column_counts

    K = upper_kkt(qp.P, qp.A)
    counts = column_counts(K)
    if counts is None:
        return False
    work = float(np.sum(counts.astype(float) ** 2))
    return counts.sum() - counts.size >= FILL_CLARABEL * K.nnz and work >= DEAR_WORK


def choose(qp: QPProblem, warm: bool, eps: float = 1e-3) -> str:
    """The rule's first step for ``qp`` at the tolerance ``eps`` (the larger of eps_abs and eps_rel): 'kkt', 'piqp',
    'clarabel' (where ``FIRST_RULE`` names it, or where ADMM's factor would fill in: :func:`fills_in`, and it is
    installed; else PIQP) or 'admm' (each falls through to 'admm')."""
    if warm:
        return "admm"
    if equality_only(qp):
        dear = qp.P_work is not None and qp.P_work >= KKT_CLARABEL_WORK and has_clarabel()
        return "clarabel" if dear else "kkt"
    if not has_piqp():
        return "admm"
    if eps <= PIQP_FIRST_EPS:
        return "piqp"
    found = features(qp, rule_features(FIRST_RULE) | {"entries"})  # only what the rule reads
    first = first_by_rule(found)
    if first == "piqp" and found["entries"] <= PIQP_FIRST_ENTRIES and qp.P_work is not None and \
            qp.P_work >= P_WORK_ADMM:
        first = "admm"  # P's own factorisation is dear: once (ADMM), not at every step (PIQP)
    if first != "clarabel" and found["entries"] > PIQP_FIRST_ENTRIES and fills_in(qp):
        return "clarabel"
    return "piqp" if first == "clarabel" and not has_clarabel() else first


def solve_kkt(qp: QPProblem, eps_abs: float, eps_rel: float, deadline: float | None = None):
    """The equality-constrained (or unconstrained) QP by its KKT system: ``(x, y, z, steps)``, unscaled, where the
    answer passes OSQP's termination test at (eps_abs, eps_rel); else None."""
    from optsolve.qp.termination import passes_termination
    from optsolve.qp.scaling import ruiz_scale
    from optsolve.qp.ldl import QuasiDefinite
    from optsolve.qp.reduced import Reduced

    eq = equality_rows(qp)
    s = ruiz_scale(QPProblem(P=qp.P, q=qp.q, A=qp.A[eq], l=qp.l[eq], u=qp.u[eq]), KKT_SCALING)  # free rows left out
    n, m = qp.n, int(eq.sum())
    AT = s.A.T

    def residual(sol):  # [-q; l] - [P A'; A 0] [x; y], by products with P and A (building that matrix costs more)
        x, y = sol[:n], sol[n:]
        return np.concatenate([-s.q - (s.P @ x + AT @ y), s.l - s.A @ x]) if m else -s.q - s.P @ x

    H = (s.P + KKT_DELTA * sp.eye(n, format="csc")).tocsc()
    try:
        factor = (Reduced.of(H, s.A, np.full(m, KKT_DELTA)) if m else None) or \
            QuasiDefinite(H, s.A if m else None, np.full(m, KKT_DELTA))
    except RuntimeError:
        return None
    sol = np.zeros(n + m)
    with np.errstate(over="ignore", invalid="ignore"):
        for step in range(1, KKT_REFINE + 1):
            sol = sol + factor.solve(residual(sol))
            if not np.all(np.isfinite(sol)):
                return None
            x, y = sol[:n], sol[n:]
            if passes_termination(s, x, y, np.clip(s.A @ x, s.l, s.u), eps_abs, eps_rel):
                y_all = np.zeros(qp.m)
                y_all[eq] = s.E * y / s.c
                return s.D * x, y_all, qp.A @ (s.D * x), step
            if deadline is not None and time.perf_counter() > deadline:
                return None
    return None
