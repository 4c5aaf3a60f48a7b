"""How much of a command's ``--time-limit`` is already spent when a solver starts.

``--time-limit`` is the whole command's: reading and checking the problem file count. The
runner records when the command started (:func:`started_at`); a solver takes its deadline from
:func:`remaining`, which is the limit less the time spent so far (the whole limit when called
from the Python API, where nothing was spent before the call).
"""

from __future__ import annotations

import contextlib
import contextvars
import time

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


def deadline(time_limit, share: float = 1.0) -> float | None:
    """The ``time.perf_counter()`` value by which ``share`` of what is left of ``time_limit`` is spent: the
    one clock every solver's deadline is on. ``None`` without a limit."""
    left = remaining(time_limit)
    return None if left is None else time.perf_counter() + share * left


# the longest wait the OS timers take (select, poll, a lock's timeout overflow near 9.2e9 s): a
# limit further away is held here, which no run reaches (31 years)
FAR_S = 1e9


def remaining(time_limit) -> float | None:
    """``time_limit`` less the time the command has spent (never below zero, at most :data:`FAR_S`);
    ``None`` stays ``None``."""
    if time_limit is None:
        return None
    return min(max(float(time_limit) - spent(), 0.0), FAR_S)
