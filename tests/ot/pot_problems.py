"""Transport problems that POT's own test suite solves, rebuilt here as ``(name, a, b, C)``.

Each generator re-creates one problem instance that a test in POT (PythonOT/POT, ``test/test_ot.py``,
``test/test_bregman.py``, ``test/test_utils.py``) hands to ``emd``, ``emd2`` or ``sinkhorn``: same
random seeds, grids, weights and costs, written here without POT so that the problems do not change
with POT's helpers. Where a POT test used arrays larger than 500 x 500, or masses that differ, the
comment says what was changed. All arrays are float64 and ``a.sum() == b.sum()`` up to rounding.

These are inputs nobody here designed (see STYLE.md, "Inputs nobody here made"): 1-D histograms whose
optimum is tiny next to max C, a cost of 1e8 off a sparse support, the same cloud on both sides (zero
optimum), zeros in the marginals, integer costs, 1 x 1 and rectangular sizes.
"""

from __future__ import annotations

import numpy as np


# --------------------------------------------------------------------------- helpers (POT's, re-written)

def gauss_1d(n: int, mean: float, std: float) -> np.ndarray:
    """Histogram on the bins 0..n-1 of a Gaussian density, normalised to mass 1 (POT's make_1D_gauss)."""
    t = np.arange(n, dtype=np.float64)
    h = np.exp(-0.5 * ((t - mean) / std) ** 2)
    return h / h.sum()


def sq_dists(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Squared Euclidean distances between the rows of x and of y (POT's default ``ot.dist``)."""
    x = np.asarray(x, dtype=np.float64).reshape(len(x), -1)
    y = np.asarray(y, dtype=np.float64).reshape(len(y), -1)
    # From the differences, not |x|^2 + |y|^2 - 2 x.y: a point's distance to itself is exactly 0.
    return ((x[:, None, :] - y[None, :, :]) ** 2).sum(-1)


def grid_sq_cost(n: int, m: int | None = None) -> np.ndarray:
    """(i - j)^2 on the grids 0..n-1 and 0..m-1, exactly (integers), POT's ``dist0`` for m = n."""
    i = np.arange(n, dtype=np.float64)[:, None]
    j = np.arange(n if m is None else m, dtype=np.float64)[None, :]
    return (i - j) ** 2


def uniform(n: int) -> np.ndarray:
    return np.full(n, 1.0 / n)


# --------------------------------------------------------------------------- the instances

def gauss_1d_500_same_mean():
    # test_ot.py::test_emd2_multi (first target, mean 20): OPT ~ 21 (the target is cut at bin 0) against max C = 499^2.
    n = 500
    return "gauss_1d_500_same_mean", gauss_1d(n, 20, 5), gauss_1d(n, 20, 10), grid_sq_cost(n)


def gauss_1d_500_far():
    # test_ot.py::test_emd2_multi (last target, mean 420): the mass travels 400 bins, OPT ~ 1.6e5.
    n = 500
    return "gauss_1d_500_far", gauss_1d(n, 20, 5), gauss_1d(n, 420, 10), grid_sq_cost(n)


def gauss_1d_euclid_250x300():
    # test_ot.py::test_dual_variables, halved (500 x 600 there: means 300/400 become 150/200) to stay
    # within 500 x 500; Euclidean cost |i - j|, OPT ~ |150 - 200| = 50 (POT checks the closed form).
    n, m = 250, 300
    return ("gauss_1d_euclid_250x300", gauss_1d(n, 150, 5), gauss_1d(m, 200, 10),
            np.sqrt(grid_sq_cost(n, m)))


def gauss_1d_euclid_100():
    # test_ot.py::test_warnings: 100 bins, means 30 and 50, Euclidean cost, OPT ~ 20.
    n = 100
    return "gauss_1d_euclid_100", gauss_1d(n, 30, 5), gauss_1d(n, 50, 10), np.sqrt(grid_sq_cost(n))


def gauss_1d_dist0_100():
    # test_bregman.py::test_sinkhorn_stabilization (and test_convergence_warning): dist0(100), unnormalised.
    n = 100
    return "gauss_1d_dist0_100", gauss_1d(n, 30, 10), gauss_1d(n, 40, 10), grid_sq_cost(n)


def gauss_1d_max_normalised_100():
    # test_bregman.py::test_barycenter: the same two histograms, dist0(100) / max, OPT ~ 100 / 99^2.
    n = 100
    C = grid_sq_cost(n)
    return "gauss_1d_max_normalised_100", gauss_1d(n, 30, 10), gauss_1d(n, 40, 10), C / C.max()


def gauss_1d_median_normalised_100():
    # test_bregman.py::test_stabilized_vs_sinkhorn_multidim (second target): dist0(100) / median.
    n = 100
    C = grid_sq_cost(n)
    return "gauss_1d_median_normalised_100", gauss_1d(n, 20, 5), gauss_1d(n, 30, 4), C / np.median(C)


def same_cloud_100():
    # test_ot.py::test_emd_emd2 (also test_emd_empty, test_bregman.py::test_sinkhorn): x to itself, OPT = 0.
    x = np.random.RandomState(0).randn(100, 2)
    return "same_cloud_100", uniform(100), uniform(100), sq_dists(x, x)


def two_clouds_100():
    # test_ot.py::test_emd_backends (and test_emd2_backends, test_bregman.py::test_sinkhorn_backends).
    rng = np.random.RandomState(0)
    x, y = rng.randn(100, 2), rng.randn(100, 2)
    return "two_clouds_100", uniform(100), uniform(100), sq_dists(x, y)


def two_clouds_12x15():
    # test_ot.py::test_emd2_lazy_returns_sparse_plan: n != m, uniform weights, seed 42.
    rng = np.random.RandomState(42)
    x, y = rng.randn(12, 2), rng.randn(15, 2)
    return "two_clouds_12x15", uniform(12), uniform(15), sq_dists(x, y)


def random_cost_100():
    # test_ot.py::test_emd_sparse_warmstart: a cost with no geometry, U[0, 1) entries, seed 42.
    C = np.random.RandomState(42).rand(100, 100)
    return "random_cost_100", uniform(100), uniform(100), C


def _masked_cost(n: int, m: int, k: int, seed: int) -> np.ndarray:
    """U[0, 1) costs on a support of k random entries per row and per column, 1e8 elsewhere
    (POT's _get_sparse_test_matrices, which builds the dense twin of a sparse cost)."""
    rng = np.random.RandomState(seed)
    C = rng.rand(n, m)
    keep = np.zeros((n, m), dtype=bool)
    for i in range(n):  # the draws in POT's order: rows first, then columns
        keep[i, rng.choice(m, min(k, m), replace=False)] = True
    for j in range(m):
        keep[rng.choice(n, min(k, n), replace=False), j] = True
    return np.where(keep, C, C + 1e8)


def sparse_support_1e8_100():
    # test_ot.py::test_emd_sparse_vs_dense: 100 x 100, k = 2, seed 42; max C ~ 1e8, OPT < 1.
    return "sparse_support_1e8_100", uniform(100), uniform(100), _masked_cost(100, 100, 2, 42)


def sparse_support_1e8_100x150():
    # test_ot.py::test_emd2_sparse_vs_dense: 100 x 150, k = 2, seed 43.
    return "sparse_support_1e8_100x150", uniform(100), uniform(150), _masked_cost(100, 150, 2, 43)


def grid_integer_10x20():
    # test_bregman.py::test_sinkhorn_warmstart: points 0..9 and 0..19, integer costs (i - j)^2.
    return "grid_integer_10x20", uniform(10), uniform(20), grid_sq_cost(10, 20)


def grid_linear_weights_10():
    # test_bregman.py::test_empirical_sinkhorn_divergence: a proportional to 1..10, points 0..9 against
    # 0, 2, ..., 18, integer costs.
    a = np.linspace(1, 10, 10)
    a /= a.sum()
    return "grid_linear_weights_10", a, uniform(10), sq_dists(np.arange(10.0), np.arange(0.0, 20.0, 2.0))


def clean_zeros_100():
    # test_utils.py::test_clean_zeros: half of a and a fifth of b are zero, dist0(100) (POT strips the
    # zeros there; here they stay in, as a solver must handle them).
    a, b = uniform(100), uniform(100)
    a[:50] = 0.0
    b[:20] = 0.0
    return "clean_zeros_100", a / a.sum(), b / b.sum(), grid_sq_cost(100)


def multi_b_first_10():
    # test_bregman.py::test_sinkhorn_multi_b (first column of b): the cloud to itself, b random, seed 0.
    rng = np.random.RandomState(0)
    x = rng.randn(10, 2)
    b = rng.rand(10, 3)
    b = b / b.sum(0, keepdims=True)
    return "multi_b_first_10", uniform(10), b[:, 0].copy(), sq_dists(x, x)


def gluing_first_7x5():
    # test_ot.py::test_north_west_mm_gluing (first of the three plans): random a, b and U[0, 1) costs, seed 0.
    rng = np.random.RandomState(0)
    a = rng.rand(7)
    a /= a.sum()
    bs = [rng.rand(k) for k in (5, 6, 4)]
    Cs = [rng.rand(7, k) for k in (5, 6, 4)]
    return "gluing_first_7x5", a, bs[0] / bs[0].sum(), Cs[0]


def diracs_3():
    # test_ot.py::test_lp_barycenter: the Diracs at bins 0 and 2 with the cost [[0,1,4],[1,0,1],[4,1,0]]
    # (there a barycenter LP; here the OT between the two measures): zeros in a and b, OPT = 4.
    C = np.array([[0.0, 1.0, 4.0], [1.0, 0.0, 1.0], [4.0, 1.0, 0.0]])
    return "diracs_3", np.array([1.0, 0.0, 0.0]), np.array([0.0, 0.0, 1.0]), C


def dirac_1x1():
    # test_ot.py::test_free_support_barycenter: the first step moves the Dirac at -12 onto the one at -1,
    # a 1 x 1 problem of cost 11^2.
    return "dirac_1x1", np.array([1.0]), np.array([1.0]), np.array([[121.0]])


def banded_4():
    # test_ot.py::test_emd2_sparse_vs_dense_gradients: the dense 4 x 4 cost, 0.1 on the diagonal.
    C = 0.1 * np.eye(4) + np.abs(np.subtract.outer(np.arange(4.0), np.arange(4.0)))
    return "banded_4", uniform(4), uniform(4), C


GENERATORS = (
    gauss_1d_500_same_mean, gauss_1d_500_far, gauss_1d_euclid_250x300, gauss_1d_euclid_100,
    gauss_1d_dist0_100, gauss_1d_max_normalised_100, gauss_1d_median_normalised_100,
    same_cloud_100, two_clouds_100, two_clouds_12x15, random_cost_100,
    sparse_support_1e8_100, sparse_support_1e8_100x150, grid_integer_10x20, grid_linear_weights_10,
    clean_zeros_100, multi_b_first_10, gluing_first_7x5, diracs_3, dirac_1x1, banded_4,
)


def all_problems():
    """Every instance, as a list of ``(name, a, b, C)``."""
    return [gen() for gen in GENERATORS]
