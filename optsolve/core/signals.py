"""SIGINT, SIGTERM and SIGHUP during a command: each stops it as Ctrl-C does.

``timeout``, Slurm and Kubernetes stop a job with SIGTERM (a closed terminal sends SIGHUP).
The command line, never the Python API, runs a command inside :func:`handling`:

* the first signal raises :class:`~optsolve.core.errors.Terminated` (a KeyboardInterrupt) in
  the main thread where :meth:`Handling.raising` allows it, so the solvers' own ``except
  KeyboardInterrupt`` return their best iterate, written with status ``interrupted``;
  elsewhere it is only recorded. The exit code is 128 + the signal number (130 SIGINT,
  143 SIGTERM, 129 SIGHUP).
* a second signal stops the process at once: this process's worker processes are killed
  and it exits with 128 + that signal's number, writing nothing more.
* inside :func:`deferred` (writing an output file, printing its line) both wait until the
  section ends, so that no file or line is left half written; a third stops the process at once
  there too (a write that does not end, to a FIFO nobody reads, say).

A signal ignored when the command starts (``nohup``, SIGINT of a background job) stays ignored.
The previous handlers are restored when the command ends.

A solve command run as a program holds these signals from its start (:func:`hold`): one that comes
while the command still loads its modules is kept, not acted on (which would end the process with no
document), and is the command's first signal once its handling, or its watcher, takes over.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading

from optsolve.core.errors import Terminated

SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name))

_active: "Handling | None" = None  # signal dispositions are per process: one command at a time
_held: list[int] = []  # signals that came before a command's handling took over (see hold)


def _hold(signum, frame):
    _held.append(signum)


def hold() -> None:
    """Keep SIGINT, SIGTERM and SIGHUP from now until a command takes them (:func:`take_held`); a signal
    ignored now stays ignored."""
    if threading.current_thread() is not threading.main_thread():
        return
    for signum in SIGNALS:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, _hold)


def keep_held(signums: list[int]) -> None:
    """Hold ``signums`` again, first (a forked child taking over its parent's)."""
    _held[:0] = signums


def take_held() -> list[int]:
    """The signals held so far, in their order; the list is emptied."""
    held = list(_held)
    del _held[:len(held)]
    return held


def signal_name(signum: int) -> str:
    return Terminated(signum).signal_name


def kill_children() -> None:
    """Kill the worker processes this process started (a process pool's, a local Dask cluster's)."""
    import multiprocessing

    try:
        children = multiprocessing.active_children()
    except Exception:  # the set of children may change under us: kill what can be found
        return
    for child in children:
        try:
            child.kill()
        except Exception:
            pass


def stop_at_once(label: str, signum: int, kill) -> None:
    """A second signal: say so on stderr, ``kill()`` the processes started, exit with 128 + ``signum``
    and write nothing more."""
    try:
        sys.stdout.flush()  # lines already printed whole (deferred sections end with a full line)
    except Exception:
        pass
    try:
        os.write(2, f"{label}: stopped at once by a second signal ({signal_name(signum)}); "
                    f"nothing more is written.\n".encode())
    except OSError:
        pass
    kill()
    os._exit(128 + signum)


class Handling:
    """The signal state of one command (see the module's notes); ``label`` starts its stderr lines."""

    def __init__(self, label: str):
        self.label = label
        self.received: int | None = None  # the first signal
        self.pid = os.getpid()
        self.previous: dict = {}
        self._raising = False
        self._deferring = 0
        self._raise_later = False
        self._stop_later: int | None = None

    @property
    def exit_code(self) -> int | None:
        """128 + the first signal's number, or None when none was received."""
        return None if self.received is None else 128 + self.received

    def describe(self) -> str:
        return f"Stopped by {signal_name(self.received)}." if self.received is not None else ""

    def _handle(self, signum, frame):
        if os.getpid() != self.pid:  # a worker forked from this process: behave as before
            return self._as_before(signum, frame)
        if self._deferring:
            if self.received is None:
                self.received, self._raise_later = signum, True
            elif self._stop_later is None:
                self._stop_later = signum
            else:  # a third: the section does not end (a FIFO nobody reads), so stop inside it
                self.stop(signum)
            return
        if self.received is not None:
            self.stop(signum)
        self.received = signum
        if self._raising:
            raise Terminated(signum)

    def _as_before(self, signum, frame):
        before = self.previous.get(signum, signal.SIG_DFL)
        if callable(before):
            return before(signum, frame)
        if before != signal.SIG_IGN:
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    def stop(self, signum: int) -> None:
        """Stop now: kill the worker processes, exit with 128 + ``signum``."""
        stop_at_once(self.label, signum, kill_children)

    @contextlib.contextmanager
    def raising(self):
        """Inside: the first signal raises Terminated (at once if one came before)."""
        before = self._raising
        self._raising = True
        try:
            if self.received is not None and not self._deferring:
                raise Terminated(self.received)
            yield self
        finally:
            self._raising = before

    @contextlib.contextmanager
    def deferred(self):
        """Inside: a signal waits for the end of the section, then acts as it would have."""
        self._deferring += 1
        try:
            yield self
        finally:
            self._deferring -= 1
            if not self._deferring:
                if self._stop_later is not None:
                    self.stop(self._stop_later)
                if self._raise_later:
                    self._raise_later = False
                    if self._raising:
                        raise Terminated(self.received)

    def install(self) -> bool:
        if threading.current_thread() is not threading.main_thread():
            return False  # only the main thread may set handlers (and only it runs them)
        for signum in SIGNALS:
            before = signal.getsignal(signum)
            if before == signal.SIG_IGN:
                continue
            self.previous[signum] = before
            signal.signal(signum, self._handle)
        for signum in take_held():  # signals that came while the command was loading act now
            self._handle(signum, None)
        return True

    def restore(self) -> None:
        for signum, before in self.previous.items():
            signal.signal(signum, signal.SIG_DFL if before is None else before)
        self.previous.clear()


@contextlib.contextmanager
def handling(label: str):
    """Handle SIGINT, SIGTERM and SIGHUP for the command inside (see the module's notes); yields
    the :class:`Handling`, whose ``exit_code`` says whether a signal came."""
    global _active
    state = Handling(label)
    outer = _active
    installed = state.install()
    _active = state if installed else outer
    try:
        yield state
    finally:
        _active = outer
        if installed:
            state.restore()


def received() -> int | None:
    """The first signal the command running has received (None: none, or no command): what a solver polls
    where an exception at any point would not do (MPI ranks, which must stop at the same iteration)."""
    return _active.received if _active is not None else None


def deferred():
    """:meth:`Handling.deferred` of the command running, or nothing outside a command."""
    return _active.deferred() if _active is not None else contextlib.nullcontext()

