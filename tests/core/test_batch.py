"""optsolve batch: one line per file, failures isolated, order, out-dir, worst exit code."""

from __future__ import annotations

import json
import os
import signal
import stat
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


def test_output_paths_never_collide(tmp_path):
    files = ["a/p.npz", "b/p.npz", "c/p-1.npz", "c/q.json", "a/p.npz"]
    paths = output_paths(files, str(tmp_path), "ot")
    assert len(set(paths[:4])) == 4  # four different files, four names
    assert paths[4] == paths[0]  # the same file twice: one name
    assert paths[3].endswith("q.ot.json")
    assert output_paths(list(reversed(files)), str(tmp_path), "ot")[::-1] == paths  # whatever the order


def test_batch_same_stems_in_other_folders_keep_every_solution(cli, small_ot, tmp_path):
    good, arrays = small_ot
    files = []
    for folder, name, cost in (("a", "p", "sqeuclidean"), ("b", "p", "euclidean"), ("c", "p-1", "l1")):
        (tmp_path / folder).mkdir()
        files.append(tmp_path / folder / f"{name}.npz")
        save_problem(str(files[-1]), dict(arrays, cost=cost))
    out = tmp_path / "out"
    r = cli("batch", "ot", "-j", "1", "-q", "--out-dir", out, *files)
    assert r.exit_code == 0, r.stderr
    lines = [json.loads(line) for line in r.stdout.splitlines()]
    assert len({d["output"] for d in lines}) == 3 and len(list(out.iterdir())) == 3
    for f, d in zip(files, lines):
        assert d["file"] == str(f)
        assert json.loads(open(d["output"]).read())["problem"]["path"] == str(f)


def test_an_out_dir_summary_carries_the_qualifier(cli, tmp_path, small_ot):
    """An entropic answer's summary line says so, as the document does; an answer to the LP has none."""
    path, _ = small_ot
    for method, options, said in (("sinkhorn", ["--reg", "0.05"], True), ("emd", [], False)):
        r = cli("batch", "ot", "--method", method, *options, "-j", "1", "-q", "--out-dir", tmp_path / method, path)
        assert r.exit_code == 0, r.stderr
        line = json.loads(r.stdout)
        doc = json.loads(open(line["output"]).read())
        assert line["qualifier"] == doc["qualifier"]
        assert (line["qualifier"] or "").startswith("entropic at reg 0.05; LP gap <= ") is said


def test_batch_out_dir_in_the_folder_of_json_problems_keeps_them(cli, tmp_path):
    problems = []
    for i in range(2):
        problems.append(tmp_path / f"p{i}.json")
        problems[-1].write_text(json.dumps({"P": [[2.0]], "q": [-1.0 - i]}))
    before = [p.read_bytes() for p in problems]
    r = cli("batch", "qp", "-j", "1", "-q", "--out-dir", tmp_path, *problems)
    assert r.exit_code == 0, r.stderr
    assert [p.read_bytes() for p in problems] == before
    # a problem named as another's output is refused, not overwritten
    clash = tmp_path / "p0.qp.json"
    assert clash.exists()
    clash.write_text(json.dumps({"P": [[2.0]], "q": [-3.0]}))
    r = cli("batch", "qp", "-j", "1", "--out-dir", tmp_path, problems[0], clash)
    assert r.exit_code == 2 and "input file" in r.stderr, r.stderr
    assert json.loads(clash.read_text())["q"] == [-3.0]


def test_batch_of_another_command_into_one_folder_keeps_both(cli, small_ot, tmp_path):
    good, _ = small_ot
    qp = tmp_path / "small.json"  # the same stem as the ot problem
    qp.write_text(json.dumps({"P": [[2.0]], "q": [-1.0]}))
    out = tmp_path / "out"
    assert cli("batch", "ot", "-q", "--out-dir", out, good).exit_code == 0
    assert cli("batch", "qp", "-q", "--out-dir", out, qp).exit_code == 0
    docs = sorted(json.loads(p.read_text())["command"] for p in out.iterdir())
    assert docs == ["ot", "qp"]


@pytest.mark.parametrize("content", ["not json", json.dumps({"hello": 1}), "solution of another problem", "dir",
                                     "fifo"])
def test_batch_never_replaces_a_file_it_does_not_own(cli, small_ot, tmp_path, rng, content):
    good, arrays = small_ot
    out = tmp_path / "out"
    out.mkdir()
    target = out / "small.ot.json"
    if content == "dir":
        target.mkdir()
    elif content == "fifo":  # read to see whose solution it holds, it blocked the batch
        os.mkfifo(target)
    elif content == "solution of another problem":
        other = tmp_path / "elsewhere" / "small.npz"
        other.parent.mkdir()
        save_problem(str(other), dict(arrays, cost="euclidean"))
        assert cli("batch", "ot", "-q", "--out-dir", out, other).exit_code == 0
        content = target.read_text()
    else:
        target.write_text(content)
    r = cli("batch", "ot", "-q", "--out-dir", out, good)
    assert r.exit_code == 2, r.stderr
    assert "Traceback" not in r.stderr and "small.ot.json" in r.stderr
    if content == "fifo":
        assert stat.S_ISFIFO(os.lstat(target).st_mode)
    else:
        assert target.is_dir() if content == "dir" else target.read_text() == content


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


@pytest.mark.parametrize("where", ["under a file", "locked"])
def test_batch_out_dir_that_cannot_hold_files_is_a_usage_error(cli, small_ot, tmp_path, where):
    good, _ = small_ot
    locked = tmp_path / "locked"
    locked.mkdir()
    (tmp_path / "file.txt").write_text("a file")
    if where == "locked" and subprocess.run(["chattr", "+i", str(locked)], capture_output=True).returncode != 0:
        if os.geteuid() == 0:
            pytest.skip("root writes into any folder, and this filesystem has no immutable flag")
        locked.chmod(0o555)
    try:
        target = tmp_path / "file.txt" / "out" if where == "under a file" else locked
        r = cli("batch", "ot", "--out-dir", target, good)
    finally:
        subprocess.run(["chattr", "-i", str(locked)], capture_output=True)
        locked.chmod(0o755)
    assert r.exit_code == 2 and r.stdout == "", r.stderr
    assert "cannot write solutions there" in r.stderr and "Traceback" not in r.stderr
