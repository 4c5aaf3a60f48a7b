"""Each benchmark's --quick mode runs and prints its table (so the scripts never rot)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.slow  # each runs a benchmark script in a new process


def quick(script: str, *args: str) -> list:
    """The stdout lines of ``bin/SCRIPT --quick ARGS``, after checking it exits 0 and prints its header."""
    proc = subprocess.run([sys.executable, str(ROOT / "bin" / script), "--quick", *args], capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"# {script}:")
    return lines


def test_bench_ot_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "bin" / "bench-ot"), "--quick", "--families", "grid-sq",
                           "cloud-l1"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# bench-ot:") and "threads" in lines[0]
    rows = [line for line in lines if line.startswith("| grid-sq") or line.startswith("| cloud-l1")]
    methods = {row.split("|")[4].strip().split(" (")[0] for row in rows}
    assert {"emd", "tnt discounted", "tnt plain", "POT sinkhorn", "POT sinkhorn_log"} <= methods
    assert all(len(row.split("|")) == 13 for row in rows)


def test_bench_ot_dense_and_clouds_tables():
    proc = subprocess.run([sys.executable, str(ROOT / "bin" / "bench-ot"), "--dense", "120", "--repeat", "1"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# bench-ot --dense:")
    row = next(line for line in lines if line.startswith("| Gaussians 100-d | 120 | optsolve tnt"))
    assert float(row.split("|")[6]) < 1e-2  # the rounded cost near emd's
    proc = subprocess.run([sys.executable, str(ROOT / "bin" / "bench-ot"), "--clouds", "600"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    rows = [line for line in proc.stdout.splitlines() if line.startswith("| uniform") or line.startswith("| mixture")]
    assert len(rows) == 6 and all("failed" not in row for row in rows)
    assert {row.split("|")[3].strip().split(" (")[0] for row in rows} == {"optsolve exact", "POT emd2",
                                                                         "POT emd2_lazy"}


def test_bench_qp_quick():
    proc = subprocess.run([sys.executable, str(ROOT / "bin" / "bench-qp"), "--quick", "--mm", "3"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.split("After 50 iterations")[0].splitlines()  # the family table
    assert lines[0].startswith("# bench-qp:")
    rows = [line for line in lines if line.startswith("| random") or line.startswith("| mpc")]
    assert {row.split("|")[5].strip() for row in rows} >= {"osqp", "osqp, check every iteration", "admm",
                                                           "distributed, 8 nodes (untrained)"}
    chain = {row.split("|")[5].strip() for row in lines if row.startswith("| chain")}
    assert {"distributed, its partition (8 nodes, untrained)", "deepdistributed (its family's policy)"} <= chain
    assert all(row.split("|")[6].strip() == "optimal" for row in rows)
    after = proc.stdout.split("After 50 iterations")[1].split("Shipped policies")[0]
    assert "| mpc |" in after and "| chain |" in after
    assert "Shipped DeepDistributedQP policies" in proc.stdout
    assert "Maros-Meszaros, 3 files" in proc.stdout or "Maros-Meszaros: skipped, no files" in proc.stdout


def test_bench_cover_quick():
    lines = quick("bench-cover")
    rows = [line for line in lines if line.startswith("| les_miserables") or line.startswith("| sbm")]
    assert {row.split("|")[5].strip() for row in rows} == {"greedy", "threshold", "continuous", "milp",
                                                           "unfair-greedy"}
    assert all(len(row.split("|")) == 15 for row in rows)
    assert "Lazy against plain greedy" in "\n".join(lines) and "| greedy | 4 |" in "\n".join(lines)


def test_bench_kmeans_quick():
    lines = quick("bench-kmeans")
    header = next(line for line in lines if line.startswith("| data | scheme |"))
    columns = [c.strip() for c in header.strip("|").split("|")]
    assert {"labels", "sample-centre", "default"} <= set(columns)
    rows = [line for line in lines if line.startswith("| digits |")]
    assert len(rows) == 2 and all(len(row.split("|")) == len(header.split("|")) for row in rows)
    scal = [line for line in lines if line.startswith("| 10000 |")]
    assert {row.split("|")[2].strip().split(",")[0].split(":")[0] for row in scal} == {
        "sort-window", "crdest", "sample-window", "sample-centre", "default"}


def test_bench_truncated_quick():
    lines = quick("bench-truncated", "--parts", "14")
    rows = [line for line in lines if line.startswith("| 2 | 0.1 |")]
    assert {row.split("|")[4].strip() for row in rows} == {"naive", "newton", "psgd", "dgtz"}
    assert all(len(row.split("|")) == 14 for row in rows)
    newton = next(row for row in rows if row.split("|")[4].strip() == "newton")
    assert newton.split("|")[12].strip() == "holds"
    assert any(line.startswith("Fitted exponent (newton)") for line in lines)


def test_bench_mvi_quick(tmp_path):
    csv = tmp_path / "curves.csv"
    lines = quick("bench-mvi", "--csv", str(csv))
    rows = [line for line in lines if line.startswith("| polar a=1 |")]
    methods = {row.split("|")[5].strip() for row in rows if len(row.split("|")) == 13}
    assert methods == {"ecppa", "eg+", "ceg+", "ada-eg+ rho", "ada-eg+ ref", "curv-eg+", "rppa m=5", "rppa m=20",
                       "eg", "gda"}
    ecppa = next(row for row in rows if row.split("|")[5].strip() == "ecppa")
    assert ecppa.split("|")[7].strip() == "converged"
    assert any(line.startswith("| quadratic rho=-0.9 |") and line.count("|") == 14 for line in lines)  # summary
    assert any(line.startswith("## ecppa's rate") for line in lines)
    header = csv.read_text().splitlines()[0]
    assert header == "problem,method,evaluations,jacobian_evaluations,best_residual,min_u"
