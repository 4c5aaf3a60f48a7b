"""Lloyd steps with bounds (optsolve.kmeans.lloyd) against plain Lloyd steps and brute-force assignments."""

import numpy as np
import pytest

from optsolve.kmeans.lloyd import lloyd


def brute(X, C):
    X = np.asarray(X, dtype=float)
    d2 = ((X[:, None, :] - np.asarray(C, dtype=float)[None]) ** 2).sum(axis=2)
    return d2.argmin(axis=1), d2


def plain_lloyd(X, C, steps):
    """Textbook Lloyd iterations in float64: assign, then move each centre to its points' mean."""
    X = np.asarray(X, dtype=float)
    C = np.array(C, dtype=float)
    done = 0
    previous = None
    for _ in range(steps):
        a, _ = brute(X, C)
        if previous is not None and np.array_equal(a, previous):
            break
        for j in range(C.shape[0]):
            if np.any(a == j):
                C[j] = X[a == j].mean(axis=0)
        previous = a
        done += 1
    return C


def blobs(m=3000, d=5, k=6, spread=1.5, seed=0):
    rng = np.random.default_rng(seed)
    centres = rng.uniform(-6, 6, size=(k, d))
    truth = rng.integers(k, size=m)
    X = centres[truth] + spread * rng.standard_normal((m, d))
    labels = truth.copy()
    wrong = rng.random(m) < 0.2
    labels[wrong] = rng.integers(k, size=int(wrong.sum()))
    return X, labels, truth


def check_nearest(X, run):
    a, d2 = brute(X, run.centres)
    got = d2[np.arange(len(a)), run.nearest]
    assert np.all(got - d2.min(axis=1) <= 1e-9 * max(1.0, float(d2.max())))
    assert run.cost == pytest.approx(float(d2.min(axis=1).sum()), rel=1e-10)


@pytest.mark.parametrize("steps", [0, 1, 3, 30])
@pytest.mark.parametrize("spread", [0.3, 1.5, 6.0])  # separated, touching and overlapping clusters
def test_the_steps_match_plain_lloyd_and_the_assignment_is_nearest(steps, spread):
    X, labels, _ = blobs(spread=spread)
    rng = np.random.default_rng(1)
    C0 = X[rng.choice(len(X), 6, replace=False)]
    run = lloyd(X, C0, steps, start=labels)
    assert run.steps <= steps
    assert np.allclose(run.centres, plain_lloyd(X, C0, run.steps), atol=1e-9)
    if run.steps < steps:  # stopped because no point changed centre: a fixed point of Lloyd's map
        assert np.allclose(plain_lloyd(X, run.centres, 1), run.centres, atol=1e-9)
    check_nearest(X, run)


def test_float32_memory_map_is_read_in_place_and_assigned_as_in_float64(tmp_path):
    X, labels, _ = blobs(m=20000, d=40, k=12, spread=4.0, seed=3)
    X = (X + 1e3).astype(np.float32)  # far from the origin: the expansion's cancellation matters
    path = tmp_path / "X.npy"
    np.save(path, X)
    mapped = np.load(path, mmap_mode="r")
    C0 = X[:12].astype(float)
    run = lloyd(mapped, C0, 10, start=labels % 12)
    assert isinstance(mapped, np.memmap) and np.array_equal(np.load(path), X)
    check_nearest(X.astype(float), run)
    assert np.allclose(run.centres, plain_lloyd(X, C0, run.steps), rtol=0, atol=1e-6)


def test_ties_and_repeated_points():
    X = np.array([[0.0, 0.0], [1.0, 0.0], [2.0, 0.0], [1.0, 0.0], [1.0, 0.0]])  # 1.0 is equidistant from 0 and 2
    run = lloyd(X, [[0.0, 0.0], [2.0, 0.0]], 0, start=np.array([1, 1, 0, 0, 1]))
    check_nearest(X, run)
    run = lloyd(np.ones((7, 3)), np.ones((3, 3)), 5)  # every centre on every point
    assert run.cost == 0.0 and set(run.nearest) <= {0, 1, 2}


def test_one_centre_empty_centres_and_unknown_starts():
    X, labels, _ = blobs(m=500, k=3)
    run = lloyd(X, [X.mean(axis=0)], 5)
    assert np.all(run.nearest == 0) and run.cost == pytest.approx(((X - X.mean(axis=0)) ** 2).sum())
    far = np.vstack([X[:3], [[1e3] * X.shape[1]]])  # a centre no point is nearest to stays where it is
    run = lloyd(X, far, 10, start=np.full(len(X), -1))
    assert np.allclose(run.centres[3], 1e3) and np.sum(run.nearest == 3) == 0
    check_nearest(X, run)


def test_the_deadline_stops_between_steps():
    X, labels, _ = blobs()
    run = lloyd(X, X[:6], 50, start=labels, deadline=0.0)
    assert run.stopped and run.steps == 0
    check_nearest(X, run)


def test_predicted_labels_spare_full_distance_rows():
    X, labels, truth = blobs(m=5000, spread=0.3)
    centres = np.array([X[truth == j].mean(axis=0) for j in range(6)])
    run = lloyd(X, centres, 0, start=labels)
    assert run.full_rows < 0.35 * len(X)  # the 20% relabelled points and few more
    check_nearest(X, run)


def test_float32_points_whose_squares_overflow_float32_are_assigned_in_float64():
    rng = np.random.default_rng(2)
    X = np.concatenate([rng.normal(c, 1e18, (200, 3)) for c in (-3e19, 0.0, 3e19)]).astype(np.float32)
    X[0] = 3e38  # its squared norm is beyond float32's range
    labels = np.repeat(np.arange(3), 200)
    run = lloyd(X, X[[1, 250, 450]].astype(float), 5, start=labels)
    check_nearest(X.astype(float), run)
