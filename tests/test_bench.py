"""Each benchmark's --quick mode runs and prints its table (so the scripts never rot)."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest
from conftest import ROOT, SHARED_DATA, load_script

pytestmark = pytest.mark.slow  # each runs a benchmark script in a new process


def quick(script: str, *args: str) -> list:
    """The stdout lines of ``bin/SCRIPT --quick ARGS``, after checking it exits 0 and prints its header."""
    return run(script, "--quick", *args)


def run(script: str, *args: str) -> list:
    """The stdout lines of ``bin/SCRIPT ARGS``, after checking it exits 0 and prints its header line."""
    proc = subprocess.run([sys.executable, str(ROOT / "bin" / script), *args], capture_output=True, text=True,
                          timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(f"# {script}") and "threads" in lines[0]
    return lines


def rows(lines: list, first: str, has: str = "") -> list:
    """The rows, as dicts keyed by the header's names, of every table whose header's first cell is ``first``
    and which has a column ``has`` (a row with more or fewer cells than its header fails)."""
    out, header = [], None
    for line in lines:
        if not line.startswith("|"):
            header = None
            continue
        if set(line) <= set("|- "):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if header is None:
            header = cells if cells[0] == first and (not has or has in cells) else []
        elif header:
            assert len(cells) == len(header), (header, line)
            out.append(dict(zip(header, cells)))
    return out


def test_bench_ot_quick():
    table = rows(run("bench-ot", "--quick", "--families", "grid-sq", "cloud-l1"), "family")
    methods = {r["method"].split(" (")[0] for r in table if r["family"] in ("grid-sq", "cloud-l1")}
    assert {"emd", "tnt discounted", "tnt plain", "POT sinkhorn", "POT sinkhorn_log"} <= methods


def test_bench_ot_dense_and_clouds_tables():
    lines = run("bench-ot", "--dense", "120", "--repeat", "1")
    assert lines[0].startswith("# bench-ot --dense:")
    tnt = next(r for r in rows(lines, "problem") if r["solver"] == "optsolve tnt")
    assert tnt["problem"] == "Gaussians 100-d" and float(tnt["rel. gap vs emd"]) < 1e-2  # the rounded cost near emd's
    table = rows(run("bench-ot", "--clouds", "600", "--cloud-runs", "", "--target-gap 1e-3"), "clouds")
    assert len(table) == 8 and {r["clouds"] for r in table} == {"uniform", "mixture"}
    assert all("failed" not in " ".join(r.values()) for r in table)
    assert {r["solver"].split(" (")[0] for r in table} == {"optsolve exact", "POT emd2", "POT emd2_lazy"}
    assert {r["options"] for r in table} == {"(default)", "--target-gap 1e-3", "-"}
    assert all(float(r["POT emd2 / optsolve (wall)"]) > 0 for r in table if r["options"] != "-")


def test_bench_qp_qpbenchmark_quick():
    pytest.importorskip("qpbenchmark", reason="qpbenchmark is not installed (optsolve[bench-qp])")
    if not (SHARED_DATA / "maros_meszaros").is_dir():
        pytest.skip("Maros-Meszaros files not found")
    lines = run("bench-qp", "--quick", "--qpbenchmark", "--qpb-files", "3", "--qpb-settings", "low", "mid")
    table = rows(lines, "settings", has="solver")
    assert [(r["settings"], r["solver"]) for r in table] == [
        (s, solver) for s in ("low_accuracy", "mid_accuracy") for solver in ("optsolve", "piqp", "clarabel", "osqp")]
    ours = [r for r in table if r["solver"] == "optsolve"]
    assert all(r["solved"] == "3/3" and r["optimal claims failing verify"] == "0" for r in ours)
    assert all(r["time / PIQP's"] == "1.00" for r in table if r["solver"] == "piqp")
    assert any(line.startswith("- mid_accuracy, not solved by optsolve: none") for line in lines)


def test_bench_qp_quick():
    lines = run("bench-qp", "--quick", "--mm", "3")
    text = "\n".join(lines)
    family = rows(text.split("After 50 iterations")[0].splitlines(), "family")
    methods = {r["method"] for r in family if r["family"] in ("random", "mpc")}
    assert methods >= {"osqp", "osqp, check every iteration", "admm", "distributed, 8 nodes (untrained)"}
    chain = {r["method"] for r in family if r["family"] == "chain"}
    assert {"distributed, its partition (8 nodes, untrained)", "deepdistributed (its family's policy)"} <= chain
    assert all(r["status"] == "optimal" for r in family if r["family"] in ("random", "mpc"))
    after = text.split("After 50 iterations")[1].split("Shipped policies")[0]
    assert "| mpc |" in after and "| chain |" in after
    assert "Shipped DeepDistributedQP policies" in text
    assert "Maros-Meszaros, 3 files" in text or "Maros-Meszaros: skipped, no files" in text


def test_bench_cover_quick():
    lines = quick("bench-cover")
    table = [r for r in rows(lines, "instance") if r["instance"] in ("les_miserables", "sbm")]
    assert {r["method"] for r in table} == {"greedy", "threshold", "continuous", "milp", "unfair-greedy"}
    assert all(r["oracle calls"] == "0" for r in table if r["method"] == "milp")  # the MILP calls no oracle
    assert "Lazy against plain greedy" in "\n".join(lines) and "| greedy | 4 |" in "\n".join(lines)


def test_bench_cover_scale_quick(tmp_path):
    lines = quick("bench-cover", "--scale", "--dir", str(tmp_path))
    assert lines[0].startswith("# bench-cover --scale:")
    (row,) = rows(lines, "incidences")
    assert row["incidences"] == "1e7" and row["method"] == "greedy" and row["status"] == "optimal"
    assert row["fairness violation"] == "0" and float(row["f / tau"]) >= 1 and float(row["S / bound"]) >= 1
    for column in ("whole command (s)", "solve (s)", "peak RSS (MB)"):
        assert float(row[column]) > 0, column
    milp = rows(lines, "instance", "OPT (MILP)")
    assert len(milp) == 4 and all(float(r["S / OPT"]) >= 1 for r in milp)
    assert any(line.startswith("MILP-solvable cases: 4;") for line in lines)
    assert [p.suffix for p in tmp_path.iterdir()] == [".npz"]


def test_bench_kmeans_quick():
    lines = quick("bench-kmeans")
    table = rows(lines, "data")
    assert len(table) == 2 and all(r["data"] == "digits" for r in table)
    assert all(float(r["default"]) <= float(r["sample-centre"].split(" (")[0]) + 1e-3 for r in table)
    scaling = rows(lines, "m")
    assert {r["method"].split(",")[0].split(":")[0] for r in scaling} == {
        "sort-window", "crdest", "sample-window", "sample-centre", "default"}


def test_bench_kmeans_scale_quick(tmp_path):
    lines = quick("bench-kmeans", "--scale", "--dir", str(tmp_path))
    assert lines[0].startswith("# bench-kmeans --scale:")
    table = rows(lines, "size")
    tools = {r["tool"]: r for r in table}
    assert len(table) == len(tools) and {"optsolve", "scikit-learn"} <= set(tools)
    if importlib.util.find_spec("faiss") is not None:
        assert "faiss" in tools
    else:
        assert any(line.startswith("faiss: not run") for line in lines), lines
    for r in table:
        for column in ("whole command (s)", "cost", "cost / optsolve's", "time / optsolve's", "peak RSS (MB)",
                       "RSS / X file"):
            assert float(r[column]) > 0, (r["tool"], column)
    assert float(tools["optsolve"]["solve (s)"]) > 0 and float(tools["optsolve"]["certificate (s)"]) >= 0
    assert any(line.startswith("2e4 x 10, k = 5: optsolve: ") and "Targets met: " in line for line in lines)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".npy", ".npz"]


def test_bench_truncated_quick():
    lines = quick("bench-truncated", "--parts", "14")
    table = [r for r in rows(lines, "d") if r["d"] == "2" and r["alpha"] == "0.1"]
    assert {r["method"] for r in table} == {"naive", "newton", "psgd", "dgtz"}
    assert next(r for r in table if r["method"] == "newton")["certificate"] == "holds"
    assert any(line.startswith("Fitted exponent (newton)") for line in lines)


def test_bench_truncated_dimension_quick(tmp_path):
    lines = quick("bench-truncated", "--dimension", "--dir", str(tmp_path))
    assert lines[0].startswith("# bench-truncated --dimension:")
    table = rows(lines, "d", has="whole command (s)")
    assert [(r["d"], r["n"], r["set"]) for r in table] == [("3", "1000", s) for s in ("halfspace", "box", "intersection")]
    for r in table:
        assert r["status"] and float(r["whole command (s)"]) > 0 and float(r["peak RSS (MB)"]) > 0, r
        assert 0 < float(r["alpha"]) < 1 and float(r["naive KL"]) > 0
    half = table[0]
    assert half["status"] == "optimal" and float(half["KL(truth, est)"]) < float(half["naive KL"])
    assert any(line.startswith("delphi-ai: not run: give --delphi-python") for line in lines)
    assert sorted(p.suffix for p in tmp_path.iterdir()) == [".npz"] * 3


def test_bench_truncated_dimension_rows_chosen_and_timed_out(tmp_path):
    lines = run("bench-truncated", "--dimension", "--dimension-dims", "2", "--dimension-sets", "intersection",
                "--dimension-n", "400", "--row-limit", "0.05", "--dimension-seeds", "2", "--dir", str(tmp_path))
    table = rows(lines, "d", has="whole command (s)")
    assert [(r["d"], r["n"], r["set"], r["seed"], r["status"]) for r in table] == [
        ("2", "400", "intersection", seed, "timed out") for seed in ("0", "1")]
    assert any(line.startswith("d = 2, n = 400, intersection, seed 1: optsolve timed out after 0.05 s")
               for line in lines)
    (means,) = rows(lines, "d", has="seeds")  # no estimate: no mean KL
    assert (means["seeds"], means["KL(truth, est)"], means["delphi KL"]) == ("2", "-", "-")
    assert float(means["naive KL"]) > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        f"truncated-gaussian-d2-n400-halfspace-ball-alpha0.086-seed{seed}.npz" for seed in (0, 1)]


def test_bench_mvi_scale_quick(tmp_path):
    lines = quick("bench-mvi", "--scale", "--dir", str(tmp_path))
    assert lines[0].startswith("# bench-mvi --scale:")
    whole = rows(lines, "d", has="wall (s)")
    assert [(r["d"], r["T / norm F(z0)"], r["status"]) for r in whole] == [("2000", "1e-06", "optimal"),
                                                                          ("2000", "1e-09", "optimal")]
    assert all(float(r["wall (s)"]) > 0 and 0 < float(r["share of the solve in F"]) <= 1 for r in whole)
    runs = {r["method"]: r for r in rows(lines, "d", has="method")}
    assert set(runs) == {"ecppa", "ecppa fixed-point", "eg+", "ceg+", "rppa m=20"}
    ours, fixed = runs["ecppa"], runs["ecppa fixed-point"]
    assert ours["stop"] == "converged" and float(ours["best / norm F(z0)"]) <= 1e-9
    assert int(ours["evaluations to 1e-6"]) < int(ours["evaluations to 1e-9"])
    assert fixed["stop"] == "converged" and float(fixed["evaluations to 1e-9 / ecppa's"]) > 1
    assert [p.name for p in tmp_path.iterdir()] == ["mvi-affine-d2000-rho-0.3.npz"]


def test_bench_mvi_batch_quick():
    lines = quick("bench-mvi", "--batch")
    assert lines[0].startswith("# bench-mvi --batch:")
    runs = {r["method"]: r for r in rows(lines, "N terms", has="method")}
    assert set(runs) == {"ecppa", "eg+", "bc-seg+ B=64", "bc-seg+ B=1024"}
    assert runs["ecppa"]["stop"] == "converged" and float(runs["ecppa"]["best / norm F(z0)"]) <= 1e-3
    for r in runs.values():  # passes grow with the level reached; a stochastic run reaches 1e-1 at least
        reached = [float(r[f"passes to {x}"]) for x in ("0.1", "0.01", "0.001") if r[f"passes to {x}"] != "-"]
        assert reached and reached == sorted(reached)


def test_bench_mvi_quick(tmp_path):
    csv = tmp_path / "curves.csv"
    lines = quick("bench-mvi", "--csv", str(csv))
    table = [r for r in rows(lines, "problem", has="method") if r["problem"] == "polar a=1"]
    assert {r["method"] for r in table} == {"ecppa", "eg+", "ceg+", "ada-eg+ rho", "ada-eg+ ref", "curv-eg+",
                                            "rppa m=5", "rppa m=20", "eg", "gda"}
    assert next(r for r in table if r["method"] == "ecppa")["status"] == "converged"
    assert any(line.startswith("| quadratic rho=-0.9 |") and line.count("|") == 14 for line in lines)  # summary
    assert any(line.startswith("## ecppa's rate") for line in lines)
    header = csv.read_text().splitlines()[0]
    assert header == "problem,method,evaluations,jacobian_evaluations,best_residual,min_u"


def test_bench_scale_quick():
    lines = quick("bench-scale")
    paths = {r["path"] for r in rows(lines, "path")}
    assert paths == {"process pool -j 2", "Dask LocalCluster 2 workers, 1 file a task",
                     "Dask LocalCluster 2 workers, default chunks"}
    runs = rows(lines, "run")
    if runs:  # mpiexec found (the dist extra)
        assert {r["run"] for r in runs} == {"1 process", "mpiexec -n 2"} and all(r["iterations"] == "100" for r in runs)
    else:
        assert any("MPI" in line and "skipped" in line for line in lines), lines


def bench_scale_module():
    return load_script("bench-scale", "bench_scale")


def test_bench_scale_counts_the_variables_nodes_share(tmp_path):
    """A chain's neighbouring blocks share a quarter of a block: (blocks - 1) * size // 4 variables in all."""
    import numpy as np

    from optsolve.core.files import save_problem
    from optsolve.qp.problems import FAMILIES

    raw = FAMILIES["chain"].generate(np.random.default_rng(0), n=2000)
    path = tmp_path / "chain.npz"
    save_problem(str(path), raw)
    size = round(2000 / (0.75 * 8 + 0.25))
    assert bench_scale_module().partition_facts(str(path)) == (8 * size, 8, 7 * (size // 4))


def test_bench_scale_links_parse_and_refuse():
    import argparse

    bs = bench_scale_module()
    assert bs.link("5:25") == ("5:25", pytest.approx(5e-6), pytest.approx(25e9 / 8))
    for bad in ("5", "a:b", "5:0", "-1:10"):
        with pytest.raises(argparse.ArgumentTypeError):
            bs.link(bad)


@pytest.mark.slow
def test_bench_scale_model_quick():
    lines = run("bench-scale", "--quick", "--part", "model", "--model-links", "5:25", "500:1")
    if any("Model: skipped" in line for line in lines):
        return
    links = rows(lines, "link latency (us)")
    assert [(r["link latency (us)"], r["bandwidth (Gbit/s)"]) for r in links] == [("5", "25"), ("500", "1")]


def test_bench_qp_records_each_first_step(tmp_path):
    import csv

    record = tmp_path / "record.csv"
    run("bench-qp", "--default-record", str(record), "--families", "chain", "huber", "--default-max-size", "2000",
        "--no-default-mm", "--time-limit", "30")
    with open(record, newline="") as f:
        table = list(csv.DictReader(f))
    assert [r["problem"] for r in table] == ["chain 2000", "huber 2000"]
    for r in table:
        assert r["admm_ran"] in ("admm", "admm, then piqp") and r["piqp_ran"] == "piqp"
        assert r["clarabel_ran"] == "clarabel" and r["osqp_ran"] == "osqp"
        assert all(float(r[c]) > 0 and r[c + "_ok"] == "1" for c in ("osqp", "auto", "admm", "piqp", "clarabel"))
        assert int(r["entries"]) > 0 and 0 <= float(r["box_share"]) <= 1
    lines = run("bench-qp", "--default-fit", str(record), "--fit-depth", "1")
    assert any("each family left out of its fit" in line for line in lines)
