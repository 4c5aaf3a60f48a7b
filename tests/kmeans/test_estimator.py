"""PredictedLabelsKMeans: the solve's answer in scikit-learn's estimator shape."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.base import clone

import optsolve.kmeans
from optsolve.core.errors import InputError
from optsolve.kmeans.estimator import PredictedLabelsKMeans
from optsolve.kmeans.problems import FAMILIES


def _blobs():
    data = FAMILIES["blobs"].generate(np.random.default_rng(3), m=600, d=3, k=4, alpha=0.2)
    return np.asarray(data["X"]), np.asarray(data["labels"])


def test_fit_gives_the_solve_and_predict_the_nearest_centre():
    X, y = _blobs()
    est = PredictedLabelsKMeans(random_state=1).fit(X, y)
    res = optsolve.kmeans.solve(X, y, seed=1)
    assert np.array_equal(est.cluster_centers_, np.asarray(res.solution["centres"]))
    assert np.array_equal(est.labels_, res.solution["assignment"]) and est.inertia_ == pytest.approx(res.objective)
    assert est.result_.certificate.holds and est.n_features_in_ == 3 and est.n_iter_ >= 1
    new = np.random.default_rng(0).normal(size=(50, 3)) * 5
    distances = ((new[:, None, :] - est.cluster_centers_[None]) ** 2).sum(axis=2)
    assert np.array_equal(est.predict(new), distances.argmin(axis=1))
    assert est.score(new) == pytest.approx(-distances.min(axis=1).sum())
    assert np.array_equal(PredictedLabelsKMeans(random_state=1).fit_predict(X, y), est.labels_)


def test_float32_points_are_clustered_without_a_float64_copy():
    """The estimator takes the command's path: float32 points stay float32, the answer is the same
    clustering as the command's on those points, and the certificate holds."""
    X, y = _blobs()
    X32 = X.astype(np.float32)
    est = PredictedLabelsKMeans(random_state=1).fit(X32, y)
    res = optsolve.kmeans.solve(X32, y, seed=1)
    assert est.result_.stats["dtype"] == "float32" and est.result_.certificate.holds
    assert np.array_equal(est.labels_, res.solution["assignment"])
    distances = ((X32.astype(float)[:, None, :] - est.cluster_centers_[None]) ** 2).sum(axis=2)
    assert np.array_equal(est.predict(X32), distances.argmin(axis=1))


def test_parameters_follow_scikit_learn():
    est = PredictedLabelsKMeans(4, method="labels", refine=False)
    copy = clone(est)
    assert copy.get_params() == est.get_params() and copy.get_params()["n_clusters"] == 4
    X, y = _blobs()
    alone = copy.fit(X, y)
    assert alone.n_iter_ == 0 and alone.result_.settings["refine"] is False
    assert copy.set_params(refine=True).fit(X, y).inertia_ <= alone.inertia_ + 1e-9
    seeded = PredictedLabelsKMeans(random_state=np.random.RandomState(0)).fit(X, y)
    assert seeded.cluster_centers_.shape == (4, 3)


def test_errors_before_and_after_fitting():
    from sklearn.exceptions import NotFittedError

    X, y = _blobs()
    with pytest.raises(NotFittedError):
        PredictedLabelsKMeans().predict(X)
    with pytest.raises(InputError):
        PredictedLabelsKMeans().fit(X, y[:-1])
    with pytest.raises(ValueError, match="features"):
        PredictedLabelsKMeans().fit(X, y).predict(X[:, :2])
