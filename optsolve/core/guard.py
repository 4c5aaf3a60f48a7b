"""The watcher: every solve command run as a program answers a signal, and its time limit, within 2 s.

The solvers keep the limit themselves and answer a signal with their best iterate: they check the
clock between iterations and catch KeyboardInterrupt. A step that cannot be interrupted can still
run past both: a sparse factorisation, HiGHS's MILP, k-means++ seeding, a native transport solver,
a distributed setup. On the command line a solve therefore runs in a forked child process, watched
by the command's own process:

* the child reads, solves and tells the watcher the problem's SHA-256 once read, the stage it is
  in, and ``done`` once its result is final; it then waits for the watcher's go-ahead before it
  writes anything, so that a document is written by one of the two, whole, or by none;
* if the child is not done :data:`GRACE_S` seconds after the limit, or :data:`SIGNAL_GRACE_S`
  seconds after a first signal, whatever it is doing, the watcher kills it (and the processes it
  started) and writes the document itself: no solution, status ``time_limit`` or ``interrupted``,
  a message naming the stage that did not answer;
* SIGINT, SIGTERM and SIGHUP sent to the command are passed on to the child, which handles them
  as :mod:`optsolve.core.signals` says; a second one stops both at once, unless the child is
  writing its document, which it then finishes first (a third one stops both even then). The
  child runs in a process group of its own, so that a terminal's Ctrl-C reaches it once, through
  the watcher (and Ctrl-Z stops both, ``fg`` and ``bg`` continue both);
* the child dies with the watcher (Linux: ``PR_SET_PDEATHSIG``; elsewhere a thread of the child
  sees the watcher's pipe close), and never writes once the watcher is gone.

The limit counts from the command's start (:data:`optsolve.cli.STARTED`). ``optsolve batch``
watches each file's solve under a time limit the same way, in its worker
(:func:`optsolve.core.runner.watched_solve`). Rank 0 of ``mpiexec ... --engine mpi`` is watched
alike: it forks before MPI starts, and its child starts MPI (:func:`mpi_started`); when its watcher
ends the command, the launcher ends the other ranks. Without ``fork``, in a process that has
already started MPI, when the problem is typed at a terminal (``-`` on a tty, which a background
process group may not read), and for calls from Python (the API, Click's test runner), the solve
runs in one process.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import threading
import time

from optsolve.core.signals import SIGNALS, keep_held, stop_at_once, take_held

GRACE_S = 0.7  # after the limit, before the watcher stops a child that is not done
SIGNAL_GRACE_S = 1.5  # after a first signal: the watcher's document is out within 2 s of it
_POLL_S = 3600.0  # the longest single wait of the watcher (select's timeout overflows near 9.2e9 s)
STOPS = tuple(getattr(signal, name) for name in ("SIGTSTP",) if hasattr(signal, name))
_GO = b"w"  # the watcher's go-ahead: the child may write its document


def usable(problem: str) -> bool:
    """Whether the solve of ``problem`` can run in a watched child process."""
    if not hasattr(os, "fork") or sys.platform == "win32":
        return False
    if problem == "-":
        try:
            return not sys.stdin.isatty()
        except (AttributeError, ValueError):
            return True
    return True


def mpi_started() -> bool:
    """Whether this process has started MPI (mpi4py): a process that has may not fork."""
    mpi = sys.modules.get("mpi4py.MPI")
    try:
        return mpi is not None and bool(mpi.Is_initialized())
    except Exception:  # noqa: BLE001 - a broken MPI: do not fork
        return True


def _end_mpi() -> None:
    """In the child: end MPI where the solve started it (``os._exit`` skips mpi4py's own ending, and the
    launcher then takes the rank for failed and kills the others)."""
    if mpi_started():
        mpi = sys.modules["mpi4py.MPI"]
        if not mpi.Is_finalized():
            mpi.Finalize()


class Channel:
    """The child's side of the pipes to the watcher: one short line a message, and the go-ahead."""

    def __init__(self, fd: int, go_fd: int | None = None):
        self.fd = fd
        self._go = threading.Event()
        if go_fd is not None:
            threading.Thread(target=self._listen, args=(go_fd,), daemon=True).start()

    def _listen(self, go_fd: int) -> None:
        """Wait for the go-ahead; the pipe closed without it, the watcher is gone: so is the child."""
        try:
            got = os.read(go_fd, 1)
        except OSError:
            got = b""
        if got == _GO:
            self._go.set()
            return
        os._exit(1)  # nothing may be written once the command has ended

    def send(self, word: str, value: str = "") -> None:
        try:
            os.write(self.fd, f"{word} {value}\n".encode())
        except OSError:  # the watcher is gone: nothing to tell
            pass

    def finish(self) -> None:
        """Say ``done`` and wait for the watcher's go-ahead to write; the watcher kills the child instead
        when it has given up on it, and the child exits when the watcher is gone."""
        self.send("done")
        while not self._go.wait(_POLL_S):
            pass


def _die_with(parent: int) -> None:
    """In the child: be killed when the watcher ends, however it ends (Linux); elsewhere the go-ahead
    pipe's end does it (:meth:`Channel._listen`)."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, int(signal.SIGKILL), 0, 0, 0)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:  # the watcher ended before the setting took: end now
        os._exit(1)


def _descendants(pid: int) -> list[int]:
    """The processes started by ``pid`` and by them (Linux's /proc; empty elsewhere)."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            tasks = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{parent}/task/{tid}/children") as f:
                    kids = [int(p) for p in f.read().split()]
            except (OSError, ValueError):
                continue
            found.extend(kids)
            todo.extend(kids)
    return found


def kill_all(pid: int) -> None:
    """Kill the child's process group, and whatever it started outside the group."""
    victims = _descendants(pid)
    try:
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    for victim in victims:
        try:
            os.kill(victim, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass


def _exit_code(status: int) -> int:
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return 1


def run_watched(limit: float | None, started: float, child, on_timeout, label: str) -> int:
    """Run ``child(channel)`` (which returns an exit code, and calls ``channel.finish()`` before it
    writes) in a forked process; return its exit code, or, when it is not done ``GRACE_S`` after
    ``started + limit`` (``limit`` None: never) or ``SIGNAL_GRACE_S`` after a first signal, kill it
    and return ``on_timeout(sha256, method, stage, signum)`` (the watcher writes the document;
    ``signum`` is the first signal received, or None)."""
    read_fd, write_fd = os.pipe()
    go_read, go_write = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    parent = os.getpid()
    early = take_held()  # signals that came while the command was loading: the child's first ones
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_fd)
            os.close(go_write)
            keep_held(early)  # taken by its handling (a signal sent now could be lost while fork returns)
            _die_with(parent)
            os.setpgid(0, 0)
            if hasattr(signal, "SIGTTOU"):  # its group is in the background: its lines to the terminal
                signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # stopped it under `stty tostop`
            code = child(Channel(write_fd, go_read))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - never let the child run on into the watcher's code
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
                _end_mpi()
            finally:
                os._exit(code)
    os.close(write_fd)
    os.close(go_read)
    try:
        os.setpgid(pid, pid)  # also here: whichever of the two runs first
    except OSError:
        pass
    limit_at = None if limit is None else started + min(float(limit), 1e9)
    try:
        return _watch(pid, read_fd, go_write, limit_at, on_timeout, label, early)
    finally:
        os.close(go_write)


class _Report:
    """What the child has told of its solve so far, line by line: the problem's sha256, the method, the stage,
    and whether its document is ready (``done``: it waits for the go-ahead)."""

    def __init__(self):
        self.sha256 = self.method = None
        self.stage, self.done, self.buffer = "reading the problem", False, b""

    def feed(self, chunk: bytes) -> None:
        self.buffer += chunk
        *lines, self.buffer = self.buffer.split(b"\n")
        for line in lines:
            word, _, value = line.decode(errors="replace").partition(" ")
            if word == "sha256":
                self.sha256 = value or None
            elif word == "stage":
                self.stage = value
            elif word == "method":
                self.method = value or None
            elif word == "done":
                self.done = True


def _handlers(pid: int, label: str, received: list, writing: list, wake_write: int):
    """(forward, pause): the signal handlers of the watcher. ``forward`` passes a signal on to the child's
    process group and wakes the wait; ``pause`` stops the child with the command (Ctrl-Z) and resumes it."""

    def forward(signum, frame, send=True):
        received.append(signum)
        # a second signal stops everything at once, unless a document is being written (the child's, whose
        # own handling then stops after it, or this process's): it ends first, unless a third signal comes
        if len(received) > 2 or (len(received) > 1 and not writing[0]):
            stop_at_once(label, signum, lambda: kill_all(pid))
        try:
            if send:
                os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass
        try:
            os.write(wake_write, b"s")
        except OSError:
            pass

    def pause(signum, frame):  # Ctrl-Z: the child, in a process group of its own, stops with the command
        try:
            os.killpg(pid, signal.SIGSTOP)
        except (ProcessLookupError, PermissionError):
            pass
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)  # stopped here until SIGCONT (fg, bg)
        signal.signal(signum, pause)
        try:
            os.killpg(pid, signal.SIGCONT)
        except (ProcessLookupError, PermissionError):
            pass

    return forward, pause


def _watch(pid: int, read_fd: int, go_fd: int, limit_at: float | None, on_timeout, label: str,
           early: list[int]) -> int:
    received: list[int] = []
    writing = [False]  # the go-ahead is given: the child's document is being written
    wake_read, wake_write = os.pipe()  # a signal wakes the wait below, which then shortens it
    os.set_blocking(wake_write, False)
    previous = {}
    forward, pause = _handlers(pid, label, received, writing, wake_write)
    for signum, handler in [(s, forward) for s in SIGNALS] + [(s, pause) for s in STOPS]:
        before = signal.getsignal(signum)
        if before != signal.SIG_IGN:
            previous[signum] = before
            signal.signal(signum, handler)
    for signum in early:  # the child has them
        forward(signum, None, send=False)
    for signum in take_held():  # came while forking
        forward(signum, None)
    report, signalled_at = _Report(), None
    try:
        while not report.done:
            if received and signalled_at is None:
                signalled_at = time.perf_counter()
            ends = [t for t in (None if limit_at is None else limit_at + GRACE_S,
                                None if signalled_at is None else signalled_at + SIGNAL_GRACE_S) if t is not None]
            wait = min(ends) - time.perf_counter() if ends else _POLL_S
            if wait <= 0:
                break
            ready, _, _ = select.select([read_fd, wake_read], [], [], min(wait, _POLL_S))
            if wake_read in ready:
                os.read(wake_read, 64)
            if read_fd not in ready:
                continue
            chunk = os.read(read_fd, 4096)
            if not chunk:  # the child closed its end: it is exiting
                _, status = os.waitpid(pid, 0)
                return _exit_code(status)
            report.feed(chunk)
        if report.done:
            writing[0] = True
            try:
                os.write(go_fd, _GO)
            except OSError:  # the child has exited
                pass
            _, status = os.waitpid(pid, 0)
            return _exit_code(status)
        kill_all(pid)
        os.waitpid(pid, 0)
        writing[0] = True
        return on_timeout(report.sha256, report.method, report.stage, received[0] if received else None)
    finally:
        os.close(read_fd)
        os.close(wake_read)
        os.close(wake_write)
        for signum, before in previous.items():
            signal.signal(signum, signal.SIG_DFL if before is None else before)
