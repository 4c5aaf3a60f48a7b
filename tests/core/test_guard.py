"""``--time-limit`` on the command line holds even through a step that cannot be interrupted: the
document comes within a second of the limit, status time_limit, exit 5, and nothing the solve
started is left running. Signals reach the watched solve once, and a second one stops all."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from optsolve.core.guard import GRACE_S

pytestmark = [pytest.mark.slow, pytest.mark.skipif(not hasattr(os, "fork") or sys.platform == "win32", reason="POSIX fork and signals")]

# An operator for `optsolve mvi --operator games.py:NAME`: a rotation of the plane, each of whose
# evaluations after the first few takes a long time (a step the solver cannot cut short).
GAMES = '''
import os, signal, subprocess, time
import numpy as np

CALLS = [0]

def _rot(z):
    return np.array([z[1], -z[0]]) + 0.1 * np.asarray(z)

def _inside():
    # the test waits for this file before it signals: the solve is then inside its long evaluation
    open("inside", "w").close()

def slow(z):
    CALLS[0] += 1
    if CALLS[0] > 3:
        _inside()
        time.sleep(60)
    return _rot(z)

def deaf(z):
    # blocks the stopping signals, as a native call that never returns to Python would ignore them
    CALLS[0] += 1
    if CALLS[0] > 3:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM, signal.SIGHUP})
        _inside()
        time.sleep(60)
    return _rot(z)

def spawns(z):
    CALLS[0] += 1
    if CALLS[0] > 3:
        p = subprocess.Popen(["sleep", "120"])
        with open(os.environ["GAMES_PID_FILE"], "w") as f:
            f.write(str(p.pid))
        time.sleep(60)
    return _rot(z)

def quick(z):
    return _rot(z)
'''


@pytest.fixture
def games(tmp_path):
    (tmp_path / "games.py").write_text(GAMES)
    (tmp_path / "p.json").write_text(json.dumps({"z0": [1.0, 0.5]}))
    return tmp_path


def start(cwd, *args, env=None, **popen):
    return subprocess.Popen([sys.executable, "-m", "optsolve", *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=dict(os.environ, **(env or {})),
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL), **popen)


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_a_step_past_the_limit_is_stopped_and_the_document_written(games):
    t = time.monotonic()
    proc = start(games, "mvi", "p.json", "--operator", "games.py:slow", "--time-limit", "1.5")
    out, err = proc.communicate(timeout=60)
    wall = time.monotonic() - t
    assert proc.returncode == 5, err
    doc = json.loads(out)  # one document on stdout, nothing else
    assert doc["status"] == "time_limit" and "1.5 s" in doc["message"] and "solving" in doc["message"]
    assert doc["problem"]["sha256"] and doc["stats"]["time_s"]["total"] < 1.5 + GRACE_S + 0.5
    assert wall < 1.5 + GRACE_S + 1.5  # the interpreter's start included
    assert "time_limit" in err and "Traceback" not in err


def test_the_document_from_the_watcher_goes_to_the_output_file_and_verify_reads_it(games):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:slow", "--time-limit", "1", "-o", "s.json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 5 and out == ""
    doc = json.loads((games / "s.json").read_text())
    assert doc["status"] == "time_limit" and doc["solution"] is None
    proc = start(games, "verify", "p.json", "s.json", "--operator", "games.py:quick")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 7 and "holds no solution" in err and "Traceback" not in err  # nothing to certify


def test_what_the_stopped_solve_started_is_stopped_too(games, tmp_path):
    pid_file = tmp_path / "sleep.pid"
    proc = start(games, "mvi", "p.json", "--operator", "games.py:spawns", "--time-limit", "1",
                 env={"GAMES_PID_FILE": str(pid_file)})
    proc.communicate(timeout=60)
    assert proc.returncode == 5
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while alive(pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not alive(pid)


def test_a_quick_solve_under_a_limit_is_the_same_as_without(games):
    with_limit = start(games, "mvi", "p.json", "--operator", "games.py:quick", "--time-limit", "60")
    without = start(games, "mvi", "p.json", "--operator", "games.py:quick")
    (a, ea), (b, eb) = with_limit.communicate(timeout=60), without.communicate(timeout=60)
    assert with_limit.returncode == without.returncode == 0, ea + eb
    da, db = json.loads(a), json.loads(b)
    assert da["status"] == db["status"] == "optimal" and da["solution"] == db["solution"]


def wait_for_solving(proc, cwd, bound: float = 60.0):
    """Until the solve is inside its long evaluation (the operator's marker file), however loaded the machine."""
    deadline = time.monotonic() + bound
    while not (cwd / "inside").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read() if proc.poll() else "no marker"
        time.sleep(0.02)
    time.sleep(0.05)
    assert proc.poll() is None


def test_sigterm_reaches_the_watched_solve_once(games):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:slow", "--time-limit", "30")
    wait_for_solving(proc, games)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 143, err
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and "SIGTERM" in doc["message"]
    assert "at once" not in err  # passed on once, not twice


def test_ctrl_c_at_a_terminal_reaches_the_watched_solve_once(games):
    # a terminal sends SIGINT to its foreground process group: here, the command's own group
    proc = start(games, "mvi", "p.json", "--operator", "games.py:slow", "--time-limit", "30", start_new_session=True)
    wait_for_solving(proc, games)
    os.killpg(proc.pid, signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert json.loads(out)["status"] == "interrupted" and "at once" not in err


def test_a_second_signal_stops_a_solve_deaf_to_the_first(games):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:deaf", "--time-limit", "30")
    wait_for_solving(proc, games)
    proc.send_signal(signal.SIGTERM)
    time.sleep(0.3)
    assert proc.poll() is None  # the solve cannot hear it: still running
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=10)
    assert proc.returncode == 143 and out == ""
    assert "second signal" in err


def test_a_signal_then_the_limit_ends_interrupted(games):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:deaf", "--time-limit", "2")
    wait_for_solving(proc, games)
    proc.send_signal(signal.SIGHUP)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 129, err
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and "SIGHUP" in doc["message"]


def test_a_limit_shorter_than_the_setup_still_ends_within_a_second(tmp_path):
    # importing POT alone takes about a second: the limit runs out before the solve starts
    import numpy as np

    from optsolve.core.files import save_problem

    rng = np.random.default_rng(3)
    save_problem(str(tmp_path / "p.npz"), {"a": rng.dirichlet(np.ones(40)), "b": rng.dirichlet(np.ones(30)),
                                           "C": rng.random((40, 30))})
    t = time.monotonic()
    proc = start(tmp_path, "ot", "p.npz", "--method", "sinkhorn", "--reg", "1e-3", "--time-limit", "1e-3")
    out, err = proc.communicate(timeout=60)
    wall = time.monotonic() - t
    assert proc.returncode == 5, err
    doc = json.loads(out)
    assert doc["status"] == "time_limit" and doc["stats"]["time_s"]["total"] < 1e-3 + GRACE_S + 0.5
    assert wall < GRACE_S + 1.5
    assert doc["solution"] is None or doc["certificate"]["holds"]  # a solution, if any, is the solver's own


def test_batch_files_under_a_limit_have_the_same_backstop(games):
    (games / "q.json").write_text(json.dumps({"z0": [0.5, 1.0]}))
    t = time.monotonic()
    proc = start(games, "batch", "mvi", "p.json", "q.json", "-j", "2", "--operator", "games.py:slow",
                 "--time-limit", "1.5")
    out, err = proc.communicate(timeout=120)
    wall = time.monotonic() - t
    lines = [json.loads(line) for line in out.splitlines() if line.strip()]
    assert len(lines) == 2 and all(d["status"] == "time_limit" for d in lines), err
    assert all("ran out while solving" in d["message"] and d["problem"]["sha256"] for d in lines)
    assert proc.returncode == 5 and wall < 1.5 + GRACE_S + 6  # two workers' start included


def test_batch_files_within_the_limit_are_solved_as_without(games):
    proc = start(games, "batch", "mvi", "p.json", "--operator", "games.py:quick", "--time-limit", "60")
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    doc = json.loads(out)
    assert doc["status"] == "optimal" and doc["certificate"]["holds"]


# ------------------------------------------------------------------ without a time limit, and far limits

WAKES = '''
import os, time
import numpy as np

CALLS = [0]

def late(z):
    # one long evaluation, after which the solve goes on and finishes
    CALLS[0] += 1
    if CALLS[0] == 4:
        with open(os.environ["GAMES_PID_FILE"], "w") as f:
            f.write(str(os.getpid()))
        time.sleep(4)
    return np.array([z[1], -z[0]]) + 0.1 * np.asarray(z)
'''


def signalled(proc, signum, bound: float = 6.0):
    """Send ``signum`` and collect the command's output, waiting at most ``bound`` seconds."""
    proc.send_signal(signum)
    try:
        return proc.communicate(timeout=bound)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        pytest.fail(f"no answer to the signal within {bound} s: {err}")


def test_sigterm_without_a_limit_is_answered_through_a_deaf_step(games):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:deaf")
    wait_for_solving(proc, games)
    out, err = signalled(proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    doc = json.loads(out)  # whole: the watcher's document, as the solve could not answer
    assert doc["status"] == "interrupted" and doc["solution"] is None
    assert "SIGTERM" in doc["message"] and "solving" in doc["message"] and doc["problem"]["sha256"]
    assert "Traceback" not in err


def test_sigterm_without_a_limit_keeps_the_solvers_best_iterate(games):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:slow", "-o", "s.json")
    wait_for_solving(proc, games)
    out, err = signalled(proc, signal.SIGTERM)
    assert proc.returncode == 143 and out == "", err
    doc = json.loads((games / "s.json").read_text())
    assert doc["status"] == "interrupted" and doc["solution"]["z"] and "SIGTERM" in doc["message"]


@pytest.mark.parametrize("limit", [None, "30"])
def test_a_killed_command_leaves_no_solve_behind_and_writes_nothing_after(games, tmp_path, limit):
    (games / "wakes.py").write_text(WAKES)
    pid_file = tmp_path / "solve.pid"
    args = ["--time-limit", limit] if limit else []
    proc = start(games, "mvi", "p.json", "--operator", "wakes.py:late", "-o", "out.json", *args,
                 env={"GAMES_PID_FILE": str(pid_file)})
    deadline = time.monotonic() + 30
    while not pid_file.exists() or not pid_file.read_text():
        assert proc.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    solver = int(pid_file.read_text())
    proc.kill()
    proc.communicate(timeout=10)
    time.sleep(5)  # past the end of the long evaluation and the rest of the solve
    assert not (games / "out.json").exists()
    assert not alive(solver)


def test_a_nan_time_limit_is_a_usage_error(games):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:quick", "--time-limit", "nan", "-o", "s.json")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2 and out == ""
    assert "Traceback" not in err and [line for line in err.splitlines() if "--time-limit" in line and "nan" in line]
    time.sleep(0.5)
    assert not (games / "s.json").exists()


@pytest.mark.parametrize("limit", ["inf", "1e10", "1e300"])
def test_an_infinite_or_far_time_limit_solves_as_without(games, limit):
    proc = start(games, "mvi", "p.json", "--operator", "games.py:quick", "--time-limit", limit)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
    doc = json.loads(out)
    assert doc["status"] == "optimal" and doc["certificate"]["holds"]
    assert doc["settings"]["time_limit"] == (None if limit == "inf" else float(limit))


def test_a_far_time_limit_reaches_a_native_solve_in_a_child(tmp_path):
    import numpy as np

    from optsolve.core.files import save_problem

    rng = np.random.default_rng(4)
    save_problem(str(tmp_path / "p.npz"), {"a": rng.dirichlet(np.ones(30)), "b": rng.dirichlet(np.ones(20)),
                                           "C": rng.random((30, 20))})
    proc = start(tmp_path, "ot", "p.npz", "--method", "emd", "--time-limit", "1e10")
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0 and "Traceback" not in err, err
    assert json.loads(out)["status"] == "optimal"


def state(pid: int) -> str:
    with open(f"/proc/{pid}/stat") as f:
        return f.read().rsplit(")", 1)[1].split()[0]


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_z_stops_the_solve_with_the_command_and_fg_continues_both(games):
    psutil = pytest.importorskip("psutil")
    proc = start(games, "mvi", "p.json", "--operator", "games.py:slow")
    wait_for_solving(proc, games)
    solve = psutil.Process(proc.pid).children()[0].pid
    proc.send_signal(signal.SIGTSTP)
    deadline = time.monotonic() + 10
    while not (state(proc.pid) == "T" and state(solve) == "T"):
        assert time.monotonic() < deadline, (state(proc.pid), state(solve))
        time.sleep(0.02)
    proc.send_signal(signal.SIGCONT)
    deadline = time.monotonic() + 10
    while state(proc.pid) == "T" or state(solve) == "T":
        assert time.monotonic() < deadline, (state(proc.pid), state(solve))
        time.sleep(0.02)
    out, err = signalled(proc, signal.SIGTERM)
    assert proc.returncode == 143, err
    assert json.loads(out)["status"] == "interrupted"


# The program with a SIGTERM sent to itself as the command starts to load (before its modules, the watcher
# and the solve's own handling exist): the default action would end it with no document.
SIGNALLED_AT_START = '''
import os, signal, sys
import optsolve.cli as cli

loading = cli.main

def signalled_main():
    os.kill(os.getpid(), signal.SIGTERM)
    loading()

cli.main = signalled_main
sys.argv = ["optsolve", *sys.argv[1:]]
cli.run()
'''


@pytest.mark.parametrize("args", [["mvi", "p.json", "--operator", "games.py:quick"],
                                  ["mvi", "p.json", "--operator", "games.py:quick", "--time-limit", "30"]])
def test_a_signal_while_the_command_loads_gets_its_document(games, args):
    proc = subprocess.run([sys.executable, "-c", SIGNALLED_AT_START, *args, "-o", "s.json"], cwd=games,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 143, proc.stderr
    doc = json.loads((games / "s.json").read_text())
    assert doc["status"] == "interrupted" and "SIGTERM" in doc["message"], doc["message"]
    assert "Traceback" not in proc.stderr and "at once" not in proc.stderr


def _blocked_opening_a_fifo(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/task/{pid}/children") as f:
            children = [int(c) for c in f.read().split()]
        return any(open(f"/proc/{c}/wchan").read() == "wait_for_partner" for c in children)
    except OSError:
        return False


@pytest.mark.skipif(not os.path.exists("/proc/self/wchan"), reason="reads /proc")
def test_a_third_signal_ends_a_write_to_a_fifo_nobody_reads(games):
    """The document waits on a FIFO that no one opens: the first signal waits for the write, the second too
    (it would cut the document), a third stops the command at once."""
    os.mkfifo(games / "out.fifo")
    proc = start(games, "mvi", "p.json", "--operator", "games.py:quick", "-o", "out.fifo")
    deadline = time.monotonic() + 60
    while not _blocked_opening_a_fifo(proc.pid):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.05)
    for _ in range(3):
        proc.send_signal(signal.SIGTERM)
        time.sleep(0.3)
    try:
        _, err = proc.communicate(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        pytest.fail("three signals did not end a write to a FIFO nobody reads")
    assert proc.returncode == 143 and "at once" in err, err


def test_a_solve_writes_to_a_terminal_set_to_stop_background_writers(games):
    """`stty tostop`: a background process group's write to the terminal stops it (SIGTTOU). The solve's
    group is in the background of the command's terminal; its lines and document still come out."""
    import fcntl
    import pty
    import select
    import termios

    leader, follower = pty.openpty()
    attrs = termios.tcgetattr(follower)
    attrs[3] |= termios.TOSTOP
    termios.tcsetattr(follower, termios.TCSANOW, attrs)

    def own_terminal():
        os.setsid()
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)

    proc = subprocess.Popen([sys.executable, "-m", "optsolve", "mvi", "p.json", "--operator", "games.py:quick"],
                            cwd=games, stdin=follower, stdout=follower, stderr=follower, preexec_fn=own_terminal)
    os.close(follower)
    seen = bytearray()
    try:
        deadline = time.monotonic() + 30
        while proc.poll() is None and time.monotonic() < deadline:
            if select.select([leader], [], [], 0.2)[0]:
                try:
                    seen += os.read(leader, 1 << 16)
                except OSError:
                    break
        try:  # the terminal's end of file (EIO) comes as the command closes it, just before it exits
            proc.wait(timeout=max(deadline - time.monotonic(), 1.0))
        except subprocess.TimeoutExpired:
            proc.kill()
            pytest.fail(f"the command did not end: {bytes(seen)[-500:]!r}")
    finally:
        os.close(leader)
    assert proc.returncode == 0 and b"optsolve mvi: optimal" in seen, bytes(seen)[-500:]
