"""The Newton method for the truncated MLE, inside the paper's cheap-sampling region.

Karatapanis, Kontonis and Tzamos (ICLR 2025) minimise the truncated negative log-likelihood

    l_S(theta) = -theta . Tbar + A(theta) + log p_theta(S)

over D = {theta : L(theta) <= L(theta0) + R}, where L is the ordinary (untruncated) NLL of
the samples and theta0 its minimiser (the empirical moments): on D every p_theta keeps mass
at least about alpha^2 on S, so rejection sampling from it stays cheap. Here (ours), in
coordinates whitened by theta0:

* Rejection draws are reused. Each batch draws N_k proposals of the current estimate theta_k
  (one oracle call each; a scrambled Sobol sequence mapped to p_theta_k, randomised
  quasi-Monte Carlo: on a halfspace in d = 2 the estimate's Monte-Carlo error fell 10-100 fold
  against independent draws) and keeps those in S; all batches together, weighted against the
  balance-heuristic mixture q = sum_k (N_k / N) p_theta_k, give for any theta near the theta_k
  the sample-average approximation

      f(theta) = -theta . Tbar + log sum_i exp(theta . T(y_i) + log h(y_i) - log q(y_i)),

  convex in theta, whose gradient E_w[T] - Tbar and Hessian Cov_w[T] are the Monte-Carlo
  gradient and Fisher information of l_S (self-normalised importance weights w).
* Newton on f: the step solves Cov_w[T] delta = -grad by conjugate gradients (Hessian-vector
  products cost O(N d^2) for the Gaussian; the d^4 Hessian is never formed), preconditioned by
  the inverse Fisher information of the untruncated member with the weights' moments (for the
  Gaussian the Jacobian of the moments-to-parameters map, applied in O(d^3)), to a relative
  residual of 1e-2 far from the optimum and sqrt(decrement) near it, down to 1e-8 (inexact
  Newton: Dembo, Eisenstat and Steihaug, SIAM J. Numer. Anal. 19, 1982), the products in
  single precision from SCALE_FROM_P statistics on; backtracking
  halves the step until theta stays in D (covariance positive definite), the weights keep an
  effective sample size (ESS) of at least half of what they had at the start and the survival
  mass p_theta(S) stays above a quarter of its start (a trust region: beyond it the draws no
  longer describe p_theta | S, and rejection would cost more), and f decreases by a quarter of
  the predicted amount. The steps stop when the Newton decrement -grad . delta falls below
  1e-12 (the truncated Fisher information can be a thousand times below the untruncated one,
  so a looser decrement leaves the estimate visibly off the MLE), or at the trust region,
  where a new batch is drawn.
* Batch sizes (in accepted draws, the proposals from the estimated survival mass) grow: the
  first holds max(2,000, 10 p); once the steps converge, the next adds what the ESS lacks of
  FINAL_ESS x n (``final_ess``; the command's --tol is its inverse; by default at least
  FINAL_ESS_FLOOR from SCALE_FROM_P statistics on, :func:`final_target`), at most 4 times the ESS
  so far. Batches drawn before the estimate settled are dropped. With independent draws the
  estimate would have a Monte-Carlo variance of about 1/FINAL_ESS of the data's own; with
  Sobol points it is smaller still.
* Importance proposals: once the steps on a pool converge, the next batch is drawn from the
  member with theta's covariance whose mean is moved toward the mean of p_theta | S (by the
  shares SHIFTS, the best kept), when that gives more effective draws per oracle call (N
  alpha / E_{p_theta|S}[p_theta / q] against N alpha for rejection from p_theta); on a
  halfspace of mass 0.05 in d = 30 this took the oracle calls from 4.4 million to 0.7
  million. The balance-heuristic weights treat a shifted batch like any other. Below
  SCALE_FROM_P statistics the batches stay plain rejection draws of p_theta: there the
  draws are cheap and Sobol rejection draws, unweighted, keep an error well below their
  effective size's (bin/bench-truncated part 1: KL(MLE, estimate) 5e-5 against 1e-3 with
  shifts at d = 10, alpha = 0.1).
* Streamed final step: the kept pool grows to an effective size of
  max(STREAM_FROM, POOL_PER_STATISTIC p, sqrt(POOL_FACTOR p FINAL_ESS n)) (all of FINAL_ESS n
  when that is smaller);
  the last step's gradient then comes from the pool and fresh draws summed as they are drawn,
  never kept, FINAL_ESS n effective draws together, and its Hessian from the pool (an error e
  in the Hessian moves the step by about e times the step, already of the order of the pool's
  own Monte-Carlo error). Memory then grows with sqrt(n), not n: at d = 100, n = 1e6, 1.25 GB
  beyond the samples. The streamed step starts once the pool holds KEEP_SLACK of its size.
* R = log(1/alpha_0) + 2, alpha_0 the acceptance of p_theta0 (measured); when the steps of
  two batches in a row stall at the bound (the constrained optimum lies on it, not a noisy
  step), R doubles and they go on (reported), at most MAX_DOUBLINGS times.
* An estimate that runs off ends the run (status numerical_error). Any theta that improves on
  theta0 has l_S(theta) <= l_S(theta0), that is p_theta(S) <= alpha_0 exp(-(L(theta) - L(theta0))):
  past L(theta0) + 4 R_0 its survival mass is below alpha_0^5 e^-8 (under 3.4e-4), and it
  shrinks by e^-R with every further unit. When the steps still press on the bound after
  MAX_DOUBLINGS doublings, the likelihood keeps improving toward the edge of the family (for
  the Gaussian: a precision tending to a singular one, a density flat or log-convex along
  some direction of the set, which no Gaussian has), so the truncated MLE does not exist in
  the family, or lies where each accepted draw costs thousands of oracle calls.
* Every batch is checked before it is drawn: against the oracle budget, the length of one
  Sobol sequence (2^30 points), the memory budget (its accepted draws are kept, at most
  KEPT_PER_EFFECTIVE per effective draw wanted) and the
  deadline (looked at between chunks of 2^16 proposals and between Newton steps).
"""

from __future__ import annotations

import math
import time

import numpy as np
from scipy.sparse.linalg import LinearOperator, cg
from scipy.special import logsumexp

from optsolve.core import memory
from optsolve.core.history import trace
from optsolve.truncated.sampling import (STOPPED, AcceptanceCollapse, DrawLimit, PoolSet, Sampler, check_time,
                                         sobol_count, stop_of)

FINAL_ESS = 8  # the final effective sample size, in multiples of n (--tol 0.125)
FINAL_ESS_FLOOR = 100_000  # ... and at least this many by default from SCALE_FROM_P statistics on (see final_target)
START_ACCEPTED = 2000
MAX_NEWTON = 50
DECREMENT_TOL = 1e-12  # the Newton decrement at which a pool's steps stop (see the module's notes)
MAX_POOLS = 30
TRUST_ESS = 0.5  # Newton steps on a pool keep the weights' ESS above this share of what it was at the start
TRUST_MASS = 4.0  # ... and the survival mass p_theta(S) above 1 / TRUST_MASS of what it was
MAX_DOUBLINGS = 2  # R up to 4 R_0 (see the module's notes)
ALPHA0_DRAWS = (4000, 1 << 16)  # proposals of p_theta0 measuring alpha_0; the second when the first has no hit
KEEP_COPIES = 1  # bytes of the kept draws, in multiples of the draws themselves (written in place, never stacked)
CG_RTOL = 1e-8  # relative residual of a Newton system near the optimum
CG_RTOL_FIRST = 1e-2  # ... and far from it
CG_RTOL_STREAM = 1e-4  # of the streamed step (its Hessian, the pool's, has a larger error)
SHIFTS = (0.25, 0.5, 0.75, 1.0)  # proposal means tried, as shares of the way to the mean of p_theta | S
SCALE_FROM_P = 200  # statistics from which newton works as at scale: shifted proposals, Sobol counts in whole
# chunks, inexact Newton systems with single-precision products (below: Sobol rejection in nets of 2^m points and
# systems solved to CG_RTOL, as the batches there follow the steps' path)
STREAM_FROM = 50_000  # effective size beyond which the final draws are streamed, not kept
KEPT_PER_EFFECTIVE = 3.0  # accepted draws a batch keeps per effective draw wanted, at most (for its memory check)
KEEP_SLACK = 0.8  # the streamed step starts once the pool has this share of its effective size (or of the target)
POOL_FACTOR = 4.0  # the kept pool's effective size before the streamed step: sqrt(POOL_FACTOR p target) ...
POOL_PER_STATISTIC = 30  # ... and at least this many per statistic (d = 100, n = 20,000: 9 per statistic left
# the streamed step's Hessian too rough, and the certificate's gradient statistic at 1.3 times its limit)


def pool_bytes(accepted: float, d: int) -> float:
    """Memory that ``accepted`` kept draws in d dimensions take (with the pool's copies)."""
    return float(accepted) * max(d, 1) * 8.0 * (KEEP_COPIES + 0.5)  # and the single-precision copy


class ZeroMass(RuntimeError):
    """No proposal of the samples' own fit falls in the set."""


def alpha0_and_radius(family, theta0, sampler: Sampler, measured: tuple[int, int] | None = None
                      ) -> tuple[float, float]:
    """The acceptance of p_theta0 on S and R = log(1 / alpha_0) + 2; :class:`ZeroMass` when none of
    ALPHA0_DRAWS proposals is accepted. ``measured``: (accepted, proposals) already counted."""
    drawn = acc = 0
    if measured is not None:
        acc, drawn = measured
    else:
        for draws in ALPHA0_DRAWS:
            Y = family.sample(theta0, draws, sampler.rng)
            acc += int(sampler.ask(Y).sum())
            drawn += draws
            if acc:
                break
    if not acc:
        raise ZeroMass(f"none of {drawn} proposals of the samples' own fit fell in the set: it has no measurable "
                       "mass (a set of zero volume, such as a box with lo = hi in a coordinate, or a membership "
                       "function that rejects almost every point)")
    a0 = acc / drawn
    return a0, math.log(1.0 / a0) + 2.0


def _solve(family, pool, w, g, rtol=CG_RTOL):
    """The Newton direction on a pool: Cov_w[T] delta = -g by conjugate gradients, preconditioned by
    the inverse Fisher information of the Gaussian (or member) with the draws' weighted moments
    (Hessian-vector products cost O(N d^2); no p x p matrix is formed). From SCALE_FROM_P
    statistics on, the products run on the draws in single precision (twice as fast; their
    relative error, about 1e-6, only makes the direction inexact: the gradient stays double).
    Returns delta."""
    p = g.size
    Y = pool.single() if p >= SCALE_FROM_P else pool.Y
    m = family.moments(Y, w)

    def hv(v):
        u = family.dot(Y, v)
        return family.moments(Y, w * (u - w @ u))

    H = LinearOperator((p, p), matvec=hv, dtype=float)
    M = LinearOperator((p, p), matvec=family.inverse_fisher(m), dtype=float)
    delta, _ = cg(H, -g, rtol=rtol, atol=0.0, maxiter=max(50, 2 * p), M=M)
    return delta


def saa_newton(family, pool, theta, Tbar, L, bound, tol: float, deadline=None):
    """Newton steps on the pool's sample-average objective from theta, inside L(theta) <= bound and
    inside the pool's trust region (the weights' ESS at least TRUST_ESS of the accepted draws).
    Returns (theta, decrement, steps, why): why is 'converged', 'bound' (a step was cut by the
    bound and the decrement stalled there), 'trust' (a step was cut by the trust region: draw
    a new pool there) or 'stalled'."""
    Y = pool.Y

    def evaluate(th):
        s = family.dot(Y, th) + pool.base
        lse = logsumexp(s)
        w = np.exp(s - lse)
        return -th @ Tbar + lse, w, lse - family.A(th)  # the last: log p_theta(S) + log N

    f, w, logmass = evaluate(theta)
    floor = TRUST_ESS / (w @ w)
    mass_floor = logmass - math.log(TRUST_MASS)
    dec, why, steps = np.inf, "stalled", 0
    for steps in range(1, MAX_NEWTON + 1):
        if deadline is not None and time.perf_counter() > deadline:
            return theta, dec, steps - 1, "time"
        g = family.moments(Y, w) - Tbar
        # inexact Newton: the system's tolerance follows the last decrement (superlinear convergence)
        # (a decrement near tol announces the checking solve: a rough solve measures the decrement within
        # about condition x rtol^2, and a step still taken from it converges linearly)
        rtol = (CG_RTOL if family.p < SCALE_FROM_P else CG_RTOL_FIRST if dec < 10 * tol or dec == np.inf
                else min(CG_RTOL_FIRST, max(CG_RTOL, math.sqrt(dec))))
        delta = _solve(family, pool, w, g, rtol=rtol)
        dec = float(-g @ delta)
        if not np.isfinite(dec) or dec <= 0:
            delta, dec = -g, float(g @ g)
        if dec < tol:
            return theta, dec, steps, "converged"
        t, cut = 1.0, None
        while t > 1e-12:
            new = theta + t * delta
            if family.valid(new):
                if L(new) > bound:
                    cut = "bound"
                else:
                    fn, wn, mass = evaluate(new)
                    if 1.0 / (wn @ wn) < floor or mass < mass_floor:
                        cut = cut or "trust"
                    elif fn <= f - 0.25 * t * dec:
                        break
            t *= 0.5
        else:
            return theta, dec, steps, cut or "stalled"
        theta, f, w = new, fn, wn
        if cut == "trust":
            return theta, dec, steps, "trust"
        if cut == "bound" and t < 1e-3:
            return theta, dec, steps, "bound"
    return theta, dec, steps, why


def proposal(family, pool, theta, rate: float) -> tuple[np.ndarray, float]:
    """The proposal for the next draws at theta, and its effective draws per proposal (the pool
    should describe p_theta | S: drawn near theta, with some batch from p_theta itself).

    Candidates: members with theta's covariance and a mean moved from theta's toward the mean of
    p_theta | S (the pool's weighted mean) by SHIFTS; each keeps an effective sample size of
    N alpha / E_{p_theta|S}[p_theta / q] for N proposals (alpha = p_theta(S) = ``rate``), the
    expectation taken over the pool. Where S holds little of p_theta, a proposal centred nearer
    S spends far fewer oracle calls per effective draw (importance sampling by a mean shift)."""
    best = (np.asarray(theta), rate)
    if family.shifted(theta, np.zeros(family.d)) is None or not rate > 0:
        return best
    w = pool.weights(family, theta)
    mu = family.params(theta)["mean"]
    target = w @ pool.Y
    A = family.A(theta)
    for c in SHIFTS:
        q = family.shifted(theta, mu + c * (target - mu))
        r = family.dot(pool.Y, theta - q) - A + family.A(q)  # log p_theta / q
        ratio = float(w @ np.exp(r))
        mass = rate * float(w @ np.exp(-r))  # q(S), which bounds the effective draws per proposal
        eff = min(rate / ratio, mass, 1.0) if np.isfinite(ratio) and ratio > 0 else 0.0
        if eff > best[1]:
            best = (q, eff)
    return best


def stream_step(family, pools, pool, theta, Tbar, L, bound, target: float, deadline=None):
    """One Newton step from theta (the pool's optimum) whose gradient also counts fresh draws, summed
    as they come (no draw is kept): proposals are drawn until the weights' effective size with the
    pool's reaches ``target``; the two independent estimates of E_theta[T | S] are averaged in
    proportion to their effective sizes (the one-step optimum of the pool and the fresh draws
    together), and the step's Hessian is the pool's (its error then changes the step only by the
    pool's Monte-Carlo error times the step). Returns (theta, effective size, proposals)."""
    w = pool.weights(family, theta)
    kept = 1.0 / (w @ w)
    g_kept = family.moments(pool.Y, w) - Tbar
    need = max(target - kept, 0.1 * target)
    q, eff = proposal(family, pool, theta, pool.survival(family, theta)[0])
    d = family.d
    A_diff = family.A(q) - family.A(theta)
    top, W, W2, S1, S2 = -np.inf, 0.0, 0.0, np.zeros(d), 0.0
    drawn = 0
    ess = 0.0
    while ess < need:
        N = sobol_count(1.2 * (need - ess) / max(eff, 1e-12), nets=family.p < SCALE_FROM_P)
        for Yc, count in pools.accepted(q, N):
            drawn += count
            if not Yc.shape[0]:
                continue
            s = family.dot(Yc, theta - q) + A_diff  # log p_theta / q
            m = float(s.max())
            if m > top:  # keep the sums' scale at the largest log weight so far
                scale = math.exp(top - m) if np.isfinite(top) else 0.0
                W, W2, S1, S2, top = W * scale, W2 * scale * scale, S1 * scale, S2 * scale, m
            wc = np.exp(s - top)
            W, W2 = W + float(wc.sum()), W2 + float(wc @ wc)
            S1 += wc @ Yc
            S2 += family.second_moment(Yc, wc)
            pools.sampler.accepted += Yc.shape[0]
            ess = W * W / W2
            if ess >= need:  # each scrambled Sobol point is N(0, I): a prefix averages without bias
                break
        ess = W * W / W2 if W2 > 0 else 0.0
        if ess < 2:
            raise AcceptanceCollapse(f"none of {drawn} proposals of the final draws fell in the set")
        eff = max(ess / drawn, 1e-12)
    g = (ess * (family.moments_from(S1 / W, S2 / W) - Tbar) + kept * g_kept) / (ess + kept)
    delta = _solve(family, pool, w, g, rtol=CG_RTOL_STREAM)
    t = 1.0
    while t > 1e-6 and not (family.valid(theta + t * delta) and L(theta + t * delta) <= bound):
        t *= 0.5
    return (theta + t * delta if t > 1e-6 else theta), ess + kept, drawn


def final_target(p: int, n: int, final_ess: float | None = None) -> float:
    """The final effective sample size: ``final_ess`` n (the command's n / --tol), FINAL_ESS n by
    default, and by default at least FINAL_ESS_FLOOR from SCALE_FROM_P statistics on: there the
    shifted proposals' draws lose most of the Sobol points' extra accuracy, and where n is small
    their Monte-Carlo error would show beside the data's own (docs/benchmarks.md, bench-truncated
    part 1)."""
    if final_ess is not None:
        return final_ess * n
    return max(FINAL_ESS * n, FINAL_ESS_FLOOR) if p >= SCALE_FROM_P else FINAL_ESS * n


def kept_target(p: int, target: float) -> float:
    """The effective size the kept pool grows to before the final streamed step (all of ``target``
    when that is small): large enough that the pool's Hessian error moves the final step by a
    small share of the final draws' own Monte-Carlo error."""
    return min(target, max(STREAM_FROM, POOL_PER_STATISTIC * p, math.sqrt(POOL_FACTOR * p * target)))


def _draw_batch(family, pools, q, N: int, need: float, deadline) -> None:
    """The next batch: N proposals from p_q, after the time and the memory its kept draws take are checked."""
    check_time(deadline)
    kept = pools.accepted_count() + KEPT_PER_EFFECTIVE * need
    if pool_bytes(kept, family.d) > memory.budget_bytes():
        raise DrawLimit(f"the next batch would keep {int(kept)} accepted draws in d = {family.d}, "
                        f"{memory.human_bytes(pool_bytes(kept, family.d))}, more than the memory budget "
                        f"of {memory.human_bytes(memory.budget_bytes())} (raise it with --memory-limit "
                        "or loosen --tol)")
    pools.draw(q, N)


def _next_proposal(family, pools, pool, theta, why: str, unshifted: bool, N: int):
    """(ess, rate, q, eff): the pool's effective size and survival mass at theta, and the member p_q the next
    batch is drawn from with its expected acceptance."""
    ess = pool.ess(family, theta)
    rate = pool.survival(family, theta)[0]
    if unshifted:  # floored by the last batch's own acceptance, when it was drawn from p_theta
        rate = max(rate, 0.25 * pools.accepted_count(last=True) / N)
    # a shifted proposal only from a pool that describes theta (its estimate from a pool drawn
    # elsewhere can be far off); after a move, the next batch is drawn from p_theta itself
    shift = why == "converged" and family.p >= SCALE_FROM_P
    q, eff = proposal(family, pool, theta, rate) if shift else (theta, rate)
    return ess, rate, q, eff


def _record(k: int, N: int, accepted: int, ess, steps: int, dec, why: str, oracle, progress) -> dict:
    """A batch's entry of the history, traced and shown as progress."""
    trace(k, float(dec), evaluations=oracle.calls, measure="Newton decrement of the sample-average likelihood",
          evaluations_of="membership oracle", ess=float(ess), accepted=accepted)
    if progress is not None:
        progress.update(k, proposals=N, accepted=accepted, ess=float(ess), newton_steps=steps,
                        decrement=float(dec), stop=why)
    return {"batch": k, "proposals": N, "accepted": accepted, "ess": ess, "newton_steps": steps,
            "decrement": dec, "stop": why, "oracle_calls": oracle.calls}


def fit(family, Tbar, n, oracle, rng, *, max_calls=None, radius=None, final_ess=None, deadline=None,
        progress=None, alpha0=None):
    """The Newton estimate for whitened samples with mean statistics Tbar (n of them). Returns a dict:
    theta, ``stop`` ('converged', 'budget', 'time_limit', 'collapse', 'runoff', 'limit' or
    'max_batches'), its reason, counts and the history. ``alpha0``: (accepted, proposals) of
    p_theta0 on S when measured already."""
    theta0 = family.from_moments(Tbar)

    def L(th):
        return float(-th @ Tbar + family.A(th))

    L0 = L(theta0)
    sampler = Sampler(family, oracle, rng, max_calls=max_calls, deadline=deadline)
    try:
        alpha0, R = alpha0_and_radius(family, theta0, sampler, alpha0)
    except (ZeroMass, *STOPPED) as exc:
        stop, reason = ("collapse", str(exc)) if isinstance(exc, ZeroMass) else stop_of(exc)
        return dict(theta=theta0, theta0=theta0, radius=radius, radius_doublings=0, ess=0.0, batches=[],
                    samples_drawn=0, notes=[], stop=stop, reason=reason)
    R = R0 = float(radius) if radius is not None else R
    target = final_target(family.p, n, final_ess)
    keep = kept_target(family.p, target)
    theta = theta0.copy()
    need = max(START_ACCEPTED, 10 * family.p)  # effective draws wanted in the next batch
    rate = alpha0
    pools = PoolSet(family, sampler)
    pools.reserve(int(KEPT_PER_EFFECTIVE * keep) + (1 << 16))
    history, notes, doubled, ess, dec, bound_hits = [], [], 0, 0.0, np.inf, 0
    stop, reason = "max_batches", f"stopped after {MAX_POOLS} batches"
    pool, q, eff = None, theta, alpha0
    try:
        for k in range(MAX_POOLS):
            N = sobol_count(1.2 * need / max(eff, sampler.floor), nets=family.p < SCALE_FROM_P)
            try:
                _draw_batch(family, pools, q, N, need, deadline)
                unshifted = q is theta
            except STOPPED as exc:
                stop, reason = stop_of(exc)
                break
            pool = pools.pool()
            theta, dec, steps, why = saa_newton(family, pool, theta, Tbar, L, L0 + R, DECREMENT_TOL, deadline)
            if why == "time":
                stop, reason = "time_limit", "the time limit was reached"
                break
            ess, rate, q, eff = _next_proposal(family, pools, pool, theta, why, unshifted, N)
            history.append(_record(k, N, pools.accepted_count(last=True), ess, steps, dec, why, oracle, progress))
            bound_hits = bound_hits + 1 if why == "bound" else 0
            if bound_hits == 2 and doubled == MAX_DOUBLINGS and radius is None:
                stop, reason = "runoff", runoff_reason(family, theta, R0, R, L(theta) - L0, alpha0, rate)
                break
            if bound_hits == 2:  # two batches in a row stop at the bound: the constrained optimum is on it
                R, doubled, bound_hits = 2.0 * R, doubled + 1, 0
                notes.append(f"the bound L(theta) <= L(theta0) + R was active: R doubled to {R:.3g}")
            if why != "converged":
                pools.forget()  # the estimate moved: the batches so far describe another theta
                continue
            if ess >= target:
                stop, reason = "converged", ""
                break
            if ess >= KEEP_SLACK * keep:  # (a last small batch would cost a whole pool's Newton steps)
                check_time(deadline)
                theta, ess, drawn = stream_step(family, pools, pool, theta, Tbar, L, L0 + R, target, deadline)
                history.append(dict(batch=k + 1, proposals=drawn, accepted=None, ess=float(ess), newton_steps=1,
                                    decrement=None, stop="streamed", oracle_calls=oracle.calls))
                stop, reason = "converged", ""
                break
            need = int(min(4.0 * ess, max(need, target - ess)))
            if keep < target:  # the kept pool grows to its own size only
                need = int(min(need, max(keep - ess, 0.25 * ess)))
    except STOPPED as exc:
        stop, reason = stop_of(exc)
    except KeyboardInterrupt:  # Ctrl-C or a signal (optsolve.core.signals): the estimate so far
        stop, reason = "interrupted", "interrupted"
    return {"theta": theta, "theta0": theta0, "Tbar": Tbar, "alpha0": alpha0, "radius": R,
            "radius_doublings": doubled, "ess": ess, "decrement": dec, "batches": history,
            "samples_drawn": sampler.accepted, "notes": notes, "stop": stop, "reason": reason}


EDGES = {"gaussian": "a density flat or log-convex along some direction of the set, which no Gaussian has",
         "gaussian-mean": "samples whose mean lies on the boundary of the set, where the likelihood grows as the "
                          "mean moves out",
         "exponential": "a density flat or increasing along some coordinate of the set"}


def runoff_reason(family, theta, R0, R, excess, alpha0, rate) -> str:
    """Why a run whose steps still press on the bound after MAX_DOUBLINGS doublings was stopped."""
    if family.name == "gaussian":
        h, P = family.split(theta)
        edge = (f"the precision's smallest eigenvalue (in coordinates whitened by the samples) fell to "
                f"{float(np.linalg.eigvalsh(P).min()):.3g}")
    elif family.name == "exponential":
        edge = f"the smallest rate (relative to the samples' mean) fell to {float((-theta).min()):.3g}"
    else:
        edge = f"the mean moved {float(np.linalg.norm(theta)):.3g} standard deviations from the samples' mean"
    return (f"the estimate does not exist: the truncated likelihood kept improving toward the edge of the family "
            f"after R doubled {MAX_DOUBLINGS} times (from {R0:.3g} to {R:.3g}; L(theta) - L(theta0) = {excess:.3g}): "
            f"{edge} and the estimate's survival mass to about {rate:.2g} (alpha_0 = {alpha0:.2g}). The samples fit "
            f"a limit outside the family {family.name!r} ({EDGES[family.name]}) better than any member; a member "
            f"that improved further would keep less than "
            f"alpha_0 exp(-{R:.3g}) of its mass on the set. Give --radius to search a larger region anyway")
