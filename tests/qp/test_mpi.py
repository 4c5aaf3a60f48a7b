"""DistributedQP across MPI ranks (`--engine mpi`): the same answer as one process."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from optsolve.core.files import save_problem
from optsolve.qp.distributed import assign_nodes


def _mpiexec() -> str | None:
    here = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    return here if os.path.exists(here) else shutil.which("mpiexec")


@pytest.fixture(scope="module")
def mpirun():
    """``mpirun(R, *args)``: ``mpiexec -n R python -m optsolve ARGS...``; skips when MPI cannot start."""
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install 'optsolve[dist]')")
    exe = _mpiexec()
    if exe is None:
        pytest.skip("mpiexec is not on PATH (pip install 'optsolve[dist]' brings MPICH's)")
    probe = subprocess.run([exe, "-n", "2", sys.executable, "-c",
                            "from mpi4py import MPI; print(MPI.COMM_WORLD.Get_size())"],
                           capture_output=True, text=True, timeout=60)
    if probe.returncode != 0 or probe.stdout.count("2") != 2:
        pytest.skip(f"mpiexec -n 2 cannot start here: {(probe.stderr or probe.stdout).strip()[:300]}")

    def run(ranks, *args):
        return subprocess.run([exe, "-n", str(ranks), sys.executable, "-m", "optsolve", *map(str, args)],
                              capture_output=True, text=True, timeout=300)

    return run


@pytest.fixture(scope="module")
def chain(tmp_path_factory):
    from click.testing import CliRunner

    from optsolve.cli import main

    path = tmp_path_factory.mktemp("mpi") / "chain.npz"
    r = CliRunner().invoke(main, ["gen", "qp", "--family", "chain", "--n", "3000", "--seed", "5", "-o", str(path)])
    assert r.exit_code == 0
    return path


def test_two_ranks_equal_one_process(mpirun, chain, tmp_path, cli):
    one = cli("qp", chain, "--method", "distributed", "--history").json()
    out = tmp_path / "two.json"
    r = mpirun(2, "qp", chain, "--method", "distributed", "--engine", "mpi", "--history", "-o", out)
    assert r.returncode == 0, r.stderr
    assert r.stderr.count("optsolve qp: optimal") == 1  # rank 0 alone reports
    two = json.loads(out.read_text())
    assert two["status"] == one["status"] == "optimal"
    assert two["stats"]["ranks"] == 2 and two["settings"]["engine"] == "mpi"
    assert two["stats"]["iterations"] == one["stats"]["iterations"]
    assert two["stats"]["copies"] == one["stats"]["copies"]
    for key in ("x", "y", "z"):
        np.testing.assert_allclose(two["solution"][key], one["solution"][key], rtol=0, atol=1e-8)
    assert two["objective"] == pytest.approx(one["objective"], rel=1e-10)
    assert two["certificate"]["holds"]
    assert two["stats"]["history"]["iteration"] == one["stats"]["history"]["iteration"]
    assert [f for f in os.listdir(tmp_path) if f.startswith(".optsolve-")] == []


def test_three_ranks_on_stdout_and_a_learned_policy(mpirun, chain, cli):
    one = cli("qp", chain, "--method", "deepdistributed", "--residual-balancing").json()
    r = mpirun(3, "qp", chain, "--method", "deepdistributed", "--residual-balancing", "--engine", "mpi", "-o", "-")
    assert r.returncode == 0, r.stderr
    assert r.stdout.count('"schema"') == 1  # one document: rank 0's
    three = json.loads(r.stdout)
    assert three["stats"]["ranks"] == 3
    assert three["stats"]["iterations"] == one["stats"]["iterations"]
    np.testing.assert_allclose(three["solution"]["x"], one["solution"]["x"], rtol=0, atol=1e-8)


def test_more_ranks_than_nodes_and_a_centralised_method_are_refused(mpirun, chain):
    r = mpirun(3, "qp", chain, "--method", "distributed", "--nodes", "2", "--engine", "mpi", "-o", "-")
    assert r.returncode == 7
    assert "3 MPI ranks need at least 3 nodes" in r.stderr and r.stderr.count("error") <= 1
    r = mpirun(2, "qp", chain, "--engine", "mpi", "--method", "admm", "-o", "-")
    assert r.returncode == 7 and "--method distributed" in r.stderr


def test_one_rank_without_mpiexec(chain, cli):
    pytest.importorskip("mpi4py", reason="mpi4py is not installed (pip install 'optsolve[dist]')")
    r = cli("qp", chain, "--method", "distributed", "--engine", "mpi", "--max-iter", "50")
    doc = r.json()
    assert doc["stats"]["ranks"] == 1 and doc["stats"]["iterations"] == 50


def test_assign_nodes_balances_the_work():
    assert assign_nodes([50, 8, 8, 8, 8, 8, 8, 8], 2) == [[0], [1, 2, 3, 4, 5, 6, 7]]
    assert assign_nodes([6, 1, 1, 1, 1, 1, 1, 1], 2) == [[0, 7], [1, 2, 3, 4, 5, 6]]
    costs = [3, 1, 1, 1, 1, 1, 1, 1]
    loads = [sum(costs[i] for i in o) for o in assign_nodes(costs, 2)]
    assert sorted(loads) == [5, 5]
    assert sorted(sum(assign_nodes([5, 4, 3, 2, 1], 3), [])) == list(range(5))
    assert all(assign_nodes([1.0] * 8, 8))


def test_node_costs_are_measured_times_of_every_node(chain):
    from optsolve.core.files import read_raw
    from optsolve.qp.scaling import ruiz_scale
    from optsolve.qp.distributed import OneProcess, node_costs, split
    from optsolve.qp.problems import SCHEMA, prepare

    qp = prepare(SCHEMA.validate(read_raw(str(chain))[0], source="chain"))
    part = np.searchsorted(np.unique(qp.partition), qp.partition)
    nodes = split(ruiz_scale(qp, 10), part, int(part.max()) + 1)
    cost = node_costs(nodes, OneProcess)
    assert cost.shape == (len(nodes),) and np.all(cost > 0) and np.all(cost < 1.0)
    # the node holding the whole (connected) cost matrix is the costliest
    assert int(np.argmax(cost)) == int(np.argmax([nd.Q.nnz for nd in nodes]))


def test_ranks_on_one_machine_share_its_cores():
    """Each rank's BLAS threads are capped at cores / ranks on the machine; under the cap, left alone."""
    from threadpoolctl import threadpool_info, threadpool_limits

    from optsolve.qp.ranks import MPIRanks

    def blas_threads():
        return [int(lib["num_threads"]) for lib in threadpool_info() if lib.get("user_api") == "blas"]

    if not blas_threads():
        pytest.skip("no BLAS library reports its threads to threadpoolctl")
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    with threadpool_limits(limits=None):
        before = blas_threads()
        MPIRanks._share_cores(2 * cores)  # more ranks than cores: one thread each
        assert max(blas_threads()) == 1
        with threadpool_limits(limits=1):
            MPIRanks._share_cores(1)  # one rank: the cap (all cores) is not below 1 thread: left alone
            assert max(blas_threads()) == 1
    assert blas_threads() == before


def _ranks_handle_signals(proc, ranks: int) -> bool:
    """The ``ranks`` Python processes under ``proc`` (mpiexec) have installed the command's handlers
    (Linux: SIGTERM, which Python leaves alone, is in their caught mask)."""
    import signal

    psutil = pytest.importorskip("psutil")
    caught = 0
    for child in psutil.Process(proc.pid).children(recursive=True):
        try:
            if "optsolve" not in child.cmdline():  # mpiexec's proxy is no rank
                continue
            with open(f"/proc/{child.pid}/status") as f:
                mask = next(int(line.split()[1], 16) for line in f if line.startswith("SigCgt:"))
        except (OSError, StopIteration, psutil.Error):
            continue
        caught += bool(mask >> (signal.SIGTERM - 1) & 1)
    return caught >= ranks


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_ctrl_c_to_mpiexec_ends_with_rank_0s_interrupted_document(mpirun, chain, tmp_path):
    """SIGINT to mpiexec (which passes it on to the ranks), ten times, from the setup to the iterations:
    each ends, within a few seconds, with one whole document of status interrupted from rank 0 and exit
    code 130."""
    import signal
    import time

    for attempt in range(10):
        out = tmp_path / f"stopped{attempt}.json"
        proc = subprocess.Popen([_mpiexec(), "-n", "2", sys.executable, "-m", "optsolve", "qp", str(chain),
                                 "--method", "distributed", "--engine", "mpi", "--eps-abs", "1e-300",
                                 "--eps-rel", "1e-300", "--max-iter", "100000000", "-o", str(out)],
                                cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
        try:
            time.sleep(0.8 + 0.17 * attempt)  # somewhere else in the setup or the iterations each time
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=10)
            except subprocess.TimeoutExpired:
                pytest.fail(f"attempt {attempt}: no answer to SIGINT within 10 s")
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 130, (attempt, err[-2000:])
        doc = json.loads(out.read_text())
        assert doc["status"] == "interrupted" and doc["stats"]["ranks"] == 2, attempt
        assert doc["solution"]["x"] and doc["stats"]["iterations"] > 0 and "SIGINT" in doc["message"]
        assert "Traceback" not in err


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG and /proc")
def test_sigterm_inside_the_ranks_setup_is_answered_within_the_watchers_grace(mpirun, tmp_path):
    """A SIGTERM while the ranks load and factor a QP whose setup takes seconds inside native code (no
    iteration to agree at): rank 0's watcher writes the interrupted document, naming the stage, within
    its grace of 1.5 s, and no rank's solve is left running."""
    import signal
    import time

    from optsolve.qp.problems import FAMILIES

    psutil = pytest.importorskip("psutil")
    save_problem(str(tmp_path / "big.npz"), FAMILIES["random"].generate(np.random.default_rng(0), n=1500))
    out = tmp_path / "stopped.json"
    proc = subprocess.Popen([_mpiexec(), "-n", "2", sys.executable, "-m", "optsolve", "qp", "big.npz",
                             "--method", "distributed", "--nodes", "8", "--engine", "mpi", "-o", str(out)],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        time.sleep(4.0)  # loading (a convexity check) or factoring: seconds more of native code either way
        assert proc.poll() is None
        proc.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        while not out.exists() and proc.poll() is None and time.monotonic() < sent + 30:
            time.sleep(0.02)
        answered = time.monotonic() - sent
        _, err = proc.communicate(timeout=60)  # the other ranks end too, once out of their native step
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143, err[-2000:]
    doc = json.loads(out.read_text())
    assert doc["status"] == "interrupted" and "SIGTERM" in doc["message"], doc["message"]
    assert answered < 5.0, f"the document came after {answered:.1f} s: {err[-2000:]}"  # 10 s and more when not watched
    time.sleep(0.5)
    assert not [p for p in psutil.process_iter(["cmdline"]) if "big.npz" in " ".join(p.info["cmdline"] or [])]
