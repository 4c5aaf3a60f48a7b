"""OSQP's ADMM for convex QPs, in numpy/scipy.

Stellato, Banjac, Goulart, Bemporad and Boyd (2020), "OSQP: an operator splitting solver for
quadratic programs", Math. Prog. Comp. 12: the iteration (Algorithm 1), Ruiz equilibration
with cost scaling (section 5.1), the adaptive step size rho (5.2), termination on unscaled
residuals and the duality gap, and primal / dual infeasibility detection from successive
differences of the iterates (3.4). Constants follow osqp 1.x's defaults: rho 0.1 (x 1e3 on
equality rows, 1e-6 on free rows), sigma 1e-6, alpha 1.6, 10 scaling passes, termination
checked every 25 iterations, rho adapted every 50 when the estimate moves by more than 5x.

The quasi-definite KKT matrix ``[P + sigma I, A'; A, -diag(1/rho)]`` is factored once by LDL'
(:mod:`optsolve.qp.ldl`, QDLDL as in osqp), and again, numerically only, when rho changes.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from optsolve.core.history import trace
from optsolve.core.progress import SILENT, Progress
from optsolve.qp import defaults
from optsolve.qp.ipm import interior_point
from optsolve.qp.ldl import QuasiDefinite
from optsolve.qp.polish import ACTIVE_SET_ROUNDS, polish
from optsolve.qp.problems import QPProblem
from optsolve.qp.scaling import Scaled, ruiz_scale
from optsolve.qp.handover import HANDED, PIQP_MAX_ITER, far, piqp_finish, piqp_iterations, to_clarabel, too_slow
from optsolve.qp.termination import (RESIDUAL_MEASURE, dual_cone, next_check, residuals_of, tolerance_distance,
                                     tolerance_tests)

RHO_MIN, RHO_MAX = 1e-6, 1e6
RHO_EQ_FACTOR = 1e3
RHO_TOL = 1e-4  # |u - l| below this (scaled): an equality row
DIVISION_TOL = 1e-30
NONCONVEX_RES = 1e30


@dataclass
class ADMMSettings:
    rho: float = 0.1
    sigma: float = defaults.SIGMA
    alpha: float = defaults.ALPHA
    scaling: int = defaults.SCALING
    eps_abs: float = defaults.EPS
    eps_rel: float = defaults.EPS
    eps_prim_inf: float = defaults.EPS_INFEASIBLE
    eps_dual_inf: float = defaults.EPS_INFEASIBLE
    max_iter: int = 4000
    check_every: int = defaults.CHECK_EVERY
    adaptive_rho: bool = True
    adaptive_rho_interval: int = 50
    adaptive_rho_tolerance: float = 5.0
    check_dualgap: bool = True
    time_limit: float | None = None
    polish: bool = False  # polish an optimal solution (osqp's 'polishing')
    refine_stalled: bool = True  # at max_iter or time_limit, try polishing before giving up
    switch_after: float | None = None  # hand over to PIQP once the iterations cost the setup and this many
    # numeric factorisations
    row_spread: float | None = None  # at early adaptive-rho steps: rho x this on rows at a bound, / this elsewhere
    early_checks: bool = False  # a check between the regular ones where the pace predicts the end there
    delta: float = 1e-6
    polish_refine_iter: int = 3


@dataclass
class ADMMResult:
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    status: str  # optimal, optimal_inaccurate, infeasible, unbounded, max_iter, time_limit, numerical_error
    iterations: int
    prim_res: float
    dual_res: float
    duality_gap: float
    rho_updates: int = 0
    rho: float = 0.0
    message: str = ""
    prim_inf_cert: np.ndarray | None = None  # dy, scaled to unit inf-norm
    dual_inf_cert: np.ndarray | None = None  # dx, scaled to unit inf-norm
    rejected_claims: list = field(default_factory=list)
    time_s: dict = field(default_factory=dict)
    factorisations: int = 0
    polished: str | None = None  # "polished" or "refined a stalled run"


REFINED = "refined a stalled run"
REFINED_IPM = "refined a stalled run by interior-point steps"
SWITCHED = HANDED["piqp"]


def refined_message(iterations: int, how: str = REFINED) -> str:
    """The message of a run whose answer came from a refinement after the iterations stalled."""
    if how in HANDED.values():
        return (f"After {iterations} iterations, expected to cost more than an interior-point method, the problem was "
                f"{how}; its answer passes the same termination test.")
    if how == REFINED_IPM:
        return (f"The iterations stopped short of the tolerance after {iterations}; the solution is the one of "
                "interior-point steps started from the last iterate, polished where they stop short (it passes "
                "the same termination test).")
    return (f"The iterations stopped short of the tolerance after {iterations}; the solution is the polished "
            "one (the active set of the last iterate, solved exactly).")


class KKT:
    """The factored KKT matrix ``[P + sigma I, A'; A, -diag(1/rho)]`` for a rho vector: in its reduced form
    where that is sparse enough (:class:`optsolve.qp.reduced.Reduced`), else as it is
    (:class:`optsolve.qp.ldl.QuasiDefinite`); pattern and ordering once, :meth:`update` refactors."""

    def __init__(self, s: Scaled, sigma: float, rho_vec: np.ndarray):
        from optsolve.qp.reduced import Reduced

        self.s, self.sigma, self.rho_vec, self.inv_rho = s, sigma, rho_vec, 1.0 / rho_vec
        self.ldl = Reduced.of(s.P, s.A, self.inv_rho, shift=sigma) or \
            QuasiDefinite(s.P, s.A, self.inv_rho, shift=sigma)

    @property
    def factorisations(self) -> int:
        return self.ldl.factorisations

    def update(self, rho_vec):
        self.rho_vec, self.inv_rho = rho_vec, 1.0 / rho_vec
        self.ldl.update(self.inv_rho)

    def solve(self, rhs):
        return self.ldl.solve(rhs)


def rho_vector(rho, l, u, factor=None):
    """OSQP's rho per row: RHO_MIN on free rows, RHO_EQ_FACTOR * rho on equality rows, rho on the others, there
    multiplied by ``factor`` (a per-row policy's, :meth:`optsolve.qp.policy.Policy.rows`) where given."""
    loose = np.isinf(l) & np.isinf(u)
    eq = np.abs(u - l) < RHO_TOL
    rest = rho if factor is None else np.clip(rho * factor, RHO_MIN, RHO_MAX)
    return np.where(loose, RHO_MIN, np.where(eq, RHO_EQ_FACTOR * rho, rest))


ACTIVE_TOL = 1e-3  # z within this (relative) of a bound: the row's bound is active
# the active set sets the rows' factors at this many adaptive-rho steps, from the ROW_SPREAD_FIRST-th on (a run that
# converges before it, in 100 iterations, keeps osqp's iterates: the LISWET files went from 75 iterations to 125
# with the active set taken at the first step)
ROW_SPREAD_STEPS, ROW_SPREAD_FIRST = 4, 2
# with row_spread, a new rho once the iterations since the last factorisation cost this share of one (osqp's
# adaptive_rho_fraction, of its setup there): CVXQP3_L at 1e-3 refactored 6 times in 300 iterations (docs/qp-default.md)
REFACTOR_SHARE = 0.4


def active_row_factors(l, u, z, spread: float) -> np.ndarray:
    """Per-row factors of rho from the active set: ``spread`` where z is at (within ACTIVE_TOL of) a bound, 1/spread
    elsewhere (equality and free rows keep OSQP's rho: :func:`rho_vector`).

    A row whose bound is active acts as an equality, for which OSQP already takes a larger rho; an
    inactive row's dual is zero at the solution, and a small rho lets its z move. Per-constraint
    penalties are QPALM's (Hermans, Themelis and Pas, "QPALM: a proximal augmented Lagrangian
    method for nonconvex quadratic programs", Math. Prog. Comp. 2022), there raised on rows whose
    violation does not fall; here they follow the active set, the feature the learned per-row
    policies (:meth:`optsolve.qp.policy.Policy.rows`) found."""
    with np.errstate(invalid="ignore"):  # inf - inf on a missing bound: not active
        at = (np.isfinite(l) & (np.abs(z - l) <= ACTIVE_TOL * (1.0 + np.abs(l)))) | (
            np.isfinite(u) & (np.abs(u - z) <= ACTIVE_TOL * (1.0 + np.abs(u))))
    return np.where(at, spread, 1.0 / spread)


# The interior-point finishes factor a KKT system at every step, and PIQP has no time limit: each
# starts only where the deadline leaves this many times the ADMM's own setup (its factorisation) ahead
FINISH_FACTORISATIONS = 60


def solve_admm(qp: QPProblem, settings: ADMMSettings | None = None, *, x0=None, y0=None,
               verify_claim=None, progress: Progress = SILENT, deadline: float | None = None,
               controller=None, scaled: Scaled | None = None) -> ADMMResult:
    """Solve ``qp`` by OSQP's ADMM. ``x0``, ``y0``: a warm start (unscaled).

    ``controller``: a learned parameter policy (:class:`optsolve.qp.policy.Policy`): every
    ``controller.interval`` iterations, for its first ``controller.steps`` calls, it maps the
    relative residuals to (rho, alpha), or (a per-row policy) each inequality row's features to the
    factor of its rho; OSQP's adaptive rule is off meanwhile and takes over after (moving the rows'
    common rho, their factors kept).
    The policy's starting rho (``controller.start["rho"]``, fitted with it), where it has one,
    replaces ``settings.rho``.

    ``verify_claim(kind, vector, exact=True) -> (certificate or None, reason)``: an independent check
    of an infeasibility certificate (``kind`` 'infeasible' with dy or 'unbounded' with dx, unscaled),
    which may return a corrected vector (``exact=False``: the vector's own checks only); a claim it
    rejects is not reported, the iterations go on. Where the run may hand over to PIQP
    (``switch_after``), a claim whose vector fails its own checks hands over at once instead.
    """
    run = _Run(qp, settings or ADMMSettings(), x0=x0, y0=y0, verify_claim=verify_claim, progress=progress,
               deadline=deadline, controller=controller, scaled=scaled)
    run.iterate()
    run.finish()
    return run.result()


def primal_infeasibility(s: Scaled, dy: np.ndarray, eps: float) -> np.ndarray | None:
    """OSQP's test of primal infeasibility on the scaled duals' last difference ``dy`` (projected on the polar
    recession cone of the bounds): the unscaled Farkas vector it supports, or None."""
    dyp = np.where(np.isinf(s.u), np.minimum(dy, 0.0), dy)
    dyp = np.where(np.isinf(s.l), np.maximum(dyp, 0.0), dyp)
    norm = float(np.abs(s.E * dyp).max()) if dy.size else 0.0
    if norm <= DIVISION_TOL:
        return None
    pos, neg = np.maximum(dyp, 0.0), np.minimum(dyp, 0.0)
    lhs = float(np.where(pos > 0, s.u, 0.0) @ pos + np.where(neg < 0, s.l, 0.0) @ neg)
    if lhs < 0.0 and float(np.abs((1.0 / s.D) * (s.A.T @ dyp)).max()) < eps * norm:
        return s.E * dyp
    return None


def dual_infeasibility(s: Scaled, dx: np.ndarray, eps: float) -> np.ndarray | None:
    """OSQP's test of dual infeasibility (unboundedness) on the scaled primal's last difference ``dx``: the unscaled
    recession direction it supports, or None."""
    norm = float(np.abs(s.D * dx).max()) if dx.size else 0.0
    if norm <= DIVISION_TOL or float(s.q @ dx) >= 0.0:
        return None
    if float(np.abs((1.0 / s.D) * (s.P @ dx)).max()) >= s.c * eps * norm:
        return None
    Adx = (1.0 / s.E) * (s.A @ dx)
    tol = eps * norm
    if np.any(np.isfinite(s.u) & (Adx > tol)) or np.any(np.isfinite(s.l) & (Adx < -tol)):
        return None
    return s.D * dx


class _Run:
    """One ADMM solve: the setup (scaling, KKT factorisation), :meth:`iterate` (OSQP's Algorithm 1, with the
    adaptive or learned rho and the hand-over to PIQP), :meth:`finish` (the duals in their cone, polishing, the
    refinement of a stalled run) and :meth:`result`. The iterates live in the scaled variables."""

    def __init__(self, qp: QPProblem, st: ADMMSettings, *, x0, y0, verify_claim, progress: Progress,
                 deadline: float | None, controller, scaled: Scaled | None):
        self.qp, self.st, self.verify_claim, self.progress = qp, st, verify_claim, progress
        self.deadline, self.controller = deadline, controller
        self.t0 = time.perf_counter()
        s = self.s = scaled if scaled is not None else ruiz_scale(qp, st.scaling)  # ``scaled``: reused across solves
        self.n, self.m = n, m = qp.n, qp.m
        rho = st.rho if controller is None else controller.start.get("rho", st.rho)  # a policy's own starting rho
        self.rho = rho = min(max(rho, RHO_MIN), RHO_MAX)
        self.kkt = KKT(s, st.sigma, rho_vector(rho, s.l, s.u))
        self.t_setup = self.t_factored = time.perf_counter()

        self.x = np.zeros(n) if x0 is None else np.asarray(x0, dtype=float) * (1.0 / s.D)
        self.y = np.zeros(m) if y0 is None else np.asarray(y0, dtype=float) * (1.0 / s.E) * s.c
        self.z = s.A @ self.x if x0 is not None else np.zeros(m)  # as osqp: z = Ax on a warm start, else 0
        self.dx, self.dy = np.zeros(n), np.zeros(m)
        self.alpha = st.alpha
        self.rho_updates = 0
        self.row_factor = None  # a per-row policy's factors of the rows' rho (or those of the active set: row_spread)
        self.adaptive_steps = self.row_refactors = 0
        self.numeric_time = self.kkt.ldl.numeric_time  # one numeric factorisation, timed at the setup
        self.rejected = []
        self.status = "max_iter"
        self.info = {}
        self.iteration = 0
        self.polished = None
        # the ski-rental switch: PIQP costs about a setup like this one and ``switch_after`` numeric factorisations
        # of the same KKT matrix; once the iterations have cost that much, the interior-point method is the better bet
        self.switched = None  # the solver whose hand-over answered; the target of one, by the factor's fill:
        self.target = "clarabel" if st.switch_after is not None and to_clarabel(self.kkt.ldl, self.numeric_time) \
            else "piqp"
        self.piqp_cost = (self.t_setup - self.t0) + (st.switch_after or 0.0) * self.numeric_time  # PIQP's time
        self.switch_at = None if st.switch_after is None else self.t_setup + self.piqp_cost
        self.pace, self.paced = None, False  # (time, distance) at the first check, the least since; a later one seen
        self.early, self.last_check = None, None  # the next early check; the last check's (iteration, distance)

    # ------------------------------------------------------------------ the termination test and the claims

    def residuals(self, x, y, z) -> dict:
        return residuals_of(self.s, x, y, z)

    def check(self, x, y, z, approximate=False, claims=True, defer=False) -> str | None:
        """OSQP's termination test; returns a status or None (``claims``: also the infeasibility tests on the last
        differences ``self.dx``, ``self.dy``; ``defer``: a claim may be left to the hand-over to PIQP)."""
        st = self.st
        info = self.info = self.residuals(x, y, z)
        if info["prim"] > NONCONVEX_RES or info["dual"] > NONCONVEX_RES or not (
                math.isfinite(info["prim"]) and math.isfinite(info["dual"])):
            return "numerical_error"
        f = 10.0 if approximate else 1.0
        prim_ok, dual_ok, gap_ok = tolerance_tests(info, st.eps_abs * f, st.eps_rel * f)
        gap_ok = gap_ok or not st.check_dualgap
        if prim_ok and dual_ok and gap_ok:
            return "optimal_inaccurate" if approximate else "optimal"
        if not claims:
            return None
        if not prim_ok:
            cert = primal_infeasibility(self.s, self.dy, st.eps_prim_inf * f)
            if cert is not None and self._accepted("infeasible", cert, defer):
                return "infeasible"
        if not dual_ok:
            cert = dual_infeasibility(self.s, self.dx, st.eps_dual_inf * f)
            if cert is not None and self._accepted("unbounded", cert, defer):
                return "unbounded"
        return None

    def _accepted(self, kind: str, cert: np.ndarray, defer: bool) -> bool:
        vec = cert / max(float(np.abs(cert).max()), DIVISION_TOL)
        if self.verify_claim is not None:
            if any(k == kind for _, k, _ in self.rejected):
                return False  # refuted once: the LP answer does not change
            # where the run may hand over, the direction's own checks only: one that fails them hands over to PIQP
            # now, which answers (or makes its own claim) in less time than the exact LP takes to settle this one
            # (HUESTIS: 0.03 s against 0.21 s)
            quick = defer and self.switch_at is not None
            vec, reason = self.verify_claim(kind, vec, exact=not quick)
            if vec is None and quick:
                self.switch_at = self.t_setup
                return False
            if vec is None:
                self.rejected.append((self.iteration, kind, reason))
                return False
        self.info["cert"] = vec
        return True

    # ------------------------------------------------------------------ the iterations

    def iterate(self) -> None:
        """The iterations, until a status, the iteration limit or the deadline."""
        st, s, kkt, n, m = self.st, self.s, self.kkt, self.n, self.m
        controller, deadline, progress = self.controller, self.deadline, self.progress
        x, y, z, dx, dy = self.x, self.y, self.z, self.dx, self.dy
        alpha, sigma = self.alpha, st.sigma
        iteration = 0
        rhs = np.empty(n + m)
        rhs_x, rhs_z = rhs[:n], rhs[n:]
        completed = False
        try:
            for iteration in range(1, st.max_iter + 1):
                # OSQP's step in its own order of operations (1/rho multiplied, as osqp's rho_inv_vec), in place
                inv_rho = kkt.inv_rho
                x_prev, z_prev = x, z
                np.multiply(x_prev, sigma, out=rhs_x)
                rhs_x -= s.q
                np.multiply(y, inv_rho, out=rhs_z)
                np.subtract(z_prev, rhs_z, out=rhs_z)
                sol = kkt.solve(rhs)
                zr = sol[n:]
                zr -= y
                zr *= inv_rho
                zr += z_prev  # z~
                x = sol[:n] * alpha
                x += (1.0 - alpha) * x_prev
                dx = x - x_prev
                zr *= alpha
                zr += (1.0 - alpha) * z_prev  # relaxed z~
                z = y * inv_rho
                z += zr
                np.minimum(np.maximum(z, s.l, out=z), s.u, out=z)  # np.clip's result, at a third of its time
                dy = zr - z
                dy *= kkt.rho_vec
                y = y + dy
                checking = iteration % st.check_every == 0 or iteration == self.early
                learned = (controller is not None and iteration % controller.interval == 0
                           and iteration // controller.interval <= controller.steps)
                adapting = (st.adaptive_rho and st.adaptive_rho_interval and iteration % st.adaptive_rho_interval == 0
                            and (controller is None or iteration > controller.interval * controller.steps))
                if checking:
                    self.dx, self.dy, self.iteration = dx, dy, iteration
                    status_now = self.check(x, y, z, defer=True)
                    info = self.info
                    progress.update(iteration, prim=info["prim"], dual=info["dual"], gap=info["gap"])
                    trace(iteration, max(info["prim"], info["dual"]), measure=RESIDUAL_MEASURE, prim=info["prim"],
                          dual=info["dual"], gap=info["gap"], rho=self.rho)
                    if status_now is not None:
                        self.status = status_now
                        break
                    if st.early_checks:
                        self._schedule(iteration)
                    if self.switch_at is not None and (self._slow() or time.perf_counter() > self.switch_at):
                        answer = self._hand_over()
                        if answer is not None:
                            x, y, z = answer
                            break
                if adapting or learned:
                    self._adapt(x, y, z, iteration, checking, learned)
                    alpha = self.alpha
                if deadline is not None and time.perf_counter() > deadline:
                    self.status = "time_limit"
                    break
            else:
                completed = True
        except KeyboardInterrupt:
            self._interrupted(x, y, z, dx, dy, iteration)
            return
        self.x, self.y, self.z, self.dx, self.dy, self.iteration = x, y, z, dx, dy, iteration
        try:
            if completed:
                final = self.check(x, y, z)
                if final is None:
                    final = self.check(x, y, z, approximate=True)
                self.status = final or "max_iter"
            if self.status == "time_limit":
                final = self.check(x, y, z)
                self.status = final if final in ("optimal",) else "time_limit"
        except KeyboardInterrupt:
            self._interrupted(x, y, z, dx, dy, iteration)

    def _interrupted(self, x, y, z, dx, dy, iteration) -> None:
        self.x, self.y, self.z, self.dx, self.dy, self.iteration = x, y, z, dx, dy, iteration
        self.status = "interrupted"
        self.info = self.residuals(x, y, z)

    def _slow(self) -> bool:
        """Whether the iterations, at the pace their distance to the tolerances (:func:`tolerance_distance`) has
        fallen since the first check (linearly in its log, the least distance so far against that check's), need
        longer than PIQP's expected cost to reach it; no fall at all counts as never. From the second check on;
        at the first, whether the run is still as far from the tolerances as the problem's scale (:func:`far`).
        The ski-rental switch is the bound where nothing is known of the pace (measurements: docs/qp-default.md)."""
        st = self.st
        dist = tolerance_distance(self.info, st.eps_abs, st.eps_rel, gap=st.check_dualgap)
        now = time.perf_counter()
        if self.pace is None:
            self.pace = (now, dist, dist)
        else:
            self.pace, self.paced = (*self.pace[:2], min(self.pace[2], dist)), True
        return self._hopeless(self.piqp_cost, now) or (not self.paced and self.target == "clarabel")

    def _schedule(self, iteration: int) -> None:
        """The next early check (:func:`next_check`; at most one between two regular ones) after a failed check."""
        st = self.st
        dist = tolerance_distance(self.info, st.eps_abs, st.eps_rel, gap=st.check_dualgap)
        regular = iteration % st.check_every == 0
        self.early = next_check(self.last_check, iteration, dist, st.check_every) if regular else None
        self.last_check = (iteration, dist)

    def _hopeless(self, left: float, now: float | None = None) -> bool:
        """Whether the iterations would not reach the tolerances in ``left`` seconds from ``now`` (default: now):
        far at the first check, or, from the second, too slow (:func:`too_slow`) for that time."""
        if self.pace is None:
            return False
        if not self.paced:
            return far(self.pace[1], self.st.eps_abs, self.st.eps_rel)
        return too_slow(self.pace, time.perf_counter() if now is None else now, left)

    def _hand_over(self):
        """PIQP (or Clarabel, ``self.target``: :func:`to_clarabel`) on the problem, once (where it does not answer
        the iterations go on): its (x, y, z), scaled, where it passes the termination test, else None. Under a
        deadline PIQP starts only where the time left holds twice its expected cost, or where the iterations would
        not reach the tolerances in that time either (:meth:`_hopeless`); until then later checks ask again."""
        deadline, clarabel = self.deadline, self.target == "clarabel"  # Clarabel: its own time limit
        left = None if deadline is None else deadline - time.perf_counter()
        if left is None or clarabel or left > 2 * self.piqp_cost or self._hopeless(left):
            self.switch_at = None  # PIQP: at most about four times its expected cost, a stalling PIQP does not hold on
            cap = PIQP_MAX_ITER if clarabel else piqp_iterations(deadline, 4 * self.piqp_cost, self.numeric_time)
            out = piqp_finish(self.s, self.st, unscaled=self.qp, solver=self.target, time_limit=left, max_iter=cap)
            if out is not None and out[3] and self.check(*out[:3], claims=False) == "optimal":
                self.status, self.switched = "optimal", self.target
                return out[:3]
            if clarabel:  # PIQP's ski-rental switch still stands
                self.target, self.switch_at = "piqp", self.t_setup + self.piqp_cost
        return None

    def _adapt(self, x, y, z, iteration: int, checking: bool, learned: bool) -> None:
        """A new rho (OSQP's adaptive rule, or a learned policy's rho and alpha or its rows' factors), the KKT
        matrix refactored where it changes."""
        st, s, controller, n, m = self.st, self.s, self.controller, self.n, self.m
        if not checking:
            self.info = self.residuals(x, y, z)
        info, rho = self.info, self.rho
        pn = max(float(np.abs(z).max()) if m else 0.0, float(np.abs(info["Ax"]).max()) if m else 0.0)
        dn = max(float(np.abs(s.q).max()) if n else 0.0, float(np.abs(info["Aty"]).max()) if n else 0.0,
                 float(np.abs(info["Px"]).max()) if n else 0.0)
        prim_rel = info["prim_scaled"] / (pn + DIVISION_TOL)
        dual_rel = info["dual_scaled"] / (dn + DIVISION_TOL)
        if learned and controller.kind == "rows":
            new, change = rho, True
            self.row_factor = controller.rows(iteration // controller.interval, s.l, s.u, z, y, info["Ax"])
        elif learned:
            new, self.alpha = controller(iteration // controller.interval, prim_rel, dual_rel, rho, self.alpha)
            change = abs(math.log(new / rho)) > 0.01
        else:
            new = min(max(rho * math.sqrt(prim_rel / (dual_rel + DIVISION_TOL)), RHO_MIN), RHO_MAX)
            change = new > rho * st.adaptive_rho_tolerance or new < rho / st.adaptive_rho_tolerance
            self.adaptive_steps += 1
            if st.row_spread is not None and time.perf_counter() - self.t_factored < REFACTOR_SHARE * self.numeric_time:
                change = False  # a dear factorisation waits for the iterations since the last to cost its share
            elif st.row_spread is not None and \
                    ROW_SPREAD_FIRST <= self.adaptive_steps < ROW_SPREAD_FIRST + ROW_SPREAD_STEPS:
                # a new active set is worth a refactorisation of its own only once the iterations have
                # cost as many factorisations as it would then have made (free where rho changes anyway)
                factor = active_row_factors(s.l, s.u, z, st.row_spread)
                if (self.row_factor is None or not np.array_equal(factor, self.row_factor)) and (
                        change or time.perf_counter() - self.t_setup >= (self.row_refactors + 1) * self.numeric_time):
                    self.row_factor, change = factor, True
                    self.row_refactors += 1
        if change:
            self.rho = new
            self.kkt.update(rho_vector(new, s.l, s.u, self.row_factor))
            self.rho_updates += 1
            self.t_factored = time.perf_counter()

    # ------------------------------------------------------------------ after the iterations

    def time_left(self) -> bool:
        """Polishing and refinement count against --time-limit too: none starts once it has passed."""
        return self.deadline is None or time.perf_counter() < self.deadline

    def room(self) -> bool:
        """Neither PIQP nor the hand-written steps can stop inside a factorisation: a stalled run's finish starts
        only where the deadline leaves room for FINISH_FACTORISATIONS of them."""
        return self.deadline is None or self.deadline - time.perf_counter() > FINISH_FACTORISATIONS * (
            self.t_setup - self.t0)

    def valid_dual(self, y):
        return dual_cone(y, self.s.l, self.s.u)

    def finish(self) -> None:
        """The duals in their cone where that passes the same test; polishing (``polish``, or a stalled run's
        active-set refinement), then a stalled run's interior-point refinement."""
        st, s, m, status = self.st, self.s, self.m, self.status
        x, y, z = self.x, self.y, self.z
        if status == "optimal" and m:  # report y in the dual cone where it passes the same test
            saved, yv = self.info, self.valid_dual(y)
            # duals already in the cone (an interior-point answer's) need no second check
            if np.array_equal(yv, y) or self.check(x, yv, z, claims=False) == "optimal":
                self.y = yv
            else:
                self.info = saved
        self.polished = HANDED[self.switched] if self.switched else None
        stalled = status in ("max_iter", "optimal_inaccurate") and self.time_left()
        if ((st.polish and status == "optimal") or (st.refine_stalled and stalled)) and self.time_left():
            saved = self.info
            out = polish(s, self.x, self.y, self.z, st.delta, st.polish_refine_iter,
                         rounds=ACTIVE_SET_ROUNDS if stalled else 1, deadline=self.deadline) if m else None
            if out is not None:
                out = (out[0], self.valid_dual(out[1]), out[2])
            if out is not None and self.check(*out) == "optimal" and (
                    stalled or (self.info["prim"] <= max(saved["prim"], 1e-10)
                                and self.info["dual"] <= max(saved["dual"], 1e-10))):
                self.polished = REFINED if stalled else "polished"
                self.x, self.y, self.z = out
                self.status = "optimal"
            else:
                self.info = saved
        if st.refine_stalled and stalled and self.polished is None and m:
            self._refine()

    def _optimal(self, x, y, z) -> bool:
        return self.check(x, self.valid_dual(y), z, claims=False) == "optimal"

    def _score(self, x, y, z) -> float:
        """The termination test's largest ratio of a residual to its tolerance (<= 1: optimal)."""
        st = self.st
        worst = tolerance_distance(self.residuals(x, self.valid_dual(y), z), st.eps_abs, st.eps_rel,
                                   gap=st.check_dualgap)
        return worst if math.isfinite(worst) else math.inf

    def _finished(self, out):
        """An interior-point answer that passes the test, polished first where it is close; else None."""
        st = self.st
        if out is not None and out[3] and not self._optimal(*out[:3]):
            out = (*out[:3], False)  # the score and the test disagree at the margin: the test decides
        if out is not None and not out[3]:  # close, not there: polish from the interior-point iterate
            done = polish(self.s, out[0], out[1], out[2], st.delta, st.polish_refine_iter, rounds=ACTIVE_SET_ROUNDS,
                          deadline=self.deadline)
            out = (*done, True) if done is not None and self._optimal(*done) else None
        return out

    def _refine(self) -> None:
        """A stalled run finished by PIQP (where it imports), else by the hand-written interior-point steps from the
        ADMM iterate."""
        saved = self.info
        out = self._finished(piqp_finish(self.s, self.st, max_iter=piqp_iterations(self.deadline, math.inf,
                                                                                      self.numeric_time))) \
            if self.room() else None
        if out is None and self.room():
            out = self._finished(interior_point(self.s, self.x, self._score, deadline=self.deadline))
        if out is not None:
            out = (out[0], self.valid_dual(out[1]), out[2], True)
            self.check(*out[:3], claims=False)  # info of the answer
            self.x, self.y, self.z, _ = out
            self.status, self.polished = "optimal", REFINED_IPM
        else:
            self.info = saved
            if not self.time_left():
                self.status = "time_limit"  # the refinement was cut short by the deadline

    def result(self) -> ADMMResult:
        s, info, status = self.s, self.info, self.status
        t_end = time.perf_counter()
        res = ADMMResult(x=s.D * self.x, y=(1.0 / s.c) * s.E * self.y, z=(1.0 / s.E) * self.z, status=status,
                         iterations=self.iteration, prim_res=info.get("prim", math.nan),
                         dual_res=info.get("dual", math.nan), duality_gap=info.get("gap", math.nan),
                         rho_updates=self.rho_updates, rho=self.rho, rejected_claims=self.rejected,
                         time_s={"setup": self.t_setup - self.t0, "iterations": t_end - self.t_setup})
        if status in ("infeasible", "unbounded"):
            cert = info["cert"]
            cert = cert / max(float(np.abs(cert).max()), DIVISION_TOL)
            if status == "infeasible":
                res.prim_inf_cert = cert
            else:
                res.dual_inf_cert = cert
        res.factorisations = self.kkt.factorisations
        res.polished = self.polished
        if self.polished in (REFINED, REFINED_IPM, *HANDED.values()):
            res.message = refined_message(self.iteration, self.polished)
        return res
