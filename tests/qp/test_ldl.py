"""The quasi-definite KKT factorisation (optsolve.qp.ldl) against scipy's sparse solver."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from optsolve.qp.ldl import NotQuasiDefinite, QuasiDefinite


def kkt(H, B, d):
    return sp.bmat([[H, B.T], [B, sp.diags(-d)]], format="csc")


@pytest.mark.parametrize("n, m", [(1, 0), (1, 1), (30, 0), (30, 45), (60, 20)])
def test_solves_and_refactors_like_a_direct_solve(n, m):
    rng = np.random.default_rng(n + m)
    M = sp.random(n, n, 0.2, random_state=rng)
    H = (M @ M.T + 1e-6 * sp.eye(n)).tocsc()
    B = sp.random(m, n, 0.3, random_state=rng, format="csc")
    d = rng.random(m) + 0.1
    f = QuasiDefinite(H, B if m else None, d, check=True)
    b = rng.standard_normal(n + m)
    K = kkt(H, B, d) if m else H
    np.testing.assert_allclose(K @ f.solve(b), b, atol=1e-8)
    d2, h2 = rng.random(m) * 100 + 1e-3, H.diagonal() + rng.random(n)
    f.update(d2, h_diagonal=h2, check=True)
    H2 = H + sp.diags(h2 - H.diagonal())
    K2 = kkt(H2, B, d2) if m else H2.tocsc()
    np.testing.assert_allclose(f.solve(b), spla.spsolve(K2, b), rtol=1e-7, atol=1e-9)
    assert f.factorisations == 2


def test_inertia_refuses_an_indefinite_h():
    n = 10
    H = sp.kron(sp.eye(n // 2), sp.csc_matrix([[1.5, 2.0], [2.0, 1.5]]), format="csc")  # eigenvalues 3.5, -0.5
    with pytest.raises(NotQuasiDefinite) as info:
        QuasiDefinite(H, None, np.zeros(0), check=True)
    assert info.value.positive == n // 2
    # with B the pivots' signs are those of -D and of the Schur complement H + B' D^-1 B (here H + I / 0.3,
    # positive definite): the inertia of a KKT matrix does not judge H alone, so P is judged alone
    QuasiDefinite(H, sp.eye(n, format="csc"), np.full(n, 0.3), check=True)
    with pytest.raises(NotQuasiDefinite):
        QuasiDefinite(H, sp.eye(n, format="csc"), np.full(n, 3.0), check=True)  # H + I / 3: still indefinite
    b = np.arange(1.0, n + 1)
    np.testing.assert_allclose(H @ QuasiDefinite(H, None, np.zeros(0)).solve(b), b)  # not asked: not judged
    QuasiDefinite(H + 0.51 * sp.eye(n), None, np.zeros(0), check=True)  # shifted past -0.5: positive definite


def test_entries_beyond_float64_are_not_called_non_convex():
    H = sp.csc_matrix(np.full((2, 2), 1e308)) + 1e308 * sp.eye(2)  # the diagonal overflows to inf
    with pytest.raises(RuntimeError, match="float64") as info:
        QuasiDefinite(H, None, np.zeros(0), check=True)
    assert not isinstance(info.value, NotQuasiDefinite)


BACKENDS = ["cholmod", "qdldl"]


def backend(monkeypatch, name):
    import importlib.util

    import optsolve.qp.ldl as ldl

    if name == "cholmod" and importlib.util.find_spec("cvxopt") is None:
        pytest.skip("cvxopt is not installed")
    if name == "cholmod":  # these small matrices have sparse rows, which go to QDLDL by default
        monkeypatch.setattr(ldl, "QDLDL_DEGREE", 0)
    if name == "qdldl":
        monkeypatch.setattr(ldl._Cholmod, "of", classmethod(lambda cls, K: None))


@pytest.mark.parametrize("name", BACKENDS)
@pytest.mark.parametrize("dense_rows", [0, 3])
def test_both_factorisers_solve_and_refactor(monkeypatch, name, dense_rows):
    """Without check, CHOLMOD (cvxopt) where it imports and some row is dense enough, else QDLDL; dense rows of B
    make its lower triangle the cheaper one to pass, so both orders of the entries are exercised."""
    backend(monkeypatch, name)
    rng = np.random.default_rng(dense_rows)
    n, m = 40, 50
    M = sp.random(n, n, 0.1, random_state=rng)
    H = (M @ M.T + 0.1 * sp.eye(n)).tocsc()
    B = sp.random(m, n, 0.05, random_state=rng, format="lil")
    for i in range(dense_rows):
        B[i, :] = rng.standard_normal(n)
    B = B.tocsc()
    d = rng.random(m) + 0.1
    f = QuasiDefinite(H, B, d)
    assert (f._cholmod is not None) == (name == "cholmod")
    entries = f.factor_entries()  # read before any solve: the factor must still solve after
    if name == "cholmod":
        assert entries is None
    else:  # the strict lower triangle of L, as a dense LDL' in QDLDL's order has it (no cancellation here)
        L = f._solver.factors()[0].toarray()
        assert entries == np.count_nonzero(L) and f.K.nnz - (n + m) <= entries <= (n + m) * (n + m - 1) // 2
    b = rng.standard_normal(n + m)
    np.testing.assert_allclose(kkt(H, B, d) @ f.solve(b), b, atol=1e-8)
    d2, h2 = rng.random(m) * 100 + 1e-3, H.diagonal() + rng.random(n)
    f.update(d2, h_diagonal=h2)
    H2 = (H + sp.diags(h2 - H.diagonal())).tocsc()
    np.testing.assert_allclose(f.solve(b), spla.spsolve(kkt(H2, B, d2), b), rtol=1e-7, atol=1e-9)
    assert f.factorisations == 2


@pytest.mark.parametrize("name", BACKENDS)
def test_a_zero_pivot_is_a_singular_matrix(monkeypatch, name):
    backend(monkeypatch, name)
    H = sp.csc_matrix(np.array([[1.0, 1.0], [1.0, 1.0]]))  # singular: the second pivot is 0
    with pytest.raises(RuntimeError, match="singular"):
        QuasiDefinite(H, None, np.zeros(0))
    if name == "cholmod":  # (the qdldl package's refactorisation does not report one)
        f = QuasiDefinite(H + sp.eye(2), None, np.zeros(0))
        with pytest.raises(RuntimeError, match="singular"):
            f.update(np.zeros(0), h_diagonal=np.array([1.0, 1.0]))


def test_sparse_rows_go_to_qdldl_and_dense_ones_to_cholmod():
    import importlib.util

    if importlib.util.find_spec("cvxopt") is None:
        pytest.skip("cvxopt is not installed")
    from optsolve.qp.ldl import QDLDL_DEGREE

    n = 3 * QDLDL_DEGREE
    H = sp.eye(n, format="csc")
    banded = sp.diags([np.ones(n - 1)], [1], shape=(n - 1, n), format="csc")
    assert QuasiDefinite(H, banded, np.ones(n - 1))._cholmod is None
    dense = sp.csc_matrix(np.ones((1, n)))
    f = QuasiDefinite(H, dense, np.ones(1))
    assert f._cholmod is not None
    with pytest.raises(ValueError, match="check=True"):  # CHOLMOD's factor has no pivots to read the inertia from
        f.update(np.ones(1), check=True)
    assert QuasiDefinite(H, dense, np.ones(1), check=True)._cholmod is None


@pytest.mark.parametrize("seed", range(40))
def test_upper_kkt_is_the_upper_triangle_with_every_diagonal_last(seed):
    """Index arithmetic against the dense block matrix: H's upper triangle plus the shift (explicit zeros, an
    unsorted H and empty rows of B included), B' beside it, a stored zero on each of B's rows' diagonal."""
    from optsolve.qp.ldl import upper_kkt

    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 9)), int(rng.integers(0, 6))
    M = sp.random(n, n, float(rng.random()), random_state=rng, format="csc")
    H = (M + M.T).tocsc() if n else sp.csc_matrix((0, 0))
    if H.nnz:
        H.data[rng.random(H.nnz) < 0.2] = 0.0  # explicit zeros
        H.has_sorted_indices = False  # the function sorts what it is not told is sorted
    B = sp.random(m, n, float(rng.random()), random_state=rng, format="csr") if n else sp.csr_matrix((m, 0))
    shift = float(rng.random())
    K = upper_kkt(H, B if m else None, shift)
    dense = np.zeros((n + m, n + m))
    dense[:n, :n] = np.triu(H.toarray()) + shift * np.eye(n)
    dense[:n, n:] = B.toarray().T
    np.testing.assert_array_equal(K.toarray(), dense)
    for j in range(n + m):
        column = K.indices[K.indptr[j]:K.indptr[j + 1]]
        assert column[-1] == j and np.all(np.diff(column) > 0)
    assert not np.any((K.data == 0) & (K.indices != columns_of(K)))


def columns_of(K):
    return np.repeat(np.arange(K.shape[1]), np.diff(K.indptr))
