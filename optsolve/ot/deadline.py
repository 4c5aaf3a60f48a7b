"""The ``--time-limit`` of one ``optsolve ot`` solve, rounding and certificate included.

Rounding a plan, its dual bound and the certificate cannot be interrupted and cost a fixed
number of passes over the cost (about :data:`FINISH_PASSES` log-sum-exp passes), so the
solver stops early enough to leave them that time: the deadline it sees is the end of the
limit less ``FINISH_PASSES`` times the measured duration of one pass. The solvers measure a
pass on the problem itself (a log-sum-exp over the kernel, whatever its form: dense, streamed
in blocks, or separable on a grid) and check the deadline inside every loop whose length
they do not control (conjugate gradients, Sinkhorn sweeps, chunks of POT's iterations).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Callable

from optsolve.core.clock import remaining

# Passes over the kernel (products, log-sum-exps) between two looks at the deadline: a loop stops when
# the next stretch would not fit (see :class:`Deadline`).
STAGE_START_PASSES = 3  # column update, building the plan, a first sweep
SWEEP_PASSES = 3  # one chi-Sinkhorn sweep: row and column marginals, from products or LSEs
STEP_HEAD_PASSES = 5  # a Newton step before CG: build, r_P, the preconditioner and the first product
CG_ITERATION_PASSES = 2
STEP_TAIL_PASSES = 6  # after CG: the line search's first try, the new marginals, the column update

# Log-sum-exp-equivalent passes after the solver stops: rounding (three kernel passes and a cost
# product), two dual bounds (two c-transforms each) and the certificate's rebuilt plan (two passes).
FINISH_PASSES = 16.0


@dataclass
class Deadline:
    """The end of a time limit on ``clock`` (None: no limit) and the measured cost of one pass."""

    end: float | None = None
    finish_passes: float = FINISH_PASSES
    clock: Callable[[], float] = field(default=time.perf_counter, repr=False)
    pass_s: float = 0.0  # the latest measured pass, seconds
    start: float = 0.0

    @classmethod
    def after(cls, seconds: float | None, clock: Callable[[], float] = time.perf_counter) -> "Deadline":
        now = clock()
        return cls(None if seconds is None else now + remaining(seconds), clock=clock, start=now)

    def measure(self, seconds: float, passes: float = 1.0) -> None:
        """Record that ``passes`` log-sum-exp passes took ``seconds`` (the latest measure replaces the
        earlier ones: a first pass also pays for allocations and warm-up)."""
        if passes > 0 and seconds >= 0:
            self.pass_s = seconds / passes

    @property
    def reserve_s(self) -> float:
        """Seconds kept for the rounding and the certificate."""
        return self.finish_passes * self.pass_s

    def remaining(self, extra_passes: float = 0.0) -> float:
        """Seconds the solver may still use before ``extra_passes`` more passes and the finish (inf: no limit)."""
        if self.end is None:
            return float("inf")
        return self.end - self.clock() - self.reserve_s - extra_passes * self.pass_s

    def expired(self, extra_passes: float = 0.0) -> bool:
        """Whether the solver must stop now to finish within the limit (with ``extra_passes`` still to run)."""
        return self.remaining(extra_passes) <= 0.0

    def elapsed(self) -> float:
        return self.clock() - self.start

    def report(self) -> dict:
        """What ``stats.deadline`` records: the limit, the time kept for the finish, the pass measured."""
        return {"limit_s": None if self.end is None else self.end - self.start, "reserve_s": self.reserve_s,
                "pass_s": self.pass_s}

