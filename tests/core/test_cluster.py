"""optsolve batch on a Dask LocalCluster, and --resume (pool and cluster)."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

from optsolve.core.batch import finished_solution
from optsolve.core.verify import verify_document
from optsolve.core.files import save_problem

pytestmark = pytest.mark.slow  # each starts a pool or a Dask cluster


def _dask():
    pytest.importorskip("dask.distributed", reason="dask.distributed is not installed (pip install 'optsolve[dist]')")


@pytest.fixture
def ot_files(tmp_path, rng):
    paths = []
    for i in range(5):
        p = tmp_path / f"ot{i}.npz"
        save_problem(str(p), {"a": rng.dirichlet(np.ones(12)), "b": rng.dirichlet(np.ones(9)),
                              "x": rng.random((12, 2)), "y": rng.random((9, 2)), "cost": "sqeuclidean"})
        paths.append(p)
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": [0.5, 0.5], "b": [1.0], "C": [[1.0], [2.0], [3.0]]}')
    return paths[:2] + [bad] + paths[2:4] + [tmp_path / "missing.npz"] + paths[4:]


def _lines(stdout):
    return [json.loads(line) for line in stdout.splitlines()]


def test_local_cluster_one_line_per_file_with_the_right_status(sh, ot_files):
    _dask()
    r = sh("batch", "ot", "--method", "sinkhorn", "--reg", "0.05", "--local-cluster", "2", "--chunk", "2", *ot_files)
    assert r.exit_code == 7, r.stderr
    lines = _lines(r.stdout)
    assert [d["problem"]["path"] for d in lines] == [str(p) for p in ot_files]  # input order, the paths as given
    expected = ["optimal", "optimal", "invalid_input", "optimal", "optimal", "invalid_input", "optimal"]
    assert [d["status"] for d in lines] == expected
    assert "bad.json" in lines[2]["message"] and "no such file" in lines[5]["message"]
    assert all(d["certificate"]["holds"] for d in lines if d["status"] == "optimal")
    assert "local Dask cluster of 2 workers" in r.stderr and "5 optimal, 2 invalid_input" in r.stderr


def test_local_cluster_equals_the_pool(cli, sh, ot_files, tmp_path):
    _dask()
    good = [p for p in ot_files if p.suffix == ".npz" and p.exists()]
    pool = _lines(cli("batch", "ot", "-j", "2", *good).stdout)
    dask = _lines(sh("batch", "ot", "--local-cluster", "2", "--order", "completed", *good).stdout)
    by_path = {d["problem"]["path"]: d for d in dask}
    assert sorted(by_path) == sorted(d["problem"]["path"] for d in pool)
    for d in pool:
        assert by_path[d["problem"]["path"]]["objective"] == pytest.approx(d["objective"], rel=1e-9)


@pytest.mark.parametrize("where", ["pool", "cluster"])
def test_resume_skips_finished_files_and_solves_stale_ones_again(sh, ot_files, tmp_path, where):
    if where == "cluster":
        _dask()
    engine = ["--local-cluster", "2"] if where == "cluster" else ["-j", "2"]
    out = tmp_path / "out"
    first = sh("batch", "ot", *engine, "--resume", out, *ot_files)
    assert first.exit_code == 7
    assert not any(d.get("resumed") for d in _lines(first.stdout))
    # a problem changed since its solution, and a solution edited by hand
    changed = ot_files[0]  # and ot3's solution is edited
    arrays = dict(np.load(changed))
    arrays["a"] = arrays["a"][::-1].copy()
    save_problem(str(changed), {**arrays, "cost": "sqeuclidean"})
    doc = json.loads((out / "ot3.ot.json").read_text())
    doc["problem"]["sha256"] = "0" * 64
    (out / "ot3.ot.json").write_text(json.dumps(doc))
    again = sh("batch", "ot", *engine, "--resume", out, *ot_files)
    assert again.exit_code == 7, again.stderr
    lines = _lines(again.stdout)
    assert [d["file"] for d in lines] == [str(p) for p in ot_files]
    resumed = [bool(d.get("resumed")) for d in lines]
    assert resumed == [False, True, False, True, False, False, True]  # changed, invalid, edited: solved again
    assert [d["status"] for d in lines] == ["optimal"] * 2 + ["invalid_input"] + ["optimal"] * 2 + \
        ["invalid_input", "optimal"]
    assert "(3 resumed)" in again.stderr
    for p, d in zip(ot_files, lines):
        if d["status"] == "optimal":
            assert verify_document(str(p), json.loads(open(d["output"]).read()))[0].holds
    assert finished_solution("qp", str(ot_files[1]), str(out / "ot1.ot.json")) is None  # another command's


def test_a_worker_that_dies_is_reported_and_the_batch_goes_on(sh, tmp_path):
    _dask()
    (tmp_path / "crashop.py").write_text(
        "import os\n\ndef F(z):\n    if z.shape[-1] == 4:\n        os._exit(3)\n    return z\n")
    files = []
    for d in (2, 4, 6):
        path = tmp_path / f"m{d}.npz"
        assert sh("gen", "mvi", "--family", "bilinear", "--d", d, "-o", path).exit_code == 0
        files.append(path)
    env = {"PYTHONPATH": str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
           "DASK_DISTRIBUTED__SCHEDULER__ALLOWED_FAILURES": "0"}
    r = sh("batch", "mvi", "--operator", "crashop:F", "--local-cluster", "2", "--chunk", "3", *files, env=env)
    assert r.exit_code == 1, r.stderr
    lines = _lines(r.stdout)
    assert [d["status"] for d in lines] == ["optimal", "internal_error", "optimal"]
    assert "worker process solving this file died" in lines[1]["message"]


def test_dask_usage_errors(cli, ot_files):
    r = cli("batch", "ot", "--scheduler", "tcp://127.0.0.1:1", "--local-cluster", "2", *ot_files[:1])
    assert r.exit_code == 2 and "not both" in r.stderr
    r = cli("batch", "ot", "--chunk", "2", *ot_files[:1])
    assert r.exit_code == 2 and "'--chunk' applies to a Dask batch" in r.stderr
    r = cli("batch", "ot", "--resume", "a", "--out-dir", "b", *ot_files[:1])
    assert r.exit_code == 2 and "names another directory" in r.stderr


def test_an_unreachable_scheduler_is_a_usage_error(sh, ot_files):
    _dask()
    r = sh("batch", "ot", "--scheduler", "tcp://127.0.0.1:9", *ot_files[:1], timeout=120)
    assert r.exit_code == 2 and "cannot connect to the Dask scheduler" in r.stderr
    assert "Traceback" not in r.stderr


def test_a_running_scheduler_by_address(sh, ot_files, tmp_path):
    _dask()
    import socket
    import subprocess
    import sys
    import time

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    address = f"tcp://127.0.0.1:{port}"
    procs = [subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_scheduler", "--host", "127.0.0.1",
                               "--port", str(port), "--no-dashboard"], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)]
    try:
        time.sleep(2)
        procs.append(subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_worker", address, "--nthreads", "1",
                                       "--nworkers", "2", "--no-dashboard"], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL, cwd=tmp_path))
        good = [p for p in ot_files if p.suffix == ".npz" and p.exists()]
        out = tmp_path / "out"
        r = sh("batch", "ot", "--scheduler", address, "--out-dir", out, *good)
        assert r.exit_code == 0, r.stderr
        lines = _lines(r.stdout)
        assert [d["file"] for d in lines] == [str(p) for p in good]
        assert all(d["status"] == "optimal" and d["certificate_holds"] for d in lines)
        assert sorted(os.listdir(out)) == sorted(p.stem + ".ot.json" for p in good)
        assert f"the Dask cluster at {address}" in r.stderr
    finally:
        for p in procs[::-1]:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                p.kill()
