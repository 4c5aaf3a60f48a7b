"""A benchmark's command run in a process of its own: wall time from its start to its exit, and its peak memory.

Used by ``bin/bench-*`` to time whole commands (optsolve's and its peers') as a user's shell job would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time

from optsolve.core.guard import kill_all

POLL_S = 0.005  # between two looks at the child: the wall time is this close to its exit
READ_BYTES = 64 << 20  # one read when reading a file through

# A small interpreter between the benchmark and its command: it forks the command, waits for it and writes the
# command's peak RSS (KB) and its wall time from the fork to its exit (s) to the file argv[1] (so that the
# interpreter's own start is not timed); its exit code is the command's (128 + N where signal N ended it).
# Forked from a small process, the command's ru_maxrss is its own: Linux starts a forked child's peak at its
# parent's resident size and keeps it through exec, so a command forked from a benchmark holding gigabytes
# would report the benchmark's memory as its own.
LAUNCHER = """import os, sys, time
start = time.perf_counter()
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[2], sys.argv[2:])
    except OSError as exc:
        sys.stderr.write(f"{sys.argv[2]}: {exc}\\n")
        os._exit(127)
_, status, usage = os.wait4(pid, 0)
wall = time.perf_counter() - start
with open(sys.argv[1], "w") as fh:
    fh.write(f"{usage.ru_maxrss} {wall!r}")
code = os.waitstatus_to_exitcode(status)
os._exit(code if code >= 0 else 128 - code)
"""


def timed_process(argv: list, env: dict | None, limit: float) -> dict:
    """Run ``argv`` in a session of its own: its wall time (start to exit), peak RSS in MB (2^20 bytes), exit code,
    stdout and stderr; or, past ``limit`` seconds, ``error`` ("timed out after N s") and ``timed_out`` once it and
    what it started are killed.

    The command runs under :data:`LAUNCHER`, which reaps it by ``os.wait4``, so that the peak RSS is the command's
    own, or that of a process it started and waited for, whichever is larger (``ru_maxrss``, KB on Linux), and not
    this process's; the launcher is reaped here (polled).
    """
    fd, rss_path = tempfile.mkstemp(prefix="optsolve-bench-", suffix=".rss")
    os.close(fd)
    try:
        return _timed(argv, env, limit, rss_path)
    finally:
        os.unlink(rss_path)


def _timed(argv: list, env: dict | None, limit: float, rss_path: str) -> dict:
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen([sys.executable, "-c", LAUNCHER, rss_path, *argv], stdout=out, stderr=err, env=env,
                                start_new_session=True)
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid:
                break
            if time.perf_counter() - t > limit:
                kill_all(proc.pid)
                os.wait4(proc.pid, 0)
                proc.returncode = -9  # reaped here: Popen must not wait for it again
                return {"error": f"timed out after {limit:g} s", "timed_out": True}
            time.sleep(POLL_S)
        wall = time.perf_counter() - t
        proc.returncode = code = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        with open(rss_path) as fh:
            written = fh.read().split()
        if len(written) == 2:  # the command's own figures
            peak_kb, wall = int(written[0]), float(written[1])
        else:  # the launcher's, had it failed
            peak_kb = usage.ru_maxrss
        return {"wall": wall, "rss_mb": peak_kb / 1024, "code": code, "stdout": out.read(), "stderr": err.read()}


def last_line(text: str, default) -> str:
    """The last line of ``text`` (a process's output), or ``str(default)`` where it has none."""
    return (text.strip().splitlines() or [str(default)])[-1]


def read_through(path: str) -> None:
    """Read the file once, so that each command finds it in the page cache alike (none pays for the disk)."""
    buf = bytearray(READ_BYTES)
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(buf):
            pass
