"""optsolve batch: one line per file, failures isolated, order, out-dir, worst exit code."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from optsolve.core.batch import output_paths
from optsolve.core.files import save_problem


@pytest.fixture
def mixed_files(tmp_path, small_ot):
    good, arrays = small_ot
    other = tmp_path / "other.npz"
    save_problem(str(other), dict(arrays, cost="euclidean"))
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": [1.0], "b": [1.0], "C": [[NaN]]}')
    return [good, bad, tmp_path / "missing.npz", other]


def test_batch_one_line_per_file_in_input_order(cli, mixed_files):
    r = cli("batch", "ot", "--method", "sinkhorn", "--reg", "0.05", "-j", "2", *mixed_files)
    assert r.exit_code == 7  # the worst: invalid input
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert [d["problem"]["path"] for d in lines] == [str(p) for p in mixed_files]
    assert [d["status"] for d in lines] == ["optimal", "invalid_input", "invalid_input", "optimal"]
    assert all(d["method"] == "sinkhorn" for d in lines)
    assert lines[0]["certificate"]["holds"]
    assert "4 files" in r.stderr and "2 optimal" in r.stderr and "2 invalid_input" in r.stderr


def test_batch_out_dir_and_completed_order(cli, mixed_files, tmp_path):
    out = tmp_path / "out"
    r = cli("batch", "ot", "--out-dir", out, "--order", "completed", "-j", "2", "-q", *mixed_files)
    assert r.exit_code == 7
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert sorted(d["file"] for d in lines) == sorted(str(p) for p in mixed_files)
    for d in lines:
        doc = json.loads(open(d["output"]).read())
        assert doc["status"] == d["status"]
        assert d["exit_code"] == {"optimal": 0, "invalid_input": 7}[d["status"]]
    assert r.stderr.strip().endswith("exit code 7")  # -q still reports a non-zero outcome


def test_batch_all_good_exit_0(cli, small_ot):
    path, _ = small_ot
    r = cli("batch", "ot", "-j", "1", path, path)
    assert r.exit_code == 0
    assert len(r.stdout.splitlines()) == 2


def test_batch_max_iter_exit_5(cli, small_ot):
    path, _ = small_ot
    r = cli("batch", "ot", "--method", "sinkhorn", "--reg", "0.001", "--max-iter", "2", path)
    assert r.exit_code == 5


def test_batch_usage_errors(cli, small_ot):
    path, _ = small_ot
    assert cli("batch", "ot").exit_code == 2  # no files
    assert cli("batch", "ot", "--reg", "abc", path).exit_code == 2
    assert cli("batch", "ot", "-o", "x.json", path).exit_code == 2  # batch has no single output
    r = cli("batch", "ot", path, "-")
    assert r.exit_code == 2 and "stdin" in r.stderr


def test_output_paths_disambiguate_names(tmp_path):
    paths = output_paths(["a/p.npz", "b/p.npz", "c/q.json"], str(tmp_path))
    assert len(set(paths)) == 3
    assert paths[2].endswith("q.json")


def _grandchildren(pid: int) -> list[int]:
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    parents[int(entry)] = int(fh.read().rsplit(")", 1)[1].split()[1])
            except OSError:
                continue
    children = {p for p, pp in parents.items() if pp == pid}
    return [p for p, pp in parents.items() if pp in children]


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find worker processes")
@pytest.mark.slow
def test_batch_survives_a_killed_worker(tmp_path, small_ot):
    rng = np.random.default_rng(1)
    slow = tmp_path / "slow.npz"
    save_problem(str(slow), {"a": rng.dirichlet(np.ones(150)), "b": rng.dirichlet(np.ones(150)),
                             "x": rng.random((150, 2)), "y": rng.random((150, 2)), "cost": "sqeuclidean"})
    good, _ = small_ot
    proc = subprocess.Popen([sys.executable, "-m", "optsolve", "batch", "ot", "--method", "sinkhorn", "--reg", "1e-5",
                             "--tol", "1e-300", "--max-iter", "1500", "-j", "2", str(slow), str(good)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    workers = []
    while time.monotonic() < deadline and len(workers) < 2 and proc.poll() is None:
        time.sleep(0.2)
        workers = _grandchildren(proc.pid)
    assert workers, "no worker processes found"
    time.sleep(0.5)
    for w in workers:
        try:
            os.kill(w, signal.SIGKILL)
        except ProcessLookupError:
            pass
    out, err = proc.communicate(timeout=120)
    lines = [json.loads(line) for line in out.splitlines()]
    assert [d["problem"]["path"] for d in lines] == [str(slow), str(good)]
    assert all(d["status"] in ("max_iter", "optimal") for d in lines), lines
    assert proc.returncode == 5


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


@pytest.mark.skipif(not os.path.isdir("/proc"), reason="needs /proc to find worker processes")
def test_batch_into_a_closed_pipe_ends_quietly(small_ot):
    good, _ = small_ot
    proc = subprocess.Popen([sys.executable, "-m", "optsolve", "batch", "ot", "-j", "1", "-q", *[str(good)] * 16],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    first = json.loads(proc.stdout.readline())  # then leave, as `| head -1` does
    workers = _grandchildren(proc.pid)
    proc.stdout.close()
    err = proc.stderr.read()
    proc.wait(timeout=120)
    assert first["status"] == "optimal"
    assert proc.returncode == 128 + signal.SIGPIPE, err
    assert "Traceback" not in err and "Error" not in err, err
    deadline = time.monotonic() + 10
    while any(_alive(w) for w in workers) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not any(_alive(w) for w in workers)
