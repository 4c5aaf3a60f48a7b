"""The quasi-definite KKT systems of the QP methods, factored as OSQP factors them.

``K = [H, B'; B, -diag(d)]`` with H symmetric (``P + sigma I`` in ADMM, ``Q_i + mu_i I`` at
DistributedQP's nodes) and d > 0 is quasi-definite when H is positive definite: it has an LDL'
factorisation in any symmetric ordering, with n positive and m negative pivots (Vanderbei,
"Symmetric quasidefinite matrices", SIAM J. Optim. 1995). QDLDL (the ``qdldl`` package, OSQP's own
factoriser: Stellato et al., "OSQP: an operator splitting solver for quadratic programs", 2020)
finds the fill-reducing AMD ordering and the elimination tree once; :meth:`QuasiDefinite.update`
writes new d into the stored pattern and redoes only the numeric factorisation.

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

import numpy as np
import scipy.sparse as sp


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

    def __init__(self, H: sp.spmatrix, B: sp.spmatrix | None, d: np.ndarray, check: bool = False):
        import qdldl

        n = H.shape[0]
        m = 0 if B is None else B.shape[0]
        self.n, self.m = n, m
        # the upper triangle, every diagonal entry stored (so that the pattern is the same for any d)
        Hu = sp.triu(sp.csc_matrix(H), format="csc") + sp.diags(np.zeros(n), format="csc")
        blocks = [[Hu, None if B is None or m == 0 else sp.csc_matrix(B).T], [None, sp.diags(np.ones(m))]] if m \
            else [[Hu]]
        K = sp.bmat(blocks, format="csc")
        K.sum_duplicates()
        K.sort_indices()
        self.K = K
        # the diagonal of a sorted upper-triangular CSC matrix is each column's last entry
        self._hslots = K.indptr[1:n + 1] - 1
        self._slots = K.indptr[n + 1:] - 1 if m else np.zeros(0, dtype=np.int64)
        K.data[self._slots] = -np.asarray(d, dtype=np.float64)
        try:
            self._solver = qdldl.Solver(K, upper=True)
        except (RuntimeError, ValueError) as exc:  # a zero pivot
            self._refuse(exc, check)
        self.factorisations = 1
        if check:
            self._check()

    def _refuse(self, exc: Exception, check: bool):
        if check:
            raise NotQuasiDefinite(None, self.n) from None
        raise RuntimeError(f"the KKT matrix is singular in float64 ({exc})") from None

    def _check(self):
        _, pivots, _ = self._solver.factors()
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
            self._solver.update(self.K, upper=True)
        except (RuntimeError, ValueError) as exc:
            self._refuse(exc, check)
        self.factorisations += 1
        if check:
            self._check()

    def solve(self, rhs: np.ndarray) -> np.ndarray:
        return self._solver.solve(np.ascontiguousarray(rhs, dtype=np.float64))
