"""The methods of ``optsolve kmeans``: ``METHODS[name]`` is the method's entry
(:class:`optsolve.core.solve.Entry`): its function of the job, which returns the centres as the
solution's ``centres`` (a k x d array; its ``assignment`` too where it has one, else
:class:`optsolve.kmeans.KMeansSolver`'s finish assigns every point to its nearest centre) in a
:class:`KMeansOutput` (or a plain :class:`~optsolve.core.solve.MethodOutput`); its help line; what it
imports; its tags: ``iterative`` (``--max-iter`` applies).

The estimators (:mod:`optsolve.kmeans.estimators`) give one centre per predicted cluster at an
error rate alpha; with ``alpha='auto'`` each cluster's alpha is chosen on a grid
(:func:`choose_alphas`); the Lloyd steps of the refinement follow (:func:`_refine`). ``lloyd`` is
scikit-learn's KMeans, the reference.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from optsolve.core import memory
from optsolve.core.history import trace
from optsolve.core.result import Status
from optsolve.core.solve import Job, MethodOutput, entry

ALPHA_GRID = tuple(round(0.05 * i, 2) for i in range(10))  # 0, 0.05, ..., 0.45
# kmeans's methods run in one pass: `--history` records the cost of the estimate and, where it is
# refined, after the Lloyd steps (iteration = Lloyd iterations).
KMEANS_MEASURE = "k-means cost (sum of squared distances to the nearest centre)"
CRDEST_GRID = tuple(round(0.02 * i, 2) for i in range(10))  # its kept fraction 1 - 5 alpha: 1, 0.9, ..., 0.1
SELECTION_POINTS = 20000  # auto alpha compares costs on at most this many points (a fixed random subset)
SELECTION_PER_CLUSTER = 1000  # ... of centres estimated from at most this many points of each predicted cluster
MAX_SWEEPS = 3  # sweeps over the clusters choosing each one's alpha
LLOYD_STARTS = 10  # k-means++ starts of the lloyd method (scikit-learn's n_init)


@dataclass
class KMeansOutput(MethodOutput):
    """A kmeans method's output: ``empty``, the predicted clusters left without a centre (their centres
    dropped); ``alpha_used``, the error rate its estimator trimmed for (per cluster under ``alpha='auto'``);
    ``cut_short``, what the time limit cut short, in words (the finish then reports ``time_limit``)."""

    empty: list = field(default_factory=list)
    alpha_used: object = None
    cut_short: list = field(default_factory=list)


def cluster_points(kp) -> list:
    """The points of every predicted cluster (float64 copies; None for an empty cluster), gathered once."""
    from optsolve.kmeans.estimators import clusters

    return [np.asarray(kp.X[idx], dtype=float) if idx.size else None for idx in clusters(kp.labels, kp.k)]


def _per_cluster(alpha, k: int) -> np.ndarray:
    return np.full(k, float(alpha)) if np.ndim(alpha) == 0 else np.asarray(alpha, dtype=float)


def centre_of_label(k: int, live) -> np.ndarray:
    """For each of the k predicted labels, the index of its centre among those of the ``live`` labels (-1: none)."""
    out = np.full(k, -1)
    out[live] = np.arange(len(live))
    return out


def sample_centres(kp, alpha, seed) -> tuple[np.ndarray, list]:
    """sample-centre without gathering the clusters: each cluster's start from its samples, then
    the re-centring of all clusters together in passes over X. ``alpha``: one value, or one per
    predicted cluster."""
    from optsolve.kmeans.estimators import clusters, keep_count, recentre_all, sample_draws, sample_start

    alphas = _per_cluster(alpha, kp.k)
    groups = clusters(kp.labels, kp.k)
    live = [i for i, idx in enumerate(groups) if idx.size]
    starts = []
    for i in live:
        idx = groups[i]
        if alphas[i] <= 0 or idx.size < 3:
            starts.append(np.asarray(kp.X[idx], dtype=float).mean(axis=0))
            continue
        omega, cand = sample_draws(idx.size, alphas[i], kp.k, kp.d, np.random.default_rng([seed, i]))
        starts.append(sample_start(np.asarray(kp.X[idx[omega]], dtype=float), np.asarray(kp.X[idx[cand]], dtype=float),
                                   alphas[i]))
    C = np.array(starts)
    if np.any(alphas[live] > 0):
        keep = np.array([keep_count(alphas[i], groups[i].size) for i in live])
        C = recentre_all(kp.X, centre_of_label(kp.k, live)[kp.labels], [groups[i] for i in live], C, keep)
    return C, [i for i, idx in enumerate(groups) if idx.size == 0]


def estimate_centres(kp, method: str, alpha, seed, parts: list | None = None, *, deadline: float | None = None,
                     cut: list | None = None) -> tuple[np.ndarray, list]:
    """One centre per non-empty predicted cluster (and the empty clusters' labels); ``alpha``: one
    value, or one per predicted cluster; ``parts``: :func:`cluster_points`, when already gathered.
    Once ``time.perf_counter()`` passes ``deadline``, the remaining clusters get their plain
    centroid (one pass over their points) and their labels are appended to ``cut`` (for ``labels``
    the centroid is the answer: nothing is cut)."""
    from optsolve.kmeans.estimators import ESTIMATORS

    alphas = _per_cluster(alpha, kp.k)
    est = ESTIMATORS[method]
    centres, empty = [], []
    for i, P in enumerate(cluster_points(kp) if parts is None else parts):
        if P is None:
            empty.append(i)
            continue
        rng = np.random.default_rng([seed, i])  # each cluster's own stream: its estimate depends on its alpha only
        if deadline is not None and method != "labels" and time.perf_counter() >= deadline:
            centres.append(P.mean(axis=0))
            if cut is not None:
                cut.append(i)
        elif method in ("sample-window", "sample-centre"):
            centres.append(est(P, alphas[i], rng, k=kp.k))
        else:
            centres.append(est(P, alphas[i], rng))
    return np.array(centres), empty


def choose_alphas(X: np.ndarray, candidates: list, grid) -> tuple[np.ndarray, float]:
    """Per predicted cluster, the alpha of the grid whose centre gives the lowest cost on the
    points X: from the grid value of lowest cost for all clusters, one cluster's centre at a
    time is replaced by its centre at another grid value when that lowers the cost, in sweeps
    over the clusters until none does (at most MAX_SWEEPS). ``candidates[g]``: the centres (one
    per non-empty cluster) at ``grid[g]``. Returns (the alpha index of each centre, its cost, the
    cost of each grid value for all clusters)."""
    mu = X.mean(axis=0)  # shifted points and centres: ||x||^2 - 2 x'c + ||c||^2 cancels far from the origin
    X = X - mu
    candidates = [C - mu for C in candidates]
    xx = np.einsum("ij,ij->i", X, X)

    # grid x L x n: one row per centre, its distances to all the points contiguous
    D = np.empty((len(candidates), candidates[0].shape[0], X.shape[0]))
    for Dg, C in zip(D, candidates):
        np.matmul(C, -2.0 * X.T, out=Dg)
        Dg += (C * C).sum(axis=1)[:, None]
        Dg += xx[None, :]
        np.maximum(Dg, 0.0, out=Dg)
    costs = [float(Dg.min(axis=0).sum()) for Dg in D]
    g0 = int(np.argmin(costs))
    choice = np.full(candidates[0].shape[0], g0)
    cur = D[g0].copy()
    best = costs[g0]
    L, n = cur.shape
    cols = np.arange(n)

    def nearest_two(idx):  # for the points idx: their nearest centre, its distance, the second's index and distance
        sub = cur[:, idx]
        r = np.arange(idx.size)
        a1 = np.argmin(sub, axis=0)
        m1 = sub[a1, r]
        sub[a1, r] = np.inf
        a2 = np.argmin(sub, axis=0) if L > 1 else np.full(idx.size, -1)  # -1: no second centre
        m2 = sub[a2, r] if L > 1 else np.full(idx.size, np.inf)
        return a1, m1, a2, m2

    a1, m1, a2, m2 = nearest_two(cols)

    def replace(i, row):
        """Centre i's distances become ``row``: each point's two nearest updated, read again from the
        table only where the second nearest is no longer known (its first or second got farther)."""
        old_m2 = m2.copy()
        cur[i] = row
        first, second = a1 == i, a2 == i
        again = (first | second) & (row > old_m2)
        stay = first & ~again
        m1[stay] = row[stay]
        up = second & ~again & (row < m1)  # the second becomes the first
        a2[up], m2[up], a1[up], m1[up] = a1[up], m1[up], i, row[up]
        keep = second & ~again & ~up
        m2[keep] = row[keep]
        other = ~first & ~second
        closer = other & (row < m1)
        a2[closer], m2[closer], a1[closer], m1[closer] = a1[closer], m1[closer], i, row[closer]
        between = other & ~closer & (row < m2)
        a2[between], m2[between] = i, row[between]
        idx = np.flatnonzero(again)
        if idx.size:
            a1[idx], m1[idx], a2[idx], m2[idx] = nearest_two(idx)

    for _ in range(MAX_SWEEPS):
        changed = False
        for i in range(L):
            others = np.where(a1 == i, m2, m1)  # the nearest of the other centres
            trial = np.minimum(others[None, :], D[:, i, :]).sum(axis=1)
            g = int(np.argmin(trial))
            if trial[g] < best * (1 - 1e-12):
                best, choice[i], changed = float(trial[g]), g, True
                replace(i, D[g, i])
        if not changed:
            break
    return choice, best, costs


def _late(job: Job) -> bool:
    return job.deadline.expired()


def _lloyd(job: Job) -> MethodOutput:
    """scikit-learn's KMeans (k-means++, ``LLOYD_STARTS`` starts); under a time limit the starts run one at a
    time (:func:`optsolve.kmeans.estimators.lloyd_restarts`), the cheapest kept."""
    from optsolve.kmeans.estimators import lloyd_restarts

    kp, seed, max_iter = job.data, job.settings["seed"], job.context["max_iter"]
    stats, cut = {}, []
    if job.deadline.at is None:
        from sklearn.cluster import KMeans

        memory.require(job.problem.source, f"lloyd: scikit-learn's float64 copy of the points ({kp.m} x {kp.d})",
                       8.0 * kp.m * kp.d)
        km = KMeans(n_clusters=kp.k, n_init=LLOYD_STARTS, random_state=seed, max_iter=max_iter or 300).fit(
            np.asarray(kp.X, dtype=float))
        centres, steps = km.cluster_centers_, int(km.n_iter_)
    else:
        centres, steps, starts, stopped = lloyd_restarts(kp.X, kp.k, seed, max_iter or 300, job.deadline.at,
                                                         LLOYD_STARTS)
        stats["lloyd_starts"] = starts
        if stopped:
            cut.append(f"{starts} of the {LLOYD_STARTS} k-means++ starts run, the last cut short (the cheapest kept)")
    out = KMeansOutput(Status.OPTIMAL, None, iterations=steps, stats=stats, cut_short=cut)
    _refine(job, centres, out, None, 0)  # every point to its nearest centre
    return out


def _estimator(method: str):
    """``METHODS[method]``: the estimator's centres (over the alpha grid with ``alpha='auto'``), then the Lloyd
    steps of the refinement."""

    def solve_with(job: Job) -> MethodOutput:
        cut = []
        centres, empty, used, stats, messages = _estimate(job, method, cut)
        out = KMeansOutput(Status.OPTIMAL, None, " ".join(messages), iterations=0, stats=stats, empty=empty,
                           alpha_used=used, cut_short=cut)
        _refine(job, centres, out, empty, job.context["allowed"])
        return out

    return solve_with


def _estimate(job: Job, method: str, timed_out: list):
    """The estimator's centres, the empty clusters' labels, the alpha used, stats and messages; what the time
    limit cut short is added to ``timed_out``."""
    from optsolve.kmeans.estimators import assign, clusters

    kp, alpha, seed = job.data, job.settings["alpha"], job.settings["seed"]
    stats, messages = {}, []
    grid = None
    if alpha == "auto" and method != "labels":
        grid = CRDEST_GRID if method == "crdest" else ALPHA_GRID
    gathered = method != "sample-centre"  # sample-centre reads the clusters in place
    if gathered:
        memory.require(job.problem.source, f"{method}: the predicted clusters gathered as float64 ({kp.m} x {kp.d})",
                       8.0 * kp.m * kp.d)
    parts = cluster_points(kp) if gathered else None
    cut = []

    def full(a):
        if gathered:
            return estimate_centres(kp, method, a, seed, parts, deadline=job.deadline.at, cut=cut)
        return sample_centres(kp, a, seed)

    if grid is None:
        used = 0.0 if method == "labels" else alpha
        centres, empty = full(used)
    else:
        rng = np.random.default_rng(seed + 1)
        sub = rng.choice(kp.m, size=SELECTION_POINTS, replace=False) if kp.m > SELECTION_POINTS else None
        Xs = kp.X if sub is None else np.asarray(kp.X[np.sort(sub)], dtype=float)
        live_labels = np.flatnonzero(np.bincount(kp.labels, minlength=kp.k))
        # each alpha of the grid estimated on at most SELECTION_PER_CLUSTER points of every cluster
        small = []
        for idx in clusters(kp.labels, kp.k):
            if idx.size > SELECTION_PER_CLUSTER:
                idx = idx[np.sort(rng.choice(idx.size, size=SELECTION_PER_CLUSTER, replace=False))]
            small.append(np.asarray(kp.X[idx], dtype=float) if idx.size else None)
        memory.require(job.problem.source, f"choosing alpha: {len(grid) + 2} tables of {Xs.shape[0]} points x "
                       f"{len(live_labels)} centres (k = {kp.k})",
                       8.0 * Xs.shape[0] * len(live_labels) * (len(grid) + 2))
        candidates = []
        for a in grid:  # the first value, 0, is the plain centroids: always done
            if candidates and _late(job):
                timed_out.append(f"alpha chosen from the first {len(candidates)} values of the grid")
                grid = grid[:len(candidates)]
                break
            candidates.append(estimate_centres(kp, method, a, seed, small)[0])
        choice, cost, costs = choose_alphas(np.asarray(Xs, dtype=float), candidates, grid)
        live = [i for i, P in enumerate(small) if P is not None]
        per_cluster = np.zeros(kp.k)
        per_cluster[live] = np.asarray(grid)[choice]
        used = float(per_cluster[live].max())
        chosen = np.array([candidates[g][j] for j, g in enumerate(choice)])
        sizes = np.bincount(kp.labels, minlength=kp.k)
        # without Lloyd steps to follow, the subsampled clusters are estimated again on all their points
        # (the steps start from the samples' centres instead, and read every point themselves)
        redo = np.array([small[i].shape[0] < sizes[i] and not job.context["allowed"] for i in live], dtype=bool)
        centres, empty = chosen, [i for i, P in enumerate(small) if P is None]
        if redo.any() and _late(job):
            timed_out.append("the subsampled clusters' centres kept (not estimated again on all their points)")
        elif redo.any():  # the subsampled clusters estimated again on all their points
            again = full(per_cluster)[0]
            late_rows = np.isin(live, cut)  # clusters the deadline reached keep their sample's centre
            again[~redo | late_rows] = chosen[~redo | late_rows]
            if cut:
                timed_out.append(f"predicted clusters {cut} keep the centre estimated on their sample")
                cut.clear()
            if float(assign(Xs, again)[1].sum()) <= cost:
                centres = again
            else:
                messages.append("The centres estimated on the whole clusters cost more on the selection's "
                                "points than those estimated on their samples: the latter are kept.")
        stats["alpha_grid"] = [{"alpha": a, "cost": c} for a, c in zip(grid, costs)]
        stats["alpha_per_cluster"] = [None if small[i] is None else float(per_cluster[i]) for i in range(kp.k)]
        stats["selection_cost"] = cost
    if cut:
        timed_out.append(f"predicted clusters {cut} given their plain centroid")
    return centres, empty, used, stats, messages


def _refine(job: Job, centres: np.ndarray, out: KMeansOutput, empty: list | None, allowed: int) -> None:
    """At most ``allowed`` Lloyd steps from ``centres`` (their count in ``out.iterations``),
    the predicted labels tried first (:func:`optsolve.kmeans.lloyd.lloyd`); ``empty``: the predicted
    clusters without a centre (None: the centres are not the predicted clusters'). Sets the solution
    (centres, every point's nearest) and the objective; ``allowed`` = 0: the assignment alone."""
    from optsolve.kmeans.lloyd import lloyd

    kp = job.data
    if allowed and _late(job):
        out.cut_short.append("no Lloyd step of the refinement run")
        allowed = 0
    start = None
    if empty == []:
        start = kp.labels
    elif empty is not None:  # the predicted labels as indices of the centres kept
        start = centre_of_label(kp.k, np.setdiff1d(np.arange(kp.k), empty))[kp.labels]
    try:
        run = lloyd(kp.X, centres, allowed, start=start, deadline=job.deadline.at, threads=job.context["workers"])
    except KeyboardInterrupt:  # Ctrl-C or a signal (optsolve.core.signals): the estimate is the iterate
        out.status = Status.INTERRUPTED
        out.add_message("Interrupted during the Lloyd steps of the refinement: the centres are the estimate's."
                        if allowed else "Interrupted during the assignment of the points to the centres.")
        out.solution = {"centres": centres}
        return
    if allowed:
        trace(0, run.start_cost, measure=KMEANS_MEASURE, stage="estimate")
        out.iterations = run.steps
    out.stats["distance_rows"] = run.full_rows
    if run.stopped:
        out.cut_short.append(f"{run.steps} of the {allowed} Lloyd steps of the refinement run")
    out.solution = {"centres": run.centres, "assignment": run.nearest}
    out.objective = run.cost


METHODS = {
    "sample-centre": entry(_estimator("sample-centre"), "per predicted cluster, the best of a few sampled centres by "
                           "trimmed cost, then the mean of the (1 - alpha) nearest points (the default)"),
    "sample-window": entry(_estimator("sample-window"), "per coordinate, the best window of (1 - alpha) of a sorted "
                           "subsample, then the mean of the cluster's values in its range (linear time)"),
    "sort-window": entry(_estimator("sort-window"), "Nguyen et al. 2023 (sorts every coordinate)"),
    "crdest": entry(_estimator("crdest"), "Ergun et al. 2022"),
    "labels": entry(_estimator("labels"), "the plain centroids of the predicted labels"),
    "lloyd": entry(_lloyd, "scikit-learn's KMeans (k-means++, n_init = 10), the reference", tags=("iterative",),
                   imports=("sklearn.cluster",)),
}
