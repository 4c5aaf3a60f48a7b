"""optsolve truncated against hostile files, forged solutions, degenerate problems, the memory budget and the
time limit: exit 7 or a documented status, verify judging by its own limits, nothing but a clear line."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsolve.core.files import save_problem
from optsolve.truncated import certificate
from optsolve.truncated.problems import SCHEMA, sample_truncated_gaussian

BOX = {"type": "box", "lo": [0.0, -1.0], "hi": [None, 2.0]}


def _gaussian(n=300, seed=0, desc=BOX):
    rng = np.random.default_rng(seed)
    X = sample_truncated_gaussian(np.array([0.2, 0.0]), np.array([[1.0, 0.3], [0.3, 1.0]]), desc, n, rng)
    return {"samples": X, "set": desc}


def _write(tmp_path, name, doc):
    path = tmp_path / name
    if name.endswith(".json"):
        path.write_text(json.dumps({k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in doc.items()}))
    else:
        save_problem(str(path), doc)
    return path


# --------------------------------------------------------------------------- hostile files

QUICK = ("--tol", "1", "--max-evals", "400000")


def test_hostile_gaussian_files(hostile):
    hostile("truncated", _gaussian(n=40), args=QUICK, examples=30, verify_args=("--tol", "1"))


def test_hostile_known_covariance_files(hostile):
    data = _gaussian(n=30, seed=1)
    data.update(family="gaussian-mean", cov=np.array([[1.0, 0.3], [0.3, 1.0]]))
    hostile("truncated", data, args=QUICK, examples=20, verify_args=("--tol", "1"))


# --------------------------------------------------------------------------- forged documents

@pytest.fixture
def solved(cli, tmp_path):
    """``solved(*options)``: (problem path, the document) of a small solve that passed."""

    def run(*options, data=None):
        path = _write(tmp_path, "p.npz", data if data is not None else _gaussian())
        r = cli("truncated", path, *options)
        assert r.exit_code == 0, r.stderr
        return path, r.json()

    return run




def _shift_mean(by):
    def forge(doc):
        doc["solution"]["mean"][0] += by
    return forge


def _scale_cov(doc):
    doc["solution"]["covariance"] = (1.3 * np.array(doc["solution"]["covariance"])).tolist()


def _known_failure(doc):  # the mean moved, the document's tol and radius loosened
    doc["solution"]["mean"] = [m + 1.5 for m in doc["solution"]["mean"]]
    doc["settings"].update(tol=1e9, radius=1e9)


FORGERIES = {
    "mean": _shift_mean(0.3),
    "covariance": _scale_cov,
    "known_failure": _known_failure,
    "objective": lambda doc: doc.__setitem__("objective", doc["objective"] + 0.2),
    "objective_sign": lambda doc: doc.__setitem__("objective", -doc["objective"]),
    "alpha_hat": lambda doc: doc["solution"].__setitem__("alpha_hat", 1.5 * doc["solution"]["alpha_hat"]),
    "infeasible": lambda doc: doc.__setitem__("status", "infeasible"),
    "unbounded": lambda doc: doc.__setitem__("status", "unbounded"),
    "holdout_rows": lambda doc: doc["solution"].__setitem__("holdout_rows", list(range(60))),
    **{f"loosen_{name}": (lambda name: lambda doc: doc["settings"].__setitem__(name, 1e9))(name)
       for name in ("tol", "radius", "holdout", "objective_rtol", "objective_atol")},
}


def test_forged_documents_are_rejected(cli, tmp_path, solved, verify_forged):
    problem, doc = solved()
    r = verify_forged(problem, doc)
    assert r.exit_code == 0, r.stderr
    assert all(c["holds"] is None or c["limit"] is not None for c in r.json()["checks"])
    for name, forge in FORGERIES.items():
        bad = json.loads(json.dumps(doc))
        forge(bad)
        r = verify_forged(problem, bad)
        assert r.exit_code == 6, f"forged {name} accepted: {r.stderr}"
        assert "status_claim" in r.stderr


def test_what_was_solved_is_reported_not_trusted(cli, tmp_path, solved, verify_forged):
    problem, doc = solved()
    base = verify_forged(problem, doc).json()["checks"]
    doc["method"] = "naive"
    doc["settings"].update(seed=12345, bootstrap=7, max_evals=1, method="dgtz")
    r = verify_forged(problem, doc)
    assert r.exit_code == 0, r.stderr
    assert [(c["name"], c["value"], c["holds"]) for c in r.json()["checks"]] == \
           [(c["name"], c["value"], c["holds"]) for c in base]


def test_non_default_limits_are_accepted_when_verify_is_given_them(cli, tmp_path, solved, verify_forged):
    problem, doc = solved("--tol", "0.5", "--holdout", "0.2", "--seed", "3")
    assert doc["settings"]["tol"] == 0.5 and len(doc["solution"]["holdout_rows"]) == 60
    r = verify_forged(problem, doc)
    assert r.exit_code == 6 and "setting_tol" in r.stderr and "holdout_rows" in r.stderr
    assert verify_forged(problem, doc, "--tol", "0.5", "--holdout", "0.2").exit_code == 0
    # the held-out rows are those the seed draws: other rows of the same number are refused
    rows = set(doc["solution"]["holdout_rows"])
    doc["solution"]["holdout_rows"] = [i for i in range(300) if i not in rows][:60]
    r = verify_forged(problem, doc, "--tol", "0.5", "--holdout", "0.2")
    assert r.exit_code == 6 and "holdout_rows_drawn" in r.stderr


def test_verify_radius_judges_the_region(cli, tmp_path, solved, verify_forged):
    problem, doc = solved()
    report = verify_forged(problem, doc).json()
    assert report["limits"]["radius"]["source"] == "problem" and report["limits"]["radius"]["value"] >= 10
    excess = verify_forged(problem, doc, "--radius", "1e6").json()
    slack = next(c for c in excess["checks"] if c["name"] == "region_slack")["value"]
    assert slack > 0
    r = verify_forged(problem, doc, "--radius", str(max(1e6 - slack - 1e-3, 1e-3)))
    assert r.exit_code == 6 and "region_slack" in r.stderr


def test_certificate_draws_do_not_depend_on_the_document(cli, tmp_path, solved, verify_forged):
    problem, doc = solved("--seed", "5")
    a = verify_forged(problem, doc).json()
    doc["settings"]["seed"] = 6
    b = verify_forged(problem, doc).json()
    value = {c["name"]: c["value"] for c in a["checks"]}
    assert value["alpha_hat"] == {c["name"]: c["value"] for c in b["checks"]}["alpha_hat"]
    assert value["objective_difference"] < 1e-9  # the solver used the same seeded draws


def test_info_lines_never_hold():
    data = _gaussian(n=200)
    problem = SCHEMA.validate(data, source="test")
    import optsolve.truncated

    res = optsolve.truncated.solve_problem(problem, tol=0.5)
    for c in res.certificate.checks:
        assert c.holds is None or c.limit is not None
    assert res.certificate["alpha_hat"].holds is None
    forged = dict(res.solution, covariance=[[1.0, 2.0], [2.0, 1.0]])
    cert = certificate.check(problem, forged, method="newton", objective=res.objective, settings=res.settings,
                             limits={"tol": 0.5}, status="optimal")
    assert not cert.holds and cert["covariance_spd"].holds is False


# --------------------------------------------------------------------------- degenerate problems

def _box1(lo=0.0, hi=1.0):
    return {"type": "box", "lo": [lo], "hi": [hi]}


@pytest.mark.parametrize("doc, needle", [
    ({"samples": np.zeros((50, 0)), "set": {"type": "box", "lo": [], "hi": []}}, "d = 0 dimensions"),
    ({"samples": [[0.5]], "set": _box1()}, "needs at least 2"),
    ({"samples": [[0.5]], "family": "gaussian-mean", "cov": [[1.0]], "set": _box1()}, "needs at least 2"),
    ({"samples": [[0.1, 0.2], [0.3, 0.1]], "set": {"type": "ball", "center": [0, 0], "radius": 5}},
     "needs at least 3"),
    ({"samples": [[0.3, 0.3]] * 8, "set": {"type": "ball", "center": [0, 0], "radius": 5}}, "rank-deficient"),
    ({"samples": [[0.3], [0.6], [0.9]], "set": _box1(2.0, 3.0)}, "3 of the 3 samples lie outside"),
    ({"samples": [[1e-200], [2e-200], [4e-200]], "set": _box1()}, "rescale the samples"),
    ({"samples": [[1e200], [2e200], [4e200]], "set": _box1(0.0, 1e300)}, "at most 1e+150 in magnitude"),
    ({"samples": [[0.0, 0.3], [0.0, 0.5]], "family": "exponential",
      "set": {"type": "halfspace", "a": [-1, -1], "b": -0.1}}, "rate of coordinate 0 would be infinite"),
])
def test_degenerate_inputs_are_refused(bad_input, doc, needle):
    bad_input("truncated", {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in doc.items()}, needle)


def test_equal_samples_with_a_known_covariance_solve(cli, tmp_path):
    path = _write(tmp_path, "p.json", {"samples": [[0.3, 0.3]] * 10, "family": "gaussian-mean",
                                       "cov": np.eye(2), "set": {"type": "ball", "center": [0, 0], "radius": 3}})
    r = cli("truncated", path, "--tol", "0.5")
    assert r.exit_code == 0, r.stderr
    sol = tmp_path / "s.json"
    sol.write_text(r.stdout)
    assert cli("verify", path, sol, "--tol", "0.5").exit_code == 0


def test_a_set_of_zero_mass_is_named(cli, tmp_path):
    X = np.column_stack([np.linspace(-1, 1, 20), np.zeros(20)])
    path = _write(tmp_path, "p.json", {"samples": X, "family": "gaussian-mean", "cov": np.eye(2),
                                       "set": {"type": "box", "lo": [-5, 0], "hi": [5, 0]}})
    r = cli("truncated", path)
    assert r.exit_code == 6 and "no measurable mass" in r.stderr
    assert r.json()["status"] == "numerical_error"


def test_an_estimate_that_does_not_exist_ends_early(cli, tmp_path):
    """A sample on [0, 1] heavier near 0 than any truncated normal: the likelihood improves as mu runs
    to -infinity with the precision to 0. It ends as numerical_error with the reason, within a few
    million oracle calls (it used to run a billion and fail inside the Sobol generator)."""
    x = np.random.default_rng(0).beta(0.5, 2.0, size=300)
    path = _write(tmp_path, "p.json", {"samples": x[:, None], "set": _box1()})
    r = cli("truncated", path)
    assert r.exit_code == 6, r.stderr
    doc = r.json()
    assert doc["status"] == "numerical_error" and "does not exist" in doc["message"]
    assert "precision's smallest eigenvalue" in doc["message"]
    assert doc["stats"]["evaluations"] < 5e7


def test_samples_on_a_face_of_the_set_end_early(cli, tmp_path):
    X = np.column_stack([np.zeros(30), np.random.default_rng(1).standard_normal(30)])
    path = _write(tmp_path, "p.json", {"samples": X, "family": "gaussian-mean", "cov": np.eye(2),
                                       "set": {"type": "halfspace", "a": [1, 0], "b": 0}})
    r = cli("truncated", path)
    assert r.exit_code == 6 and "does not exist" in r.stderr and "boundary of the set" in r.stderr


# --------------------------------------------------------------------------- budgets

def test_memory_budget_refuses_large_dimensions_and_options(cli, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.standard_normal((50, 40))
    path = _write(tmp_path, "p.npz", {"samples": X, "set": {"type": "ball", "center": [0.0] * 40, "radius": 100}})
    r = cli("truncated", path, "--memory-limit", "10M")
    assert r.exit_code == 7 and "d = 40" in r.stderr and "sufficient statistics" in r.stderr
    small = _write(tmp_path, "q.npz", _gaussian(n=50))
    # the final draws are streamed: a tiny --tol needs kept draws of order sqrt(p n / tol) only
    r = cli("truncated", small, "--tol", "1e-9", "--memory-limit", "50M")
    assert r.exit_code == 7 and "'--tol'" in r.stderr and "memory budget" in r.stderr
    r = cli("truncated", small, "--tol", "1e-9")
    assert r.exit_code == 5 and "proposals" in r.stderr
    r = cli("truncated", small, "--bootstrap", str(10 ** 15))
    assert r.exit_code == 7 and "'--bootstrap'" in r.stderr and "memory budget" in r.stderr


def test_oracle_budget_and_time_limit_keep_an_iterate(cli, tmp_path):
    path = _write(tmp_path, "p.npz", _gaussian(n=300))
    r = cli("truncated", path, "--max-evals", "1000")
    assert r.exit_code == 5 and "--max-evals" in r.stderr
    r = cli("truncated", path, "--max-evals", "6000")
    assert r.exit_code == 5 and r.json()["status"] == "max_iter" and r.json()["stats"]["evaluations"] <= 6000
    assert "budget" in r.json()["message"]
    r = cli("truncated", path, "--time-limit", "0.001")
    doc = r.json()
    assert r.exit_code == 5 and doc["status"] == "time_limit" and len(doc["solution"]["mean"]) == 2


def test_sobol_and_memory_limits_are_checked_before_a_batch():
    from optsolve.truncated import families, sampling

    fam = families.Gaussian(1)

    class Counter:
        calls = 0

        def __call__(self, Y):
            self.calls += Y.shape[0]
            return np.ones(Y.shape[0], dtype=bool)

    oracle = Counter()
    pools = sampling.PoolSet(fam, sampling.Sampler(fam, oracle, np.random.default_rng(0), max_calls=10 ** 6))
    with pytest.raises(sampling.DrawLimit, match="Sobol"):
        pools.draw(fam.standard(), 1 << 31)
    with pytest.raises(sampling.BudgetExhausted, match="budget"):
        pools.draw(fam.standard(), 1 << 21)
    assert oracle.calls == 0


def test_reported_alpha_interval_is_judged(cli, tmp_path):
    path = tmp_path / "t.npz"
    assert cli("gen", "truncated", "--family", "gaussian", "-o", path).exit_code == 0
    r = cli("truncated", path)
    assert r.exit_code == 0, r.stderr
    doc = r.json()
    sol = tmp_path / "same.json"
    sol.write_text(json.dumps(doc))
    assert cli("verify", path, sol).exit_code == 0
    doc["solution"]["alpha_interval"] = [0.2, 0.3]
    sol.write_text(json.dumps(doc))
    v = cli("verify", path, sol)
    assert v.exit_code == 6 and "alpha_interval_difference" in v.stderr, v.stderr
