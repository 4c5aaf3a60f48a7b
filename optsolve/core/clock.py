"""How much of a command's ``--time-limit`` is already spent when a solver starts, and the one deadline
type every solver uses.

``--time-limit`` is the whole command's: reading and checking the problem file count. The
runner records when the command started (:func:`started_at`); a solver takes its deadline from
:func:`remaining`, which is the limit less the time spent so far (the whole limit when called
from the Python API, where nothing was spent before the call). :class:`Deadline` is that limit's
end on ``time.perf_counter``: the pipeline gives every job one, a solver may keep time for work after
its method (ot's rounding and certificate, measured in passes over the cost) or give a stage a share
of what is left (truncated's estimate); code that compares clock values reads :attr:`Deadline.at`.
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from dataclasses import dataclass, field
from typing import Callable

_started: contextvars.ContextVar[float | None] = contextvars.ContextVar("optsolve_started", default=None)


@contextlib.contextmanager
def started_at(t0: float):
    """Inside: the command started at ``t0`` (``time.perf_counter()``)."""
    token = _started.set(t0)
    try:
        yield
    finally:
        _started.reset(token)


def spent() -> float:
    """Seconds since the command started (0 outside a command)."""
    t0 = _started.get()
    return 0.0 if t0 is None else max(time.perf_counter() - t0, 0.0)


@contextlib.contextmanager
def timed(times: dict, key: str):
    """Inside: timed; its seconds go to ``times[key]`` (a solve's ``stats["time_s"]``)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        times[key] = time.perf_counter() - start


# the longest wait the OS timers take (select, poll, a lock's timeout overflow near 9.2e9 s): a
# limit further away is held here, which no run reaches (31 years)
FAR_S = 1e9


def remaining(time_limit) -> float | None:
    """``time_limit`` less the time the command has spent (never below zero, at most :data:`FAR_S`);
    ``None`` stays ``None``."""
    if time_limit is None:
        return None
    return min(max(float(time_limit) - spent(), 0.0), FAR_S)


@dataclass
class Deadline:
    """The end of a time limit on ``clock`` (None: no limit), less the time kept for ``finish_passes`` passes
    of the work that follows the method, each as long as the latest measured (:meth:`measure`)."""

    end: float | None = None
    finish_passes: float = 0.0
    clock: Callable[[], float] = field(default=time.perf_counter, repr=False)
    pass_s: float = 0.0  # the latest measured pass, seconds
    start: float = 0.0

    @classmethod
    def after(cls, seconds: float | None, *, finish_passes: float = 0.0,
              clock: Callable[[], float] = time.perf_counter) -> "Deadline":
        """The deadline ``seconds`` of the command's limit from now (:func:`remaining`: less what is spent)."""
        now = clock()
        return cls(None if seconds is None else now + remaining(seconds), finish_passes, clock, start=now)

    def share(self, fraction: float) -> "Deadline":
        """A deadline at ``fraction`` of the time left before this one (for a stage that leaves the rest)."""
        now = self.clock()
        end = None if self.end is None else now + fraction * max(self.end - now, 0.0)
        return Deadline(end, self.finish_passes, self.clock, start=now)

    @property
    def at(self) -> float | None:
        """The ``clock`` value by which the method must stop (the end less the time kept); None: no limit."""
        return None if self.end is None else self.end - self.reserve_s

    def measure(self, seconds: float, passes: float = 1.0) -> None:
        """Record that ``passes`` passes took ``seconds`` (the latest measure replaces the earlier ones: a first
        pass also pays for allocations and warm-up)."""
        if passes > 0 and seconds >= 0:
            self.pass_s = seconds / passes

    @property
    def reserve_s(self) -> float:
        """Seconds kept for the work after the method."""
        return self.finish_passes * self.pass_s

    def remaining(self, extra_passes: float = 0.0) -> float:
        """Seconds the method may still use before ``extra_passes`` more passes and the finish (inf: no limit)."""
        if self.end is None:
            return float("inf")
        return self.end - self.clock() - self.reserve_s - extra_passes * self.pass_s

    def expired(self, extra_passes: float = 0.0) -> bool:
        """Whether the method must stop now to finish within the limit (with ``extra_passes`` still to run)."""
        return self.remaining(extra_passes) <= 0.0

    def elapsed(self) -> float:
        return self.clock() - self.start

    def report(self) -> dict:
        """The limit, the time kept for the finish and the pass measured (a document's ``stats.deadline``)."""
        return {"limit_s": None if self.end is None else self.end - self.start, "reserve_s": self.reserve_s,
                "pass_s": self.pass_s}
