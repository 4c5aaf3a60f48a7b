"""Unix habits: '-' for stdin/stdout on every streaming file option, user code by module or file,
every listed subcommand answers --help, completion never fails, osqp's errors keep the exit-code table."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import ROOT
from optsolve.cli import main
from optsolve.core.errors import ParameterError
from optsolve.core.registry import load_user_function

# one small family per kind: `gen KIND ARGS -o -` piped into `KIND -`
SMALL = {
    "ot": ["--family", "clouds", "--n", "20", "--m", "15"],
    "qp": ["--family", "random", "--n", "10"],
    "cover": ["--family", "karate"],
    "kmeans": ["--family", "iris"],
    "truncated": ["--family", "gaussian", "--d", "2", "--n", "300"],
    "mvi": ["--family", "polar"],
}
ENV = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
ENV.pop("PYTHONPATH", None)


def invoke(*args, input=None):
    """``optsolve ARGS`` in-process; the Click result (stdout_bytes for binary output)."""
    return CliRunner().invoke(main, [str(a) for a in args], input=input, catch_exceptions=False)


def run(args: list, cwd, input=None):
    """``python -m optsolve ARGS`` as a process in ``cwd`` without PYTHONPATH."""
    return subprocess.run([sys.executable, "-m", "optsolve", *map(str, args)], cwd=cwd, input=input,
                          capture_output=True, text=True, env=ENV, timeout=300)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


def no_dash_file(folder) -> bool:
    return not os.path.exists(os.path.join(folder, "-"))


# --------------------------------------------------------------------------- gen -o -


@pytest.mark.parametrize("kind", sorted(SMALL))
def test_gen_to_stdout_is_the_json_problem_that_kind_dash_reads(kind, in_tmp):
    r = invoke("gen", kind, *SMALL[kind], "--seed", "3", "-o", "-")
    assert r.exit_code == 0, r.stderr
    assert "Traceback" not in r.stderr and "stdout" in r.stderr
    assert no_dash_file(in_tmp)
    assert invoke("gen", kind, *SMALL[kind], "--seed", "3", "-o", "p.json").exit_code == 0
    assert json.loads(r.stdout) == json.loads((in_tmp / "p.json").read_text())
    solved = invoke(kind, "-", "-q", input=r.stdout)
    assert solved.exit_code == 0, solved.stderr
    doc = json.loads(solved.stdout)
    assert doc["command"] == kind and doc["status"] == "optimal" and doc["problem"]["path"] is None


def test_gen_pipes_into_qp_through_a_shell(tmp_path):
    script = (f"{sys.executable} -m optsolve gen qp --family lasso --n 30 --seed 1 -o - | "
              f"{sys.executable} -m optsolve qp - -q")
    r = subprocess.run(["bash", "-o", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True,
                       env=ENV, timeout=300)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    assert doc["status"] == "optimal" and doc["certificate"]["holds"] is True
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("output, needle", [("p.txt", "unknown extension"), ("nodir/p.json", "does not exist"),
                                            (".", "directory")])
def test_gen_unwritable_output_is_a_usage_error(in_tmp, output, needle):
    r = invoke("gen", "qp", "--family", "random", "--n", "5", "-o", output)
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == "" and not (in_tmp / "p.txt").exists()


# --------------------------------------------------------------------------- plot formats and stdout


@pytest.fixture
def solution_with_history(in_tmp, small_ot):
    pytest.importorskip("matplotlib")
    path, _ = small_ot
    assert invoke("ot", path, "--method", "sinkhorn", "--reg", "0.05", "--history", "-o", "s.json").exit_code == 0
    return "s.json"


MAGIC = {"png": b"\x89PNG\r\n\x1a\n", "pdf": b"%PDF-"}


def is_format(data: bytes, fmt: str) -> bool:
    if fmt == "svg":
        return data.lstrip().startswith(b"<?xml") and b"<svg" in data[:2000]
    return data.startswith(MAGIC[fmt])


@pytest.mark.parametrize("fmt", ["png", "pdf", "svg"])
def test_plot_writes_the_format_its_file_name_asks_for(solution_with_history, in_tmp, fmt):
    r = invoke("plot", solution_with_history, "-o", f"fig.{fmt}")
    assert r.exit_code == 0, r.stderr
    data = (in_tmp / f"fig.{fmt}").read_bytes()
    assert is_format(data, fmt)
    assert all(is_format(data, other) is False for other in MAGIC if other != fmt)


@pytest.mark.parametrize("args, fmt", [([], "png"), (["--format", "pdf"], "pdf"), (["--format", "svg"], "svg")])
def test_plot_dash_writes_the_figure_to_stdout(solution_with_history, in_tmp, args, fmt):
    r = invoke("plot", solution_with_history, "-o", "-", *args)
    assert r.exit_code == 0, r.stderr
    assert is_format(r.stdout_bytes, fmt)
    assert no_dash_file(in_tmp) and sorted(os.listdir(in_tmp)) == ["s.json", "small.npz"]


def test_plot_format_option_names_the_format_of_a_file_without_extension(solution_with_history, in_tmp):
    assert invoke("plot", solution_with_history, "-o", "fig", "--format", "svg").exit_code == 0
    assert is_format((in_tmp / "fig").read_bytes(), "svg")


@pytest.mark.parametrize("args, needle", [(["-o", "fig.jpg"], ".png"), (["-o", "fig"], ".png"),
                                          (["-o", "fig.png", "--format", "pdf"], "--format"),
                                          (["-o", "-", "--format", "gif"], "gif")])
def test_plot_unknown_or_contradictory_format_is_a_usage_error(solution_with_history, in_tmp, args, needle):
    r = invoke("plot", solution_with_history, *args)
    assert r.exit_code == 2 and needle in r.stderr and "Traceback" not in r.stderr
    assert sorted(os.listdir(in_tmp)) == ["s.json", "small.npz"]


# --------------------------------------------------------------------------- other file options and '-'


def test_verify_output_dash_is_stdout(in_tmp, small_ot):
    path, _ = small_ot
    assert invoke("ot", path, "-o", "s.json").exit_code == 0
    r = invoke("verify", path, "s.json", "-o", "-")
    assert r.exit_code == 0 and json.loads(r.stdout)
    assert no_dash_file(in_tmp)


@pytest.mark.parametrize("args, option", [
    (["ot", "{p}", "--arrays", "-"], "'--arrays'"),
    (["ot", "{p}", "--plan", "-"], "'--plan'"),
    (["ot", "{p}", "-o", "s.json", "--arrays", "-"], "'--arrays'"),
    (["qp-train", "mpc", "-o", "-"], "'-o' / '--output'"),
    (["batch", "ot", "--out-dir", "-", "{p}"], "'--out-dir'"),
    (["batch", "ot", "--resume", "-", "{p}"], "'--resume'"),
])
def test_dash_where_no_stream_fits_is_a_usage_error(in_tmp, small_ot, args, option):
    path, _ = small_ot
    r = invoke(*[a.format(p=path) for a in args])
    assert r.exit_code == 2, r.stderr
    assert option in r.stderr and "'-'" in r.stderr and "Traceback" not in r.stderr
    assert r.stdout == "" and no_dash_file(in_tmp) and not (in_tmp / "s.json").exists()


# --------------------------------------------------------------------------- user functions


GAMES = ("import numpy as np\n"
         "def F(z):\n    return np.array([z[1] + 0.1 * z[0], -z[0] + 0.1 * z[1]])\n")


def fresh(name: str):
    sys.modules.pop(name, None)


def test_user_module_is_found_in_the_current_directory(in_tmp):
    (in_tmp / "cwdgames.py").write_text(GAMES)
    fresh("cwdgames")
    path_before = list(sys.path)
    fn, mod = load_user_function("cwdgames:F", "operator")
    assert mod.__name__ == "cwdgames" and np.allclose(fn(np.array([1.0, 0.0])), [0.1, -1.0])
    assert sys.path == path_before
    fresh("cwdgames")


@pytest.mark.parametrize("spec", ["./sub/filegames.py:F", "sub/filegames.py:F", "{abs}/sub/filegames.py:F"])
def test_user_function_from_a_file_path(in_tmp, spec):
    (in_tmp / "sub").mkdir()
    (in_tmp / "sub" / "filegames.py").write_text(GAMES)
    fn, mod = load_user_function(spec.format(abs=in_tmp), "operator")
    assert np.allclose(fn(np.array([0.0, 2.0])), [2.0, 0.2])
    assert "filegames" not in sys.modules  # a file never takes the place of a module of that name


@pytest.mark.parametrize("spec, needles", [
    ("sub/missing.py:F", ["'--oracle'", "sub/missing.py", "no such file"]),
    ("./sub:F", ["'--oracle'", "./sub", "directory"]),
    ("sub/broken.py:F", ["'--oracle'", "sub/broken.py", "ZeroDivisionError"]),
    ("sub/ok.py:G", ["'--oracle'", "'G'", "sub/ok.py"]),
    ("sub/ok.py", ["'--oracle'", "file.py:function"]),
    ("not_a_module_here_xyz:F", ["'--oracle'", "not_a_module_here_xyz"]),
])
def test_user_function_errors_are_one_line_parameter_errors(in_tmp, spec, needles):
    (in_tmp / "sub").mkdir()
    (in_tmp / "sub" / "broken.py").write_text("x = 1 / 0\n")
    (in_tmp / "sub" / "ok.py").write_text("def F(x):\n    return x\n")
    with pytest.raises(ParameterError) as info:
        load_user_function(spec, "oracle")
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message


def test_readme_operator_example_works_from_the_directory_of_the_module(tmp_path):
    (tmp_path / "mygames.py").write_text(GAMES)
    assert run(["gen", "mvi", "--family", "polar", "-o", "polar.npz"], tmp_path).returncode == 0
    r = run(["mvi", "polar.npz", "--operator", "mygames:F", "--rho", "-0.05", "-o", "s.json"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads((tmp_path / "s.json").read_text())["status"] == "optimal"
    r = run(["verify", "polar.npz", "s.json", "--operator", "mygames:F"], tmp_path)
    assert r.returncode == 0, r.stderr
    r = run(["mvi", "polar.npz", "--operator", "nowhere/mygames.py:F"], tmp_path)
    assert r.returncode == 7 and r.stderr.count("\n") == 1
    assert "'--operator'" in r.stderr and "nowhere/mygames.py" in r.stderr


def test_readme_oracle_example_works_from_the_directory_of_the_module(tmp_path):
    (tmp_path / "mysets.py").write_text("def inside(X):\n    return X[:, 0] >= 0\n")
    r = run(["gen", "truncated", "--family", "gaussian", "--d", "2", "--n", "300", "--set", "halfspace",
             "-o", "t.json"], tmp_path)
    assert r.returncode == 0, r.stderr
    r = run(["truncated", "t.json", "--oracle", "mysets:inside", "--method", "naive"], tmp_path)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["command"] == "truncated"
    r = run(["truncated", "t.json", "--oracle", "./mysets.py:inside", "--method", "naive"], tmp_path)
    assert r.returncode == 0, r.stderr


# --------------------------------------------------------------------------- --help and completion


def listed(*group: str) -> list[str]:
    r = invoke(*group, "--help")
    assert r.exit_code == 0
    section = r.stdout.split("Commands:", 1)[1]
    return re.findall(r"^  (\S+)", section, re.M)


def test_every_listed_subcommand_of_gen_and_batch_answers_help():
    top = listed()
    assert "qp-train" in top
    for group in ("gen", "batch"):
        names = listed(group)
        assert "qp" in names and "qp-train" not in names  # qp-train is not a problem kind
        for name in names:
            r = invoke(group, name, "--help")
            assert r.exit_code == 0, (group, name, r.stderr)
            assert r.stdout.startswith(f"Usage: main {group} {name}") or f"{group} {name}" in r.stdout
    for name in top:
        assert invoke(name, "--help").exit_code == 0, name


def complete(monkeypatch, capsys, words: str) -> list[str]:
    """Click's bash completion of ``words`` (the word under the cursor is the last, maybe empty)."""
    parts = words.split(" ")
    monkeypatch.setenv("_OPTSOLVE_COMPLETE", "bash_complete")
    monkeypatch.setenv("COMP_WORDS", words)
    monkeypatch.setenv("COMP_CWORD", str(len(parts) - 1))
    with pytest.raises(SystemExit) as exit_info:
        main.main(args=[], prog_name="optsolve")
    out, err = capsys.readouterr()
    assert exit_info.value.code == 0, (words, err)
    assert err == "" and "Traceback" not in out, words
    return [line.split(",", 1)[1] for line in out.splitlines() if line]


def test_completion_of_every_command_and_subcommand(monkeypatch, capsys):
    top = listed()
    assert complete(monkeypatch, capsys, "optsolve ") == top
    kinds = listed("gen")
    for group in ("gen", "batch"):
        assert complete(monkeypatch, capsys, f"optsolve {group} ") == kinds
        assert complete(monkeypatch, capsys, f"optsolve {group} q") == ["qp"]
    for name in top:
        complete(monkeypatch, capsys, f"optsolve {name} ")
        assert "--help" in complete(monkeypatch, capsys, f"optsolve {name} --")
    for kind in kinds:
        assert "--family" in complete(monkeypatch, capsys, f"optsolve gen {kind} --")
        assert complete(monkeypatch, capsys, f"optsolve gen {kind} --family ")
        complete(monkeypatch, capsys, f"optsolve gen {kind} ")
        assert "--jobs" in complete(monkeypatch, capsys, f"optsolve batch {kind} --")
        complete(monkeypatch, capsys, f"optsolve batch {kind} ")
    for words in ("optsolve gen qp-train ", "optsolve batch nosuch --"):
        assert "qp-train" not in complete(monkeypatch, capsys, words)
    assert "qp-train" in complete(monkeypatch, capsys, "optsolve nosuch ")


def test_completion_of_the_root_imports_no_solver(monkeypatch, capsys):
    code = ("import os, sys\nos.environ.update(_OPTSOLVE_COMPLETE='bash_complete', COMP_WORDS='optsolve gen ', "
            "COMP_CWORD='2')\nfrom optsolve.cli import main\ntry:\n    main.main(args=[], prog_name='optsolve')\n"
            "except SystemExit:\n    pass\n"
            "print('LOADED', sorted(m for m in sys.modules if m.startswith('optsolve.') and m.count('.') >= 2))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=ENV, cwd=ROOT,
                         timeout=120).stdout
    assert "plain,qp" in out
    loaded = out.split("LOADED", 1)[1]
    assert "problems" not in loaded and ".cli'" not in loaded


# --------------------------------------------------------------------------- osqp's errors


def nonconvex_qp(path, n=2000):
    """P = blockdiag([[1, 2], [2, 1]], ...) (eigenvalues 3 and -1), a box -1 <= x <= 1."""
    import scipy.sparse as sp

    from optsolve.core.files import save_problem

    P = sp.block_diag([np.array([[1.0, 2.0], [2.0, 1.0]])] * (n // 2), format="csc")
    save_problem(str(path), {"P": P, "q": np.ones(n), "A": sp.eye(n, format="csc"),
                             "l": -np.ones(n), "u": np.ones(n)})
    return path


def test_osqp_nonconvex_refusal_is_invalid_input(tmp_path):
    pytest.importorskip("osqp")
    path = nonconvex_qp(tmp_path / "nc.npz")
    r = run(["qp", path, "--method", "osqp", "-q"], tmp_path)
    assert r.returncode == 7
    doc = json.loads(r.stdout)
    assert doc["status"] == "invalid_input" and doc["method"] == "osqp"
    assert "'P' is not positive semidefinite" in doc["message"]  # refused as the file is read, before osqp
    lines = r.stderr.splitlines()
    assert len(lines) == 1 and "'P' is not positive semidefinite" in lines[0] and str(path) in lines[0], r.stderr


@pytest.mark.parametrize("error, code, status", [
    ("OSQP_LINSYS_SOLVER_INIT_ERROR", 6, "numerical_error"),
    ("OSQP_MEM_ALLOC_ERROR", 6, "numerical_error"),
    ("OSQP_SETTINGS_VALIDATION_ERROR", 7, "invalid_input"),
    ("OSQP_DATA_VALIDATION_ERROR", 7, "invalid_input"),
    ("OSQP_WORKSPACE_NOT_INIT_ERROR", 6, "numerical_error"),
])
def test_osqp_setup_errors_map_to_the_exit_code_table(cli, tmp_path, monkeypatch, error, code, status):
    osqp = pytest.importorskip("osqp")
    path = tmp_path / "q.json"
    assert cli("gen", "qp", "--family", "random", "--n", "10", "-o", path).exit_code == 0

    def refuse(self, *args, **kwargs):
        os.write(2, b"ERROR in osqp_setup: something osqp says.\n")
        raise osqp.OSQPException(int(osqp.SolverError[error]))

    monkeypatch.setattr(osqp.OSQP, "setup", refuse)
    r = cli("qp", path, "--method", "osqp")
    assert r.exit_code == code, r.stderr
    doc = r.json()
    assert doc["status"] == status and error in doc["message"] and "something osqp says" in doc["message"]
    assert "Internal error" not in doc["message"] and "\n" not in doc["message"]


@pytest.mark.parametrize("argv", [["ot", "--family", "images", "--size", "0"],
                                  ["truncated", "--family", "gaussian", "--d", "0"]])
def test_gen_sizes_out_of_range_are_usage_errors(cli, tmp_path, argv):
    r = cli("gen", *argv, "-o", tmp_path / "g.json")
    assert r.exit_code == 2 and "Traceback" not in r.stderr, r.stderr
    assert f"'{argv[3]}' option must be an integer >= 1; got 0" in r.stderr, r.stderr
    assert not (tmp_path / "g.json").exists()
