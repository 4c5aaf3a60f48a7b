"""SIGTERM and SIGHUP stop a command as Ctrl-C does: the best iterate is written with status
interrupted and the exit code is 128 + the signal's number; a second signal stops at once; a
batch keeps the files finished, starts no other and leaves no worker behind."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from optsolve.core import signals as sigmod
from optsolve.core.errors import Terminated
from optsolve.core.files import save_problem

pytestmark = [pytest.mark.slow, pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")]


class Running:
    """``python -m optsolve ARGS...`` in the background, its stdout and stderr collected as they come."""

    started: list = []  # killed (with their children) at the end of each test, whatever happened

    def __init__(self, *args, cwd):
        # a background job starts with SIGINT ignored, which a command keeps: give it the default
        self.proc = subprocess.Popen([sys.executable, "-m", "optsolve", *map(str, args)], cwd=cwd,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        self.out, self.err = [], []
        self.readers = [threading.Thread(target=self._read, args=(s, acc), daemon=True)
                        for s, acc in ((self.proc.stdout, self.out), (self.proc.stderr, self.err))]
        for t in self.readers:
            t.start()
        Running.started.append(self.proc)

    @staticmethod
    def _read(stream, acc):
        for line in stream:
            acc.append(line)

    def handles_signals(self) -> bool:
        """The command has installed its handlers (Linux: SIGTERM is in the caught mask)."""
        try:
            with open(f"/proc/{self.proc.pid}/status") as f:
                caught = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
        except (OSError, StopIteration):
            return False
        return bool(caught >> (signal.SIGTERM - 1) & 1)

    def loaded(self) -> bool:
        """The command has loaded its modules and started its solve (Linux: the watcher has forked its child)."""
        try:
            with open(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children") as f:
                return bool(f.read().split())
        except OSError:
            return False

    def wait_until(self, ready, what: str, limit: float = 90.0) -> None:
        deadline = time.monotonic() + limit
        while not ready():
            assert self.proc.poll() is None, f"exited ({self.proc.returncode}) before {what}: {''.join(self.err)}"
            assert time.monotonic() < deadline, f"never {what}: {''.join(self.err)}"
            time.sleep(0.02)

    def wait_solving(self, needle: str | None = None, settle: float = 0.0) -> None:
        """Until the handlers are in place and, with ``needle``, a stderr line holds it; then ``settle`` s."""
        if os.path.exists(f"/proc/{os.getpid()}/status"):
            self.wait_until(self.handles_signals, "installed its signal handlers")
        if os.path.exists(f"/proc/{os.getpid()}/task/{os.getpid()}/children"):
            self.wait_until(self.loaded, "started its solve")
        if needle is not None:
            self.wait_until(lambda: any(needle in line for line in self.err), f"printed {needle!r}")
        time.sleep(settle)

    def signal(self, signum) -> None:
        self.proc.send_signal(signum)

    def finish(self, limit: float = 90.0) -> tuple[int, str, str]:
        code = self.proc.wait(timeout=limit)
        for t in self.readers:
            t.join(10)
        return code, "".join(self.out), "".join(self.err)


@pytest.fixture(autouse=True)
def _kill_leftovers():
    yield
    while Running.started:
        proc = Running.started.pop()
        if proc.poll() is None:
            try:
                import psutil

                for child in psutil.Process(proc.pid).children(recursive=True):
                    child.kill()
            except Exception:
                pass
            proc.kill()
            proc.wait(30)


def no_temporary_files(directory) -> bool:
    return not [n for n in os.listdir(directory) if n.startswith(".optsolve-")]


# ------------------------------------------------------------------ one problem per command

def _ot(path, rng):
    save_problem(str(path), {"a": rng.dirichlet(np.ones(150)), "b": rng.dirichlet(np.ones(150)),
                             "x": rng.random((150, 2)), "y": rng.random((150, 2)), "cost": "sqeuclidean"})
    return ["--method", "sinkhorn", "--reg", "1e-5", "--tol", "1e-300", "--max-iter", "100000000", "-v"], "iter"


def _qp(path, rng):
    from optsolve.qp.problems import FAMILIES

    save_problem(str(path), FAMILIES["random"].generate(rng, n=100))
    return ["--method", "admm", "--eps-abs", "1e-300", "--eps-rel", "1e-300", "--max-iter", "100000000", "-v"], "iter"


def _mvi(path, rng):
    from optsolve.mvi.problems import FAMILIES

    save_problem(str(path), FAMILIES["affine"].generate(rng))
    # the fixed-point inner loop goes on at the rounding level (GMRES resolvents stop there, and say so)
    return ["--tol", "1e-300", "--max-evals", "1000000000", "--inner-solver", "fixed-point", "-v"], "iter"


def _truncated(path, rng):
    from optsolve.truncated.problems import FAMILIES

    # a sample whose finish (the certificate) ends within the watcher's grace after a signal
    save_problem(str(path), FAMILIES["gaussian"].generate(rng, d=3, n=20000))
    return ["--method", "psgd", "-v"], "iter"


def _cover(path, rng):
    from optsolve.cover.problems import FAMILIES

    # guesses of the optimum's size growing by 1.0001 up to a cover of everything: many FSM rounds
    save_problem(str(path), FAMILIES["bipartite"].generate(rng, n=20000, items=20000))
    return ["--method", "greedy", "--alpha", "0.0001", "--tau-frac", "1.0"], None


def _kmeans(path, rng):
    # no clusters in the points: the Lloyd steps of the refinement go on for some hundred iterations, and the
    # certificate's pass over the points ends within the watcher's grace after a signal
    save_problem(str(path), {"X": rng.random((600_000, 2)), "labels": rng.integers(0, 100, 600_000)})
    return ["--method", "labels", "--lloyd-steps", "100000"], None


COMMANDS = {  # kind -> (problem writer, key of the solution it keeps; None: it keeps none when interrupted)
    "ot": (_ot, "f"),
    "qp": (_qp, "x"),
    "mvi": (_mvi, "z"),
    "truncated": (_truncated, "mean"),
    "cover": (_cover, None),  # convert-fair has no fair cover before it reaches tau
    "kmeans": (_kmeans, "centres"),  # the estimate, before the Lloyd steps
}


@pytest.mark.parametrize("kind", sorted(COMMANDS))
def test_sigterm_writes_the_best_iterate_and_exits_143(kind, tmp_path):
    write, key = COMMANDS[kind]
    options, needle = write(tmp_path / "p.npz", np.random.default_rng(0))
    run = Running(kind, "p.npz", "-o", "out.json", *options, cwd=tmp_path)
    # without a log line to wait for, give the loading and the first estimate time to end (kmeans: 6e5 points)
    run.wait_solving(needle, settle=0.3 if needle else 3.0 if kind == "kmeans" else 2.0)
    run.signal(signal.SIGTERM)
    code, _, err = run.finish()
    assert code == 143, err
    doc = json.loads((tmp_path / "out.json").read_text())
    assert doc["status"] == "interrupted" and doc["command"] == kind
    assert "SIGTERM" in doc["message"] and "SIGTERM" in err and "Traceback" not in err
    if key is not None:
        assert doc["solution"][key], doc["message"]
        assert doc["certificate"] is not None
    else:
        assert doc["solution"] is None
    assert no_temporary_files(tmp_path)


def test_sighup_exits_129_with_the_last_iterate(tmp_path):
    options, needle = _ot(tmp_path / "p.npz", np.random.default_rng(1))
    run = Running("ot", "p.npz", *options, cwd=tmp_path)  # the document on stdout
    run.wait_solving(needle)
    run.signal(signal.SIGHUP)
    code, out, err = run.finish()
    assert code == 129, err
    doc = json.loads(out)
    assert doc["status"] == "interrupted" and "SIGHUP" in doc["message"]
    assert doc["solution"]["f"] and doc["stats"]["iterations"] > 0


def test_an_ignored_sighup_stays_ignored(tmp_path):
    options, needle = _ot(tmp_path / "p.npz", np.random.default_rng(2))

    def nohup():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGHUP, signal.SIG_IGN)

    proc = subprocess.Popen([sys.executable, "-m", "optsolve", "ot", "p.npz", "-o", "out.json", *options], cwd=tmp_path,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, preexec_fn=nohup)
    line = ""
    while needle not in line:
        line = proc.stderr.readline()
        assert line, "exited before iterating"
    proc.send_signal(signal.SIGHUP)
    for _ in range(5):  # it goes on iterating
        assert needle in proc.stderr.readline()
    assert proc.poll() is None
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=90)
    assert proc.returncode == 143, err
    assert json.loads((tmp_path / "out.json").read_text())["status"] == "interrupted"


def test_a_second_sigterm_stops_at_once_and_never_leaves_half_a_file(tmp_path):
    # after the first signal the kmeans command still assigns 600,000 points and certifies them:
    # the second one lands there and stops it
    options, _ = _kmeans(tmp_path / "p.npz", np.random.default_rng(0))
    run = Running("kmeans", "p.npz", "-o", "out.json", *options, cwd=tmp_path)
    run.wait_solving(settle=2.0)
    run.signal(signal.SIGTERM)
    time.sleep(0.1)
    run.signal(signal.SIGTERM)
    code, _, err = run.finish()
    assert code == 143, err
    assert "Traceback" not in err and no_temporary_files(tmp_path)
    if "stopped at once" in err:
        assert not (tmp_path / "out.json").exists()
    else:  # the whole document was out before the second signal came
        assert json.loads((tmp_path / "out.json").read_text())["status"] == "interrupted"


# ------------------------------------------------------------------ batch

@pytest.fixture
def batch_files(tmp_path):
    """Two problems solved in about a second, then three that take minutes (sinkhorn, 3,000 iterations)."""
    rng = np.random.default_rng(0)
    names = []
    for name, n in (("quick1", 8), ("quick2", 8), ("long1", 400), ("long2", 400), ("long3", 400)):
        save_problem(str(tmp_path / f"{name}.npz"), {"a": rng.dirichlet(np.ones(n)), "b": rng.dirichlet(np.ones(n)),
                                                     "x": rng.random((n, 2)), "y": rng.random((n, 2)),
                                                     "cost": "sqeuclidean"})
        names.append(f"{name}.npz")
    return names


BATCH = ("batch", "ot", "--method", "sinkhorn", "--reg", "1e-4", "--tol", "1e-300", "--max-iter", "3000",
         "--out-dir", "out")


def _stop_batch(tmp_path, files, extra, signals):
    psutil = pytest.importorskip("psutil")
    run = Running(*BATCH, *extra, *files, cwd=tmp_path)
    run.wait_until(lambda: len(run.out) >= 2, "finished the two quick files")  # in input order: long ones run now
    workers = psutil.Process(run.proc.pid).children(recursive=True)
    assert workers
    for signum in signals:  # back to back
        run.signal(signum)
    code, out, err = run.finish()
    lines = [json.loads(line) for line in out.splitlines()]
    assert [line["file"] for line in lines] == ["quick1.npz", "quick2.npz"], err
    out_dir = tmp_path / "out"
    assert sorted(os.listdir(out_dir)) == ["quick1.ot.json", "quick2.ot.json"]  # no other file, whole or half
    for name in ("quick1", "quick2"):
        assert json.loads((out_dir / f"{name}.ot.json").read_text())["status"] == "max_iter"

    def gone(p):
        try:
            return p.status() == psutil.STATUS_ZOMBIE
        except psutil.NoSuchProcess:
            return True

    deadline = time.monotonic() + 30
    while not all(gone(p) for p in workers):
        assert time.monotonic() < deadline, [p for p in workers if not gone(p)]
        time.sleep(0.05)
    return code, err


def test_sigterm_stops_a_batch_keeping_the_files_finished(tmp_path, batch_files):
    code, err = _stop_batch(tmp_path, batch_files, ["-j", "2"], [signal.SIGTERM])
    assert code == 143, err
    assert "stopped by SIGTERM" in err and "Traceback" not in err


def test_two_sigterms_stop_a_batch_at_once(tmp_path, batch_files):
    code, err = _stop_batch(tmp_path, batch_files, ["-j", "2"], [signal.SIGTERM, signal.SIGTERM])
    assert code == 143, err
    assert "Traceback" not in err


def test_sighup_stops_a_batch_on_a_local_dask_cluster(tmp_path, batch_files):
    pytest.importorskip("dask.distributed")
    code, err = _stop_batch(tmp_path, batch_files, ["--local-cluster", "2", "--chunk", "1"], [signal.SIGHUP])
    assert code == 129, err
    assert "stopped by SIGHUP" in err


# ------------------------------------------------------------------ the handlers themselves

class Stopped(Exception):
    pass


@pytest.fixture
def no_exit(monkeypatch):
    """Handling.stop without leaving the test process: os._exit raises Stopped(code), no child is killed."""

    def fake_exit(code):
        raise Stopped(code)

    monkeypatch.setattr(sigmod.os, "_exit", fake_exit)
    monkeypatch.setattr(sigmod, "kill_children", lambda: None)


def test_first_signal_raises_terminated_only_where_allowed(no_exit):
    h = sigmod.Handling("optsolve test")
    h._handle(signal.SIGTERM, None)  # outside raising(): recorded only
    assert h.received == signal.SIGTERM and h.exit_code == 143
    h = sigmod.Handling("optsolve test")
    with pytest.raises(Terminated) as caught, h.raising():
        h._handle(signal.SIGHUP, None)
    assert isinstance(caught.value, KeyboardInterrupt) and caught.value.exit_code == 129
    with pytest.raises(Stopped) as stopped:
        h._handle(signal.SIGTERM, None)  # the second one
    assert stopped.value.args == (143,)


def test_signals_inside_a_deferred_section_act_at_its_end(no_exit):
    h = sigmod.Handling("optsolve test")
    done = []
    with pytest.raises(Terminated), h.raising():
        with h.deferred():
            h._handle(signal.SIGTERM, None)
            done.append("written")  # not cut short
    assert done == ["written"]
    h = sigmod.Handling("optsolve test")
    h._handle(signal.SIGTERM, None)
    with pytest.raises(Stopped) as stopped:
        with h.deferred():
            h._handle(signal.SIGINT, None)
            done.append("written whole")
    assert done[-1] == "written whole" and stopped.value.args == (130,)


def test_handlers_are_installed_for_the_command_only(cli, monkeypatch):
    import optsolve.core.runner as runner
    import optsolve.ot
    from conftest import EXAMPLE_OT

    before = {s: signal.getsignal(s) for s in sigmod.SIGNALS}
    seen = {}
    original = runner.solve_file

    def spy(*args, **kwargs):
        seen.update({s: signal.getsignal(s) for s in sigmod.SIGNALS})
        return original(*args, **kwargs)

    monkeypatch.setattr(runner, "solve_file", spy)
    r = cli("ot", EXAMPLE_OT, "-q")
    assert r.exit_code == 0, r.stderr
    assert all(callable(h) and h not in before.values() for h in seen.values()), seen
    assert {s: signal.getsignal(s) for s in sigmod.SIGNALS} == before
    a, b = np.full(3, 1 / 3), np.full(3, 1 / 3)
    optsolve.ot.solve(a, b, np.ones((3, 3)) - np.eye(3), method="emd")  # the Python API installs none
    assert {s: signal.getsignal(s) for s in sigmod.SIGNALS} == before


def test_a_signal_ignored_at_the_start_stays_ignored():
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)
    try:
        with sigmod.handling("optsolve test"):
            assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
            assert signal.getsignal(signal.SIGTERM) not in (signal.SIG_DFL, signal.SIG_IGN)
        assert signal.getsignal(signal.SIGHUP) == signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)


def test_sigterm_in_process_interrupts_the_solve_and_exits_143(cli, monkeypatch):
    import optsolve.ot.sinkhorn as sinkhorn
    from conftest import EXAMPLE_OT

    original, calls = sinkhorn.trace, []

    def trace(*args, **kwargs):  # the second pass of the loop: a SIGTERM arrives
        calls.append(1)
        if len(calls) == 2:
            signal.raise_signal(signal.SIGTERM)
        return original(*args, **kwargs)

    monkeypatch.setattr(sinkhorn, "trace", trace)
    r = cli("ot", EXAMPLE_OT, "--method", "sinkhorn", "--reg", "1e-4", "--tol", "1e-300", "--max-iter", "100000000")
    assert r.exit_code == 143, r.stderr
    doc = r.json()
    assert doc["status"] == "interrupted" and doc["message"].endswith("Stopped by SIGTERM.")
    assert doc["solution"]["f"] and doc["certificate"]["checks"]
    assert len(calls) == 2  # nothing after the signal ran another pass


# ------------------------------------------------------------------ a document into a pipe read late

def _bytes_waiting(fd: int) -> int:
    import fcntl
    import termios

    buf = bytearray(4)
    fcntl.ioctl(fd, termios.FIONREAD, buf)
    return int.from_bytes(buf, sys.byteorder)


@pytest.mark.parametrize("signals, limit", [((signal.SIGTERM,), None), ((signal.SIGINT, signal.SIGINT), "60"),
                                            ((signal.SIGTERM, signal.SIGINT), None)])
def test_a_signal_during_a_blocked_write_to_stdout_leaves_the_document_whole(tmp_path, signals, limit):
    import fcntl

    rng = np.random.default_rng(5)
    # a document of some 450 KB, many times the pipe's capacity
    save_problem(str(tmp_path / "km.npz"), {"X": rng.random((150_000, 2)), "labels": rng.integers(0, 8, 150_000)})
    args = ["--time-limit", limit] if limit else []
    proc = subprocess.Popen([sys.executable, "-m", "optsolve", "kmeans", "km.npz", "-o", "-", *args], cwd=tmp_path,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    Running.started.append(proc)
    capacity = fcntl.fcntl(proc.stdout.fileno(), 1032)  # F_GETPIPE_SZ: the writer blocks once it is full
    deadline = time.monotonic() + 90
    while _bytes_waiting(proc.stdout.fileno()) < capacity:
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.02)
    for signum in signals:
        proc.send_signal(signum)
        time.sleep(0.1)
    time.sleep(0.5)  # the reader starts late
    out, err = proc.communicate(timeout=60)
    # a second signal waits until the document is out, then stops the command at once
    assert proc.returncode in (128 + signals[0], 128 + signals[-1]), err
    doc = json.loads(out)  # whole
    assert doc["command"] == "kmeans" and len(doc["solution"]["assignment"]) == 150_000 and len(out) > 4 * capacity
    assert b"Traceback" not in err
