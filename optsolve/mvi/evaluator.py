"""Counted evaluations of F, the natural residual at every evaluated point, and the stops.

Every method calls F only through an :class:`Evaluator`, so evaluations are counted the
same way for all of them (Jacobian evaluations of CurvatureEG+ separately), the natural
residual ||z - P_C(z - F(z))|| is measured at every point where F is evaluated, and the
best point by residual is the one reported. A stop (tolerance reached, budget spent, time
up, a non-finite value) is raised as :class:`Stop` from inside the method's loop. :class:`Setup`
is what every method is given beside its evaluator.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np

from optsolve.core.history import trace
from optsolve.mvi.operators import ConstraintSet, Operator, natural_residual, norm2

HISTORY_PER_DECADE = 20


class Stop(Exception):
    """Raised by the evaluator: ``reason`` is converged, budget, time_limit, numerical or max_iter."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason)
        self.reason = reason
        self.detail = detail


class Evaluator:
    def __init__(self, op: Operator, C: ConstraintSet, *, tol: float, max_evals: int, deadline: float | None = None,
                 history: bool = False, progress=None):
        self.op, self.C = op, C
        self.tol = tol
        self.max_evals = max_evals
        self.deadline = deadline
        self.evals = 0  # evaluations of F, and products with M (:meth:`product`), each one sparse or dense product
        self.sampled_terms = 0  # terms F_i evaluated by :meth:`sample` (an operator that is a mean of terms)
        self.sampled = 0.0  # the same in evaluations of F: terms / N
        self.sampling = False  # set by a method that samples terms: the history then counts them
        self.jacobian_evals = 0
        self.f_time = 0.0  # seconds spent inside F and the products
        self.best_residual = math.inf
        self.best_z = None
        self.best_eval = 0
        self.iteration = 0  # outer iterations, kept by the method
        self.min_u = math.inf  # smallest ||u|| a method reported (u in (F + N_C)(w))
        self.keep_history = history
        self.history: list = []
        self._next_record = 1.0
        self.t0 = time.perf_counter()
        self.progress = progress

    def __call__(self, z: np.ndarray) -> np.ndarray:
        if self.evals + self.sampled >= self.max_evals:
            raise Stop("budget")
        start = time.perf_counter()
        if self.op.user:
            try:
                Fz = self.op.F(z)
            except Exception as exc:  # the best iterate so far is still written
                raise Stop("numerical", f"the operator {self.op.name} raised {type(exc).__name__} ({exc}) at "
                           f"evaluation {self.evals + 1}") from None
        else:
            Fz = self.op.F(z)
        now = time.perf_counter()
        self.f_time += now - start
        self.evals += 1
        if Fz.shape != z.shape:
            raise Stop("numerical", f"the operator returned shape {Fz.shape} at a point of shape {z.shape}")
        if not np.isfinite(Fz).all():
            raise Stop("numerical", f"the operator returned a non-finite value at evaluation {self.evals}"
                       + ("" if np.isfinite(z).all() else " (the iterate itself is not finite: the method diverged)"))
        r = norm2(Fz) if self.C.kind == "none" else natural_residual(self.C, z, Fz)
        if r < self.best_residual or self.best_z is None:  # the first point is the best so far, r = inf too
            if self.best_z is None:
                self.best_z = z.copy()
            else:  # into the same buffer: no allocation per improvement
                np.copyto(self.best_z, z)
            self.best_residual, self.best_eval = r, self.evals
        if self.keep_history and (self.evals >= self._next_record or r <= self.tol):
            self.record(r)
        if r <= self.tol:
            raise Stop("converged")
        self._tick(now)
        return Fz

    def _tick(self, now: float) -> None:
        # every evaluation: one evaluation may be slow (a large operator), and the clock costs little
        if self.deadline is not None and now > self.deadline:
            raise Stop("time_limit")
        if self.evals & 255 == 0 and self.progress is not None:
            self.progress.update(self.evals, best_residual=self.best_residual)

    def product(self, v: np.ndarray) -> np.ndarray:
        """M v for an affine F = M z + q (``op.matrix``): one evaluation of the budget, timed with F's;
        v is a direction, not a point, so no residual is measured."""
        if self.evals >= self.max_evals:
            raise Stop("budget")
        start = time.perf_counter()
        Mv = self.op.matrix @ v
        now = time.perf_counter()
        self.f_time += now - start
        self.evals += 1
        self._tick(now)
        return Mv

    def sample(self, z: np.ndarray, idx: np.ndarray) -> np.ndarray:
        """The mean of the terms F_i(z), i in ``idx``, of an operator that is a mean of N terms: len(idx) / N
        of an evaluation of the budget, timed with F's; no residual is measured (it is not F)."""
        if self.evals + self.sampled >= self.max_evals:
            raise Stop("budget")
        start = time.perf_counter()
        try:
            Fz = self.op.batch(z, idx)
        except Exception as exc:
            raise Stop("numerical", f"the operator {self.op.name} raised {type(exc).__name__} ({exc}) on a batch of "
                       f"{len(idx)} terms") from None
        now = time.perf_counter()
        self.f_time += now - start
        self.sampled_terms += len(idx)
        self.sampled = self.sampled_terms / self.op.terms
        if Fz.shape != z.shape:
            raise Stop("numerical", f"the operator's batch function returned shape {Fz.shape} at a point of shape "
                       f"{z.shape}")
        if not np.isfinite(Fz).all():
            raise Stop("numerical", "the operator's batch function returned a non-finite value"
                       + ("" if np.isfinite(z).all() else " (the iterate itself is not finite: the method diverged)"))
        self._tick(now)
        return Fz

    def jacobian_norm(self, z: np.ndarray) -> float | None:
        """||JF(z)|| when the operator has a Jacobian (counted), else None; stops at the deadline."""
        try:
            value = self.op.jacobian_norm(z, self.deadline)
        except Exception as exc:
            if not self.op.user:
                raise
            raise Stop("numerical", f"the Jacobian of the operator {self.op.name} failed ({type(exc).__name__}: "
                       f"{exc})") from None
        if value is None and self.op.jacobian is not None and self.deadline is not None \
                and time.perf_counter() > self.deadline:
            raise Stop("time_limit")
        if value is not None:
            self.jacobian_evals += 1
        return value

    def note_u(self, uu: float) -> None:
        """A method's ||u||^2 at its latest point (the quantity the O(1/eps) guarantee bounds)."""
        u = math.sqrt(uu)
        if u < self.min_u:
            self.min_u = u

    def record(self, r: float) -> None:
        u = None if math.isinf(self.min_u) else self.min_u
        self.history.append((self.evals, self.jacobian_evals, r, self.best_residual, u, time.perf_counter() - self.t0,
                             self.evals + self.sampled))
        sampled = {"term_evaluations": self.sampled_terms} if self.sampling else {}
        trace(self.iteration, r, evaluations=self.evals, measure="natural residual ||z - P_C(z - F(z))||",
              evaluations_of="operator F", jacobian_evaluations=self.jacobian_evals, best_residual=self.best_residual,
              u_norm=u, **sampled)
        self._next_record = max(self.evals + 1, self._next_record * 10 ** (1 / HISTORY_PER_DECADE))


@dataclass
class Setup:
    """What every method is given (after validation)."""

    z0: np.ndarray
    L: float | None  # the global Lipschitz constant, when known
    rho: float | None  # the weak-MVI constant, when known
    gamma: float | None = None  # a fixed step (None: chosen by the method)
    lam: float = 1.0
    sigma: float | None = None
    inner_steps: int | None = None  # ecppa: forced inner steps; rppa: the fixed count
    inner: str = "auto"  # ecppa's resolvents: "fixed-point", "gmres" (affine F on R^d), "auto" (gmres where it applies)
    max_iter: int | None = None
    batch: int | None = None  # bc-seg+: terms per sampled evaluation
    seed: int = 0  # bc-seg+: the sampling generator's seed
    notes: list = field(default_factory=list)
