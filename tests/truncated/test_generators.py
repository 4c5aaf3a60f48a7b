"""The Gaussian generator's sets along a random direction (halfspace-random, halfspace-ball): their mass against
fresh draws of the recorded truth, the samples inside, the exact halfspace sampler against closed-form truncated
moments, and the generator's refusals of bad arguments."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsolve.truncated.exact import _truncated_moments
from optsolve.truncated.problems import BALL_KEEPS, FAMILIES, SCHEMA, sample_truncated_gaussian
from optsolve.truncated.sets import parse_set

DRAWS = 400_000  # fresh draws of the truth per mass check: standard error sqrt(alpha (1 - alpha) / DRAWS)


def generate(seed=0, **kw):
    return FAMILIES["gaussian"].generate(np.random.default_rng(seed), **kw)


def mass_under_truth(data, seed=99) -> float:
    mu, Sigma = data["true_mean"], data["true_cov"]
    Y = mu + np.random.default_rng(seed).standard_normal((DRAWS, mu.size)) @ np.linalg.cholesky(Sigma).T
    return float(parse_set(data["set"], mu.size).contains(Y).mean())


@pytest.mark.parametrize("kind, alpha, d", [("halfspace-random", 0.05, 12), ("halfspace-random", 0.3, 3),
                                            ("halfspace-ball", 0.086, 20), ("halfspace-ball", 0.2, 5)])
def test_new_sets_have_their_mass_and_hold_their_samples(kind, alpha, d):
    data = generate(1, d=d, n=3000, alpha=alpha, set=kind)
    assert data["samples"].shape == (3000, d)
    assert parse_set(data["set"], d).contains(data["samples"]).all()
    assert data["true_mean"].shape == (d,) and data["true_cov"].shape == (d, d)
    assert np.linalg.eigvalsh(data["true_cov"]).min() > 0
    se = np.sqrt(alpha * (1 - alpha) / DRAWS)
    assert abs(data["alpha"] - alpha) < 0.01 * alpha  # the recorded mass is the asked one
    assert abs(mass_under_truth(data) - data["alpha"]) < 4 * se + 0.005 * alpha  # and the set's, within MC error
    SCHEMA.validate(data, source="test")  # a valid problem: the samples inside its set


def test_halfspace_random_is_along_a_random_direction_and_ball_about_the_mean():
    normals = [np.array(generate(s, d=6, n=50, alpha=0.1, set="halfspace-random")["set"]["a"]) for s in range(4)]
    for a in normals:
        assert abs(np.linalg.norm(a) - 1) < 1e-12 and np.count_nonzero(np.abs(a) > 1e-3) == 6  # not an axis
    assert min(np.linalg.norm(a - b) for i, a in enumerate(normals) for b in normals[i + 1:]) > 0.1
    data = generate(2, d=6, n=500, alpha=0.05, set="halfspace-ball")
    cut, ball = data["set"]["sets"]
    assert data["set"]["type"] == "intersection" and cut["type"] == "halfspace" and ball["type"] == "ball"
    np.testing.assert_allclose(ball["center"], data["true_mean"])
    # the halfspace alone has mass alpha / BALL_KEEPS (closed form along its normal)
    from scipy.stats import norm

    a, mu, Sigma = np.array(cut["a"]), data["true_mean"], data["true_cov"]
    assert abs(norm.cdf((cut["b"] - a @ mu) / np.sqrt(a @ Sigma @ a)) - 0.05 / BALL_KEEPS) < 1e-12


def test_exact_halfspace_sampler_matches_the_closed_form_truncated_moments():
    rng = np.random.default_rng(4)
    d = 5
    mu = rng.standard_normal(d)
    Q = np.linalg.qr(rng.standard_normal((d, d)))[0]
    Sigma = (Q * np.geomspace(1, 10, d)) @ Q.T
    a = rng.standard_normal(d)
    b = float(a @ mu - 1.5 * np.sqrt(a @ Sigma @ a))  # mass Phi(-1.5), about 0.067
    n = 200_000
    X = sample_truncated_gaussian(mu, Sigma, {"type": "halfspace", "a": a.tolist(), "b": b}, n, rng)
    assert (X @ a <= b).all()
    m, C = _truncated_moments(mu, Sigma, a, b)[:2]
    w, V = np.linalg.eigh(C)
    z = (X.mean(axis=0) - m) @ V / np.sqrt(w / n)  # standardised along C's axes
    assert np.abs(z).max() < 5
    rel = np.linalg.norm(np.cov(X, rowvar=False) - C) / np.linalg.norm(C)
    assert rel < 0.02


def test_command_line_writes_the_new_sets_with_their_truth(cli, tmp_path):
    out = tmp_path / "p.json"
    r = cli("gen", "truncated", "--family", "gaussian", "--d", "4", "--n", "300", "--alpha", "0.086",
            "--set", "halfspace-ball", "--seed", "5", "-o", out)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(out.read_text())
    assert {"samples", "set", "true_mean", "true_cov", "alpha"} <= set(doc)
    assert np.array(doc["true_cov"]).shape == (4, 4) and abs(doc["alpha"] - 0.086) < 1e-3
    set_ = doc["set"] if isinstance(doc["set"], dict) else json.loads(doc["set"])
    assert set_["type"] == "intersection"


@pytest.mark.parametrize("args, needle", [
    (["--alpha", "0"], "'--alpha' option must be a survival mass in (0, 1); got 0"),
    (["--alpha", "1.5", "--set", "halfspace-random"], "got 1.5"),
    (["--alpha", "0.9", "--set", "halfspace-ball"], "must be below 0.86"),
    (["--cond", "0.5"], "'--cond' option must be a condition number >= 1"),
    (["--set", "halfspace-sphere"], "halfspace-sphere"),
    (["--d", "0", "--set", "halfspace-random"], "'--d' option must be an integer >= 1"),
])
def test_bad_arguments_are_usage_errors(cli, tmp_path, args, needle):
    r = cli("gen", "truncated", "--family", "gaussian", *args, "-o", tmp_path / "p.npz")
    assert r.exit_code == 2 and needle in r.stderr, r.stderr
    assert not (tmp_path / "p.npz").exists()
