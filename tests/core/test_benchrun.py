"""Timing a benchmark's command in a process of its own."""

from __future__ import annotations

import sys
import time

from optsolve.core.benchrun import last_line, timed_process


def test_timed_process_reports_exit_output_and_peak_memory():
    # 64 MB touched by the child: its peak RSS is at least that, whatever the interpreter's own
    run = timed_process([sys.executable, "-c", "import sys; b = bytearray(64 << 20); print('a\\nb'); sys.exit(3)"],
                        None, 60)
    assert run["code"] == 3 and run["stdout"] == "a\nb\n" and run["wall"] > 0
    assert run["rss_mb"] >= 64
    assert last_line(run["stdout"], "none") == "b" and last_line("", 3) == "3"


def test_timed_process_kills_the_command_and_what_it_started_past_its_limit(tmp_path):
    pid_file = tmp_path / "grandchild"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)']); "
            f"open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    t = time.perf_counter()
    run = timed_process([sys.executable, "-c", code], None, 3.0)  # time to start both on a busy machine
    assert run == {"error": "timed out after 3 s", "timed_out": True} and time.perf_counter() - t < 30
    grandchild = int(pid_file.read_text())
    for _ in range(100):  # killed; reaped by init once its parent is gone
        if not running(grandchild):
            break
        time.sleep(0.05)
    else:
        raise AssertionError(f"process {grandchild} still runs")


def running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/status") as fh:
            return "State:\tZ" not in fh.read()
    except FileNotFoundError:
        return False


def test_the_peak_memory_is_the_commands_not_the_benchmarks():
    """A command started by a process holding hundreds of MB reports its own peak (Linux starts a forked child's
    peak at its parent's resident size)."""
    import numpy as np

    held = np.ones(400 << 17)  # 400 MB, touched
    run = timed_process([sys.executable, "-c", "pass"], None, 60)
    assert run["code"] == 0 and run["rss_mb"] < 150, run["rss_mb"]
    assert held.sum() > 0


def test_a_signal_or_a_missing_program_gives_the_shells_exit_code(tmp_path):
    run = timed_process([sys.executable, "-c", "import os, signal; os.kill(os.getpid(), signal.SIGTERM)"], None, 60)
    assert run["code"] == 143
    run = timed_process([str(tmp_path / "no-such-program")], None, 60)
    assert run["code"] == 127 and "no-such-program" in run["stderr"]
