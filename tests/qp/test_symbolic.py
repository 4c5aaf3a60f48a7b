"""The symbolic step (:mod:`optsolve.qp.symbolic`): column counts of the factor against a dense elimination on
the pattern, and against QDLDL's factor."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from optsolve.qp.ldl import QuasiDefinite
from optsolve.qp.symbolic import amd_order, column_counts


def eliminated(K: sp.spmatrix, perm: np.ndarray) -> np.ndarray:
    """Each column's entries in the factor, by eliminating the symmetric pattern of K (in the order perm) as a
    dense boolean matrix: every pair of a column's later rows becomes an entry."""
    F = (abs(K) + abs(K).T).toarray() != 0
    F = F[np.ix_(perm, perm)]
    n = F.shape[0]
    counts = np.zeros(n, dtype=np.int64)
    for j in range(n):
        rows = np.flatnonzero(F[j + 1:, j]) + j + 1
        counts[j] = 1 + rows.size
        F[np.ix_(rows, rows)] = True
    return counts


def random_upper(rng, n, density):
    M = sp.random(n, n, density=density, random_state=rng)
    K = sp.triu(M + M.T + sp.eye(n), format="csc")
    K.sort_indices()
    return K


@pytest.mark.parametrize("seed", range(6))
def test_column_counts_match_a_dense_elimination_in_any_order(seed):
    rng = np.random.default_rng(seed)
    for n, density in ((1, 0.0), (2, 1.0), (7, 0.0), (30, 0.05), (40, 0.15), (60, 0.3)):
        K = random_upper(rng, n, density)
        perm = rng.permutation(n)
        assert np.array_equal(column_counts(K, perm), eliminated(K, perm))
        assert np.array_equal(column_counts(K), eliminated(K, amd_order(K)))


def test_counts_of_a_forest_and_of_a_dense_matrix():
    n = 9
    diagonal = sp.eye(n, format="csc")
    assert np.array_equal(column_counts(diagonal, np.arange(n)), np.ones(n, dtype=np.int64))
    full = sp.triu(np.ones((n, n)), format="csc")
    assert np.array_equal(column_counts(full, np.arange(n)), np.arange(n, 0, -1))
    arrow = sp.lil_matrix((n, n))  # a dense first row: eliminated first it fills everything, last it fills nothing
    arrow[0, :] = 1
    arrow.setdiag(1)
    arrow = arrow.tocsc()
    assert column_counts(arrow, np.arange(n)).sum() == n * (n + 1) // 2
    assert column_counts(arrow, np.r_[1:n, 0]).sum() == 2 * n - 1


def test_counts_in_amd_order_are_qdldls_factor():
    """cvxopt's AMD orders as the qdldl package does: the counted entries are QDLDL's factor's, on a KKT matrix
    of random sparse P and A whose factor fills in."""
    rng = np.random.default_rng(3)
    n, m = 1500, 1000
    M = sp.random(n, n, density=2.0 / n, random_state=rng)
    P = (M @ M.T + sp.eye(n)).tocsc()
    A = sp.random(m, n, density=3.0 / n, random_state=rng, format="csc")
    ldl = QuasiDefinite(P, A, np.ones(m), check=True, shift=1.0)  # check: QDLDL factors it
    counts = column_counts(ldl.K)
    assert counts.sum() - counts.size == ldl.factor_entries()
    assert ldl.factor_entries() > 5 * ldl.K.nnz
