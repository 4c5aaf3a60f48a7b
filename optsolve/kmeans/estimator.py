"""k-means with predicted labels as a scikit-learn estimator: ``fit(X, y)`` with ``y`` the labels."""

from __future__ import annotations

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin
from sklearn.utils import check_random_state
from sklearn.utils.validation import check_array, check_is_fitted

from optsolve.core.result import Status
from optsolve.kmeans import LLOYD_STEPS


class PredictedLabelsKMeans(ClusterMixin, BaseEstimator):
    """k-means whose clusters start from predicted labels, with scikit-learn's estimator interface.

    ``fit(X, y)`` runs :func:`optsolve.kmeans.solve` on the points ``X`` and their predicted labels
    ``y`` (which may be wrong for a fraction ``alpha`` of the points); the learned centres then
    assign any points by ``predict``. The certificate and the statistics of the solve are kept in
    ``result_``.

    Parameters
    ----------
    n_clusters : int or None, default=None
        The number of clusters k; None takes ``max(y) + 1``.
    method : str, default="sample-centre"
        The estimator of the clusters' centres (see ``optsolve kmeans --help``; ``"lloyd"`` ignores
        the labels).
    alpha : float or "auto", default="auto"
        The labels' error rate the estimators trim for, in [0, 0.5), or one per cluster chosen by cost.
    refine : bool, default=True
        Lloyd steps after the estimate (they never raise the cost); False keeps the estimate.
    lloyd_steps : int, default=10
        The most Lloyd steps of the refinement.
    random_state : int, RandomState instance or None, default=None
        Seeds the estimators' samples; None uses seed 0, so that fits are repeatable.
    time_limit : float or None, default=None
        Seconds for the whole fit; past it the best centres so far are kept and ``result_.status``
        is ``time_limit``.

    Attributes
    ----------
    cluster_centers_ : ndarray of shape (k, n_features)
        The centres (fewer than k where predicted clusters are empty).
    labels_ : ndarray of shape (n_samples,)
        The nearest centre of every point of ``X``.
    inertia_ : float
        The sum of squared distances of the points of ``X`` to their nearest centre.
    n_iter_ : int
        The Lloyd steps run (those of the refinement, or of ``method="lloyd"``).
    n_features_in_ : int
        The number of features of ``X``.
    result_ : optsolve.core.result.Result
        The solve's result: status, certificate (``result_.certificate.holds``), statistics.

    References
    ----------
    Huang, Feng, Huang, Zhang, Xu and Wang (2025), "New Algorithms for the Learning-Augmented
    k-means Problem", ICLR; Ergun, Feng, Silwal, Woodruff and Zhou (2022), "Learning-Augmented
    k-means Clustering", ICLR.
    """

    def __init__(self, n_clusters: int | None = None, *, method: str = "sample-centre", alpha="auto",
                 refine: bool = True, lloyd_steps: int = LLOYD_STEPS, random_state=None,
                 time_limit: float | None = None):
        self.n_clusters = n_clusters
        self.method = method
        self.alpha = alpha
        self.refine = refine
        self.lloyd_steps = lloyd_steps
        self.random_state = random_state
        self.time_limit = time_limit

    def fit(self, X, y):
        """Fit the centres to the points ``X`` (n_samples x n_features) and their predicted labels ``y``.

        Returns
        -------
        self : PredictedLabelsKMeans
            The fitted estimator.

        Raises
        ------
        optsolve.core.errors.InputError
            ``X`` or ``y`` is not a valid problem (shapes, non-finite values, labels out of range).
        optsolve.core.errors.ParameterError
            A parameter has a value the solver does not accept.
        RuntimeError
            The solve was interrupted or ended without centres.
        """
        from optsolve.kmeans import solve

        if self.random_state is None or isinstance(self.random_state, (int, np.integer)):
            seed = self.random_state
        else:
            seed = int(check_random_state(self.random_state).randint(np.iinfo(np.int32).max))
        res = solve(X, y, k=self.n_clusters, method=self.method, alpha=self.alpha, refine=self.refine,
                    lloyd_steps=self.lloyd_steps, seed=seed, time_limit=self.time_limit)
        if res.status not in (Status.OPTIMAL, Status.TIME_LIMIT) or res.solution is None:
            raise RuntimeError(f"optsolve kmeans ended {res.status.value}: {res.message}")
        self.cluster_centers_ = np.asarray(res.solution["centres"], dtype=float)
        self.labels_ = np.asarray(res.solution["assignment"], dtype=np.int64)
        self.inertia_ = float(res.objective)
        self.n_iter_ = int(res.stats["iterations"])
        self.n_features_in_ = self.cluster_centers_.shape[1]
        self.result_ = res
        return self

    def fit_predict(self, X, y):
        """Fit, and return the nearest centre of every point of ``X``."""
        return self.fit(X, y).labels_

    def _points(self, X) -> np.ndarray:
        from optsolve.kmeans.estimators import assign

        check_is_fitted(self, "cluster_centers_")
        X = check_array(X, dtype=[np.float64, np.float32])  # float32 stays float32: assign reads it in blocks
        if X.shape[1] != self.n_features_in_:
            raise ValueError(f"X has {X.shape[1]} features; the estimator was fitted with {self.n_features_in_}.")
        return assign(X, self.cluster_centers_)

    def predict(self, X):
        """The index of the nearest learned centre of every point of ``X``."""
        return self._points(X)[0]

    def score(self, X, y=None):
        """Minus the sum of squared distances of ``X``'s points to their nearest centre (as KMeans.score)."""
        return -float(self._points(X)[1].sum())
