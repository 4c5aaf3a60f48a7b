"""``optsolve kmeans``: k-means with predicted labels (Huang et al., ICLR 2025).

Given points and labels predicted by an oracle with error rate alpha, estimate one centre per
predicted cluster robustly (see :mod:`optsolve.kmeans.estimators`), then assign every point to
its nearest centre. Methods: ``sample-centre`` (default), ``sample-window``, ``sort-window``,
``crdest``, ``labels`` (plain centroids) and ``lloyd`` (scikit-learn's KMeans, k-means++ with
n_init = 10, the reference).
"""

from __future__ import annotations

import time

import numpy as np

from optsolve.core.errors import ParameterError
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.kmeans.problems import SCHEMA, prepare

DEFAULT_METHOD = "sample-centre"
METHODS = ("sample-centre", "sample-window", "sort-window", "crdest", "labels", "lloyd")
ALPHA_GRID = tuple(round(0.05 * i, 2) for i in range(10))  # 0, 0.05, ..., 0.45
CRDEST_GRID = tuple(round(0.02 * i, 2) for i in range(10))  # its kept fraction 1 - 5 alpha: 1, 0.9, ..., 0.1
SELECTION_POINTS = 20000  # auto alpha compares costs on at most this many points (a fixed random subset)
SELECTION_PER_CLUSTER = 1000  # ... of centres estimated from at most this many points of each predicted cluster


def _alpha_option(alpha):
    if alpha in (None, "auto"):
        return "auto"
    try:
        a = float(alpha)
    except (TypeError, ValueError):
        a = -1.0
    if not 0 <= a < 0.5:
        raise ParameterError(f"The '--alpha' option must be 'auto' or a number in [0, 0.5); got {alpha!r}.")
    return a


def cluster_points(kp) -> list:
    """The points of every predicted cluster (float64 copies; None for an empty cluster), gathered once."""
    from optsolve.kmeans.estimators import clusters

    return [np.asarray(kp.X[idx], dtype=float) if idx.size else None for idx in clusters(kp.labels, kp.k)]


def sample_centres(kp, alpha: float, seed) -> tuple[np.ndarray, list]:
    """sample-centre without gathering the clusters: each cluster's start from its samples, then
    the re-centring of all clusters together in passes over X."""
    from optsolve.kmeans.estimators import clusters, keep_count, recentre_all, sample_draws, sample_start

    rng = np.random.default_rng(seed)
    groups = clusters(kp.labels, kp.k)
    live = [i for i, idx in enumerate(groups) if idx.size]
    starts = []
    for i in live:
        idx = groups[i]
        if alpha <= 0 or idx.size < 3:
            starts.append(np.asarray(kp.X[idx], dtype=float).mean(axis=0))
            continue
        omega, cand = sample_draws(idx.size, alpha, kp.k, kp.d, rng)
        starts.append(sample_start(np.asarray(kp.X[idx[omega]], dtype=float), np.asarray(kp.X[idx[cand]], dtype=float),
                                   alpha))
    C = np.array(starts)
    if alpha > 0:
        relabel = np.full(kp.k, -1)
        relabel[live] = np.arange(len(live))
        keep = np.array([keep_count(alpha, groups[i].size) for i in live])
        C = recentre_all(kp.X, relabel[kp.labels], [groups[i] for i in live], C, keep)
    return C, [i for i, idx in enumerate(groups) if idx.size == 0]


def estimate_centres(kp, method: str, alpha: float, seed, parts: list | None = None) -> tuple[np.ndarray, list]:
    """One centre per non-empty predicted cluster (and the empty clusters' labels); ``parts``:
    :func:`cluster_points`, when already gathered."""
    from optsolve.kmeans.estimators import ESTIMATORS

    rng = np.random.default_rng(seed)
    est = ESTIMATORS[method]
    centres, empty = [], []
    for i, P in enumerate(cluster_points(kp) if parts is None else parts):
        if P is None:
            empty.append(i)
            continue
        if method in ("sample-window", "sample-centre"):
            centres.append(est(P, alpha, rng, k=kp.k))
        else:
            centres.append(est(P, alpha, rng))
    return np.array(centres), empty


def solve_problem(problem, *, method: str | None = None, alpha="auto", refine: int = 0, seed: int | None = None,
                  max_iter: int | None = None, time_limit: float | None = None, device: str = "auto",
                  progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.kmeans.problems.SCHEMA`); the certificate is attached.

    ``alpha``: the error rate the estimators trim for, or ``'auto'`` (the grid 0, 0.05, ..., 0.45,
    crdest's 0, 0.02, ..., 0.18: centres estimated from at most 1,000 points of each predicted
    cluster, their cost on at most 20,000 of the points; the lowest is estimated again on
    the whole clusters);
    ``refine``: Lloyd steps (scikit-learn's KMeans from these centres) after the estimate.
    """
    from optsolve.kmeans import certificate
    from optsolve.kmeans.estimators import assign, clusters

    if device == "gpu":
        raise ParameterError("optsolve kmeans runs on the CPU; use '--device cpu' (or auto).")
    method = method or DEFAULT_METHOD
    if method not in METHODS:
        raise ParameterError(f"Unknown method {method!r}; expected one of {sorted(METHODS)}")
    alpha = _alpha_option(alpha)
    if refine is None or refine < 0:
        raise ParameterError(f"The '--refine' option must be a nonnegative integer; got {refine!r}.")
    if max_iter is not None and method != "lloyd":
        raise ParameterError(f"The '--max-iter' option applies to '--method lloyd' (KMeans's iteration limit); "
                             f"{method} is not iterative: use '--refine N' for Lloyd steps after it.")
    if time_limit is not None:
        raise ParameterError("The '--time-limit' option does not apply to optsolve kmeans (its methods run in "
                             "one pass, or scikit-learn's KMeans with '--max-iter').")
    t0 = time.perf_counter()
    kp = prepare(problem)
    seed = 0 if seed is None else int(seed)
    settings = {"alpha": alpha, "refine": int(refine), "seed": seed}
    stats = {"m": kp.m, "d": kp.d, "k": kp.k}
    messages = []
    if method == "lloyd":
        from sklearn.cluster import KMeans

        km = KMeans(n_clusters=kp.k, n_init=10, random_state=seed, max_iter=max_iter or 300).fit(
            np.asarray(kp.X, dtype=float))
        centres, empty, used = km.cluster_centers_, [], None
        stats["lloyd_iterations"] = int(km.n_iter_)
    else:
        grid = None
        if alpha == "auto" and method != "labels":
            grid = CRDEST_GRID if method == "crdest" else ALPHA_GRID
        gathered = method != "sample-centre"  # sample-centre reads the clusters in place
        parts = cluster_points(kp) if gathered else None

        def full(a):
            return estimate_centres(kp, method, a, seed, parts) if gathered else sample_centres(kp, a, seed)

        if grid is None:
            used = 0.0 if method == "labels" else alpha
            centres, empty = full(used)
        else:
            rng = np.random.default_rng(seed + 1)
            sub = rng.choice(kp.m, size=SELECTION_POINTS, replace=False) if kp.m > SELECTION_POINTS else None
            Xs = kp.X if sub is None else np.asarray(kp.X[np.sort(sub)], dtype=float)
            # each alpha of the grid estimated on at most SELECTION_PER_CLUSTER points of every cluster
            small = []
            for idx in clusters(kp.labels, kp.k):
                if idx.size > SELECTION_PER_CLUSTER:
                    idx = idx[np.sort(rng.choice(idx.size, size=SELECTION_PER_CLUSTER, replace=False))]
                small.append(np.asarray(kp.X[idx], dtype=float) if idx.size else None)
            best = None
            tried = []
            for a in grid:
                C, _ = estimate_centres(kp, method, a, seed, small)
                cost = float(assign(Xs, C)[1].sum())
                tried.append({"alpha": a, "cost": cost})
                if best is None or cost < best[0]:
                    best = (cost, a)
            used = best[1]
            centres, empty = full(used)
            stats["alpha_grid"] = tried
        if refine:
            from sklearn.cluster import KMeans

            km = KMeans(n_clusters=centres.shape[0], init=centres, n_init=1, max_iter=int(refine)).fit(
                np.asarray(kp.X, dtype=float))
            centres = km.cluster_centers_
            stats["refine_iterations"] = int(km.n_iter_)
    if empty:
        messages.append(f"Predicted clusters {empty} are empty: their centres are dropped ({centres.shape[0]} centres).")
    assignment, dist = assign(kp.X, centres)
    cost = float(dist.sum())
    settings["alpha_used"] = used
    stats.update({"alpha_used": used, "empty_clusters": empty, "sizes": np.bincount(assignment,
                                                                                     minlength=centres.shape[0])})
    stats["time_s"] = {"solve": time.perf_counter() - t0}
    result = Result("kmeans", method, Status.OPTIMAL, " ".join(messages), problem=problem.info(m=kp.m, d=kp.d, k=kp.k),
                    objective=cost, solution={"centres": centres.tolist(), "assignment": assignment},
                    stats=stats, settings=settings)
    t = time.perf_counter()
    result.attach_certificate(certificate.check(problem, result.solution, method=method, objective=cost,
                                                settings=settings))
    stats["time_s"]["certificate"] = time.perf_counter() - t
    return result


def solve(X, labels, *, k: int | None = None, method: str = DEFAULT_METHOD, progress: Progress = SILENT,
          **options) -> Result:
    """k-means from points ``X`` (m x d) and predicted ``labels``. Bad input raises
    :class:`optsolve.core.errors.InputError`, bad options ``ParameterError``."""
    raw = {"X": X, "labels": labels}
    if k is not None:
        raw["k"] = k
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, progress=progress, **options)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
