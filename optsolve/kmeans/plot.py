"""The picture of a kmeans answer for ``optsolve plot --problem``: the clusters on the points' first two principal
directions, with their centres."""

from __future__ import annotations

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.plot import cost_text, plain

CLUSTER_POINTS = 20000  # at most this many points drawn, and used for the principal directions


def draw_answer(ax, doc: dict, problem) -> None:
    """Draw the clusters of the kmeans solution ``doc`` on ``problem``'s points into ``ax``."""
    from optsolve.kmeans.problems import prepare

    X = prepare(problem).X  # possibly a memory map: only the rows drawn are read
    sol = doc["solution"]
    try:
        centres = np.asarray(sol["centres"], dtype=float)
        labels = np.asarray(sol["assignment"], dtype=np.int64)
    except (KeyError, TypeError, ValueError):
        centres, labels = np.zeros(0), np.zeros(0, dtype=np.int64)
    if centres.ndim != 2 or centres.shape[1] != X.shape[1] or labels.shape != (X.shape[0],):
        raise InputError(f"{problem.source}: the solution's centres and assignment do not fit these points.")
    shown = np.sort(np.random.default_rng(0).choice(X.shape[0], CLUSTER_POINTS, replace=False)) \
        if X.shape[0] > CLUSTER_POINTS else np.arange(X.shape[0])
    drawn = np.asarray(X[shown], dtype=float)
    mean = drawn.mean(axis=0)
    if X.shape[1] > 2:  # the first two principal directions of the points drawn
        _, _, vt = np.linalg.svd(drawn - mean, full_matrices=False)
        basis, names = vt[:2].T, ("first principal direction", "second principal direction")
    else:
        basis, names = np.eye(X.shape[1], 2), ("x1", "x2")
    pts, ctr = (drawn - mean) @ basis, (centres - mean) @ basis
    ax.scatter(pts[:, 0], pts[:, 1], c=labels[shown], cmap="tab20", s=6, alpha=0.7, label=f"{shown.size} points")
    ax.scatter(ctr[:, 0], ctr[:, 1], c="black", marker="x", s=120, linewidths=2.5, label=f"{len(ctr)} centres")
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_title(plain(f"k-means clusters ({doc.get('method')}{cost_text(doc)})"), fontsize="medium")
