"""Logs and progress on stderr; stdout carries only the JSON document.

Verbosity: ``-q`` keeps only error lines, the default adds warnings and a one-line
summary, ``-v`` adds iteration logs. A progress line is drawn only when stderr is a
terminal. Third-party solvers that print are run inside :func:`stdout_to_stderr`.
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import sys
import time

LOGGER_NAME = "optsolve"
QUIET, NORMAL, VERBOSE = -1, 0, 1


def get_logger(name: str | None = None) -> logging.Logger:
    return logging.getLogger(LOGGER_NAME if not name else f"{LOGGER_NAME}.{name}")


def configure_logging(verbosity: int = NORMAL) -> None:
    """Send optsolve's log records (and Python warnings) to the current stderr."""
    logger = logging.getLogger(LOGGER_NAME)
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("optsolve: %(levelname)s: %(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    level = {QUIET: logging.ERROR, NORMAL: logging.WARNING, VERBOSE: logging.DEBUG}
    logger.setLevel(level.get(verbosity, logging.DEBUG if verbosity > 0 else logging.ERROR))
    logging.captureWarnings(True)
    pywarn = logging.getLogger("py.warnings")
    for h in list(pywarn.handlers):
        pywarn.removeHandler(h)
    pywarn.addHandler(handler)
    pywarn.propagate = False
    pywarn.setLevel(logging.ERROR if verbosity <= QUIET else logging.WARNING)


class Progress:
    """Per-iteration reporting for a solver loop.

    ``update(iteration, **metrics)`` logs at debug level (``-v``) and, when stderr is
    a terminal and not silenced, redraws one progress line. Cheap when neither applies.
    """

    def __init__(self, label: str = "", verbosity: int = NORMAL, stream=None, every_s: float = 0.2):
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.verbosity = verbosity
        self.tty = verbosity >= NORMAL and _isatty(self.stream)
        self.every_s = every_s
        self._last_draw = 0.0
        self._drawn = False
        self.logger = get_logger()

    @property
    def active(self) -> bool:
        return self.tty or self.verbosity >= VERBOSE

    def update(self, iteration: int, **metrics) -> None:
        if not self.active:
            return
        text = f"{self.label} iter {iteration}" + "".join(f" {k}={_fmt(v)}" for k, v in metrics.items())
        if self.verbosity >= VERBOSE:
            self.logger.debug(text)
        elif self.tty:
            now = time.monotonic()
            if now - self._last_draw >= self.every_s:
                self.stream.write("\r\x1b[K" + text)
                self.stream.flush()
                self._last_draw = now
                self._drawn = True

    def close(self) -> None:
        if self._drawn:
            self.stream.write("\r\x1b[K")
            self.stream.flush()
            self._drawn = False

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


SILENT = Progress(verbosity=QUIET)


def _fmt(v) -> str:
    if isinstance(v, float):
        return f"{v:.3e}"
    return str(v)


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


@contextlib.contextmanager
def stdout_to_stderr():
    """Redirect stdout to stderr for third-party code, at the Python and the file-descriptor level.

    Solvers written in C (network simplex, OSQP) print with ``printf`` to descriptor 1,
    which ``contextlib.redirect_stdout`` alone does not catch.
    """
    sys.stdout.flush()
    saved = None
    try:
        out_fd, err_fd = sys.__stdout__.fileno(), sys.__stderr__.fileno()
        sys.__stdout__.flush()
        saved = os.dup(out_fd)
        os.dup2(err_fd, out_fd)
    except (AttributeError, OSError, ValueError):
        saved = None
    try:
        with contextlib.redirect_stdout(sys.stderr):
            yield
    finally:
        if saved is not None:
            try:
                sys.__stdout__.flush()
            except (OSError, ValueError):
                pass
            os.dup2(saved, out_fd)
            os.close(saved)


_stage_listener: contextvars.ContextVar = contextvars.ContextVar("optsolve_stage", default=None)


@contextlib.contextmanager
def stages_to(listener):
    """Inside: :func:`stage` calls ``listener(text)`` (the watcher's channel names the stage that did not answer)."""
    token = _stage_listener.set(listener)
    try:
        yield
    finally:
        _stage_listener.reset(token)


def stage(text: str) -> None:
    """Say what the command is doing now ('certifying the answer'); free where nobody listens."""
    listener = _stage_listener.get()
    if listener is not None:
        listener(text)
