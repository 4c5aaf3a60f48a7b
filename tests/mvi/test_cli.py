"""optsolve mvi on the command line: bad inputs, verify, generators, history, every method."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import optsolve.mvi as mvi
from optsolve.mvi import operators as ops
from optsolve.core.solve import tagged
from optsolve.mvi import problems as P


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return path


def test_unknown_operator(bad_input):
    bad_input("mvi", {"operator": "spiral", "z0": [1, 0]}, "'operator'")


def test_wrong_parameter_shapes(bad_input):
    bad_input("mvi", {"operator": "affine", "M": np.eye(3).tolist(), "q": [1, 2, 3, 4]}, "'q'")
    bad_input("mvi", {"operator": "polar", "z0": [1, 0, 0]}, "R^2")
    bad_input("mvi", {"operator": "quadratic-game", "L": 1.0, "rho": -1.5}, "|rho| <= 1/L")


def test_start_outside_the_set_is_projected_with_a_warning(cli, tmp_path):
    path = write(tmp_path, "p.json", {"operator": "polar", "z0": [3.0, 0.5]})
    r = cli("mvi", path)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert "projected" in doc["message"] and doc["status"] == "optimal"


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "mygames.py").write_text(
        "import numpy as np\n"
        "def rot(z):\n    return np.array([z[1] + 0.1 * z[0], -z[0] + 0.1 * z[1]])\n"
        "def bad(z):\n    return np.full(2, np.nan)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("mygames", None)
    return "mygames"


def test_non_finite_operator_values_are_a_numerical_error(cli, tmp_path, user_module):
    path = write(tmp_path, "p.json", {"z0": [1.0, 0.5]})
    r = cli("mvi", path, "--operator", "mygames:bad")
    assert r.exit_code == 6
    assert r.json()["status"] == "numerical_error" and "non-finite" in r.json()["message"]
    assert "Traceback" not in r.stderr


def test_user_operator_and_verify_needs_it(cli, tmp_path, user_module):
    path = write(tmp_path, "p.json", {"z0": [1.0, 0.5]})
    sol = tmp_path / "s.json"
    r = cli("mvi", path, "--operator", "mygames:rot", "-o", sol)
    assert r.exit_code == 0, r.stderr
    assert cli("verify", path, sol, "--operator", "mygames:rot").exit_code == 0
    r = cli("verify", path, sol)
    assert r.exit_code == 7 and "--operator" in r.stderr
    r = cli("mvi", path, "--operator", "no_such_module_xyz:F")
    assert r.exit_code == 7 and "no_such_module_xyz" in r.stderr and "Traceback" not in r.stderr


def test_rho_out_of_range_is_refused_unless_forced(cli, tmp_path):
    path = tmp_path / "f.npz"
    assert cli("gen", "mvi", "--family", "forsaken", "-o", path).exit_code == 0
    r = cli("mvi", path)
    assert r.exit_code == 7 and "--force" in r.stderr and "-1/L" in r.stderr
    r = cli("mvi", path, "--force", "--max-evals", "20000")
    assert r.exit_code == 0, r.stderr
    assert "outside every guarantee" in r.json()["message"]


def test_verify_detects_a_tampered_solution(cli, tmp_path):
    path = tmp_path / "p.npz"
    assert cli("gen", "mvi", "--family", "lower-bound", "-o", path).exit_code == 0
    sol = tmp_path / "s.json"
    assert cli("mvi", path, "-o", sol).exit_code == 0
    assert cli("verify", path, sol).exit_code == 0
    doc = json.loads(sol.read_text())
    doc["solution"]["z"][0] += 0.1
    sol.write_text(json.dumps(doc))
    r = cli("verify", path, sol)
    assert r.exit_code == 6 and "natural_residual" in r.stderr


def test_affine_generator_has_the_prescribed_constants(cli, tmp_path):
    from scipy.sparse.linalg import svds

    path = tmp_path / "a.npz"
    assert cli("gen", "mvi", "--family", "affine", "--d", "2000", "--rho", "-0.5", "--L", "2", "-o", path).exit_code == 0
    from optsolve.core.files import load_problem

    problem = load_problem(str(path), mvi.SCHEMA)
    M = problem["M"]
    assert hasattr(M, "tocsr")  # stored sparse
    assert svds(M, k=1, return_singular_vectors=False, random_state=0)[0] == pytest.approx(2.0, rel=1e-6)
    small = P.gen_affine(np.random.default_rng(1), d=40, L=1.0, rho=-0.3)
    assert ops.weak_mvi_of_affine(small["M"]) == pytest.approx(-0.3, abs=1e-8)
    assert np.linalg.norm(small["M"], 2) == pytest.approx(1.0, rel=1e-10)
    game = ops.quadratic_game(2.0, -0.3)
    M2 = game.jacobian(None)
    assert np.linalg.norm(M2, 2) == pytest.approx(2.0) and ops.weak_mvi_of_affine(M2) == pytest.approx(-0.3)


def test_history_is_monotone_and_ends_at_the_answer(cli, tmp_path):
    path = tmp_path / "p.npz"
    assert cli("gen", "mvi", "--family", "polar", "-o", path).exit_code == 0
    r = cli("mvi", path, "--history")
    doc = r.json()
    h = doc["stats"]["history"]
    assert np.all(np.diff(h["evaluations"]) > 0) and np.all(np.diff(h["best_residual"]) <= 0)
    assert h["best_residual"][-1] == doc["solution"]["residual"]
    assert h["evaluations"][-1] == doc["stats"]["evaluations"]


@pytest.mark.parametrize("method", [m for m in mvi.METHODS if m not in tagged(mvi.METHODS, "stochastic")])  # on sums: test_stochastic
def test_every_method_runs_on_the_bilinear_game(cli, tmp_path, method):
    path = tmp_path / "b.npz"
    assert cli("gen", "mvi", "--family", "bilinear", "--d", "4", "-o", path).exit_code == 0
    r = cli("mvi", path, "--method", method, "--max-evals", "2000")
    doc = r.json()
    assert doc["status"] in ("optimal", "max_iter", "numerical_error")
    assert doc["stats"]["evaluations"] <= 2000
    assert r.exit_code == {"optimal": 0, "max_iter": 5, "numerical_error": 6}[doc["status"]]


def test_library_constants():
    L, rho = P.polar_constants(1.0, 1.0, 1.1)
    assert L == pytest.approx(18.5, rel=1e-2) and rho == pytest.approx(-0.0477, rel=1e-2)
    op = ops.global_forsaken()
    r = np.linspace(0, 4 / 3, 120)[1:]
    th = np.linspace(0, 2 * np.pi, 240, endpoint=False)
    zs = (r[:, None, None] * np.stack([np.cos(th), np.sin(th)], -1)[None]).reshape(-1, 2)
    ratios = [float(op.F(z) @ z / (op.F(z) @ op.F(z))) for z in zs]
    norms = [np.linalg.norm(op.jacobian(z), 2) for z in zs]
    assert min(ratios) >= op.rho - 1e-3 and max(norms) <= op.L + 1e-2
