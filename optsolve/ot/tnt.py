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

The kernel (:mod:`optsolve.ot.kernels`) is the dense cost in memory, point clouds whose cost is
recomputed in column blocks (low-memory mode), or a grid's separable costs; all offer the same
log-sum-exp passes and products. The Newton systems are solved by :mod:`optsolve.ot.pcg`. All array
code goes through the namespace ``xp`` of :mod:`optsolve.core.backend`, so the same lines run on
numpy and cupy.
"""

from __future__ import annotations

import functools
import math
import time
from dataclasses import dataclass, field

import numpy as np

from optsolve.core.backend import get_backend
from optsolve.core.blocks import empty_base_pages
from optsolve.core.history import active as history_active
from optsolve.core.history import trace
from optsolve.core.progress import SILENT, Progress, get_logger
from optsolve.ot.deadline import (CG_ITERATION_PASSES, STAGE_START_PASSES, STEP_HEAD_PASSES, STEP_TAIL_PASSES,
                                   SWEEP_PASSES, Deadline)
from optsolve.ot.deadline import after as deadline_after
from optsolve.ot.kernels import SPARSE_GROWTH, DenseKernel, GridKernel, Plan, StreamedKernel
from optsolve.ot.pcg import PCGState, l1, pcg

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


TNT_MEASURE = "column marginal L1 error of the stage's plan (rows exact)"


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
    v = v + (log_ch - _timed_lse(K, deadline, K.log_cols, u, v, gamma))
    plan = Plan(K, gamma, opts["shift_limit"])
    plan.rebuild(u, v)
    u, v, lr = _chi_sinkhorn(plan, log_rh, log_ch, rh, tol, u, v, stats, expired)
    err = l1(xp, xp.exp(lr) - rh)
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
        stepped = _newton_step(K, plan, rh, ch, log_rh, log_ch, tol, u, v, err, eta, state, stats, opts, expired)
        failure = stepped[4]
        if failure == "time_limit":  # (u, v) is still the iterate before this step
            return u, v, deltas, "time_limit"
        deltas.append(stepped[3])  # no step: 0, and the schedule slows down
        if failure is None:
            u, v, err = stepped[:3]
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
        err = l1(xp, xp.exp(lr) - rh)
        if err < PROGRESS * best[0]:
            best, failures = (err, u, v), 0
    return u, v, deltas, None


def _newton_step(K, plan, rh, ch, log_rh, log_ch, tol, u, v, err, eta, state, stats, opts, expired):
    """One Newton step of :func:`project` from (u, v) at marginal error ``err`` (CG to eta err, the line search),
    then the column update and the chi-Sinkhorn sweeps. Returns (u, v, err, delta, failure): ``failure`` is
    None after a step (``delta``: its predicted decrease of the error, relative to (1 - eta) err), 'time_limit'
    when the limit came first, else why no step was taken (delta 0); (u, v, err) unchanged then."""
    xp = K.xp
    plan.rebuild(u, v)
    rP = K.matvec(xp.ones(K.m, dtype=K.dtype))  # and c_P = c_hat after the column update (the line search's)
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
    if isinstance(alpha, str):
        return u, v, err, 0.0, alpha
    stats.newton_steps += 1
    u = u + alpha * du
    v = v + alpha * dv
    r_new = (1.0 + a) * (Pb + rP)  # exp(alpha du) * P exp(alpha dv)
    c_new = (1.0 + b) * (rmatvec(a) + cP)
    err_pre = l1(xp, c_new - ch) + l1(xp, r_new - rh)
    (lc,) = plan.log_marginals(u, v, rows=False)
    v = v + (log_ch - lc)
    u, v, lr = _chi_sinkhorn(plan, log_rh, log_ch, rh, tol, u, v, stats, expired)
    return u, v, l1(xp, xp.exp(lr) - rh), (err - err_pre) / ((1.0 - eta) * err), None


# --------------------------------------------------------------------------- outer loop


def _given_up(exc, gamma, best, retreats: int, target_gap):
    """The answer after a stage failed and its retries are spent: the previous stage's."""
    tried = f" {retreats - 1} retries at smaller gamma did not get past it;" if retreats > 1 else ""
    return (*best, "optimal_inaccurate" if target_gap is None else "numerical_error",
            f"The stage at gamma={gamma:g} failed ({exc});{tried} returned the solution of the previous stage, "
            f"gamma={best[2]:g}.")


def _stopped(reason: str, best, current):
    """The answer when a limit or a signal stopped a stage: the last completed stage's, else the current
    iterate (u, v, gamma), rounded."""
    if best is None:
        if reason == "interrupted":
            return (*current, reason, "Interrupted inside the first stage; the plan is the rounded current iterate.")
        return (*current, reason, f"Stopped by the {reason.replace('_', ' ')} inside the first stage.")
    if reason == "interrupted":
        return (*best, reason, f"Interrupted; returned the last completed stage, gamma={best[2]:g}.")
    return (*best, reason, f"Stopped by the {reason.replace('_', ' ')}; returned the last completed stage, "
                           f"gamma={best[2]:g}.")


def _stage_gap(out: TNTResult, gap_fn, entry: dict):
    """The certified relative gap of a stage's rounded plan (None: not evaluated at this stage), in its entry."""
    gap = gap_fn(out.f, out.g, out.reg)
    if gap is not None:
        entry["relative_gap"] = gap
    return gap


def _answer(ot, ia, ib, backend, scale, stats, K, u, v, gamma, status, message) -> TNTResult:
    """The result of the potentials (u, v) at gamma over the supports ia, ib, in cost units."""
    f = np.full(ot.a.shape, -np.inf)
    g = np.full(ot.b.shape, -np.inf)
    f[ia] = backend.to_numpy(u).astype(np.float64) / gamma * scale
    g[ib] = backend.to_numpy(v).astype(np.float64) / gamma * scale
    return TNTResult(f, g, gamma, scale / gamma, status, message, stats, round(K.passes, 1), str(np.dtype(K.dtype)))


def _stage_targets(H_min, gamma, ceiling, tol, r, c):
    """(last, the stage's tolerance, its smoothed marginals rh, ch): MDOT's eps_d = H / gamma^p / 2 for a stage
    below the ceiling, ``tol`` (where given) for the last; the smoothing stays within the stage's tolerance."""
    eps_d = H_min / gamma ** P_EXPONENT if H_min > 0 else 1e-12
    last = gamma >= ceiling * (1 - 1e-12)
    stage_tol = tol if (last and tol is not None) else eps_d / 2.0
    e = min(eps_d / 2.0, 1.0, stage_tol)
    rh = (1.0 - 0.9 * e) * r + 0.9 * e / r.shape[0]
    ch = (1.0 - 0.1 * e) * c + 0.1 * e / c.shape[0]
    return last, stage_tol, rh, ch


def _retry(exc, gamma, best, stats, deadline):
    """After the stage at gamma failed: (u, v, gamma) of a smaller increase from the last completed stage
    ``best``, warm-started with its potentials f = u / gamma, or None where the retries are spent."""
    msg = f"stage gamma={gamma:g} failed ({exc})"
    if not (stats.fallbacks.get("lower_gamma", 0) < RETREATS_MAX and gamma > best[2] * RETREAT_MIN_RATIO
            and not deadline.expired(STAGE_START_PASSES)):
        get_logger().warning(f"{msg}; returning the solution at gamma={best[2]:g}")
        return None
    retry = math.sqrt(best[2] * gamma)
    get_logger().info(f"{msg}; retrying at gamma={retry:g}")
    stats.count("lower_gamma")
    return best[0] * (retry / best[2]), best[1] * (retry / best[2]), retry


def _kernel(ot, xp, scale: float, dtype, structure: bool):
    """(K, ia, ib): the kernel of the cost over the supports ia, ib (separable on a grid kept whole, streamed
    from point clouds, or dense)."""
    ia, ib = np.flatnonzero(ot.a > 0), np.flatnonzero(ot.b > 0)
    if ot.grid is not None and structure:
        ia, ib = np.arange(ot.n), np.arange(ot.m)  # zeros stay (the grid is kept whole); smoothing covers them
        return GridKernel(xp, ot.grid, ot.cost, scale, dtype), ia, ib
    if ot.low_memory:
        return StreamedKernel(xp, ot, ia, ib, scale, dtype), ia, ib
    return DenseKernel(xp, _scaled_cost(ot, ia, ib, scale, dtype, xp), dtype), ia, ib


def _run_stage(K, gamma, rh, ch, stage_tol, u, v, state, stats, opts, deadline, budget):
    """One stage's projection and its last row update: (u, v, deltas, reason, limited); ``limited``: why the
    stage ended above its tolerance, where the precision ran out; raises StageFailed."""
    xp = K.xp
    u_new, v_new, deltas, reason = project(K, gamma, rh, ch, stage_tol, u, v, state, stats, opts, deadline, budget)
    limited = None
    if reason is not None and reason.startswith("precision: "):
        limited, reason = reason[len("precision: "):], None
    if reason is None:
        u_new = u_new + (xp.log(rh) - _timed_lse(K, deadline, K.log_rows, u_new, v_new, gamma))
        if not (bool(xp.isfinite(u_new).all()) and bool(xp.isfinite(v_new).all())):
            raise StageFailed("non-finite potentials")
    return u_new, v_new, deltas, reason, limited


def _stage_entry(stats, gamma, newton_steps, time_s, stage_tol, fallbacks0, retreats, limited) -> dict:
    """A completed stage's entry of ``stats.stage_log``: its fallbacks, the stages retried before it, and where
    it ended at the precision limit (also logged)."""
    entry = {"gamma": gamma, "newton_steps": newton_steps, "time_s": time_s, "tol": stage_tol}
    used = _counts_since(stats.fallbacks, fallbacks0)
    if retreats:
        used["lower_gamma"] = len(retreats)
        entry["retried_after"] = retreats
    if used:
        entry["fallbacks"] = used
    if limited is not None:
        entry["precision_limited"] = limited
        get_logger().warning(f"stage gamma={gamma:g} ended at the precision limit: {limited}")
    return entry


def _report_stage(K, stats, entry: dict, u, v, ch, gap, progress) -> None:
    """A completed stage in ``--history`` (its column error, measured here), the progress line and the log."""
    gamma, xp = entry["gamma"], K.xp
    if history_active():
        passes = round(K.passes, 1)  # before the check's own pass
        col_err = float(xp.abs(xp.exp(K.log_cols(u, v, gamma)) - ch).sum())
        trace(stats.stages, col_err, evaluations=passes, measure=TNT_MEASURE,
              evaluations_of="passes over the cost matrix", gamma=gamma, newton_steps=stats.newton_steps,
              cg_iterations=stats.cg_iterations, relative_gap=gap)
    progress.update(stats.stages, gamma=gamma, newton=stats.newton_steps, cg=stats.cg_iterations,
                    **({} if gap is None else {"gap": gap}))
    get_logger().info(f"stage {stats.stages}: gamma={gamma:g} newton={entry['newton_steps']} tol={entry['tol']:.2e} "
                      f"time={entry['time_s']:.3f}s" + ("" if gap is None else f" gap={gap:.3e}"))


def _last_answer(K, gamma, tol, gap, target_gap, limited) -> tuple[str, str]:
    """(status, message) after the last stage (gamma at its ceiling)."""
    if target_gap is not None:
        reached = "" if gap is None else f" {gap:.3g}"
        return "max_iter", f"gamma reached {gamma:g} before the relative gap{reached} met the target {target_gap:g}."
    if limited is not None:
        return "optimal_inaccurate", f"The last stage ended at the precision limit ({limited})."
    floor = tolerance_floor(K, gamma)
    if tol is not None and tol < floor:
        return "optimal", (f"The tolerance {tol:g} is below what {np.dtype(K.dtype).name} resolves at "
                           f"gamma={gamma:g}; the last stage was solved to {floor:.1e}.")
    return "optimal", ""


def _next_gamma(deltas, q, gamma, ceiling, gap, target_gap):
    """(the next stage's gamma, the growth factor q): q slows down where the stage's Newton steps fell short of
    their predicted decrease, and speeds up where they met it; with a gap, just past the target."""
    d = min(deltas + [1.0])
    if d < 0.5:
        q = max(math.sqrt(q), Q_MIN)
    elif d > 0.9:
        q = q * q
    gamma_next = min(gamma * q, ceiling)
    if gap is not None:  # aim just past the target instead of overshooting it by a factor q
        gamma_next = min(gamma_next, gamma * GAP_MARGIN * gap / target_gap)
    return (ceiling if gamma_next >= ceiling * (1 - 1e-9) else gamma_next), q


def _extrapolate(u_new, v_new, u_prev, v_prev, gamma, gamma_prev, gamma_next):
    """The next stage's start: the potentials scaled to gamma_next, or extrapolated along the last two stages."""
    if u_prev is None:
        return u_new * (gamma_next / gamma), v_new * (gamma_next / gamma)
    w = (gamma_next - gamma) / (gamma - gamma_prev)
    return u_new + (u_new - u_prev) * w, v_new + (v_new - v_prev) * w


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
    20% of them are kept. ``structure``: grid problems use the separable :class:`GridKernel`.
    ``target_gap``/``gap_fn``: when given, ``gap_fn(f, g, reg)`` returns the certified relative gap of the
    rounded plan after each stage, and gamma keeps growing (up to 2^20) until it is at most ``target_gap``;
    ``gamma_f`` is then only where the schedule would otherwise stop.
    ``deadline``: the :class:`optsolve.core.clock.Deadline` of the whole solve (default: ``time_limit``
    seconds from now), checked inside every loop; it keeps time for the rounding and the certificate.
    """
    backend = backend or get_backend("cpu")
    xp = backend.xp
    if deadline is None:
        deadline = deadline_after(time_limit)
    scale = ot.max_cost()
    scale = scale if scale > 0 else 1.0
    K, ia, ib = _kernel(ot, xp, scale, dtype, structure)
    r, c = xp.asarray(ot.a[ia], dtype=K.dtype), xp.asarray(ot.b[ib], dtype=K.dtype)
    H_min = min(entropy(ot.a), entropy(ot.b))
    opts = {"pcg": pcg_mode, "shift_limit": 30.0 if K.dtype == np.float64 else 12.0, "truncate": truncate}
    state, stats = PCGState(), TNTStats()
    ceiling = GAMMA_MAX if target_gap is not None else gamma_f
    gamma, gamma_prev, q = min(GAMMA_START, ceiling), 0.0, Q_START
    u = v = u_prev = v_prev = best = None  # best: (u, v, gamma) of the last completed stage
    retreats = []  # stages failed since the last completed one: {"gamma", "reason", "time_s", "fallbacks"}
    finish = functools.partial(_answer, ot, ia, ib, backend, scale, stats, K)
    try:
        while True:
            t_stage = time.perf_counter()
            last, stage_tol, rh, ch = _stage_targets(H_min, gamma, ceiling, tol, r, c)
            if u is None:
                u, v = xp.log(rh), xp.log(ch)
            budget = None if max_iter is None else max(0, max_iter - stats.newton_steps)
            steps0, fallbacks0 = stats.newton_steps, dict(stats.fallbacks)
            try:
                u_new, v_new, deltas, reason, limited = _run_stage(K, gamma, rh, ch, stage_tol, u, v, state, stats,
                                                                   opts, deadline, budget)
            except StageFailed as exc:
                if best is None:
                    return finish(u, v, gamma, "numerical_error",
                                  f"The first stage failed ({exc}); the plan is that stage's rounded iterate.")
                retreats.append({"gamma": gamma, "reason": str(exc), "time_s": time.perf_counter() - t_stage,
                                 "fallbacks": _counts_since(stats.fallbacks, fallbacks0)})
                again = _retry(exc, gamma, best, stats, deadline)
                if again is not None:
                    (u, v, gamma), q = again, Q_MIN
                    continue
                return finish(*_given_up(exc, gamma, best, len(retreats), target_gap))
            if reason is not None:
                return finish(*_stopped(reason, best, (u_new, v_new, gamma)))
            stats.stages += 1
            best = (u_new, v_new, gamma)
            entry = _stage_entry(stats, gamma, stats.newton_steps - steps0, time.perf_counter() - t_stage, stage_tol,
                                 fallbacks0, retreats, limited)
            retreats, gap = [], None
            if target_gap is not None and gap_fn is not None:
                if not last and deadline.expired(deadline.finish_passes):
                    stats.stage_log.append(entry)
                    return finish(u_new, v_new, gamma, "time_limit", f"Stopped by the time limit after the stage at "
                                                                     f"gamma={gamma:g}, before its gap was evaluated.")
                gap = _stage_gap(finish(u_new, v_new, gamma, "optimal", ""), gap_fn, entry)
            stats.stage_log.append(entry)
            _report_stage(K, stats, entry, u_new, v_new, ch, gap, progress)
            if target_gap is not None and gap is not None and gap <= target_gap:
                return finish(u_new, v_new, gamma, "optimal", "")
            if last:
                return finish(u_new, v_new, gamma, *_last_answer(K, gamma, tol, gap, target_gap, limited))
            if deadline.expired(STAGE_START_PASSES):
                return finish(u_new, v_new, gamma, "time_limit",
                              f"Stopped by the time limit after the stage at gamma={gamma:g}.")
            gamma_next, q = _next_gamma(deltas, q, gamma, ceiling, gap, target_gap)
            u, v = _extrapolate(u_new, v_new, u_prev, v_prev, gamma, gamma_prev, gamma_next)
            u_prev, v_prev = u_new, v_new
            gamma_prev, gamma = gamma, gamma_next
    except KeyboardInterrupt:
        return finish(*_stopped("interrupted", best, (u, v, gamma)))
