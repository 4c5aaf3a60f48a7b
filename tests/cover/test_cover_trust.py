"""optsolve cover on files nobody here made: hostile mutations, forged solution documents,
degenerate problems, sizes given as values, and the limits verify judges by."""

from __future__ import annotations

import json
import time
import tracemalloc

import numpy as np
import pytest
import scipy.sparse as sp

import optsolve.cover
from optsolve.core.files import save_problem
from optsolve.cover import certificate
from optsolve.cover.problems import SCHEMA, prepare


def small_coverage(seed=0, n=8, items=10):
    rng = np.random.default_rng(seed)
    inc = (rng.random((n, items)) < 0.35).astype(float)
    inc[np.arange(n), rng.integers(0, items, n)] = 1.0  # every element covers something
    return {"cover": inc, "weights": rng.uniform(0.5, 2.0, items), "groups": np.arange(n) % 2,
            "p": np.array([0.3, 0.3]), "q": np.array([0.7, 0.7]), "tau_frac": 0.7}


def small_facility(seed=1, n=7, clients=6):
    rng = np.random.default_rng(seed)
    sim = rng.random((n, clients)) * (rng.random((n, clients)) < 0.6)
    return {"sim": sim, "groups": np.arange(n) % 3, "balance": 0.5, "tau": 0.5 * float(sim.max(0).sum())}


def test_hostile_coverage_files(hostile):
    hostile("cover", small_coverage(), args=("--time-limit", "5"), examples=30)


def test_hostile_facility_files(hostile):
    hostile("cover", small_facility(), args=("--method", "milp", "--time-limit", "5"), examples=20)


# --------------------------------------------------------------------------- forged documents


@pytest.fixture
def solved(cli, tmp_path):
    """A small problem file, and the document of its solve with ``args``: (problem path, doc, verify)."""
    path = tmp_path / "p.npz"
    raw = {k: v for k, v in small_coverage(3).items() if k not in ("p", "q")}
    save_problem(str(path), dict(raw, balance=0.4))  # p_c = 0.3, q_c = 0.7 for the two groups

    def solve(*args):
        sol = tmp_path / "s.json"
        r = cli("cover", path, "-o", sol, *args)
        assert r.exit_code == 0, r.stderr
        return json.loads(sol.read_text())

    def verify(doc, *args):
        forged = tmp_path / "forged.json"
        forged.write_text(json.dumps(doc))
        return cli("verify", path, forged, *args)

    return path, solve, verify


def _forge(doc, how):
    doc = json.loads(json.dumps(doc))
    sel = doc["solution"]["selected"]
    if how == "drop_element":
        doc["solution"]["selected"] = sel[:-1]
        doc["objective"] = len(sel) - 1
    elif how == "swap_element":
        doc["solution"]["selected"] = sel[:-1] + [next(i for i in range(100) if i not in sel)]
    elif how == "duplicate":
        doc["solution"]["selected"] = sel + sel[:1]
        doc["objective"] = len(sel) + 1
    elif how == "out_of_range":
        doc["solution"]["selected"] = sel[:-1] + [10**30]
    elif how == "empty":
        doc["solution"]["selected"], doc["objective"] = [], 0
    elif how == "infeasible_certificate":
        doc["solution"] = {"certificate_kind": "infeasible", "reason": "forged"}
    elif how.startswith("status_"):
        doc["status"] = how[len("status_"):]
    elif how == "objective":
        doc["objective"] = len(sel) - 1
    elif how == "objective_missing":
        doc["objective"] = None
    elif how.startswith("setting_"):
        name, value = how[len("setting_"):].split("=")
        doc["settings"][name] = json.loads(value)
    return doc


@pytest.mark.parametrize("how", [
    "drop_element", "swap_element", "duplicate", "out_of_range", "empty", "infeasible_certificate",
    "status_infeasible", "status_unbounded", "status_bogus", "objective", "objective_missing",
    "setting_eps=1e9", "setting_eps=0.5", "setting_bicriteria=true", "setting_unfair=true",
    "setting_value_rtol=1.0", "setting_balance=1.0", "setting_tau=1e-9", "setting_tau_frac=1e-9",
])
def test_forged_documents_are_rejected(solved, how):
    _, solve, verify = solved
    doc = solve()
    assert verify(doc).exit_code == 0  # the untouched document is accepted
    r = verify(_forge(doc, how))
    assert r.exit_code == 6, (how, r.stderr)


def test_the_known_forgery_one_element_with_loose_settings_fails(solved):
    _, solve, verify = solved
    doc = solve()
    doc["solution"]["selected"] = doc["solution"]["selected"][:1]
    doc["objective"] = 1
    doc["settings"].update(tau=1, balance=1, eps=0.99, bicriteria=True)
    r = verify(doc)
    assert r.exit_code == 6
    for name in ("setting_balance", "setting_eps", "setting_bicriteria", "threshold_shortfall"):
        assert name in r.stderr, name


@pytest.mark.parametrize("args", [("--tau-frac", "0.4"), ("--tau", "3.0"), ("--balance", "1.0"),
                                  ("--bicriteria", "--eps", "0.3"), ("--value-rtol", "1e-6")])
def test_non_default_limits_are_accepted_with_the_same_options(solved, args):
    _, solve, verify = solved
    doc = solve(*args)
    assert verify(doc, *args).exit_code == 0
    loose = args[1] != "3.0" or doc["stats"]["tau"] > 3.0  # --tau 3 is looser than the file's tau_frac 0.7
    if loose:
        r = verify(doc)
        assert r.exit_code == 6 and "setting_" in r.stderr, r.stderr


def test_unfair_greedy_needs_verify_unfair(solved):
    _, solve, verify = solved
    doc = solve("--method", "unfair-greedy")
    assert doc["settings"]["unfair"] is True
    assert verify(doc, "--unfair").exit_code == 0
    r = verify(doc)
    assert r.exit_code == 6 and "setting_unfair" in r.stderr
    # a fair method's solution relabelled as the baseline gains nothing: the proportions still apply
    fair = solve()
    fair["method"] = "unfair-greedy"
    fair["solution"]["selected"] = doc["solution"]["selected"]
    fair["objective"] = doc["objective"]
    if doc["stats"]["fairness_violation"] > 0:
        assert verify(fair).exit_code == 6


def test_verify_refuses_limits_out_of_range(solved):
    _, solve, verify = solved
    doc = solve()
    for args in (("--eps", "5"), ("--balance", "-1"), ("--tau-frac", "2"), ("--value-rtol", "nan")):
        r = verify(doc, *args)
        assert r.exit_code == 7 and args[0] in r.stderr, (args, r.stderr)


def test_verify_limits_come_from_the_file_then_options(solved):
    path, solve, verify = solved
    doc = solve()
    r = verify(doc)
    report = json.loads(r.stdout)
    assert report["limits"]["tau_frac"] == {"value": 0.7, "source": "problem"}
    assert report["limits"]["eps"] == {"value": 0.1, "source": "default"}
    # a stricter threshold than the solve's: the same set no longer reaches it
    r = verify(doc, "--tau", str(doc["stats"]["f_all"]))
    assert r.exit_code == 6 or doc["certificate"]["checks"][1]["value"] == 0


# --------------------------------------------------------------------------- degenerate problems

EYE3 = np.eye(3).tolist()


@pytest.mark.parametrize("doc, code, needle", [
    ({"cover": [[1.0]], "groups": [0], "balance": 0.5, "tau": 1}, 0, None),
    ({"sim": [[0.5, 0.2]], "groups": [0], "balance": 0.0, "tau_frac": 1.0}, 0, None),
    ({"cover": EYE3, "groups": [0, 0, 0], "balance": 0.5, "tau": 2}, 0, None),
    ({"cover": [], "groups": [], "balance": 0.5, "tau": 1}, 7, "'cover'"),
    ({"cover": EYE3, "groups": [0, 1, 1], "balance": 0.5, "tau": 0}, 7, "'tau'"),
    ({"cover": EYE3, "groups": [0, 1, 1], "balance": 0.5, "tau": 4}, 3, "exceeds f(U)"),
    ({"cover": EYE3, "groups": [0, 0, 2], "balance": 0.5, "tau": 1}, 3, "group 1 has no element"),
    ({"cover": EYE3, "groups": [0, 0, 2], "balance": 1.0, "tau": 1}, 0, None),
    ({"cover": EYE3, "groups": [0, 0, 2], "p": [0.2, 0.0, 0.2], "q": [1, 1, 1], "tau": 2}, 0, None),
    ({"cover": np.eye(4).tolist(), "groups": [0, 0, 1, 1], "balance": 0.0, "tau": 3}, 0, None),
    ({"cover": np.eye(4).tolist(), "groups": [0, 0, 1, 1], "balance": 1.0, "tau": 3}, 0, None),
    ({"cover": np.eye(4).tolist(), "groups": [0, 0, 1, 1], "balance": 0.5, "tau_frac": 1.0}, 0, None),
    ({"cover": EYE3, "weights": [0, 0, 0], "groups": [0, 1, 1], "balance": 0.5, "tau_frac": 0.5}, 7, "f(U) = 0"),
    ({"sim": np.zeros((3, 2)).tolist(), "groups": [0, 1, 1], "balance": 0.5, "tau_frac": 0.5}, 7, "f(U) = 0"),
    ({"cover": EYE3, "weights": [0, 0, 0], "groups": [0, 1, 1], "balance": 0.5, "tau": 1}, 3, "exceeds f(U)"),
    ({"cover": [[], [], []], "groups": [0, 1, 1], "balance": 0.5, "tau": 1}, 3, "exceeds f(U)"),
    ({"cover": EYE3, "weights": [1e308, 1e308, 1e308], "groups": [0, 1, 1], "balance": 0.5, "tau_frac": 0.5}, 7,
     "overflows"),
    ({"cover": EYE3, "groups": [0, 1, 1], "p": 0.6, "q": 1.0, "tau": 1}, 3, "sum to 1.2 > 1"),
])
@pytest.mark.parametrize("method", ["greedy", "threshold", "continuous", "milp"])
def test_degenerate_problems(cli, tmp_path, doc, code, needle, method):
    path, sol = tmp_path / "p.json", tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    r = cli("cover", path, "--method", method, "--seed", "0", "-o", sol)
    assert r.exit_code == code, r.stderr
    out = json.loads(sol.read_text())
    if needle is not None:
        assert needle in out["message"]
    if code == 7:
        assert str(path) in r.stderr and len(r.stderr.strip().splitlines()) == 1 and out["solution"] is None
    else:
        assert cli("verify", path, sol).exit_code == 0


def test_an_empty_ground_set_in_npz_is_refused(cli, tmp_path):
    path = tmp_path / "p.npz"
    save_problem(str(path), {"cover": np.zeros((0, 3)), "groups": np.zeros(0, dtype=np.int64), "balance": 0.5,
                             "tau": 1.0})
    r = cli("cover", path)
    assert r.exit_code == 7 and "'groups' is empty" in r.stderr


def test_an_integer_infeasibility_is_re_derived_by_the_exact_milp(cli, tmp_path):
    # fair sets have two elements, one of them the useless element 3; the LP relaxation reaches 1.5
    doc = {"cover": [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 0]], "groups": [0, 0, 0, 1], "balance": 0.2,
           "tau": 1.5}
    path, sol = tmp_path / "p.json", tmp_path / "s.json"
    path.write_text(json.dumps(doc))
    cp = prepare(SCHEMA.validate(doc, source="test"))
    assert certificate.lp_bound(cp)[0] is not None and np.isfinite(certificate.lp_bound(cp)[0])
    r = cli("cover", path, "--method", "milp", "-o", sol)
    assert r.exit_code == 3, r.stderr
    assert cli("verify", path, sol).exit_code == 0
    check = certificate.check(SCHEMA.validate(doc, source="t"), {}, status="infeasible").checks[0]
    assert check.holds and "exact MILP" in check.value
    assert cli("cover", path, "-o", sol).exit_code == 5  # greedy finds none and proves nothing


def test_the_weights_scale_changes_no_choice():
    base = small_coverage(5)
    sets = []
    for scale in (1e-200, 1.0, 1e200):
        raw = dict(base, weights=base["weights"] * scale)
        res = optsolve.cover.solve_problem(SCHEMA.validate(raw, source="t"))
        assert res.status.value == "optimal" and res.certificate.holds, (scale, res.message)
        sets.append(res.solution["selected"])
    assert sets[0] == sets[1] == sets[2]


def test_the_certificate_skips_the_lower_bounds_after_the_deadline():
    problem = SCHEMA.validate(small_coverage(2), source="t")
    res = optsolve.cover.solve_problem(problem)
    cert = certificate.check(problem, res.solution, objective=res.objective, status="optimal",
                             deadline=time.perf_counter() - 1.0)
    assert cert.holds and "time limit" in cert["lower_bound_opt"].note
    assert cert["threshold_shortfall"].holds and cert["fairness_excess"].holds


# --------------------------------------------------------------------------- sizes given as values


def test_a_group_label_of_1e15_allocates_nothing_by_its_value(cli, tmp_path):
    path, sol = tmp_path / "p.json", tmp_path / "s.json"
    path.write_text(json.dumps({"cover": np.eye(3).tolist(), "groups": [0, 7, 10**15], "p": 0.0, "q": 1.0,
                                "tau": 2}))
    tracemalloc.start()
    try:
        r = cli("cover", path, "-o", sol)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.exit_code == 0, r.stderr
    assert peak < 50 << 20
    doc = json.loads(sol.read_text())
    assert sum(doc["solution"]["group_counts"].values()) == 2  # by label: {"0": .., "7": .., "1000000000000000": ..}
    assert set(doc["solution"]["group_counts"]) <= {"0", "7", str(10**15)}
    assert cli("verify", path, sol).exit_code == 0
    # with the balance, 10^15 + 1 groups leave every group a maximum count of 0: infeasible, said so
    path.write_text(json.dumps({"cover": np.eye(3).tolist(), "groups": [0, 7, 10**15], "balance": 0.5, "tau": 2}))
    r = cli("cover", path, "-o", sol)
    assert r.exit_code == 3 and "no set size" in json.loads(sol.read_text())["message"]


def test_columns_no_element_reaches_allocate_nothing(cli, tmp_path):
    path = tmp_path / "wide.npz"
    M = sp.csr_matrix((np.ones(3), ([0, 1, 2], [0, 5, 4_999_999])), shape=(6, 5_000_000))
    save_problem(str(path), {"cover": M, "groups": np.arange(6) % 2, "balance": 0.5, "tau": 2.0})
    tracemalloc.start()
    try:
        r = cli("cover", path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert r.exit_code == 0, r.stderr
    assert peak < 20 << 20  # one float per item would be 40 MB


def test_a_sparse_cover_of_1e9_columns_is_refused_before_allocation(cli, tmp_path):
    path = tmp_path / "wide.npz"
    M = sp.csr_matrix((np.ones(3), ([0, 1, 2], [0, 5, 10**9 - 1])), shape=(34, 10**9))
    save_problem(str(path), {"cover": M, "groups": np.zeros(34, dtype=np.int64), "balance": 0.5, "tau": 1.0})
    r = cli("cover", path, "--memory-limit", "1G")
    assert r.exit_code == 7 and "'cover'" in r.stderr and "memory budget" in r.stderr


def test_the_milp_is_checked_against_the_memory_budget(cli, tmp_path):
    path = tmp_path / "p.npz"
    rng = np.random.default_rng(0)
    inc = sp.random(300, 600, density=0.05, random_state=0, format="csr")
    save_problem(str(path), {"cover": inc, "groups": rng.integers(0, 3, 300), "balance": 0.5, "tau_frac": 0.5})
    r = cli("cover", path, "--method", "milp", "--memory-limit", "1M")
    assert r.exit_code == 7 and "MILP" in r.stderr and "memory budget" in r.stderr


def test_many_groups_of_one_element_solve(cli, tmp_path):
    # every element its own group, q_c = 2/n: a group may hold an element only once |S| >= n/2, so the
    # smallest fair cover has n/2 elements (the fair sizes are decided per distinct (p, q, size))
    n = 600
    path, sol = tmp_path / "p.npz", tmp_path / "s.json"
    save_problem(str(path), {"cover": sp.eye(n, format="csr"), "groups": np.arange(n), "balance": 1.0,
                             "tau": 5.0})
    r = cli("cover", path, "-o", sol)
    assert r.exit_code == 0, r.stderr
    assert json.loads(sol.read_text())["objective"] == n // 2
    assert cli("verify", path, sol).exit_code == 0


@pytest.mark.parametrize("args", [("--alpha", "1e308"), ("--alpha", "1e-300"), ("--eps", "1e-300", "--beta", "auto"),
                                  ("--beta", "100000000000000000000"), ("--method", "threshold", "--eps", "1e-300"),
                                  ("--method", "continuous", "--eps", "1e-300", "--beta", "1000000000000")])
def test_extreme_options_solve(cli, tmp_path, args):
    # guesses and thresholds skip the steps that change nothing; extended bounds past int64 stay exact
    path, sol = tmp_path / "p.npz", tmp_path / "s.json"
    save_problem(str(path), small_coverage(7))
    r = cli("cover", path, "-o", sol, *args)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(sol.read_text())
    assert doc["stats"]["iterations"] <= 40
    verify_args = ("--eps", "1e-300") if "--eps" in args else ()
    assert cli("verify", path, sol, *verify_args).exit_code == 0


@pytest.mark.parametrize("args, needle", [(("--alpha", "inf"), "'--alpha'"), (("--seed", "-1"), "'--seed'"),
                                          (("--value-rtol", "2"), "'--value-rtol'"),
                                          (("--unfair",), "'--unfair'")])
def test_bad_options_exit_7(cli, tmp_path, args, needle):
    path = tmp_path / "p.npz"
    save_problem(str(path), small_coverage(7))
    r = cli("cover", path, "--method", "continuous", *args)
    assert r.exit_code == 7 and needle in r.stderr, r.stderr


def test_reported_group_counts_are_judged(cli, tmp_path):
    """The group counts a document reports are the selected set's, or verify fails."""
    path = tmp_path / "c.npz"
    assert cli("gen", "cover", "--family", "sbm", "-o", path).exit_code == 0
    r = cli("cover", path)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    doc["solution"]["group_counts"] = [0] * len(doc["solution"]["group_counts"])
    sol = tmp_path / "forged.json"
    sol.write_text(json.dumps(doc))
    v = cli("verify", path, sol)
    assert v.exit_code == 6 and "group_counts_match" in v.stderr, v.stderr
