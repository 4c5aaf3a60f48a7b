"""Convergence histories: what ``--history`` writes to ``stats.history``.

A solver loop calls :func:`trace` at the points where it measures its progress (a
termination check, a stage, a batch): the iteration, the residual or gap it measured, the
operator or oracle evaluations so far, and any extra quantities. The call does nothing
unless a :class:`History` is being recorded (``with recording(True)``, which the runner
opens for ``--history``), so solvers need no extra argument and cost nothing without it.

The document is columnar, one list per column, so that it plots and filters (``jq``) directly::

    {"measure": "...", "evaluations_of": "...", "iteration": [...], "evaluations": [...],
     "residual": [...], "time_s": [...], <extra columns>}

``time_s`` is the elapsed time since the recording started. Long traces are thinned: past
``MAX_ROWS`` rows every other row is dropped (the first and the latest are always kept).
"""

from __future__ import annotations

import contextlib
import contextvars
import math
import numbers
import time

MAX_ROWS = 5000

_ACTIVE: contextvars.ContextVar = contextvars.ContextVar("optsolve_history", default=None)


class History:
    """Rows of (iteration, evaluations, residual, time) plus named extra columns."""

    def __init__(self):
        self.t0 = time.perf_counter()
        self.measure: str | None = None
        self.evaluations_of: str | None = None
        self.rows: list[dict] = []
        self.columns: list[str] = []

    def record(self, iteration, residual, evaluations=None, **extra) -> None:
        row = {"iteration": _num(iteration), "evaluations": _num(evaluations), "residual": _num(residual),
               "time_s": time.perf_counter() - self.t0}
        for name, value in extra.items():
            if name not in self.columns:
                self.columns.append(name)
            row[name] = _num(value)
        self.rows.append(row)
        if len(self.rows) > MAX_ROWS:
            last = self.rows[-1]
            self.rows = self.rows[:-1:2] + [last]

    def to_dict(self) -> dict:
        names = ["iteration", "evaluations", "residual", "time_s"] + self.columns
        doc = {"measure": self.measure, "evaluations_of": self.evaluations_of}
        doc.update({name: [row.get(name) for row in self.rows] for name in names})
        return doc


def _num(value):
    """A JSON value from a Python or numpy scalar; non-finite floats become None."""
    if value is None or isinstance(value, (str, bool)):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    x = float(value)
    return x if math.isfinite(x) else None


def active() -> History | None:
    """The history being recorded in this context, or None."""
    return _ACTIVE.get()


def trace(iteration, residual, *, evaluations=None, measure: str | None = None, evaluations_of: str | None = None,
          **extra) -> None:
    """Record one point of the active history (nothing when none is recorded).

    ``measure`` names what ``residual`` is (set once, by the first call that gives it);
    ``evaluations_of`` names what ``evaluations`` counts."""
    h = _ACTIVE.get()
    if h is None:
        return
    if measure is not None and h.measure is None:
        h.measure = measure
    if evaluations_of is not None and h.evaluations_of is None:
        h.evaluations_of = evaluations_of
    h.record(iteration, residual, evaluations, **extra)


@contextlib.contextmanager
def recording(enabled: bool = True):
    """Record the traces of the code run inside (yields the History, or None when not enabled)."""
    if not enabled:
        yield None
        return
    h = History()
    token = _ACTIVE.set(h)
    try:
        yield h
    finally:
        _ACTIVE.reset(token)
