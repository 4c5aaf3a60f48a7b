"""optsolve kmeans: the estimators against their definitions, guarantees on separated blobs,
the certificate, the command line and bad inputs."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import optsolve.kmeans
from optsolve.core.errors import ParameterError
from optsolve.kmeans import estimators
from optsolve.kmeans.certificate import guarantee
from optsolve.kmeans.problems import FAMILIES, SCHEMA, corrupt, realised_alpha

METHODS = ("labels", "sort-window", "crdest", "sample-window", "sample-centre", "lloyd")


def test_sort_window_is_the_best_window_by_brute_force():
    rng = np.random.default_rng(0)
    for _ in range(20):
        P = np.round(rng.normal(size=(int(rng.integers(5, 40)), 3)) * 3)  # integer values: ties
        alpha = float(rng.uniform(0, 0.45))
        K = max(1, math.floor((1 - alpha) * P.shape[0] + 1e-9))
        want = []
        for j in range(3):
            v = np.sort(P[:, j])
            costs = [((v[s:s + K] - v[s:s + K].mean()) ** 2).sum() for s in range(v.size - K + 1)]
            s = int(np.argmin(np.round(costs, 9)))
            want.append(v[s:s + K].mean())
        np.testing.assert_allclose(estimators.sort_window(P, alpha, rng), want, atol=1e-9)


def test_crdest_matches_its_definition():
    P = np.random.default_rng(1).normal(size=(41, 2))
    alpha = 0.1
    got = estimators.crdest(P, alpha, np.random.default_rng(5))
    perm = np.random.default_rng(5).permutation(41)
    X1, X2 = P[perm[:20]], P[perm[20:]]
    keep = math.ceil((1 - 5 * alpha) * 20)
    for j in range(2):
        v = np.sort(X1[:, j])
        s = int(np.argmin([v[i + keep - 1] - v[i] for i in range(20 - keep + 1)]))
        inside = X2[:, j][(X2[:, j] >= v[s]) & (X2[:, j] <= v[s + keep - 1])]
        assert got[j] == pytest.approx(inside.mean())


def test_sample_window_scores_every_window_of_its_subsample():
    """Where the subsample is the whole cluster (s >= m) and no values tie, sample-window's best
    window is sort-window's; on one well-separated group plus outliers it finds the group."""
    rng = np.random.default_rng(2)
    for alpha in (0.05, 0.2, 0.4):
        P = rng.normal(size=(40, 3)) ** 3  # skewed, no ties
        assert estimators.subsample_size(alpha, 1, 3, 40) == 40
        np.testing.assert_allclose(estimators.sample_window(P, alpha, rng), estimators.sort_window(P, alpha, rng),
                                   rtol=1e-12, atol=1e-12)
    P = np.vstack([rng.normal(0, 1, size=(90, 4)), rng.normal(30, 1, size=(10, 4))])
    c = estimators.sample_window(P, 0.1, rng, k=1)
    assert np.abs(c).max() < 0.5


def blobs(seed=0, m=3000, k=4, alpha=0.2, scheme="near-mean"):
    data = FAMILIES["blobs"].generate(np.random.default_rng(seed), m=m, d=5, k=k, alpha=alpha, scheme=scheme,
                                      spread=1.0)
    return SCHEMA.validate(data, source="test"), data


@pytest.mark.parametrize("scheme", ["near-mean", "random"])
def test_every_method_is_within_its_guarantee_on_separated_blobs(scheme):
    problem, data = blobs(scheme=scheme)
    best = optsolve.kmeans.solve_problem(problem, method="lloyd").objective
    labels_cost = optsolve.kmeans.solve_problem(problem, method="labels").objective
    for method in METHODS[1:5]:
        res = optsolve.kmeans.solve_problem(problem, method=method, seed=3)
        assert res.status.value == "optimal" and res.certificate.holds
        a = data["realised_alpha"]
        factor = 1 + (5 * a - 2 * a * a) / ((1 - 2 * a) * (1 - a))  # Nguyen et al.'s, the loosest stated here
        assert res.objective <= factor * best * (1 + 1e-9)
        assert res.objective <= labels_cost * (1 + 1e-9)  # the robust estimate beats the raw labels here


def test_guarantee_formulas():
    f, text = guarantee("sort-window", 0.1, 1000)
    assert f == pytest.approx(1 + (0.5 - 0.02) / (0.8 * 0.9))
    f, text = guarantee("crdest", 0.1, 1797)
    assert f is None and "does not apply" in text  # 10 ln m / sqrt m = 1.77 > 0.1
    f, text = guarantee("crdest", 0.1, 10**7)
    assert f == pytest.approx(3.0)


def test_corruption_and_realised_rate():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(200, 2))
    truth = np.repeat(np.arange(4), 50)
    for scheme in ("near-mean", "random"):
        lab = corrupt(X, truth, 4, 0.2, scheme, rng)
        changed = lab != truth
        assert changed.sum() == 40 and np.all(np.bincount(truth[changed], minlength=4) == 10)
        assert 0.2 <= realised_alpha(truth, lab, 4) < 0.5


def test_determinism_and_auto_alpha_reported():
    problem, _ = blobs(seed=4)
    a = optsolve.kmeans.solve_problem(problem, method="sample-window", seed=11)
    b = optsolve.kmeans.solve_problem(problem, method="sample-window", seed=11)
    assert a.solution["centres"] == b.solution["centres"]
    assert a.stats["alpha_used"] in [g["alpha"] for g in a.stats["alpha_grid"]]
    assert a.stats["alpha_used"] == max(a.stats["alpha_per_cluster"])
    fixed = optsolve.kmeans.solve_problem(problem, method="sort-window", alpha=0.1)
    assert fixed.stats["alpha_used"] == 0.1 and "alpha_grid" not in fixed.stats


def test_auto_alpha_is_chosen_per_cluster():
    """Clusters with different error rates get different alphas, and the choice costs no more than
    the best single alpha of the grid (on these 1,200 points the selection sees every point)."""
    rng = np.random.default_rng(7)
    centres = np.array([[0.0, 0.0], [12.0, 0.0], [0.0, 12.0]])
    truth = np.repeat(np.arange(3), 400)
    X = centres[truth] + rng.normal(size=(1200, 2))
    labels = truth.copy()
    labels[rng.choice(np.flatnonzero(truth == 1), 120, replace=False)] = 0  # cluster 0 gets 23% strays
    problem = SCHEMA.validate({"X": X, "labels": labels}, source="test")
    res = optsolve.kmeans.solve_problem(problem, method="sample-centre", refine=False)
    per = res.stats["alpha_per_cluster"]
    assert per[0] > 0.1 and min(per) < per[0]
    assert res.stats["selection_cost"] <= min(g["cost"] for g in res.stats["alpha_grid"])
    assert res.objective == pytest.approx(res.stats["selection_cost"], rel=1e-9)


@pytest.mark.parametrize("scheme", ["near-mean", "random"])
def test_auto_alpha_is_never_worse_than_the_labels_on_small_data(scheme):
    """alpha = 0 is on the grid and gives the labels' centroids: with every point in the selection,
    the sampling methods and sort-window cost at most what the labels do (breast_cancer, k = 2,
    realised error rate 0.45, where the estimates at a single alpha vary widely with the seed)."""
    data = FAMILIES["breast_cancer"].generate(np.random.default_rng(0), alpha=0.2, scheme=scheme)
    problem = SCHEMA.validate(data, source="test")
    labels = optsolve.kmeans.solve_problem(problem, method="labels", refine=False).objective
    for method in ("sample-centre", "sample-window", "sort-window"):
        for seed in range(3):
            assert optsolve.kmeans.solve_problem(problem, method=method, seed=seed, refine=False).objective <= labels * (1 + 1e-12)


def test_empty_predicted_cluster_is_reported():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(30, 2))
    res = optsolve.kmeans.solve(X, np.repeat([0, 2], 15), k=3, method="sort-window")
    assert res.status.value == "optimal" and len(res.solution["centres"]) == 2
    assert "[1]" in res.message and res.certificate.holds


def test_command_line_memory_mapped_points_and_tampering(cli, tmp_path):
    rng = np.random.default_rng(0)
    X = np.vstack([rng.normal(c, 1, size=(100, 3)) for c in (0, 10)])
    np.save(tmp_path / "X.npy", X)
    (tmp_path / "p.json").write_text(json.dumps({"X_path": "X.npy", "labels": [0] * 100 + [1] * 100}))
    sol = tmp_path / "s.json"
    r = cli("kmeans", tmp_path / "p.json", "-o", sol)
    assert r.exit_code == 0, r.stderr
    assert cli("verify", tmp_path / "p.json", sol).exit_code == 0
    doc = json.loads(sol.read_text())
    doc["solution"]["assignment"][0] = 1 - doc["solution"]["assignment"][0]  # no longer the nearest centre
    sol.write_text(json.dumps(doc))
    assert cli("verify", tmp_path / "p.json", sol).exit_code == 6


@pytest.mark.parametrize("doc, needle", [
    ({"X": [[0.0], [1.0]], "labels": [0, 3], "k": 2}, "label 3 at index 1"),
    ({"X": [[0.0], [float("nan")]], "labels": [0, 1]}, "NaN"),
    ({"X": [[0.0], [1.0]], "labels": [0, 1], "k": 3}, "exceeds the number of points"),
    ({"X": [[0.0], [1.0]], "labels": [0, 1], "alpha": 0.5}, "expected an error rate in [0, 0.5)"),
    ({"X": [[0.0], [1.0]], "labels": [0, 1, 1]}, "array 'labels' has shape (3,)"),
    ({"X_path": "missing.npy", "labels": [0, 1]}, "does not exist"),
])
def test_bad_inputs_exit_7(bad_input, doc, needle):
    bad_input("kmeans", doc, needle)


def test_bad_alpha_option(cli, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"X": [[0.0], [1.0]], "labels": [0, 1]}))
    r = cli("kmeans", path, "--alpha", "0.7")
    assert r.exit_code == 7 and "'--alpha'" in r.stderr


def test_in_place_sample_centre_equals_the_per_cluster_one():
    """The solver's sample-centre (clusters read in place, re-centred together in passes over X)
    gives the per-cluster estimator's centres."""
    from optsolve.kmeans.methods import estimate_centres, sample_centres
    from optsolve.kmeans.problems import prepare

    problem, _ = blobs(seed=7, m=4000, k=5, alpha=0.3)
    kp = prepare(problem)
    together, _ = sample_centres(kp, 0.3, seed=2)
    apart, _ = estimate_centres(kp, "sample-centre", 0.3, seed=2)
    np.testing.assert_allclose(together, apart, rtol=1e-10, atol=1e-10)


def test_one_dimensional_programme_and_the_lower_bound():
    import itertools

    from optsolve.kmeans.certificate import kmeans_1d, lower_bound

    rng = np.random.default_rng(0)
    for _ in range(20):
        v = rng.normal(size=int(rng.integers(3, 8)))
        k = int(rng.integers(1, 4))
        best = min(sum(((v[lab == c] - v[lab == c].mean()) ** 2).sum() for c in range(k) if (lab == c).any())
                   for lab in map(np.array, itertools.product(range(k), repeat=v.size)))
        assert kmeans_1d(v, k) == pytest.approx(best, abs=1e-9)
    problem, _ = blobs(seed=1, m=600, k=3)
    res = optsolve.kmeans.solve_problem(problem, method="lloyd")
    bound, _ = lower_bound(problem["X"], 3)
    assert 0 < bound <= res.objective and res.certificate["lower_bound_below_cost"].holds


def test_iteration_options_where_they_apply(cli, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"X": [[0.0], [1.0], [5.0], [6.0]], "labels": [0, 0, 1, 1]}))
    assert cli("kmeans", path, "--method", "lloyd", "--max-iter", "5").exit_code == 0
    r = cli("kmeans", path, "--max-iter", "5")
    assert r.exit_code == 7 and "--max-iter" in r.stderr
    r = cli("kmeans", path, "--time-limit", "60")  # a limit the solve does not reach
    assert r.exit_code == 0 and r.json()["settings"]["time_limit"] == 60


def test_the_default_refines_an_estimate_that_wrong_labels_pulled_away():
    """80% of the far cluster's predicted members come from the other clusters: no trimmed estimate
    recovers its centre, and a few Lloyd steps from the estimate do; they never raise its cost."""
    rng = np.random.default_rng(0)
    sizes = [300, 300, 300, 8]
    X = np.concatenate([rng.normal(c, 1.0, (s, 2)) for c, s in zip([(0, 0), (10, 0), (0, 10), (200, 200)], sizes)])
    labels = np.repeat(np.arange(4), sizes)
    labels[rng.choice(900, 32, replace=False)] = 3
    best = optsolve.kmeans.solve(X, labels, method="lloyd").objective
    estimate = optsolve.kmeans.solve(X, labels, refine=False)
    refined = optsolve.kmeans.solve(X, labels)
    assert estimate.objective > 10 * best  # the estimator alone
    assert refined.objective <= estimate.objective and refined.objective <= 1.01 * best
    assert refined.status.value == "optimal" and refined.certificate.holds
    assert 1 <= refined.stats["iterations"] <= refined.settings["lloyd_steps"] == 10
    assert estimate.stats["iterations"] == 0
    # distance rows: the points the predicted labels and the bounds did not settle, against every centre
    assert 0 < estimate.stats["evaluations"] < len(X) and refined.stats["evaluations"] >= estimate.stats["evaluations"]


def test_refine_is_a_switch_and_lloyd_steps_a_count():
    X = np.arange(12, dtype=float).reshape(6, 2)
    labels = np.array([0, 0, 0, 1, 1, 1])
    for bad in ({"refine": 5}, {"lloyd_steps": -1}, {"lloyd_steps": True}, {"lloyd_steps": 2.5}):
        with pytest.raises(ParameterError):
            optsolve.kmeans.solve(X, labels, **bad)
    assert optsolve.kmeans.solve(X, labels, lloyd_steps=0).settings["lloyd_steps"] == 0


def test_choose_alphas_sweeps_as_a_plain_recomputation_does():
    """choose_alphas keeps each point's two nearest centres up to date as centres change; a plain version
    that recomputes every cost from the whole table makes the same choices (one centre, ties, many sweeps)."""
    from optsolve.kmeans.methods import MAX_SWEEPS, choose_alphas

    def plain(X, candidates):
        D = np.array([((X[:, None, :] - C[None]) ** 2).sum(axis=2) for C in candidates])  # grid x n x L
        costs = [D[g].min(axis=1).sum() for g in range(len(candidates))]
        choice = np.full(D.shape[2], int(np.argmin(costs)))
        best = min(costs)

        def cost(ch):
            return D[ch, :, np.arange(D.shape[2])].T.min(axis=1).sum()

        for _ in range(MAX_SWEEPS):
            changed = False
            for i in range(D.shape[2]):
                trial = [cost(np.where(np.arange(D.shape[2]) == i, g, choice)) for g in range(len(candidates))]
                g = int(np.argmin(trial))
                if trial[g] < best * (1 - 1e-12):
                    best, choice[i], changed = trial[g], g, True
            if not changed:
                break
        return choice, best

    for seed in range(40):
        rng = np.random.default_rng(seed)
        n, L, G = int(rng.integers(1, 200)), int(rng.integers(1, 9)), int(rng.integers(1, 6))
        X = np.round(rng.standard_normal((n, 2)) * 3, 1 if seed % 2 else 6)  # coarse values: ties
        candidates = [np.round(rng.standard_normal((L, 2)) * 2, 1) for _ in range(G)]
        choice, best, _ = choose_alphas(X, candidates, list(range(G)))
        want, want_best = plain(X, candidates)
        assert best == pytest.approx(want_best, rel=1e-9, abs=1e-9), seed
        assert np.array_equal(choice, want), seed


def test_block_threads_are_every_core_unless_threads_bounds_them():
    import os

    from optsolve.core import threads

    X, labels = np.random.default_rng(0).normal(size=(300, 3)), np.arange(300) % 3
    assert optsolve.kmeans.solve(X, labels).stats["block_threads"] == (os.cpu_count() or 1)
    with threads.requested(1):
        res = optsolve.kmeans.solve(X, labels)
    assert res.stats["block_threads"] == 1 and res.settings["threads"] == 1
    with threads.requested("all"):
        assert optsolve.kmeans.solve(X, labels).stats["block_threads"] == (os.cpu_count() or 1)
