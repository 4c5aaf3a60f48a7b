"""optsolve truncated: the estimate against exact MLEs (scipy's truncnorm in 1-D, the closed-form
halfspace normaliser in d dimensions), recovery for every set type, the certificate, the oracle
counter, the command line and bad inputs."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

import optsolve.truncated
from optsolve.truncated.exact import halfspace_mle
from optsolve.truncated.families import kl_gaussian
from optsolve.truncated.problems import FAMILIES, SCHEMA, sample_truncated_gaussian


def gaussian(seed=0, **kw):
    data = FAMILIES["gaussian"].generate(np.random.default_rng(seed), **kw)
    return SCHEMA.validate(data, source="test"), data


def kl_to_truth(data, sol):
    return kl_gaussian(data["true_mean"], data["true_cov"], np.array(sol["mean"]), np.array(sol["covariance"]))


def test_one_dimensional_truncated_normal_matches_scipy_truncnorm_mle():
    from scipy.optimize import minimize
    from scipy.stats import truncnorm

    rng = np.random.default_rng(3)
    lo, hi = 0.5, 3.0
    x = truncnorm.rvs(lo, hi, loc=0.0, scale=1.0, size=3000, random_state=rng)

    def nll(v):
        mu, s = v[0], np.exp(v[1])
        return -truncnorm.logpdf(x, (lo - mu) / s, (hi - mu) / s, loc=mu, scale=s).mean()

    ref = minimize(nll, [x.mean(), np.log(x.std())], method="Nelder-Mead",
                   options={"xatol": 1e-10, "fatol": 1e-13, "maxiter": 20000}).x
    res = optsolve.truncated.solve(x[:, None], {"type": "box", "lo": [lo], "hi": [hi]}, seed=1)
    assert res.status.value == "optimal" and res.certificate.holds
    mu, var = res.solution["mean"][0], res.solution["covariance"][0][0]
    # the Monte-Carlo error is a fraction of the statistical one (standard errors about 0.05 and 0.1 here)
    assert mu == pytest.approx(ref[0], abs=0.01)
    assert np.sqrt(var) == pytest.approx(np.exp(ref[1]), abs=0.01)
    assert abs(mu - x.mean()) > 0.3  # the naive mean is far off


@pytest.mark.parametrize("seed", [0, 1])
def test_newton_matches_the_exact_halfspace_mle(seed):
    problem, data = gaussian(seed, d=3, n=2000, alpha=0.05, set="halfspace", cond=5.0)
    res = optsolve.truncated.solve_problem(problem, seed=seed)
    m, S = halfspace_mle(data["samples"], data["set"]["a"], data["set"]["b"])
    stat = kl_gaussian(data["true_mean"], data["true_cov"], m, S)
    mc = kl_gaussian(m, S, np.array(res.solution["mean"]), np.array(res.solution["covariance"]))
    assert mc <= 0.1 * stat
    assert res.certificate.holds


SETS = {
    "box": lambda mu: {"type": "box", "lo": [mu[0] + 0.3, None], "hi": [None, mu[1] + 1.0]},
    "ball": lambda mu: {"type": "ball", "center": [mu[0] + 1.5, mu[1]], "radius": 2.0},
    "halfspace": lambda mu: {"type": "halfspace", "a": [-1.0, -0.5], "b": float(-mu[0] - 0.5 * mu[1] - 0.2)},
    "polytope": lambda mu: {"type": "polytope", "A": [[-1.0, 0.0], [0.0, 1.0]], "b": [-mu[0] + 0.2, mu[1] + 1.2]},
    "union": lambda mu: {"type": "union", "sets": [
        {"type": "box", "lo": [mu[0] + 0.5, None], "hi": [None, None]},
        {"type": "ball", "center": [mu[0] - 2.0, mu[1]], "radius": 1.0}]},
    "intersection": lambda mu: {"type": "intersection", "sets": [
        {"type": "halfspace", "a": [-1.0, 0.0], "b": float(-mu[0])},
        {"type": "ball", "center": list(mu), "radius": 3.0}]},
    "complement": lambda mu: {"type": "complement", "set": {"type": "ball", "center": list(mu), "radius": 1.2}},
}


@pytest.mark.parametrize("kind", sorted(SETS))
def test_recovery_within_statistical_error_for_every_set_type(kind):
    rng = np.random.default_rng(11)
    mu = np.array([0.5, -1.0])
    Sigma = np.array([[1.0, 0.3], [0.3, 0.8]])
    desc = SETS[kind](mu)
    X = sample_truncated_gaussian(mu, Sigma, desc, 3000, rng)
    res = optsolve.truncated.solve(X, desc, seed=2)
    naive = optsolve.truncated.solve(X, desc, method="naive")
    kl = kl_gaussian(mu, Sigma, np.array(res.solution["mean"]), np.array(res.solution["covariance"]))
    kl_naive = kl_gaussian(mu, Sigma, np.array(naive.solution["mean"]), np.array(naive.solution["covariance"]))
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    assert kl < 0.06 and kl < 0.1 * kl_naive  # statistical error: 0.0001-0.04 over data seeds; naive 0.14-2.6
    assert not naive.certificate.holds  # the gradient at the empirical moments is large


def test_ten_dimensions_and_the_other_families():
    problem, data = gaussian(4, d=10, n=4000, alpha=0.3, set="box", cond=4.0)
    res = optsolve.truncated.solve_problem(problem, seed=0)
    assert res.certificate.holds and kl_to_truth(data, res.solution) < 0.05
    # known covariance: the mean only
    rng = np.random.default_rng(5)
    mu, Sigma = np.array([1.0, -0.5, 0.0]), np.diag([1.0, 2.0, 0.5])
    desc = {"type": "halfspace", "a": [-1.0, 0.0, 0.0], "b": -1.5}
    X = sample_truncated_gaussian(mu, Sigma, desc, 3000, rng)
    res = optsolve.truncated.solve(X, desc, family="gaussian-mean", cov=Sigma, seed=0)
    assert res.certificate.holds
    assert np.abs(np.array(res.solution["mean"]) - mu).max() < 0.15
    assert abs(X[:, 0].mean() - mu[0]) > 0.8
    # independent exponential coordinates truncated to sum(x) >= t
    data = FAMILIES["exponential"].generate(np.random.default_rng(6), d=2, n=3000, alpha=0.1)
    res = optsolve.truncated.solve_problem(SCHEMA.validate(data, source="test"), seed=0)
    assert res.certificate.holds
    np.testing.assert_allclose(res.solution["rates"], data["true_rates"], rtol=0.1)


def test_determinism_baselines_and_the_certificate_scale():
    problem, data = gaussian(2, d=2, n=1500, alpha=0.2, set="halfspace", cond=2.0)
    a = optsolve.truncated.solve_problem(problem, seed=7)
    b = optsolve.truncated.solve_problem(problem, seed=7)
    assert a.solution == b.solution and a.stats["evaluations"] == b.stats["evaluations"]
    grad = {}
    for method in ("newton", "naive", "dgtz", "psgd"):
        res = optsolve.truncated.solve_problem(problem, method=method, seed=1)
        grad[method] = res.certificate["gradient_statistic"].value
        assert res.stats["evaluations"] >= (0 if method == "naive" else 1000)
        lo, hi = res.solution["alpha_interval"]
        assert lo <= res.solution["alpha_hat"] <= hi
    assert grad["newton"] < 0.1 * grad["naive"]
    assert kl_to_truth(data, a.solution) < kl_to_truth(data, optsolve.truncated.solve_problem(
        problem, method="naive").solution)


def test_oracle_option_counts_calls(tmp_path, monkeypatch, cli):
    (tmp_path / "myset.py").write_text(
        "import numpy as np\nCALLS = [0]\n"
        "def inside(X):\n    CALLS[0] += X.shape[0]\n    return X[:, 0] >= 0.4\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    rng = np.random.default_rng(0)
    X = sample_truncated_gaussian(np.zeros(2), np.eye(2), {"type": "halfspace", "a": [-1, 0], "b": -0.4}, 1500, rng)
    import myset

    problem = SCHEMA.validate({"samples": X}, source="test")
    res = optsolve.truncated.solve_problem(problem, oracle="myset:inside", seed=0)
    # the solver's calls, then the certificate's (its fresh draws) and the samples' own check
    assert res.stats["evaluations"] > 0
    assert myset.CALLS[0] >= res.stats["evaluations"] + X.shape[0]
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"samples": X.tolist()}))
    sol = tmp_path / "s.json"
    r = cli("truncated", path, "--oracle", "myset:inside", "-o", sol)
    assert r.exit_code == 0, r.stderr
    assert cli("verify", path, sol, "--oracle", "myset:inside").exit_code == 0
    r = cli("verify", path, sol)
    assert r.exit_code == 7 and "--oracle" in r.stderr
    r = cli("truncated", path)  # no set in the file, no oracle
    assert r.exit_code == 7 and "'--oracle" in r.stderr
    del sys.modules["myset"]


def test_budget_holdout_bootstrap_and_collapse(tmp_path, monkeypatch):
    problem, data = gaussian(3, d=2, n=1000, alpha=0.2, set="ball", cond=2.0)
    small = optsolve.truncated.solve_problem(problem, max_evals=20000)
    assert small.status.value == "max_iter" and small.stats["evaluations"] <= 20000
    res = optsolve.truncated.solve_problem(problem, holdout=0.2, bootstrap=3, seed=0)
    assert len(res.solution["holdout_rows"]) == 200 and res.certificate["holdout_nll"].value > 0
    lo, hi = np.array(res.solution["mean_interval"]).T
    assert np.all(lo <= hi) and len(res.solution["variance_interval"]) == 2
    # a set of (almost) no mass: every proposal is rejected
    (tmp_path / "pinhole.py").write_text("import numpy as np\ndef inside(X):\n"
                                         "    return np.abs(X[:, 0] - np.round(X[:, 0])) < 1e-12\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    p = SCHEMA.validate({"samples": [[0.0], [1.0], [2.0], [3.0]]}, source="test")
    res = optsolve.truncated.solve_problem(p, oracle="pinhole:inside")
    assert res.status.value == "numerical_error" and "fell" in res.message
    del sys.modules["pinhole"]


def test_the_bootstrap_reruns_the_entrys_own_estimator(monkeypatch):
    """--bootstrap runs the method's entry's estimator on each resample (no dispatch by name); an entry without one
    is refused with the option's message."""
    from optsolve.core.errors import ParameterError
    from optsolve.core.solve import entry
    from optsolve.truncated import methods

    problem, _ = gaussian(4, d=2, n=400, alpha=0.3, set="ball", cond=2.0)
    calls = []

    def counted(tp, rows, rng, **kw):
        calls.append(rows.size)
        return methods.naive_fit(tp, rows, rng, **kw)

    table = dict(methods.METHODS, counted=methods.truncated_method(counted, "the naive estimate, counted"),
                 plain=entry(methods.METHODS["naive"].run, "the naive estimate, without an estimator"))
    monkeypatch.setattr(methods, "METHODS", table)
    monkeypatch.setattr(optsolve.truncated, "METHODS", table)
    monkeypatch.setattr(optsolve.truncated.SOLVER, "methods", table)
    res = optsolve.truncated.solve_problem(problem, method="counted", bootstrap=4, seed=1)
    assert calls == [400] * 5 and res.stats["bootstrap_resamples"] == 4
    with pytest.raises(ParameterError, match="'--bootstrap' option applies to methods with an estimator"):
        optsolve.truncated.solve_problem(problem, method="plain", bootstrap=2)
    assert optsolve.truncated.solve_problem(problem, method="plain").solution["mean"] is not None


def test_command_line_generator_npz_round_trip_and_tampering(cli, tmp_path):
    out = tmp_path / "p.npz"
    r = cli("gen", "truncated", "--family", "gaussian", "--d", "2", "--n", "800", "--alpha", "0.1",
            "--set", "union", "--seed", "3", "-o", out)
    assert r.exit_code == 0, r.stderr
    sol = tmp_path / "s.json"
    r = cli("truncated", out, "-o", sol)
    assert r.exit_code == 0, r.stderr
    assert cli("verify", out, sol).exit_code == 0
    doc = json.loads(sol.read_text())
    doc["solution"]["mean"] = (np.array(doc["solution"]["mean"]) + 0.5).tolist()
    sol.write_text(json.dumps(doc))
    assert cli("verify", out, sol).exit_code == 6


X_OK = [[0.1, 0.2], [0.5, 0.9], [1.5, 0.3], [0.7, 1.1]]
BOX = {"type": "box", "lo": [0, 0], "hi": [2, 2]}


@pytest.mark.parametrize("doc, needle", [
    ({"samples": X_OK + [[3.0, 0.5], [0.1, -1.0]], "set": BOX}, "2 of the 6 samples lie outside the declared set (rows 4, 5)"),
    ({"samples": [[0.1, 0.2], [0.5, 0.9]], "set": BOX}, "needs at least 3"),
    ({"samples": [[0.1, 0.2], [0.2, 0.4], [0.3, 0.6], [0.4, 0.8]], "set": BOX}, "rank-deficient"),
    ({"samples": X_OK, "set": {"type": "ellipse"}}, "'set.type' is 'ellipse'"),
    ({"samples": X_OK, "set": {"type": "box", "lo": [0, 0, 0], "hi": [2, 2]}}, "'set.lo' has length 3; expected d = 2"),
    ({"samples": X_OK, "set": {"type": "union", "sets": [BOX, {"type": "ball", "center": [0, 0]}]}},
     "'set.sets[1]' of type 'ball' lacks key 'radius'"),
    ({"samples": X_OK, "set": "not json"}, "not valid JSON"),
    ({"samples": X_OK, "family": "gaussian-mean", "set": BOX}, "needs the known covariance"),
])
def test_bad_inputs_exit_7(bad_input, doc, needle):
    bad_input("truncated", doc, needle)


def test_bad_options(cli, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"samples": X_OK, "set": BOX}))
    for args in (("--oracle", "nosuchmodule:f"), ("--tol", "0"), ("--holdout", "1.5"), ("--max-iter", "3")):
        r = cli("truncated", path, *args)
        assert r.exit_code == 7 and args[0] in r.stderr, (args, r.stderr)
