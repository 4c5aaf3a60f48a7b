"""The quasi-definite KKT systems of the QP methods, factored as OSQP factors them.

``K = [H, B'; B, -diag(d)]`` with H symmetric (``P + sigma I`` in ADMM, ``Q_i + mu_i I`` at
DistributedQP's nodes) and d > 0 is quasi-definite when H is positive definite: it has an LDL'
factorisation in any symmetric ordering, with n positive and m negative pivots (Vanderbei,
"Symmetric quasidefinite matrices", SIAM J. Optim. 1995). QDLDL (the ``qdldl`` package, OSQP's own
factoriser: Stellato et al., "OSQP: an operator splitting solver for quadratic programs", 2020)
finds the fill-reducing AMD ordering and the elimination tree once; :meth:`QuasiDefinite.update`
writes new d into the stored pattern and redoes only the numeric factorisation. Where cvxopt
imports, the same LDL' is computed by CHOLMOD (:class:`_Cholmod`), whose AMD ordering runs 3x
faster than the ``qdldl`` package's on matrices with dense-ish rows; inertia checks use QDLDL.

By Sylvester's law of inertia the pivots' signs are the eigenvalues' signs of K: those of -D and
of the Schur complement H + B' D^-1 B. Fewer than n positive pivots therefore means that this
complement, and so H, is not positive definite; n of them does not clear H alone (a large
B' D^-1 B can hide a negative eigenvalue of P, which is how osqp's setup check, on its KKT
matrix, can miss one). The problem's rule (:mod:`optsolve.qp.problems`) factors P + delta I
alone (no B) when the file is read, for every method; reading the pivots back from the ``qdldl``
package copies the whole factor (0.2-0.45 s on KKT matrices of 20,000 variables), so the
methods' own factorisations do not.
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp


def columns(M: sp.csc_matrix) -> np.ndarray:
    """The column index of every stored entry of a CSC matrix (int64)."""
    return np.repeat(np.arange(M.shape[1], dtype=np.int64), np.diff(M.indptr))


def kkt_entries(P: sp.csc_matrix, A: sp.csc_matrix) -> int:
    """Stored entries of the upper-triangular KKT matrix ``[P + sigma I, A'; ., -D]`` for a symmetric ``P`` stored
    whole, counted without building its triangle: half of P's off-diagonal entries, the full diagonal, A, and D."""
    off = int(P.nnz) - int(np.count_nonzero(P.indices == columns(P)))
    return off // 2 + P.shape[0] + int(A.nnz) + A.shape[0]


def upper_kkt(H: sp.spmatrix, B: sp.spmatrix | None, shift: float = 0.0) -> sp.csc_matrix:
    """The upper triangle of ``[H + shift I, B'; B, 0]`` as a sorted CSC matrix with every diagonal entry stored
    (the last of its column; those of the B rows hold 0), built by index arithmetic (``sp.triu`` and ``sp.bmat``
    cost 3x more on a chain of 10,000 variables). H's explicit zeros off the diagonal are left out."""
    H = sp.csc_matrix(H)
    if not H.has_canonical_format:
        H = H.copy()
        H.sum_duplicates()
    n = H.shape[0]
    rows, cols = H.indices, columns(H)
    keep = (rows < cols) & (H.data != 0)  # in each sorted column: the kept entries, then the diagonal
    diagonal = np.zeros(n)
    on = rows == cols
    diagonal[cols[on]] = H.data[on]
    counts = np.bincount(cols[keep], minlength=n) + 1
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    top = int(indptr[-1])
    if B is None or B.shape[0] == 0:
        m, b_indptr, b_indices, b_data = 0, np.zeros(1, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    else:
        Br = sp.csr_matrix(B)
        if not Br.has_canonical_format:
            Br = Br.copy()
            Br.sum_duplicates()
        m, b_indptr, b_indices, b_data = Br.shape[0], Br.indptr.astype(np.int64), Br.indices, Br.data
    size = top + b_indices.size + m
    indices, data = np.empty(size, dtype=np.int32 if n + m < 2**31 and size < 2**31 else np.int64), np.zeros(size)
    slots = np.arange(int(np.count_nonzero(keep))) + cols[keep]  # after one diagonal per earlier column
    indices[slots], data[slots] = rows[keep], H.data[keep]
    indices[indptr[1:] - 1], data[indptr[1:] - 1] = np.arange(n), diagonal + shift
    b_rows = np.repeat(np.arange(m, dtype=np.int64), np.diff(b_indptr))
    b_slots = top + np.arange(b_indices.size) + b_rows
    indices[b_slots], data[b_slots] = b_indices, b_data
    d_slots = top + b_indptr[1:] + np.arange(m)
    indices[d_slots] = n + np.arange(m)
    return sp.csc_matrix((data, indices, np.concatenate([indptr, top + b_indptr[1:] + np.arange(1, m + 1)])),
                         shape=(n + m, n + m))


class NotQuasiDefinite(ValueError):
    """The matrix has fewer positive pivots than rows of H (H is not positive definite)."""

    def __init__(self, positive: int | None, n: int):
        self.positive, self.n = positive, n  # positive: None where the factorisation met a zero pivot
        found = "a zero pivot" if positive is None else f"{positive} positive pivots"
        super().__init__(f"its LDL' factorisation has {found} where a positive definite H gives {n} positive pivots")


class QuasiDefinite:
    """The LDL' factor of ``[H, B'; B, -diag(d)]`` (``B`` m x n, possibly m = 0), re-factored by :meth:`update`.

    ``check``: raise :class:`NotQuasiDefinite` when H is not positive definite (the pivots' signs, or a
    zero pivot), and RuntimeError when a pivot is not finite (entries beyond float64's range); without
    it, a zero pivot raises RuntimeError (a singular matrix, as for any direct solver).
    """

    def __init__(self, H: sp.spmatrix, B: sp.spmatrix | None, d: np.ndarray, check: bool = False,
                 shift: float = 0.0):
        """``shift``: added to H's diagonal."""
        n = H.shape[0]
        m = 0 if B is None else B.shape[0]
        self.n, self.m = n, m
        self.K = K = upper_kkt(H, B if m else None, shift)
        # the diagonal of a sorted upper-triangular CSC matrix is each column's last entry
        self._hslots = K.indptr[1:n + 1] - 1
        self._slots = K.indptr[n + 1:] - 1 if m else np.zeros(0, dtype=np.int64)
        K.data[self._slots] = -np.asarray(d, dtype=np.float64)
        try:
            self._cholmod = None if check else _Cholmod.of(K)
        except RuntimeError as exc:  # a zero pivot
            self._refuse(exc, check)
        if self._cholmod is None:
            import qdldl

            start = time.perf_counter()
            try:
                self._solver = qdldl.Solver(K, upper=True)
            except (RuntimeError, ValueError) as exc:  # a zero pivot
                self._refuse(exc, check)
            # QDLDL orders and factors in one call: its time bounds one numeric factorisation from above
            self.numeric_time = time.perf_counter() - start
        else:
            self.numeric_time = self._cholmod.numeric_time
        self.factorisations = 1
        self._entries = None  # L's stored entries, once read
        self.work = None  # with check: the sum of L's squared column counts (read from the factor the check reads)
        if check:
            self._check()

    def _refuse(self, exc: Exception, check: bool):
        if check:
            raise NotQuasiDefinite(None, self.n) from None
        raise RuntimeError(f"the KKT matrix is singular in float64 ({exc})") from None

    def _check(self):
        if self._cholmod is not None:
            raise ValueError("the inertia is read from QDLDL's pivots: build the factor with check=True")
        L, pivots, _ = self._solver.factors()
        self._entries = int(L.nnz)
        counts = np.diff(L.indptr).astype(np.float64) + 1.0  # each column's entries, its pivot counted
        self.work = float(np.sum(counts * counts))  # the factorisation's multiply-adds, about half of this
        if not np.all(np.isfinite(pivots)):  # entries beyond float64's range, not a sign of non-convexity
            raise RuntimeError("the KKT matrix is singular in float64 (non-finite pivots)")
        positive = int(np.count_nonzero(pivots > 0))
        if positive != self.n:
            raise NotQuasiDefinite(positive, self.n)

    def update(self, d: np.ndarray, h_diagonal: np.ndarray | None = None, check: bool = False):
        """New d and, where given, a new diagonal of H (the same pattern): the numeric factorisation only;
        ``check``: the inertia again."""
        self.K.data[self._slots] = -np.asarray(d, dtype=np.float64)
        if h_diagonal is not None:
            self.K.data[self._hslots] = h_diagonal
        try:
            if self._cholmod is not None:
                self._cholmod.refactor(self.K.data)
            else:
                self._solver.update(self.K, upper=True)
        except (RuntimeError, ValueError) as exc:
            self._refuse(exc, check)
        self.factorisations += 1
        if check:
            self._check()

    def factor_entries(self) -> int | None:
        """The stored entries of QDLDL's factor L (its strict lower triangle; a copy is read: O(its entries)), or
        None where CHOLMOD factored (cvxopt reads its factor only by converting it, which spoils it for solves)."""
        if self._cholmod is None and self._entries is None:
            self._entries = int(self._solver.factors()[0].nnz)
        return self._entries

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        if self._cholmod is not None:
            return self._cholmod.solve(rhs)
        return self._solver.solve(np.ascontiguousarray(rhs, dtype=np.float64))


def cvxopt_matrix(cvxopt, K: sp.csc_matrix, lower: bool = False):
    """The triangle ``K`` (sorted CSC; upper, or lower where ``lower``) as a cvxopt matrix: ``(C, order, uplo)``,
    where ``order`` (None, or indices into K's data) gives C's values from K's and ``uplo`` names C's triangle.

    cvxopt builds a matrix in time that grows faster than linearly with its columns' lengths (a KKT
    matrix with 100 dense rows of A: 0.78 s as the upper triangle, 0.04 s as the lower), so the
    triangle with the shorter columns is passed: K, or its transpose."""
    n = K.shape[0]
    as_is = float(np.sum(np.diff(K.indptr).astype(float) ** 2))
    transposed = float(np.sum(np.bincount(K.indices, minlength=n).astype(float) ** 2))
    order, uplo, M = None, "L" if lower else "U", K
    if transposed < as_is:
        T = sp.csc_matrix((np.arange(K.nnz, dtype=np.float64), K.indices, K.indptr), shape=K.shape).T.tocsc()
        T.sort_indices()
        order, uplo = T.data.astype(np.int64), "U" if lower else "L"
        M = sp.csc_matrix((K.data[order], T.indices, T.indptr), shape=K.shape)
    C = cvxopt.spmatrix(cvxopt.matrix(M.data), cvxopt.matrix(M.indices.astype(np.int64)), cvxopt.matrix(columns(M)),
                        (n, n))
    return C, order, uplo


QDLDL_DEGREE = 32  # no row of K with more entries than this: QDLDL (both orderings are fast; no conversion)


class _Cholmod:
    """The same LDL' by CHOLMOD's simplicial factorisation (through cvxopt), where cvxopt imports.

    CHOLMOD's AMD ordering (Davis, Amestoy and Duff) is the one QDLDL's package runs too, in 32-bit
    indices, and faster on KKT matrices with dense-ish rows; the numeric factorisation and the
    solves cost what QDLDL's do. CHOLMOD's LDL' does not pivot, so a quasi-definite matrix factors
    in its fill-reducing order; a zero pivot raises RuntimeError. Inertia checks (``check=True``)
    stay with QDLDL, whose pivots are read back, and so do matrices whose rows all have at most
    ``QDLDL_DEGREE`` entries: there both orderings are fast and the conversion to cvxopt's matrix
    is a third of the setup.

    Notes
    -----
    The ordering was 3x faster here on lasso, huber and svm at 10,000 variables (1.8 s against
    5.3 s, the factorisation itself 0.25 s); on a chain of 10,000 variables the conversion made
    the setup 27 ms against 18 ms.
    """

    def __init__(self, cvxopt, cholmod, C, symbolic, order):
        self._cvxopt, self._cholmod, self._C, self._F, self._order = cvxopt, cholmod, C, symbolic, order

    @classmethod
    def of(cls, K: sp.csc_matrix) -> "_Cholmod | None":
        """The factor of the sorted upper-triangular ``K``, or None where cvxopt is missing or cannot hold it."""
        try:
            import cvxopt
            from cvxopt import cholmod
        except ImportError:
            return None
        if K.shape[0] == 0 or K.nnz >= 2**31:  # cvxopt's CHOLMOD indexes in 32 bits
            return None
        degree = np.diff(K.indptr) + np.bincount(K.indices, minlength=K.shape[0])
        if int(degree.max()) <= QDLDL_DEGREE:
            return None
        C, order, uplo = cvxopt_matrix(cvxopt, K)
        if len(C.V) != K.nnz:  # an entry merged or dropped: values could not be written by position
            return None
        cholmod.options["supernodal"] = 0  # simplicial: LDL' (the supernodal factorisation is LL', definite only)
        try:
            F = cholmod.symbolic(C, uplo=uplo)
            out = cls(cvxopt, cholmod, C, F, order)
            out.refactor(None)
        except ArithmeticError as exc:
            raise RuntimeError(f"a zero pivot ({exc})") from None
        return out

    def refactor(self, values: np.ndarray | None):
        """The numeric factorisation again, with K's entries ``values`` (in K's order) where given."""
        if values is not None:
            self._C.V = self._cvxopt.matrix(values if self._order is None else values[self._order])
        self._cholmod.options["supernodal"] = 0
        start = time.perf_counter()
        try:
            self._cholmod.numeric(self._C, self._F)
        except ArithmeticError as exc:
            raise RuntimeError(f"a zero pivot ({exc})") from None
        self.numeric_time = time.perf_counter() - start

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        b = self._cvxopt.matrix(np.asarray(rhs, dtype=np.float64))
        self._cholmod.solve(self._F, b)
        return np.asarray(b).ravel()
