"""optsolve mvi against hostile files, forged solutions, degenerate problems, the memory budget and the
time limit: exit 7 or a documented status, verify judging by its own limits and the file's operator."""

from __future__ import annotations

import json
import sys
import time

import numpy as np
import pytest
import scipy.sparse as sp

import optsolve.mvi as mvi
from optsolve.core.files import save_problem
from optsolve.mvi import certificate
from optsolve.mvi import operators as ops
from optsolve.mvi import problems as P


def _affine_box(rng):
    """F = M z + q on the box [-1, 1]^3, M a rotation plus a multiple of I (strongly monotone), z* inside."""
    M = np.array([[0.3, 1.0, 0.0], [-1.0, 0.3, 0.0], [0.0, 0.0, 0.5]])
    return {"operator": "affine", "M": M, "q": 0.3 * rng.standard_normal(3), "z0": np.zeros(3), "constraint": "box",
            "lo": -np.ones(3), "hi": np.ones(3)}


@pytest.fixture
def user_module(tmp_path, monkeypatch):
    (tmp_path / "trustgames.py").write_text(
        "import numpy as np\n"
        "def rot(z):\n    return np.array([z[1] + 0.1 * z[0], -z[0] + 0.1 * z[1]])\n"
        "def line(z):\n    return 2.0 * z - 1.0\n"
        "def late(z):\n    if abs(z[0]) < 0.9:\n        raise ZeroDivisionError('late')\n    return z\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    sys.modules.pop("trustgames", None)
    return "trustgames"


# --------------------------------------------------------------------------- hostile files

def test_hostile_affine_files(hostile, rng):
    hostile("mvi", _affine_box(rng), args=("--max-evals", "3000"), examples=30)


def test_hostile_library_files(hostile):
    data = {"operator": "quadratic-game", "L": 2.0, "rho": -0.3, "z0": np.array([1.0, 0.5]),
            "constraint": "ball", "radius": 1.5, "center": np.array([0.1, -0.2])}
    hostile("mvi", data, args=("--max-evals", "3000"), examples=25)


# --------------------------------------------------------------------------- forged documents

@pytest.fixture
def solved(cli, tmp_path, rng):
    """(problem path, document) of a small affine problem on a box, solved with ``options``."""

    def run(*options):
        path = tmp_path / "p.npz"
        save_problem(str(path), _affine_box(rng))
        r = cli("mvi", path, *options)
        assert r.exit_code == 0, r.stderr
        return path, r.json()

    return run




def _move(doc):
    z = doc["solution"]["z"]
    z[0] += 0.5
    z[1] -= 0.4


def _move_and_match(doc):  # a moved point that also reports its own residual, and a looser tol
    _move(doc)
    doc["settings"]["tol"] = 1e6


FORGERIES = {
    "move": _move,
    "move_and_loosen_tol": _move_and_match,
    "move_slightly": lambda doc: doc["solution"]["z"].__setitem__(0, doc["solution"]["z"][0] + 1e-4),
    "outside_box": lambda doc: doc["solution"]["z"].__setitem__(0, 1.0 + 1e-6),
    "residual": lambda doc: doc["solution"].__setitem__("residual", doc["solution"]["residual"] * 0.5 + 1e-300),
    "objective": lambda doc: doc.__setitem__("objective", 0.0),
    "infeasible": lambda doc: doc.__setitem__("status", "infeasible"),
    "unbounded": lambda doc: doc.__setitem__("status", "unbounded"),
    **{f"loosen_{lim.name}": (lambda name: lambda doc: doc["settings"].__setitem__(name, 1e9))(lim.name)
       for lim in certificate.LIMITS},
}


def test_forged_documents_are_rejected(cli, tmp_path, solved, verify_forged):
    problem, doc = solved()
    assert verify_forged(problem, doc).exit_code == 0
    assert {lim.name for lim in certificate.LIMITS} == {"tol", "feas_tol", "residual_rtol", "residual_atol"}
    for name, forge in FORGERIES.items():
        bad = json.loads(json.dumps(doc))
        forge(bad)
        r = verify_forged(problem, bad)
        assert r.exit_code == 6, f"forged {name} accepted: {r.stderr}"
    # what was solved is reported, not trusted: another method or step claimed still leaves the point judged
    for key, value in (("gamma", 1e9), ("method", "gda"), ("operator", "elsewhere:F")):
        bad = json.loads(json.dumps(doc))
        (bad if key == "method" else bad["settings"])[key] = value
        assert verify_forged(problem, bad).exit_code == 0, key
        _move(bad)
        assert verify_forged(problem, bad).exit_code == 6, key


def test_non_default_limits_need_the_same_option_in_verify(cli, tmp_path, solved, verify_forged):
    problem, doc = solved("--tol", "1e-2", "--feas-tol", "1e-9")
    assert doc["solution"]["residual"] > certificate.TOL  # stopped at the looser tolerance
    r = verify_forged(problem, doc)
    assert r.exit_code == 6 and "setting_tol" in r.stderr and "setting_feas_tol" in r.stderr
    assert verify_forged(problem, doc, "--tol", "1e-2", "--feas-tol", "1e-9").exit_code == 0
    r = verify_forged(problem, doc, "--tol", "1e-2", "--eps-abs", "1")
    assert r.exit_code == 2 and "--tol" in r.stderr


def test_verify_evaluates_the_files_operator_not_the_documents(cli, tmp_path, user_module):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"operator": "bilinear", "z0": [0.2, 0.3], "constraint": "box", "radius": 1.0}))
    sol = tmp_path / "s.json"
    r = cli("mvi", path, "--operator", f"{user_module}:rot", "-o", sol)
    assert r.exit_code == 0, r.stderr
    assert cli("verify", path, sol, "--operator", f"{user_module}:rot").exit_code == 0
    r = cli("verify", path, sol)  # the file's bilinear game, whose solution is (0.9, 0.9)
    assert r.exit_code == 6 and "natural_residual" in r.stderr
    report = json.loads(r.stdout)
    assert report["reported_settings"]["operator"] == f"{user_module}:rot"
    assert next(c for c in report["checks"] if c["name"] == "operator")["value"] == "bilinear"
    bare = tmp_path / "bare.json"
    bare.write_text(json.dumps({"z0": [0.2, 0.3]}))
    assert cli("mvi", bare, "--operator", f"{user_module}:rot", "-o", sol).exit_code == 0
    r = cli("verify", bare, sol)
    assert r.exit_code == 7 and "--operator" in r.stderr and "Traceback" not in r.stderr


def test_certificate_judges_by_the_limits_given():
    problem = mvi.SCHEMA.validate(P.gen_lower_bound(None), source="test")
    z = [1e-4, 0.0]  # residual ||M z|| = 3e-4
    cert = certificate.check(problem, {"z": z}, settings={"tol": 1.0}, limits={"tol": 1e-6}, status="optimal")
    assert not cert["natural_residual"].holds and cert["natural_residual"].limit == 1e-6
    cert = certificate.check(problem, {"z": z}, settings={}, limits={"tol": 1e-3}, status="optimal")
    assert cert.holds and cert["distance_to_z_star"].holds is None
    cert = certificate.check(problem, {"z": [0.0, 0.0], "residual": 0.0}, settings={}, limits=None, status="optimal")
    assert cert.holds and cert["residual_matches"].holds  # a zero residual: the absolute floor
    cert = certificate.check(problem, {"z": [0.0, 0.0]}, settings={}, limits=None, status="infeasible")
    assert not cert.holds and not cert["status_certificate"].holds
    cert = certificate.check(problem, {"z": [None, 0.0]}, settings={}, limits=None, status="optimal")
    assert not cert.holds and "not finite" in cert["natural_residual"].note


# --------------------------------------------------------------------------- degenerate problems

def _run(cli, tmp_path, data, *args, name="p.npz"):
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps(data))
    else:
        save_problem(str(path), data)
    r = cli("mvi", path, *args)
    assert "Traceback" not in r.stderr
    return path, r


@pytest.mark.parametrize("M", [np.array([[2.0]]), sp.csr_matrix(np.array([[2.0]]))], ids=["dense", "sparse"])
def test_one_by_one_affine_operators(cli, tmp_path, M):
    path, r = _run(cli, tmp_path, {"operator": "affine", "M": M, "q": np.array([1.0])})
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["solution"]["z"] == pytest.approx([-0.5], abs=1e-6) and doc["stats"]["L"] == pytest.approx(2.0)
    sol = tmp_path / "s.json"
    sol.write_text(r.stdout)
    assert cli("verify", path, sol).exit_code == 0


def test_one_dimensional_user_operator(cli, tmp_path, user_module):
    _, r = _run(cli, tmp_path, {"z0": [3.0], "constraint": "box", "lo": [0.0], "hi": [0.4]}, "--operator",
                f"{user_module}:line", name="p.json")
    assert r.exit_code == 0, r.stderr
    assert r.json()["solution"]["z"] == pytest.approx([0.4])  # F = 2z - 1 < 0 on the box: the upper end


def test_user_operator_raising_during_the_solve(cli, tmp_path, user_module):
    _, r = _run(cli, tmp_path, {"z0": [1.0, 0.5]}, "--operator", f"{user_module}:late", name="p.json")
    assert r.exit_code == 6, r.stderr
    doc = r.json()
    assert doc["status"] == "numerical_error" and "raised ZeroDivisionError (late)" in doc["message"]
    assert doc["solution"]["residual"] is not None and len(doc["solution"]["z"]) == 2  # the best point so far


def test_zero_matrix_operator(cli, tmp_path):
    """||M|| = 0 (F constant): no crash of the norm, L unknown, the solution at the box's face."""
    _, r = _run(cli, tmp_path, {"operator": "affine", "M": sp.csr_matrix((3, 3)), "q": np.array([1.0, 0.0, -1.0]),
                                "constraint": "box", "radius": 1.0})
    assert r.exit_code == 0, r.stderr
    assert r.json()["solution"]["z"][0] == pytest.approx(-1.0) and r.json()["solution"]["z"][2] == pytest.approx(1.0)


@pytest.mark.parametrize("data", [
    {"operator": "affine", "M": np.zeros((0, 0)), "q": np.zeros(0)},
    {"operator": "bilinear", "z0": np.zeros(0)},
], ids=["affine", "bilinear"])
def test_zero_dimensional_problems_are_refused(cli, tmp_path, data):
    _, r = _run(cli, tmp_path, data)
    assert r.exit_code == 7 and "dimension d = 0" in r.stderr and "p.npz" in r.stderr


def test_box_with_lo_equal_hi_and_ball_of_radius_zero(cli, tmp_path):
    _, r = _run(cli, tmp_path, {"operator": "polar", "constraint": "box", "lo": np.array([0.3, -0.2]),
                                "hi": np.array([0.3, -0.2])})
    assert r.exit_code == 0, r.stderr
    assert r.json()["solution"]["z"] == [0.3, -0.2]
    path, r = _run(cli, tmp_path, {"operator": "lower-bound", "constraint": "ball", "radius": 0.0,
                                   "center": np.array([1.0, 2.0])})
    assert r.exit_code == 0, r.stderr
    assert r.json()["solution"]["z"] == [1.0, 2.0]
    sol = tmp_path / "s.json"
    sol.write_text(r.stdout)
    assert cli("verify", path, sol).exit_code == 0
    _, r = _run(cli, tmp_path, {"operator": "polar", "constraint": "box", "radius": 0.0})  # the box {0}
    assert r.exit_code == 0 and r.json()["solution"]["z"] == [0.0, 0.0]


def test_empty_box_and_negative_radius_are_refused(cli, tmp_path):
    _, r = _run(cli, tmp_path, {"operator": "polar", "constraint": "box", "lo": np.array([0.3, 0.4]),
                                "hi": np.array([0.3, 0.3])})
    assert r.exit_code == 7 and "the box is empty: lo[1] = 0.4 > hi[1] = 0.3" in r.stderr
    _, r = _run(cli, tmp_path, {"operator": "polar", "constraint": "ball", "radius": -1.0})
    assert r.exit_code == 7 and "'radius'" in r.stderr


def test_extreme_constants_end_in_a_documented_status(cli, tmp_path):
    """L = 1e300 (a^2 would overflow; ||F||^2 overflows, which GMRES resolvents' halfspace step needs), an affine
    M with no solution (rho does not exist) and a polar box so large that F overflows on it: each ends with a
    status, never an internal error."""
    for data, status in (({"operator": "quadratic-game", "L": 1e300, "rho": 0.0}, "numerical_error"),
                         ({"operator": "affine", "M": np.zeros((2, 2)), "q": np.array([1.0, 0.0])}, "max_iter"),
                         ({"operator": "polar", "constraint": "box", "radius": 1e300}, "optimal")):
        _, r = _run(cli, tmp_path, data, "--max-evals", "2000")
        doc = r.json()
        assert doc["status"] == status and r.exit_code == {"optimal": 0, "max_iter": 5}.get(status, 6), (data, r.stderr)
        assert "Warning" not in r.stderr and doc["solution"] is not None
    assert ops.quadratic_game(1e300, -1e-300).rho == pytest.approx(-1e-300)


def test_spectral_norm_small_zero_and_large():
    assert ops.spectral_norm(sp.csr_matrix(np.array([[-3.0]]))) == 3.0
    assert ops.spectral_norm(sp.csr_matrix((4, 4))) == 0.0
    assert ops.spectral_norm(np.zeros((0, 0))) == 0.0
    M = P.random_weak_mvi_matrix(1200, 2.0, -0.3, np.random.default_rng(0))
    assert ops.spectral_norm(M) == pytest.approx(2.0, rel=1e-4)
    assert ops.spectral_norm(M) <= 2.0 * (1 + 1e-12)  # a Ritz value: never above ||M||


# --------------------------------------------------------------------------- memory

def test_huge_sparse_operator_is_refused_before_allocation(cli, tmp_path):
    path = tmp_path / "huge.npz"
    np.savez(path, **{"operator": np.array("affine"), "M.format": np.array("coo"), "M.shape": np.array([10**9, 10**9]),
                      "M.data": np.array([1.0]), "M.row": np.array([0]), "M.col": np.array([0]), "q": np.zeros(3)})
    r = cli("mvi", path)
    assert r.exit_code == 7 and "memory budget" in r.stderr and "'M'" in r.stderr


def test_dimension_is_checked_against_the_budget(cli, tmp_path):
    """d = 10^6 from a sparse M with one entry fits core's checks at 100M; the solve's vectors do not."""
    n = 10**6
    path = tmp_path / "mid.npz"
    np.savez_compressed(path, **{"operator": np.array("affine"), "M.format": np.array("coo"),
                                 "M.shape": np.array([n, n]), "M.data": np.array([1.0]), "M.row": np.array([0]),
                                 "M.col": np.array([0]), "q": np.zeros(n)})
    r = cli("mvi", path, "--memory-limit", "100M")
    assert r.exit_code == 7 and "d = 1000000" in r.stderr and "memory budget" in r.stderr


def test_minimax_matrix_is_checked_against_the_budget(cli, tmp_path):
    rng = np.random.default_rng(0)
    n = 400
    data = {"operator": "minimax-quadratic", "A": np.eye(n), "B": rng.standard_normal((n, n)), "C": np.eye(n)}
    _, r = _run(cli, tmp_path, data, "--memory-limit", "4M")  # A, B and C: 3.7 MB; M: 4.9 MB
    assert r.exit_code == 7 and "M = [[A, B], [-B', C]]" in r.stderr


# --------------------------------------------------------------------------- time limit

def test_constants_stop_at_the_deadline():
    M = P.random_weak_mvi_matrix(1200, 1.0, -0.3, np.random.default_rng(0))
    assert ops.spectral_norm(M, deadline=time.perf_counter() - 1) is None
    assert ops.weak_mvi_of_affine(np.eye(1500), deadline=time.perf_counter()) is None
    problem = mvi.SCHEMA.validate({"operator": "affine", "M": M, "q": np.ones(1200)}, source="test")
    mp = P.prepare(problem, deadline=time.perf_counter() - 1)
    assert mp.L is None and any("time limit" in n for n in mp.notes)


def test_time_limit_holds_when_the_constants_are_unknown(cli, tmp_path):
    """A sparse affine problem without L and rho in the file: the norm and the solve share the limit."""
    data = P.gen_affine(np.random.default_rng(0), d=4000, L=1.0, rho=-0.9, sparse="yes")
    for key in ("L", "rho"):
        data.pop(key)
    _, r = _run(cli, tmp_path, data, "--time-limit", "0.5", "--tol", "1e-12")
    assert r.exit_code == 5, r.stderr
    doc = r.json()
    assert doc["status"] == "time_limit" and doc["settings"]["time_limit"] == 0.5
    assert len(doc["solution"]["z"]) == 4000 and doc["certificate"] is not None


def test_reported_distance_to_z_star_is_judged(cli, tmp_path):
    path = tmp_path / "m.npz"
    assert cli("gen", "mvi", "--family", "polar", "-o", path).exit_code == 0
    r = cli("mvi", path)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert "distance_to_z_star" in doc["solution"]
    doc["solution"]["distance_to_z_star"] = 5.0
    sol = tmp_path / "forged.json"
    sol.write_text(json.dumps(doc))
    v = cli("verify", path, sol)
    assert v.exit_code == 6 and "distance_matches" in v.stderr, v.stderr
