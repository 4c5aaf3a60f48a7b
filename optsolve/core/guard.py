"""The backstop behind ``--time-limit`` on the command line.

The solvers keep the limit themselves: they check the clock between iterations and keep time
for their finish (rounding, polishing, the certificate). A step that cannot be interrupted can
still run past it: a sparse factorisation, HiGHS's MILP, k-means++ seeding, a native transport
solver. On the command line a solve with a time limit therefore runs in a forked child
process, watched by the command's own process:

* the child reads, solves and writes the document as the command always does, and tells the
  watcher the problem's SHA-256 once read and ``done`` once its result is final (the document
  is then written whatever the clock says: it is never cut in half);
* if the child is not done :data:`GRACE_S` seconds after the limit, whatever it is doing
  (reading the file, importing a library, a native solver's call), the watcher kills it (and
  the processes it started) and writes the document itself: status ``time_limit``, no
  solution, a message naming the limit and the stage that ran past it;
* SIGINT, SIGTERM and SIGHUP sent to the command are passed on to the child, which handles them
  as :mod:`optsolve.core.signals` says; a second one stops both at once. The child runs in a
  process group of its own, so that a terminal's Ctrl-C reaches it once, through the watcher.

The limit counts from the command's start (:data:`optsolve.cli.STARTED`). ``optsolve batch``
watches each file's solve the same way, in its worker (:func:`optsolve.core.runner.watched_solve`).
Without a time limit, without ``fork``, under ``--engine mpi`` (an MPI rank may not fork), when the
problem is typed at a terminal (``-`` on a tty, which a background process group may not read),
and for calls from Python (the API, Click's test runner), the solve runs in one process as before.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time

from optsolve.core.signals import SIGNALS, stop_at_once

GRACE_S = 0.7  # after the limit, before the watcher stops a child that is not done


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


class Channel:
    """The child's side of the pipe to the watcher: one short line a message."""

    def __init__(self, fd: int):
        self.fd = fd

    def send(self, word: str, value: str = "") -> None:
        try:
            os.write(self.fd, f"{word} {value}\n".encode())
        except OSError:  # the watcher is gone: nothing to tell
            pass


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


def _kill_all(pid: int) -> None:
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


def run_watched(limit: float, started: float, child, on_timeout, label: str) -> int:
    """Run ``child(channel)`` (which returns an exit code) in a forked process; return its exit code,
    or, when it is not done ``GRACE_S`` after ``started + limit``, kill it and return
    ``on_timeout(sha256, method, stage, signum)`` (the watcher writes the document; ``signum`` is
    the signal received before, or None)."""
    read_fd, write_fd = os.pipe()
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:  # the child
        code = 1
        try:
            os.close(read_fd)
            os.setpgid(0, 0)
            code = child(Channel(write_fd))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # noqa: BLE001 - never let the child run on into the watcher's code
            code = 1
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    os.close(write_fd)
    try:
        os.setpgid(pid, pid)  # also here: whichever of the two runs first
    except OSError:
        pass
    return _watch(pid, read_fd, started + limit, on_timeout, label)


def _watch(pid: int, read_fd: int, limit_at: float, on_timeout, label: str) -> int:
    received: list[int] = []
    previous = {}

    def forward(signum, frame):
        received.append(signum)
        if len(received) > 1:  # a second signal: stop everything at once, write nothing more
            stop_at_once(label, signum, lambda: _kill_all(pid))
        try:
            os.killpg(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass

    for signum in SIGNALS:
        before = signal.getsignal(signum)
        if before != signal.SIG_IGN:
            previous[signum] = before
            signal.signal(signum, forward)
    sha256, method, stage, done, buffer = None, None, "reading the problem", False, b""
    kill_at = limit_at + GRACE_S
    try:
        while not done:
            wait = kill_at - time.perf_counter()
            if wait <= 0:
                break
            try:
                ready, _, _ = select.select([read_fd], [], [], wait)
            except InterruptedError:
                continue
            if not ready:
                continue
            chunk = os.read(read_fd, 4096)
            if not chunk:  # the child closed its end: it is exiting
                _, status = os.waitpid(pid, 0)
                return _exit_code(status)
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                word, _, value = line.decode(errors="replace").partition(" ")
                if word == "sha256":
                    sha256 = value or None
                elif word == "stage":
                    stage = value
                elif word == "method":
                    method = value or None
                elif word == "done":
                    done = True
        exited, status = os.waitpid(pid, os.WNOHANG)
        if done or exited:
            if not exited:
                _, status = os.waitpid(pid, 0)
            return _exit_code(status)
        _kill_all(pid)
        os.waitpid(pid, 0)
        return on_timeout(sha256, method, stage, received[0] if received else None)
    finally:
        os.close(read_fd)
        for signum, before in previous.items():
            signal.signal(signum, signal.SIG_DFL if before is None else before)
