"""optsolve ot against hostile files, forged solutions, degenerate problems, the memory budget and the
time limit: exit 7 or a documented status, verify judging by its own limits, nothing but a clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest

import optsolve.ot
from optsolve.core.files import save_problem
from optsolve.core.clock import Deadline
from optsolve.ot.deadline import FINISH_PASSES
from optsolve.ot.deadline import after as ot_deadline
from optsolve.ot.problems import cost_matrix


def _clouds(rng, n, m, d=2):
    x, y = rng.random((n, d)), rng.random((m, d))
    return {"a": rng.dirichlet(np.ones(n)), "b": rng.dirichlet(np.ones(m)), "x": x, "y": y, "cost": "sqeuclidean"}


def _matrix(rng, n, m):
    data = _clouds(rng, n, m)
    return {"a": data["a"], "b": data["b"], "C": cost_matrix(data["x"], data["y"], "sqeuclidean")}


def _lp_optimum(a, b, C) -> float:
    """The transport LP by HiGHS (independent of POT)."""
    from scipy.optimize import linprog

    n, m = C.shape
    A = np.zeros((n + m, n * m))
    for i in range(n):
        A[i, i * m:(i + 1) * m] = 1
    for j in range(m):
        A[n + j, j::m] = 1
    res = linprog(C.ravel(), A_eq=A, b_eq=np.concatenate([a / a.sum(), b / b.sum()]), bounds=(0, None),
                  method="highs")
    assert res.status == 0
    return res.fun


# --------------------------------------------------------------------------- hostile files

def test_hostile_matrix_files(hostile, rng):
    hostile("ot", _matrix(rng, 5, 4), args=("--gamma", "64"), examples=30)


def test_hostile_point_cloud_files(hostile, rng):
    hostile("ot", _clouds(rng, 5, 4), args=("--method", "emd"), examples=30)


def test_hostile_image_files(hostile, rng):
    a, b = rng.random((3, 4)), rng.random((3, 4))
    hostile("ot", {"a": a / a.sum(), "b": b / b.sum(), "cost": "l1"}, args=("--gamma", "64"), examples=15)


# --------------------------------------------------------------------------- forged documents

@pytest.fixture
def solved(cli, tmp_path, rng):
    """``solved(method, *options, data=None)``: (problem path, the document) of a small solve that passed."""

    def run(method, *options, data=None):
        path = tmp_path / f"p-{method}.npz"
        save_problem(str(path), data if data is not None else _clouds(rng, 12, 9))
        r = cli("ot", path, "--method", method, *options)
        assert r.exit_code == 0, r.stderr
        return path, r.json()

    return run




def _move_f(doc):
    doc["solution"]["f"][0] += 0.05


def _move_g(doc):
    doc["solution"]["g"][1] -= 0.05


def _move_plan(doc):
    plan = doc["solution"]["plan"]
    if plan["format"] == "coo":
        plan["value"][0] *= 1.5
    else:
        plan["reg"] *= 1.5


FORGERIES = {
    "f": _move_f,
    "g": _move_g,
    "plan": _move_plan,
    "objective": lambda doc: doc.__setitem__("objective", doc["objective"] * (1 - 1e-6)),
    "dual_bound": lambda doc: doc["solution"].__setitem__("dual_bound", doc["solution"]["dual_bound"] * (1 + 1e-6)),
    "infeasible": lambda doc: doc.__setitem__("status", "infeasible"),
    "unbounded": lambda doc: doc.__setitem__("status", "unbounded"),
    **{f"loosen_{name}": (lambda name: lambda doc: doc["settings"].__setitem__(name, 1e9))(name)
       for name in ("feas_tol", "objective_rtol", "objective_atol", "lp_tol")},
    "normalize": lambda doc: doc["settings"].__setitem__("normalize", True),
}


@pytest.mark.parametrize("method", ["emd", "tnt"])
def test_forged_documents_are_rejected(cli, tmp_path, solved, method, verify_forged):
    problem, doc = solved(method)
    assert verify_forged(problem, doc).exit_code == 0
    for name, forge in FORGERIES.items():
        bad = json.loads(json.dumps(doc))
        forge(bad)
        r = verify_forged(problem, bad)
        assert r.exit_code == 6, f"{method}: forged {name} accepted: {r.stderr}"
        assert "status_claim" in r.stderr


def test_a_loosened_target_gap_is_rejected_by_a_verify_that_sets_one(cli, tmp_path, solved, verify_forged):
    problem, doc = solved("tnt", "--target-gap", "1e-2")
    assert doc["settings"]["target_gap"] == 1e-2
    r = verify_forged(problem, doc)  # a target claim is judged at the default target unless verify sets one
    judged = next(c for c in json.loads(r.stdout)["checks"] if c["name"] == "gap_within_target_gap")
    assert judged["holds"] is not None and r.exit_code == (0 if judged["holds"] else 6)
    assert verify_forged(problem, doc, "--target-gap", "1e-2").exit_code == 0
    doc["settings"]["target_gap"] = 1e9
    r = verify_forged(problem, doc, "--target-gap", "1e-2")
    assert r.exit_code == 6 and "setting_target_gap" in r.stderr
    r = verify_forged(problem, doc, "--target-gap", "1e-12")  # a gap the plan does not certify
    assert r.exit_code == 6 and "gap_within_target_gap" in r.stderr


def _far_support_problem():
    """U[0, 1) costs on two entries per row and column, 1e8 elsewhere (POT's sparse test matrix): the
    optimum is below 1 while max C is 1e8."""
    rng = np.random.RandomState(42)
    n = 30
    C = rng.rand(n, n)
    keep = np.zeros((n, n), dtype=bool)
    keep[np.arange(n), np.arange(n)] = keep[np.arange(n), (np.arange(n) + 1) % n] = True
    return {"a": np.full(n, 1.0 / n), "b": np.full(n, 1.0 / n), "C": np.where(keep, C, C + 1e8)}


def test_a_gap_above_the_target_is_refused_where_the_optimum_is_small_next_to_max_c(cli, tmp_path, solved,
                                                                                      verify_forged):
    """An optimal plan with 1e-9 of its mass moved round a cycle onto pairs of cost 1e8 costs about
    0.2 more than the optimum (under 1): a document claiming --target-gap 1e-3 for it is refused, and
    the certificate states the relative basis it judged by."""
    data = _far_support_problem()
    problem, doc = solved("emd", data=data)
    opt = doc["objective"]
    plan = doc["solution"]["plan"]
    row, col, val = list(plan["row"]), list(plan["col"]), list(plan["value"])
    i, j = row[0], col[0]
    k = next(t for t in range(len(row)) if row[t] != i and col[t] != j)
    t, i2, j2 = 1e-9, row[k], col[k]
    val[0] -= t
    val[k] -= t
    row += [i, i2]
    col += [j2, j]
    val += [t, t]
    C = data["C"]
    plan.update(row=row, col=col, value=val)
    doc["objective"] = float(sum(C[r, c] * v for r, c, v in zip(row, col, val)))
    doc["settings"]["target_gap"] = 1e-3
    assert doc["objective"] - opt > 0.1 > 1e-3 * doc["objective"]
    r = verify_forged(problem, doc)
    assert r.exit_code == 6 and "gap_within_target_gap" in r.stderr, r.stderr
    checks = {c["name"]: c for c in json.loads(r.stdout)["checks"]}
    assert checks["target_gap_basis"]["value"] == "relative"
    assert checks["gap_within_target_gap"]["limit"] == pytest.approx(1e-3 * doc["objective"], rel=1e-9)


def test_a_zero_optimum_is_judged_by_an_absolute_limit_at_rounding(cli, tmp_path, solved, verify_forged):
    x = np.random.default_rng(1).random((20, 2))
    problem, doc = solved("tnt", "--target-gap", "1e-3", data={"a": np.full(20, 0.05), "b": np.full(20, 0.05),
                                                              "x": x, "y": x, "cost": "sqeuclidean"})
    assert doc["status"] == "optimal" and doc["objective"] == pytest.approx(0.0, abs=1e-12)
    checks = {c["name"]: c for c in doc["certificate"]["checks"]}
    assert checks["target_gap_basis"]["value"] == "absolute"
    cmax = float(((x[:, None] - x[None]) ** 2).sum(-1).max())
    assert checks["gap_within_target_gap"]["limit"] == pytest.approx(1e-12 * cmax)
    assert verify_forged(problem, doc).exit_code == 0


def test_what_was_solved_is_reported_not_trusted(cli, tmp_path, solved, verify_forged):
    """method, gamma, reg, tol, device, low_memory, block_size change nothing verify judges."""
    problem, doc = solved("emd")
    base = verify_forged(problem, doc).json()["checks"]
    doc["method"] = "tnt"
    doc["settings"].update(gamma=1.0, reg=1e9, tol=1e9, low_memory=True, block_size=1, device="cpu",
                           method="tnt")
    r = verify_forged(problem, doc)
    assert r.exit_code == 0, r.stderr
    assert [(c["name"], c["holds"]) for c in r.json()["checks"]] == [(c["name"], c["holds"]) for c in base]
    assert r.json()["reported_settings"]["gamma"] == 1.0


def test_suboptimal_explicit_plan_fails_whatever_method_it_claims(cli, tmp_path, solved, rng, verify_forged):
    data = _clouds(rng, 8, 8)
    problem, doc = solved("emd", data=data)
    P = np.outer(data["a"], data["b"])  # feasible, not optimal
    row, col = np.nonzero(P)
    C = cost_matrix(data["x"], data["y"], "sqeuclidean")
    doc["solution"]["plan"] = {"format": "coo", "shape": [8, 8], "row": row.tolist(), "col": col.tolist(),
                               "value": P[row, col].tolist()}
    doc["objective"] = float((C * P).sum())
    for method in ("emd", "tnt", "sinkhorn"):
        doc["method"] = doc["settings"]["method"] = method
        r = verify_forged(problem, doc)
        assert r.exit_code == 6 and "gap_within_lp_tol" in r.stderr, r.stderr


def test_non_default_tolerances_are_accepted_when_verify_is_given_them(cli, tmp_path, solved, verify_forged):
    problem, doc = solved("tnt", "--feas-tol", "1e-6", "--objective-rtol", "1e-7")
    r = verify_forged(problem, doc)
    assert r.exit_code == 6 and "setting_feas_tol" in r.stderr and "setting_objective_rtol" in r.stderr
    assert verify_forged(problem, doc, "--feas-tol", "1e-6", "--objective-rtol", "1e-7").exit_code == 0
    # a tighter verify than the solve also rejects it
    r = verify_forged(problem, doc, "--feas-tol", "1e-7", "--objective-rtol", "1e-7")
    assert r.exit_code == 6 and "setting_feas_tol" in r.stderr


def test_normalized_solution_needs_verify_normalize(cli, tmp_path, solved, rng, verify_forged):
    data = _clouds(rng, 10, 7)
    data["b"] = 3 * data["b"]
    path = tmp_path / "unequal.npz"
    save_problem(str(path), data)
    r = cli("ot", path)
    assert r.exit_code == 7 and "--normalize" in r.stderr
    r = cli("ot", path, "--normalize")
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    assert doc["settings"]["normalize"] is True
    r = verify_forged(path, doc)
    assert r.exit_code == 6 and "equal_masses" in r.stderr and "setting_normalize" in r.stderr
    assert verify_forged(path, doc, "--normalize").exit_code == 0
    # with the flag forged off, the certificate still refuses to judge the file as balanced
    doc["settings"]["normalize"] = False
    r = verify_forged(path, doc)
    assert r.exit_code == 6 and "equal_masses" in r.stderr


# --------------------------------------------------------------------------- degenerate problems

def _same_cloud(rng):
    x = rng.random((6, 2))
    a = rng.dirichlet(np.ones(6))
    return {"a": a, "b": a, "x": x, "y": x.copy(), "cost": "sqeuclidean"}, 0.0


def _huge_costs(rng):
    data = _matrix(rng, 4, 3)
    optimum = _lp_optimum(data["a"], data["b"], data["C"])
    data["C"] = data["C"] + 1e8  # every plan pays 1e8 more: a cost scale far above the differences
    return data, 1e8 + optimum


def _mixed_scale(rng):
    data = _matrix(rng, 7, 6)
    data["C"][0, 0] = data["C"][6, :3] = 1e8  # the scale of max C, far above the optimum
    return data, _lp_optimum(data["a"], data["b"], data["C"])


DEGENERATE = {
    "1x1": lambda rng: ({"a": [2.0], "b": [2.0], "C": [[0.25]]}, 0.25),
    "n=1": lambda rng: ({"a": [1.0], "b": [0.25, 0.75], "C": [[1.0, 3.0]]}, 2.5),
    "m=1": lambda rng: ({"a": [0.5, 0.5], "b": [1.0], "C": [[1.0], [2.0]]}, 1.5),
    "zero_cost": lambda rng: ({"a": [0.3, 0.7], "b": [0.6, 0.4], "C": [[0.0, 0.0], [0.0, 0.0]]}, 0.0),
    "same_cloud": _same_cloud,
    "zero_mass_entry": lambda rng: ({"a": [0.0, 0.5, 0.5], "b": [0.5, 0.5, 0.0],
                                     "C": [[0.0, 1.0, 2.0], [1.0, 0.0, 1.0], [2.0, 1.0, 0.0]]}, 1.0),
    "huge_costs": _huge_costs,
    "mixed_scale": _mixed_scale,
    "tiny_costs": lambda rng: ({"a": [0.5, 0.5], "b": [0.5, 0.5], "C": [[1e-300, 3e-300], [2e-300, 1e-300]]},
                               1e-300),
    "d=0": lambda rng: ({"a": [0.5, 0.5], "b": [1.0], "x": np.zeros((2, 0)), "y": np.zeros((1, 0)),
                         "cost": "euclidean"}, 0.0),
}


@pytest.mark.parametrize("method", ["tnt", "emd", "sinkhorn"])
@pytest.mark.parametrize("case", sorted(DEGENERATE))
def test_degenerate_problems_solve_and_verify(cli, tmp_path, rng, case, method):
    data, optimum = DEGENERATE[case](rng)
    path = tmp_path / "p.npz"
    save_problem(str(path), {k: np.asarray(v) if isinstance(v, list) else v for k, v in data.items()})
    r = cli("ot", path, "--method", method, "-o", tmp_path / "s.json")
    assert r.exit_code == 0, r.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "optimal" and doc["certificate"]["holds"]
    assert cli("verify", path, tmp_path / "s.json").exit_code == 0
    cert = {c["name"]: c for c in doc["certificate"]["checks"]}
    lower, upper = cert["dual_lower_bound"]["value"], doc["objective"]
    scale = max(np.max(np.abs(cost_matrix(np.asarray(data["x"]), np.asarray(data["y"]), data["cost"])))
                if "x" in data else np.max(np.abs(data["C"])), 1.0 if case != "tiny_costs" else 1e-300)
    assert lower <= optimum + 1e-12 * scale and optimum - 1e-12 * scale <= upper
    if method == "emd":
        assert upper == pytest.approx(optimum, rel=1e-9, abs=1e-12 * scale)
    if optimum == 0.0 and upper == 0.0:
        assert cert["relative_gap"]["value"] is None  # (U - D) / U does not exist: reported as null


def test_zero_dimensions_are_refused(bad_input, cli, tmp_path):
    bad_input("ot", {"a": [], "b": [], "C": [[]]}, "'C'")
    for data, needle in (({"a": np.zeros(0), "b": np.ones(1), "C": np.zeros((0, 1))}, "array 'a' has total mass 0"),
                         ({"a": np.ones(2), "b": np.zeros(0), "x": np.zeros((2, 1)), "y": np.zeros((0, 1)),
                           "cost": "l1"}, "array 'b' has total mass 0")):
        path = tmp_path / "empty.npz"
        save_problem(str(path), data)
        r = cli("ot", path)
        assert r.exit_code == 7 and needle in r.stderr and "Traceback" not in r.stderr, r.stderr


def test_sinkhorn_on_a_kernel_that_underflows_ends_with_a_feasible_plan(cli, tmp_path):
    """exp(-C/reg) is 0 at (1, 0) but the entropic optimum needs P_01 = P_10 > 0: Sinkhorn creeps."""
    path = tmp_path / "p.npz"
    save_problem(str(path), {"a": np.array([0.5, 0.5]), "b": np.array([0.5, 0.5]),
                             "C": np.array([[1e8, 1e8 + 1.0], [2e8, 1e8]])})
    r = cli("ot", path, "--method", "sinkhorn", "--max-iter", "200")
    assert r.exit_code == 5 and r.json()["status"] == "max_iter" and r.json()["certificate"]["holds"]
    cert = {c["name"]: c["value"] for c in r.json()["certificate"]["checks"]}
    assert cert["dual_lower_bound"] <= 1e8 <= r.json()["objective"]


def test_one_pixel_images_are_refused_with_the_reason(bad_input):
    bad_input("ot", {"a": [[1.0]], "b": [[1.0]], "cost": "l1"}, "images of at least 2 x 2 pixels")


def test_unreachable_gap_is_information_when_the_cost_is_zero(rng):
    res = optsolve.ot.solve([0.5, 0.5], [0.5, 0.5], np.zeros((2, 2)), method="emd")
    assert res.objective == 0.0 and res.certificate.holds
    assert res.certificate["relative_gap"].value is None and res.certificate["relative_gap"].holds is None
    assert res.certificate["objective_matches"].limit == pytest.approx(1e-12)  # max C = 0: the floor of unit costs


# --------------------------------------------------------------------------- memory

def test_dense_cost_from_points_is_checked_against_the_budget(cli, tmp_path, rng):
    path = tmp_path / "clouds.npz"
    save_problem(str(path), _clouds(rng, 200, 150))  # 240 KB per n x m copy; the file itself is ~6 KB
    for options in (("--method", "emd"), ("--method", "sinkhorn"), ("--dense",)):
        r = cli("ot", path, *options, "--memory-limit", "1M")
        assert r.exit_code == 7, r.stderr
        assert "the 200 x 150 cost matrix of the point clouds" in r.stderr and "memory budget of 1.0 MB" in r.stderr
        assert "Traceback" not in r.stderr and r.stderr.count("\n") == 1
    r = cli("ot", path, "--memory-limit", "1M")  # exact prices pairs from the points instead
    assert r.exit_code == 0, r.stderr
    assert r.json()["settings"]["low_memory"] is True
    sol = tmp_path / "s.json"
    sol.write_text(r.stdout)
    assert cli("verify", path, sol).exit_code == 0


def test_cost_matrix_needs_its_working_copies_within_the_budget(cli, tmp_path, rng):
    path = tmp_path / "matrix.npz"
    save_problem(str(path), _matrix(rng, 120, 100))  # 96 KB per copy
    r = cli("ot", path, "--method", "sinkhorn", "--memory-limit", "1M")
    assert r.exit_code == 7 and "method 'sinkhorn'" in r.stderr and "memory budget" in r.stderr, r.stderr
    r = cli("ot", path, "--memory-limit", "400K")
    assert r.exit_code == 7 and "the certificate" in r.stderr, r.stderr
    assert cli("ot", path, "--method", "emd", "--memory-limit", "2M").exit_code == 0


def test_grid_as_a_matrix_and_block_size_are_checked(cli, tmp_path, rng):
    path = tmp_path / "grid.npz"
    a, b = rng.random((16, 16)), rng.random((16, 16))
    save_problem(str(path), {"a": a / a.sum(), "b": b / b.sum(), "cost": "l1"})
    r = cli("ot", path, "--method", "emd", "--memory-limit", "4M")  # 256 x 256 matrix, 13 copies of 512 KB
    assert r.exit_code == 7 and "the 256 x 256 cost matrix of the grid" in r.stderr, r.stderr
    clouds = tmp_path / "clouds.npz"
    save_problem(str(clouds), _clouds(rng, 300, 300))
    r = cli("ot", clouds, "--low-memory", "--block-size", "1000000", "--memory-limit", "1M")
    assert r.exit_code == 7 and "blocks of 1000000 columns" in r.stderr, r.stderr


# --------------------------------------------------------------------------- time limit

class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_deadline_keeps_time_for_the_finish():
    clock = FakeClock()
    d = ot_deadline(10.0, clock=clock)
    assert d.remaining() == 10.0 and not d.expired()
    d.measure(2.0, passes=4)  # 0.5 s a pass
    assert d.reserve_s == FINISH_PASSES * 0.5
    clock.now = 10.0 - d.reserve_s - 0.1
    assert not d.expired() and d.expired(extra_passes=1)
    clock.now += 0.1
    assert d.expired()
    d.measure(0.1)  # the latest measure counts: the first pass pays for allocations
    assert not d.expired()
    assert Deadline.after(None).remaining() == float("inf") and not Deadline.after(None).expired(1e9)


def test_an_expired_deadline_stops_every_loop_of_tnt(rng):
    from optsolve.ot.problems import SCHEMA, prepare
    from optsolve.ot.tnt import solve_tnt

    ot = prepare(SCHEMA.validate(_matrix(rng, 60, 50), source="test"))
    clock = FakeClock()
    stopped = solve_tnt(ot, gamma_f=2.0 ** 12, deadline=Deadline.after(0.0, clock=clock))
    assert stopped.status == "time_limit" and stopped.stats.newton_steps == 0 and stopped.stats.cg_iterations == 0
    assert stopped.stats.sinkhorn_sweeps == 0 and np.all(np.isfinite(stopped.f))
    free = solve_tnt(ot, gamma_f=2.0 ** 12, deadline=Deadline.after(None, clock=clock))
    assert free.status == "optimal" and free.stats.newton_steps > 0


def test_an_expired_deadline_stops_sinkhorn_after_one_iteration(rng):
    from optsolve.core.backend import get_backend
    from optsolve.ot.sinkhorn import solve_sinkhorn

    data = _matrix(rng, 30, 20)
    out = solve_sinkhorn(data["a"], data["b"], data["C"], reg=1e-3, tol=1e-15, max_iter=1000, time_limit=None,
                         backend=get_backend("cpu"), deadline=Deadline.after(0.0, clock=FakeClock()))
    assert out["status"] == "time_limit" and out["iterations"] == 1


@pytest.mark.parametrize("options", [(), ("--low-memory", "--block-size", "16"), ("--method", "sinkhorn")])
def test_time_limit_document_records_the_deadline(cli, tmp_path, rng, options):
    path = tmp_path / "p.npz"
    save_problem(str(path), _clouds(rng, 150, 120))
    r = cli("ot", path, "--gamma", "65536", "--tol", "1e-14", "--time-limit", "1e-3", *options, "-o",
            tmp_path / "s.json")
    assert r.exit_code == 5, r.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "time_limit" and doc["certificate"]["holds"]
    deadline = doc["stats"]["deadline"]
    assert 0 <= deadline["limit_s"] <= 1e-3  # what is left of the limit once the file is read
    assert deadline["pass_s"] > 0 and deadline["reserve_s"] == pytest.approx(FINISH_PASSES * deadline["pass_s"])
    assert deadline["solver_stopped_s"] <= deadline["finished_s"]
    assert cli("verify", path, tmp_path / "s.json").exit_code == 0  # no claim; the plan is feasible


def test_plan_file_of_a_streamed_problem_is_checked_against_the_budget(cli, tmp_path, rng):
    path = tmp_path / "clouds.npz"
    save_problem(str(path), _clouds(rng, 200, 150))
    out = tmp_path / "plan.npz"
    r = cli("ot", path, "--method", "tnt", "--low-memory", "--plan", out, "--memory-limit", "200K")  # the plan alone is 234 KB
    assert r.exit_code == 7 and "the dense 200 x 150 plan for --plan/--arrays" in r.stderr, r.stderr
    assert not out.exists()
    r = cli("ot", path, "--method", "tnt", "--low-memory", "--plan", out, "--plan-threshold", "0", "--memory-limit", "200K")
    assert r.exit_code == 7 and "entries above --plan-threshold 0" in r.stderr, r.stderr
    assert not out.exists()
    r = cli("ot", path, "--method", "tnt", "--low-memory", "--plan", out, "--plan-threshold", "1e-4", "--memory-limit", "200K")
    assert r.exit_code == 0 and out.exists(), r.stderr


@pytest.mark.parametrize("options, needle", [
    (("--gamma", "1e-300"), "'--gamma' 1e-300 is outside"),
    (("--gamma", "1e300"), "'--gamma' 1e+300 is outside"),
    (("--method", "sinkhorn", "--reg", "1e-300"), "'--reg' 1e-300, gamma = max(C)/reg"),
])
def test_temperatures_float64_cannot_resolve_are_refused(cli, tmp_path, rng, options, needle):
    path = tmp_path / "p.npz"
    save_problem(str(path), _clouds(rng, 6, 5))
    r = cli("ot", path, *options)
    assert r.exit_code == 7 and needle in r.stderr and r.stderr.count("\n") == 1, r.stderr


def test_north_west_corner_is_feasible(rng):
    from optsolve.ot.emd import north_west_corner

    for n, m in ((1, 1), (1, 5), (7, 3), (40, 60)):
        a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
        G = north_west_corner(a, b)
        assert (G >= 0).all() and np.allclose(G.sum(1), a) and np.allclose(G.sum(0), b)
        assert np.count_nonzero(G) <= n + m - 1


def test_emd_under_a_time_limit(cli, tmp_path, rng):
    """emd runs in a child process under a limit: optimal when it fits, else the north-west corner plan."""
    path = tmp_path / "p.npz"
    save_problem(str(path), _clouds(rng, 60, 50))
    fits = cli("ot", path, "--method", "emd", "--time-limit", "120")
    assert fits.exit_code == 0, fits.stderr
    plain = cli("ot", path, "--method", "emd")
    assert fits.json()["objective"] == pytest.approx(plain.json()["objective"], rel=1e-12)
    cut = cli("ot", path, "--method", "emd", "--time-limit", "1e-9", "-o", tmp_path / "s.json")
    assert cut.exit_code == 5, cut.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "time_limit" and "north-west corner" in doc["message"]
    assert doc["objective"] >= plain.json()["objective"] - 1e-12
    assert cli("verify", path, tmp_path / "s.json").exit_code == 0  # feasible; no optimality claimed
