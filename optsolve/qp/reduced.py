"""ADMM's linear system in its reduced form, factored by a supernodal Cholesky factorisation.

The KKT system of an ADMM step, ``[H, A'; A, -diag(1/rho)] [x; nu] = [b_x; b_z]`` with
``H = P + sigma I``, has the same x as the positive definite system

    (H + A' diag(rho) A) x = b_x + A' diag(rho) b_z,   and then   nu = rho * (A x - b_z)

(eliminate nu; OSQP solves this form with conjugate gradients in its indirect mode: Stellato
et al., "OSQP: an operator splitting solver for quadratic programs", Math. Prog. Comp. 2020).
A positive definite matrix can be factored by CHOLMOD's supernodal LL' (Chen, Davis, Hager and
Rajamanickam, "CHOLMOD, supernodal sparse Cholesky factorization and update/downdate", ACM TOMS
2008), whose dense blocks run at BLAS-3 speed, where the quasi-definite KKT matrix needs a
simplicial LDL'. Where ``A' A`` stays sparse and the factor fills in, this is much faster: 2,000
variables of OSQP's random QP, one factorisation 1.3 s as KKT, 0.1 s reduced.

The rows fall in a few classes of one rho each (equalities, inequalities, free rows: see
:func:`optsolve.qp.admm.rho_vector`), so ``A' diag(rho) A`` is a sum of one Gram matrix per
class times its rho: a new rho rewrites the values of a fixed pattern and redoes only the
numeric factorisation. :meth:`Reduced.of` declines (None) where ``A' A`` would be much denser
than the KKT matrix (a dense row of A makes it dense), where the problem is small, and where the
reduced matrix has fewer than ``MIN_DENSITY`` entries per column (see the Notes).

Notes
-----
The reduced form wins where the matrix is dense and loses or ties below; some sparse reduced matrices
factor much faster than their KKT matrices, but which ones is not known before both are factored.
``GRAM_BOUND`` declines before any product is formed. The measurements are in docs/benchmarks.md
("Measurements behind the code").
"""

from __future__ import annotations

import time

import numpy as np
import scipy.sparse as sp

MIN_ENTRIES = 20_000  # smaller KKT matrices: the simplicial LDL' is already cheap
GRAM_BOUND = 8.0  # sum over A's rows of k (k + 1) / 2 above this many times the KKT matrix's entries: declined
# before any product (see the module's Notes)
MAX_FILL = 3.0  # the reduced matrix's lower triangle above this many times the KKT matrix's entries: declined
MAX_CLASSES = 8  # distinct rho values for which the Gram matrices are kept apart
MIN_DENSITY = 128.0  # fewer entries per column in the reduced matrix's lower triangle: declined (see below)


def _positions(pattern: sp.csc_matrix, part: sp.csc_matrix) -> np.ndarray:
    """Where each stored entry of ``part`` sits in ``pattern``'s data (pattern's entries include part's)."""
    from optsolve.qp.ldl import columns

    n = pattern.shape[0]
    return np.searchsorted(columns(pattern) * n + pattern.indices, columns(part) * n + part.indices)


class Reduced:
    """The x-part of the KKT system by the supernodal Cholesky factor of ``H + A' diag(rho) A``; the same
    interface as :class:`optsolve.qp.ldl.QuasiDefinite` (``d`` = 1/rho)."""

    def __init__(self, A, d, classes, Hl, grams, parts, pattern, factor):
        self.n, self.A, self.At = A.shape[1], A, A.T.tocsc()
        self._classes, self._Hl, self._grams, self._parts, self._pattern = classes, Hl, grams, parts, pattern
        self._size = pattern.nnz
        self._cvxopt, self._cholmod, self._C, self._F, self._order = factor
        self.rho = 1.0 / d
        self.factorisations = 1

    @classmethod
    def of(cls, H: sp.csc_matrix, A: sp.csc_matrix, d: np.ndarray, shift: float = 0.0) -> "Reduced | None":
        """The factor for ``H + shift I``, or None where the reduced form is declined (see the module)."""
        from optsolve.qp.ldl import cvxopt_matrix, kkt_entries

        n, m = H.shape[0], A.shape[0]
        entries = kkt_entries(H, A)
        if m == 0 or entries < MIN_ENTRIES:
            return None
        counts = np.diff(A.tocsr().indptr).astype(float)
        bound = float(np.sum(counts * (counts + 1) / 2))  # entries of the Gram matrices' lower triangles, at most
        lower = entries - A.nnz - m  # H's lower triangle, its diagonal full
        if bound > GRAM_BOUND * entries or bound + lower < MIN_DENSITY * n:
            return None
        if shift:
            H = (H + shift * sp.eye(n, format="csc")).tocsc()
        rho = 1.0 / np.asarray(d, dtype=float)
        values, classes = np.unique(rho, return_inverse=True)
        if values.size > MAX_CLASSES:
            return None
        Ar = A.tocsr()
        grams = []
        for k in range(values.size):
            rows = Ar[classes == k]
            grams.append(sp.tril(rows.T @ rows, format="csc"))
        Hl = sp.tril(H, format="csc")
        pattern = (abs(Hl) + sum(abs(g) for g in grams)).tocsc()
        pattern.sum_duplicates()
        pattern.sort_indices()
        if pattern.nnz > MAX_FILL * entries or pattern.nnz < MIN_DENSITY * n:
            return None
        parts = [_positions(pattern, Hl)] + [_positions(pattern, g) for g in grams]
        out_values = cls._combine(pattern.nnz, Hl, grams, parts, values)
        try:
            import cvxopt
            from cvxopt import cholmod
        except ImportError:
            return None
        C, order, uplo = cvxopt_matrix(cvxopt, sp.csc_matrix((out_values, pattern.indices, pattern.indptr),
                                                             shape=(n, n)), lower=True)
        if len(C.V) != pattern.nnz:
            return None
        cholmod.options["supernodal"] = 2
        try:
            F = cholmod.symbolic(C, uplo=uplo)
            start = time.perf_counter()
            cholmod.numeric(C, F)
        except ArithmeticError:  # not positive definite in float64: the KKT form does not need that
            return None
        numeric_time = time.perf_counter() - start
        out = cls(A, d, (values, classes), Hl, grams, parts, pattern, (cvxopt, cholmod, C, F, order))
        out.numeric_time = numeric_time
        return out

    @staticmethod
    def _combine(size, Hl, grams, parts, values) -> np.ndarray:
        out = np.zeros(size)
        out[parts[0]] += Hl.data
        for g, pos, c in zip(grams, parts[1:], values):
            out[pos] += c * g.data
        return out

    def update(self, d: np.ndarray, h_diagonal: np.ndarray | None = None, check: bool = False):
        """New 1/rho: new values on the same pattern (from the classes' Gram matrices where rho is still constant on
        each class), the numeric factorisation only."""
        if h_diagonal is not None:
            raise ValueError("the reduced form keeps H")
        rho = 1.0 / np.asarray(d, dtype=float)
        values, classes = self._classes
        new = np.array([rho[classes == k][0] if np.any(classes == k) else 0.0 for k in range(values.size)])
        if np.array_equal(rho, new[classes]):
            data = self._combine(self._size, self._Hl, self._grams, self._parts, new)
        else:  # rows of one class now differ: the weighted Gram matrix itself (its pattern is within the classes')
            weighted = sp.tril(self.At @ sp.diags(rho) @ self.A, format="csc")
            parts = [self._parts[0], _positions(self._pattern, weighted)]
            data = self._combine(self._size, self._Hl, [weighted], parts, [1.0])
        self._C.V = self._cvxopt.matrix(data if self._order is None else data[self._order])
        self._cholmod.options["supernodal"] = 2
        try:
            self._cholmod.numeric(self._C, self._F)
        except ArithmeticError as exc:
            raise RuntimeError(f"the reduced matrix is singular in float64 ({exc})") from None
        self.rho = rho
        self.factorisations += 1

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        bx, bz = rhs[:self.n], rhs[self.n:]
        b = self._cvxopt.matrix(bx + self.At @ (self.rho * bz))
        self._cholmod.solve(self._F, b)
        x = np.asarray(b).ravel()
        nu = self.A @ x
        nu -= bz
        nu *= self.rho
        return np.concatenate([x, nu])
