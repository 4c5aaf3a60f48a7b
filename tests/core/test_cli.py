"""The command line: JSON on stdout, logs on stderr, exit codes, verify, gen, info, env vars."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import EXAMPLE_OT
from optsolve.core.files import save_problem

SCHEMA_FIELDS = {"schema", "optsolve_version", "command", "method", "status", "qualifier", "message", "problem",
                 "objective", "solution", "certificate", "stats", "settings"}


def test_help_imports_no_heavy_module():
    code = ("import sys\nfrom optsolve.cli import main\n"
            "try:\n    main(['--help'])\nexcept SystemExit:\n    pass\n"
            "heavy = [m for m in ('numpy', 'scipy', 'ot', 'cupy', 'cvxpy', 'osqp') if m in sys.modules]\n"
            "print('HEAVY', heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert "HEAVY []" in out
    for name in ("ot", "verify", "gen", "batch", "info"):
        assert name in out


def test_version(cli):
    from optsolve import __version__

    r = cli("--version")
    assert r.exit_code == 0 and __version__ in r.stdout


def test_python_dash_m(sh):
    r = sh("--version")
    assert r.exit_code == 0 and "optsolve" in r.stdout


def test_solve_example_stdout_is_one_json_document(cli):
    r = cli("ot", EXAMPLE_OT)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert SCHEMA_FIELDS <= set(doc)
    assert doc["schema"] == "optsolve.solution/1"
    assert doc["status"] == "optimal" and doc["command"] == "ot" and doc["method"] == "exact"
    assert doc["problem"]["size"] == {"n": 1024, "m": 1024}
    assert len(doc["problem"]["sha256"]) == 64
    assert doc["certificate"]["holds"] is True
    assert isinstance(doc["stats"]["time_s"]["total"], float)
    assert "optsolve ot: optimal" in r.stderr  # the summary goes to stderr
    assert "optimal" not in r.stdout.splitlines()[0]


def test_quiet_silences_stderr(cli, small_ot):
    path, _ = small_ot
    r = cli("ot", path, "-q")
    assert r.exit_code == 0 and r.stderr == ""


def test_verbose_logs_iterations(cli, small_ot):
    path, _ = small_ot
    r = cli("ot", path, "--method", "sinkhorn", "--reg", "0.05", "-v")
    assert r.exit_code == 0
    assert "iter" in r.stderr and "marginal_l1" in r.stderr
    json.loads(r.stdout)


def test_output_file_and_arrays(cli, small_ot, tmp_path):
    path, arrays = small_ot
    out, arr = tmp_path / "sol.json", tmp_path / "plan.npz"
    r = cli("ot", path, "-o", out, "--arrays", arr, "--method", "sinkhorn", "--reg", "0.05")
    assert r.exit_code == 0 and r.stdout == ""
    doc = json.loads(out.read_text())
    assert doc["arrays"] == {"path": str(arr), "keys": {"plan": {"shape": [30, 20], "dtype": "float64"}}}
    with np.load(arr) as z:
        plan = z["plan"]
    np.testing.assert_allclose(plan.sum(1), arrays["a"], atol=1e-12)
    assert sorted(os.listdir(tmp_path)) == ["plan.npz", "small.npz", "sol.json"]  # no temporary files left


def test_max_iter_exit_code_and_document(cli, small_ot):
    path, _ = small_ot
    r = cli("ot", path, "--method", "sinkhorn", "--reg", "0.001", "--max-iter", "3")
    assert r.exit_code == 5
    doc = r.json()
    assert doc["status"] == "max_iter" and doc["solution"]["f"]
    assert "max_iter" in r.stderr


def test_invalid_input_still_writes_a_document(cli, tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"a": [0.5, 0.5], "b": [1.0], "C": [[1.0, 2.0]]}')
    r = cli("ot", bad)
    assert r.exit_code == 7
    doc = r.json()
    assert doc["status"] == "invalid_input"
    assert "'C'" in doc["message"] and str(bad) in doc["message"]
    assert len(r.stderr.strip().splitlines()) == 1 and "Traceback" not in r.stderr


def test_invalid_input_written_to_output_file(cli, tmp_path):
    out = tmp_path / "out.json"
    r = cli("ot", tmp_path / "missing.npz", "-o", out)
    assert r.exit_code == 7
    assert json.loads(out.read_text())["status"] == "invalid_input"


@pytest.mark.parametrize("args", [
    ["ot"],  # missing PROBLEM
    ["ot", "x.npz", "--no-such-option"],
    ["ot", "x.npz", "--reg", "abc"],
    ["ot", "x.npz", "--method", "simplex"],
    ["ot", "x.npz", "--max-iter", "0"],
    ["ot", "x.npz", "-o", "no/such/dir/out.json"],
    ["ot", "x.npz", "--arrays", "no/such/dir/plan.npz"],
    ["ot", "x.npz", "-o", "."],
    ["no-such-command"],
])
def test_usage_errors_exit_2_without_json(cli, args):
    r = cli(*args)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert "Usage" in r.stderr or "Error" in r.stderr


@pytest.mark.parametrize("option,value", [("--gamma", "-1"), ("--gamma", "0"), ("--reg", "-1"), ("--tol", "0"),
                                          ("--target-gap", "-0.1"), ("--plan-threshold", "-1")])
def test_out_of_range_values_are_invalid_input(cli, small_ot, option, value):
    path, _ = small_ot
    r = cli("ot", path, option, value)
    assert r.exit_code == 7
    assert r.json()["status"] == "invalid_input"
    assert f"'{option}' option must be a float" in r.stderr and value in r.stderr


def test_options_from_environment(cli, small_ot):
    path, _ = small_ot
    r = cli("ot", path, env={"OPTSOLVE_OT_METHOD": "sinkhorn", "OPTSOLVE_OT_REG": "0.1"})
    assert r.exit_code == 0
    doc = r.json()
    assert doc["method"] == "sinkhorn" and doc["settings"]["reg"] == 0.1


def test_device_gpu_without_gpu_is_invalid_input(cli, small_ot):
    from optsolve.core.backend import cupy_status

    if cupy_status()[0]:
        pytest.skip("a GPU is available here")
    path, _ = small_ot
    for env, args in (({}, ["--device", "gpu"]), ({"OPTSOLVE_DEVICE": "gpu"}, [])):
        r = cli("ot", path, "--method", "sinkhorn", *args, env=env)
        assert r.exit_code == 7
        assert r.json()["status"] == "invalid_input"
        assert "--device gpu" in r.stderr and "cupy" in r.stderr


def test_internal_error_has_traceback_only_with_verbose(cli, small_ot, monkeypatch):
    import optsolve.ot

    def broken(*args, **kwargs):
        raise RuntimeError("boom")

    import dataclasses

    monkeypatch.setitem(optsolve.ot.METHODS, "exact", dataclasses.replace(optsolve.ot.METHODS["exact"], run=broken))
    path, _ = small_ot
    r = cli("ot", path)
    assert r.exit_code == 1
    doc = r.json()
    assert doc["status"] == "internal_error" and "RuntimeError: boom" in doc["message"]
    assert "Traceback" not in r.stderr
    r = cli("ot", path, "-v")
    assert r.exit_code == 1 and "Traceback" in r.stderr


def test_info(cli):
    r = cli("info")
    assert r.exit_code == 0
    assert "numpy" in r.stdout and "BLAS" in r.stdout and "GPU" in r.stdout
    doc = json.loads(cli("info", "--json").stdout)
    assert doc["packages"]["numpy"] and "usable" in doc["gpu"]


# --------------------------------------------------------------------------- verify

def test_verify_agrees_with_solver(cli, small_ot, tmp_path):
    path, _ = small_ot
    for method in ("tnt", "emd", "sinkhorn"):
        sol = tmp_path / f"{method}.json"
        assert cli("ot", path, "--method", method, "--reg", "0.05", "-o", sol).exit_code == 0
        r = cli("verify", path, sol)
        assert r.exit_code == 0, r.stderr
        report = r.json()
        assert report["schema"] == "optsolve.verification/1" and report["holds"] is True
        solved = json.loads(sol.read_text())["certificate"]["checks"]
        assert report["checks"][0]["name"] == "problem_sha256_matches"
        own = [c for c in report["checks"][1:-1] if not c["name"].startswith("setting_")]
        stated = [c for c in own if c["name"] == "qualifier_matches"]  # verify's, of the document's qualifier
        assert own[:len(solved)] == solved and all(c["holds"] for c in stated) and len(own) == len(solved) + len(stated)
        assert report["checks"][-1]["name"] == "status_claim" and report["checks"][-1]["holds"] is True


def test_verify_pipe(sh):
    solve = subprocess.run([sys.executable, "-m", "optsolve", "ot", str(EXAMPLE_OT), "-q"], capture_output=True,
                           text=True, check=True)
    r = sh("verify", EXAMPLE_OT, "-", input=solve.stdout)
    assert r.exit_code == 0, r.stderr
    assert json.loads(r.stdout)["holds"] is True


@pytest.mark.parametrize("tamper", ["f", "g", "objective"])
def test_verify_rejects_tampered_solution(cli, small_ot, tmp_path, tamper):
    path, _ = small_ot
    doc = cli("ot", path).json()
    if tamper == "objective":
        doc["objective"] *= 1.001
    else:
        doc["solution"][tamper][3] += 0.01
    sol = tmp_path / "t.json"
    sol.write_text(json.dumps(doc))
    r = cli("verify", path, sol)
    assert r.exit_code == 6
    assert r.json()["holds"] is False
    assert "checks fail" in r.stderr


def test_verify_other_problem_fails_sha_check(cli, small_ot, tmp_path, rng):
    path, arrays = small_ot
    doc = cli("ot", path).json()
    other = tmp_path / "other.npz"
    save_problem(str(other), dict(arrays, cost="sqeuclidean", x=arrays["x"] + 1e-3))
    sol = tmp_path / "s.json"
    sol.write_text(json.dumps(doc))
    r = cli("verify", other, sol)
    assert r.exit_code == 6
    assert not r.json()["checks"][0]["holds"]


@pytest.mark.parametrize("content,needle", [
    ("", "empty"),
    ("{not json", "invalid JSON"),
    ('{"schema": "other/1"}', "not an optsolve solution"),
    ('{"schema": "optsolve.solution/1", "command": "nope"}', "'command'"),
    ('{"schema": "optsolve.solution/1", "command": "ot", "status": "invalid_input", "solution": null}',
     "no solution"),
    ('{"schema": "optsolve.solution/1", "command": "ot", "method": "emd", "objective": 1.0, "settings": {},'
     ' "solution": {"f": [1.0], "g": [2.0]}}', "does not fit"),
])
def test_verify_malformed_solution_exit_7(cli, small_ot, tmp_path, content, needle):
    path, _ = small_ot
    sol = tmp_path / "s.json"
    sol.write_text(content)
    r = cli("verify", path, sol)
    assert r.exit_code == 7
    assert needle in r.stderr and "Traceback" not in r.stderr


# --------------------------------------------------------------------------- gen

@pytest.mark.parametrize("family,args", [
    ("images", ["--size", "6", "--kind", "whitenoise"]),
    ("images", ["--size", "6", "--kind", "grf", "--cost", "euclidean"]),
    ("images", ["--size", "6", "--kind", "cauchy", "--store", "matrix"]),
    ("clouds", ["--n", "9", "--m", "7", "--d", "3"]),
])
@pytest.mark.parametrize("ext", [".npz", ".json", ".mat"])
def test_gen_writes_solvable_problems(cli, tmp_path, family, args, ext):
    out = tmp_path / f"p{ext}"
    r = cli("gen", "ot", "--family", family, *args, "--seed", "3", "-o", out)
    assert r.exit_code == 0, r.stderr
    assert "wrote" in r.stderr
    r = cli("ot", out, "-q")
    assert r.exit_code == 0 and r.json()["certificate"]["holds"]


def test_gen_is_reproducible_and_seeded(cli, tmp_path):
    paths = [tmp_path / f"{i}.npz" for i in range(3)]
    for p, seed in zip(paths, (1, 1, 2)):
        assert cli("gen", "ot", "--family", "clouds", "--n", "5", "--seed", seed, "-o", p).exit_code == 0
    load = lambda p: dict(np.load(p))  # noqa: E731
    a, b, c = map(load, paths)
    assert np.array_equal(a["x"], b["x"]) and not np.array_equal(a["x"], c["x"])


def test_gen_rejects_option_of_another_family(cli, tmp_path):
    r = cli("gen", "ot", "--family", "clouds", "--size", "4", "-o", tmp_path / "p.npz")
    assert r.exit_code == 2 and "does not apply to family 'clouds'" in r.stderr


def test_gen_unknown_kind(cli, tmp_path):
    assert cli("gen", "nope", "--family", "x", "-o", tmp_path / "p.npz").exit_code == 2


def test_verify_help_lists_the_limit_options_of_every_command(cli):
    from optsolve.core.registry import available_kinds, solver_module

    text = cli("verify", "--help").stdout
    for kind in available_kinds():
        assert f"Limit options of {kind} solutions" in text
        for lim in solver_module(kind, "certificate").LIMITS:
            assert f"  {lim.option} " in text or f"  {lim.option}\n" in text, (kind, lim.option)
    for old in ("--obj-rtol", "--obj-atol", "--cost-rtol", "--cost-atol"):
        assert old not in text


@pytest.mark.parametrize("kind,name", [("ot", "objective_rtol"), ("qp", "obj_rtol"), ("kmeans", "cost_rtol"),
                                       ("truncated", "objective_rtol")])
def test_objective_rtol_is_one_name_in_every_command(cli, kind, name):
    from optsolve.core.registry import solver_module

    command = solver_module(kind, "cli").command
    ctx = command.make_context(kind, ["p.npz", "--objective-rtol", "1e-3", "--objective-atol", "1e-4"])
    assert ctx.params[name] == 1e-3
    assert "--objective-rtol" in cli(kind, "--help").stdout


@pytest.mark.parametrize("kind,gen,old", [("qp", ("--family", "random", "--n", "10"), "--obj-rtol"),
                                          ("kmeans", ("--family", "iris"), "--cost-rtol")])
def test_old_spellings_of_objective_rtol_still_work(cli, tmp_path, kind, gen, old):
    path = tmp_path / "p.npz"
    assert cli("gen", kind, *gen, "-o", path).exit_code == 0
    r = cli(kind, path, old, "1e-3", "-q")
    assert r.exit_code == 0, r.stderr
    assert r.json()["settings"][old[2:].replace("-", "_")] == 1e-3
    assert old not in cli(kind, "--help").stdout
    sol = tmp_path / "s.json"
    sol.write_text(r.stdout)
    assert cli("verify", path, sol, old, "1e-3").exit_code == 0
    assert cli("verify", path, sol, "--objective-rtol", "1e-3").exit_code == 0
