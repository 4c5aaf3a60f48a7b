"""A benchmark's command run in a process of its own: wall time from its start to its exit, and its peak memory.

Used by ``bin/bench-*`` to time whole commands (optsolve's and its peers') as a user's shell job would.
"""

from __future__ import annotations

import os
import subprocess
import tempfile
import time

from optsolve.core.guard import kill_all

POLL_S = 0.005  # between two looks at the child: the wall time is this close to its exit
READ_BYTES = 64 << 20  # one read when reading a file through


def timed_process(argv: list, env: dict | None, limit: float) -> dict:
    """Run ``argv`` in a session of its own: its wall time (start to exit), peak RSS in MB (2^20 bytes), exit code,
    stdout and stderr; or, past ``limit`` seconds, ``error`` ("timed out after N s") and ``timed_out`` once it and
    what it started are killed.

    The child is reaped here by ``os.wait4`` (polled), so that the peak RSS is the child's own, or that of a process
    it started and waited for, whichever is larger (``ru_maxrss``, KB on Linux).
    """
    with tempfile.TemporaryFile(mode="w+") as out, tempfile.TemporaryFile(mode="w+") as err:
        t = time.perf_counter()
        proc = subprocess.Popen(argv, stdout=out, stderr=err, env=env, start_new_session=True)
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
        return {"wall": wall, "rss_mb": usage.ru_maxrss / 1024, "code": code, "stdout": out.read(),
                "stderr": err.read()}


def last_line(text: str, default) -> str:
    """The last line of ``text`` (a process's output), or ``str(default)`` where it has none."""
    return (text.strip().splitlines() or [str(default)])[-1]


def read_through(path: str) -> None:
    """Read the file once, so that each command finds it in the page cache alike (none pays for the disk)."""
    buf = bytearray(READ_BYTES)
    with open(path, "rb", buffering=0) as fh:
        while fh.readinto(buf):
            pass
