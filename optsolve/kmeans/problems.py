"""Problem files of ``optsolve kmeans`` and generators of its benchmark families.

Learning-augmented k-means (Huang et al., ICLR 2025): points ``X`` (m x d) and predicted
labels ``labels`` (m ints in [0, k)) from an oracle with error rate ``alpha``. Keys: ``X``, or
``X_path`` (a ``.npy`` file, relative to the problem file, memory-mapped, or a ``.npz`` archive
holding the array ``X`` or a single array, read within the memory budget); ``d`` >= 1; ``labels``; optional ``k`` (default max(labels) + 1), ``alpha`` (the
oracle's error rate, in [0, 1/2)), ``realised_alpha`` (what a generator measured) and
``family``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from optsolve.core.generate import Family, Param
from optsolve.core.problem import Field, Problem, Schema, one_of

CHUNK = 65536  # rows per block in passes over X


def _labels_rule(problem: Problem) -> None:
    labels = problem["labels"]
    if labels.size == 0:
        raise problem.error("array 'labels' is empty; expected one predicted label per point.")
    k = int(problem["k"]) if "k" in problem else int(labels.max()) + 1
    if "k" in problem and (problem["k"] != k or k < 1):
        raise problem.error(f"key 'k' is {problem['k']:g}; expected a positive integer.")
    if k > labels.size:  # before k is used as a size or compared with the int64 labels
        raise problem.error(f"k = {k:.6g} exceeds the number of points m = {labels.size}; expected 1 <= k <= m.")
    bad = np.flatnonzero(labels >= k)
    if bad.size:
        raise problem.error(f"array 'labels' has label {int(labels[bad[0]])} at index {int(bad[0])} ({bad.size} labels "
                            f">= k in all); expected labels in [0, {k}).")
    if "alpha" in problem and not 0 <= problem["alpha"] < 0.5:
        raise problem.error(f"key 'alpha' is {problem['alpha']:.6g}; expected an error rate in [0, 0.5).")


SCHEMA = Schema(
    name="kmeans",
    fields=(
        Field("X", shape=("m", "d"), required=False, float32=True, doc="points, m x d (float32 stays float32)"),
        Field("X_path", kind="string", required=False,
              doc="a .npy file of the points (relative to the problem file), memory-mapped"),
        Field("labels", shape=("m",), dtype="int", nonneg=True, doc="predicted label of every point"),
        Field("k", kind="scalar", required=False, doc="number of clusters (default: max(labels) + 1)"),
        Field("alpha", kind="scalar", required=False, doc="the oracle's error rate, in [0, 1/2)"),
        Field("realised_alpha", kind="scalar", required=False, doc="the error rate a generator measured"),
        Field("family", kind="string", required=False, doc="the generator family it belongs to"),
    ),
    rules=(one_of(("X",), ("X_path",)), _labels_rule),
)


@dataclass
class KMeansProblem:
    X: np.ndarray  # m x d, float (a read-only memory map for X_path)
    labels: np.ndarray
    k: int
    alpha: float | None

    @property
    def m(self) -> int:
        return self.X.shape[0]

    @property
    def d(self) -> int:
        return self.X.shape[1]


def _read_archive(problem: Problem, path: str) -> np.ndarray:
    """The points of a .npz archive named by X_path: its array 'X', or its only array (declared
    sizes checked against the memory budget as a problem file's)."""
    from optsolve.core.errors import InputError
    from optsolve.core.files import read_raw

    name = problem["X_path"]
    try:
        arrays, _ = read_raw(path)
    except InputError as exc:
        raise problem.error(f"'X_path' names {name!r}, which cannot be read: {exc}") from None
    if "X" in arrays:
        return arrays["X"]
    if len(arrays) == 1:
        return next(iter(arrays.values()))
    raise problem.error(f"'X_path' names the archive {name!r}, which holds {sorted(arrays) or 'no arrays'}; expected "
                        "an array 'X' or a single array.")


def _load_points(problem: Problem) -> np.ndarray:
    name = path = problem["X_path"]
    if not os.path.isabs(path) and problem.path not in (None, "-"):
        path = os.path.join(os.path.dirname(os.path.abspath(problem.path)), path)
    if os.path.isdir(path):
        raise problem.error(f"'X_path' names {name!r}, which is a directory; expected a .npy or .npz file.")
    if not os.path.exists(path):
        raise problem.error(f"'X_path' names {name!r}, which does not exist.")
    if not os.path.isfile(path):  # a device or a pipe could be endless or block
        raise problem.error(f"'X_path' names {name!r}, which is not a regular file; expected a .npy or .npz file.")
    try:
        with open(path, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise problem.error(f"'X_path' names {name!r}, which cannot be read ({exc.strerror}).") from None
    if magic.startswith(b"PK"):  # a zip archive: .npz
        X = _read_archive(problem, path)
    elif magic == b"\x93NUMPY":
        try:
            X = np.load(path, mmap_mode="r", allow_pickle=False)
        except (OSError, ValueError, EOFError) as exc:
            raise problem.error(f"'X_path' names {name!r}, which is not a readable .npy array ({exc}).") from None
    else:
        raise problem.error(f"'X_path' names {name!r}, which is neither a .npy array nor a .npz archive (it "
                            f"starts with {magic!r}).")
    if not isinstance(X, np.ndarray) or X.ndim != 2 or X.dtype.kind not in "fiu":
        shape, dtype = getattr(X, "shape", None), getattr(X, "dtype", type(X).__name__)
        raise problem.error(f"'X_path' holds an array of shape {shape} and dtype {dtype}; expected a 2-D numeric "
                            "array (m x d).")
    labels = problem["labels"]
    if X.shape[0] != labels.shape[0]:
        raise problem.error(f"'X_path' holds {X.shape[0]} points but 'labels' has {labels.shape[0]} entries.")
    _check_points(problem, "X_path", X)
    return X


def largest_coordinate(m: int, d: int) -> float:
    """The largest |coordinate| of a point or centre whose squared distances, summed over m points
    of d coordinates, stay finite (with a margin of 16 for the differences and the rounding)."""
    return float(np.sqrt(np.finfo(float).max / (16.0 * max(1, m) * max(1, d))))


def _check_points(problem: Problem, name: str, X) -> None:
    """Refuse non-finite or overflowing coordinates, a block of rows at a time in X's own dtype (the
    block that fails is read again in float64 to say where)."""
    most = largest_coordinate(X.shape[0], X.shape[1])
    for start in range(0, X.shape[0], CHUNK):
        block = X[start:start + CHUNK]
        if block.dtype.kind != "f":  # integers: |min| of a signed type overflows in its own type
            block = np.asarray(block, dtype=float)
        # NaN, inf or too large: say where (max and min propagate NaN, without an |x| temporary)
        if block.size and not max(float(block.max()), -float(block.min())) <= most:
            block = np.asarray(block, dtype=float)
            if not np.isfinite(block).all():
                r, c = np.argwhere(~np.isfinite(block))[0]
                raise problem.error(f"{name!r} array has {block[r, c]} at index ({start + int(r)}, {int(c)}); "
                                    "expected finite values.")
            _check_magnitude(problem, name, block, start, X.shape)


def _check_magnitude(problem: Problem, name: str, block: np.ndarray, start: int, shape: tuple) -> None:
    """Refuse coordinates whose squared distances could overflow in a sum over all the points
    (the cost, and every comparison made with it, would be inf or NaN)."""
    most = largest_coordinate(shape[0], shape[1])
    if block.size and float(np.abs(block).max()) > most:
        r, c = np.argwhere(np.abs(block) > most)[0]
        raise problem.error(f"{'array' if name == 'X' else 'the'} {name!r} {'' if name == 'X' else 'array '}has "
                            f"{block[r, c]:.6g} at index ({start + int(r)}, {int(c)}); expected |values| <= {most:.3g} "
                            "(k-means sums squared distances over all the points: larger values overflow).")


def prepare(problem: Problem) -> KMeansProblem:
    """The points (read where X_path names them, and checked, once per problem), labels, k and alpha."""
    labels = np.asarray(problem["labels"], dtype=np.int64)
    k = int(problem["k"]) if "k" in problem else int(labels.max()) + 1
    X = getattr(problem, "_points", None)
    if X is None and "X" in problem:
        X = problem["X"]
        if X.shape[0] != labels.shape[0]:
            raise problem.error(f"array 'X' has {X.shape[0]} points but 'labels' has {labels.shape[0]} entries.")
        _check_points(problem, "X", X)
        problem._points = X
    elif X is None:
        X = problem._points = _load_points(problem)
    if X.shape[1] == 0:
        raise problem.error(f"array {'X' if 'X' in problem else 'X_path'!r} has shape ({X.shape[0]}, 0): points of "
                            "zero dimensions; expected d >= 1 coordinates per point.")
    alpha = float(problem["alpha"]) if "alpha" in problem else None
    return KMeansProblem(X, labels, k, alpha)


# --------------------------------------------------------------------------- generators


def corrupt(X, labels, k: int, alpha: float, scheme: str, rng) -> np.ndarray:
    """Labels with an alpha fraction of each cluster changed to a different label: ``near-mean``
    (the floor(alpha |C|) points closest to the cluster mean; Nguyen et al. 2023) or ``random``
    (alpha |C| random points)."""
    out = labels.copy()
    for c in range(k):
        idx = np.flatnonzero(labels == c)
        count = int(np.floor(alpha * idx.size))
        if count == 0 or k < 2:
            continue
        if scheme == "near-mean":
            dist = ((X[idx] - X[idx].mean(axis=0)) ** 2).sum(axis=1)
            chosen = idx[np.argsort(dist, kind="stable")[:count]]
        else:
            chosen = rng.choice(idx, size=count, replace=False)
        other = rng.integers(0, k - 1, size=count)
        out[chosen] = np.where(other >= c, other + 1, other)  # a different label, uniform over the others
    return out


def realised_alpha(truth, predicted, k: int) -> float:
    """The smallest alpha with |P_i n C_i| >= (1 - alpha) max(|P_i|, |C_i|) for every cluster i."""
    worst = 0.0
    for i in range(k):
        p, c = predicted == i, truth == i
        big = max(int(p.sum()), int(c.sum()))
        if big:
            worst = max(worst, 1.0 - int((p & c).sum()) / big)
    return worst


def _dataset(name: str):
    from sklearn import datasets

    loader = {"digits": datasets.load_digits, "wine": datasets.load_wine,
              "breast_cancer": datasets.load_breast_cancer, "iris": datasets.load_iris}[name]
    data = loader()
    k = {"digits": 10, "wine": 3, "breast_cancer": 2, "iris": 3}[name]
    return np.asarray(data.data, dtype=float), k


def _labelled(X, k, alpha, scheme, rng, family, seed):
    from sklearn.cluster import KMeans

    truth = KMeans(n_clusters=k, n_init=10, random_state=seed).fit(X).labels_.astype(np.int64)
    labels = corrupt(X, truth, k, alpha, scheme, rng)
    return {"X": X, "labels": labels, "k": k, "alpha": float(alpha),
            "realised_alpha": realised_alpha(truth, labels, k), "family": family}


def _real(name):
    def generate(rng, alpha=0.2, scheme="near-mean"):
        X, k = _dataset(name)
        return _labelled(X, k, alpha, scheme, rng, name, int(rng.integers(2**31)))
    return generate


def gen_blobs(rng, m=10000, d=10, k=10, alpha=0.2, scheme="near-mean", spread=1.0):
    from sklearn.datasets import make_blobs

    seed = int(rng.integers(2**31))
    X, _ = make_blobs(n_samples=m, n_features=d, centers=k, cluster_std=spread, random_state=seed)
    return _labelled(X, k, alpha, scheme, rng, "blobs", seed)


def _blobs_bytes(m, d, k, **_):
    """Peak bytes of gen_blobs: the points and KMeans' copies of them, its distances to k centres."""
    return 40.0 * m * d + 16.0 * m * k + 64.0 * m


_CORRUPTION = (Param("alpha", float, 0.2, "fraction of each cluster relabelled"),
               Param("scheme", ("near-mean", "random"), "near-mean", "which points are relabelled"))

FAMILIES = {
    **{name: Family(name, f"scikit-learn's {name} data, labels from KMeans(n_init=10) then corrupted", _real(name),
                    _CORRUPTION) for name in ("digits", "wine", "breast_cancer", "iris")},
    "blobs": Family("blobs", "make_blobs, labels from KMeans(n_init=10) then corrupted", gen_blobs,
                    (Param("m", int, 10000, "points"), Param("d", int, 10, "dimensions"), Param("k", int, 10, "clusters"),
                     Param("spread", float, 1.0, "cluster standard deviation")) + _CORRUPTION, _blobs_bytes),
}
