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
from typing import Callable

from optsolve.core.clock import Deadline

# Passes over the kernel (products, log-sum-exps) between two looks at the deadline: a loop stops when
# the next stretch would not fit (see :class:`optsolve.core.clock.Deadline`).
STAGE_START_PASSES = 3  # column update, building the plan, a first sweep
SWEEP_PASSES = 3  # one chi-Sinkhorn sweep: row and column marginals, from products or LSEs
STEP_HEAD_PASSES = 5  # a Newton step before CG: build, r_P, the preconditioner and the first product
CG_ITERATION_PASSES = 2
STEP_TAIL_PASSES = 6  # after CG: the line search's first try, the new marginals, the column update

# Log-sum-exp-equivalent passes after the solver stops: rounding (three kernel passes and a cost
# product), two dual bounds (two c-transforms each) and the certificate's rebuilt plan (two passes).
FINISH_PASSES = 16.0


def after(seconds: float | None, clock: Callable[[], float] = time.perf_counter) -> Deadline:
    """The deadline of an ot solve: ``seconds`` from now, keeping :data:`FINISH_PASSES` passes for the finish."""
    return Deadline.after(seconds, finish_passes=FINISH_PASSES, clock=clock)
