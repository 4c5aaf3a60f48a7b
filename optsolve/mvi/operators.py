"""Operators F of the problem library, user operators, and the constraint sets C.

Library (the games of Pethick et al. 2022 and 2025 and the classical test problems):

* ``polar``: F(x, y) = (-b y + psi x, b x + psi y), psi = (a/16)(||z||^2 - 1)(16 ||z||^2 - 9),
  a limit cycle at ||z|| = 1 and 3/4 around the solution z* = 0 (Pethick et al. 2022);
* ``forsaken``: F = (df/dx, -df/dy) of f = x (y - 0.45) + phi(x) - phi(y),
  phi(z) = z^2/4 - z^4/2 + z^6/6 (Hsieh et al. 2021): outside every method's guarantee;
* ``global-forsaken``: f = x y + phi(x) - phi(y), phi(z) = z^2/3 - z^4/3 + 2 z^6/21, z* = 0;
* ``lower-bound`` and ``quadratic-game``: f = a x y + (b/2)(x^2 - y^2), a linear F = M z with
  M = [[b, a], [-a, b]]: ||M|| = sqrt(a^2 + b^2) = L and sym(M^-1) = b / L^2 I, so the weak-MVI
  constant is rho = b / L^2; ``quadratic-game`` takes (L, rho) and sets b = L^2 rho,
  a = sqrt(L^2 - b^2) (needs |rho| <= 1/L); ``lower-bound`` is a = 2 sqrt(2), b = -1 (L = 3,
  rho = -1/(3L));
* ``bilinear``: f = (x - c)^T (y - c), F = (y - c, c - x), x and y of equal length;
* ``affine``: F = M z + q, M dense or sparse; rho = lambda_min(sym(M^-1)) (with u = M(z - z*),
  <u, M^-1 u> >= rho ||u||^2);
* ``minimax-quadratic``: f = x'Ax/2 + x'By - y'Cy/2 + q_x'x - q_y'y, F = M z + q with
  M = [[A, B], [-B', C]].

Every operator evaluates one point (a vector of length d) and knows the spectral norm of its
Jacobian there (``jacobian_norm``, used by CurvatureEG+). A user operator
(``--operator module:function``) maps a length-d array to a length-d array; when its module
also defines ``<function>_jacobian``, that is used for the Jacobian. A user operator that is a mean of
N terms, F = (1/N) sum_i F_i, says so with ``<function>_terms`` (the integer N, or a function of no
arguments returning it) and ``<function>_batch(z, idx)`` (the mean of F_i(z) over the integer array
idx, repeats counted): ``--batch`` then samples terms (:mod:`optsolve.mvi.stochastic`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np


LIBRARY = ("polar", "forsaken", "global-forsaken", "lower-bound", "quadratic-game", "bilinear", "affine",
           "minimax-quadratic")


@dataclass
class Operator:
    """F: R^d -> R^d with what is known about it."""

    name: str
    d: int
    F: Callable[[np.ndarray], np.ndarray]
    jacobian: Callable[[np.ndarray], object] | None = None  # z -> matrix (dense or sparse)
    norm: float | None = None  # ||JF|| everywhere, for a linear F
    L: float | None = None
    rho: float | None = None
    z_star: np.ndarray | None = None
    notes: list = field(default_factory=list)
    user: bool = False  # the user's code (--operator): an exception it raises is its own, not a bug here
    matrix: object = None  # M of an affine F = M z + q (dense or sparse), for products M v without q
    terms: int | None = None  # F = (1/N) sum_i F_i with N = terms, when the user's module says so
    batch: Callable[[np.ndarray, np.ndarray], np.ndarray] | None = None  # (z, idx) -> mean of F_i(z), i in idx

    def jacobian_norm(self, z: np.ndarray, deadline: float | None = None) -> float | None:
        """||JF(z)||_2; None without a Jacobian, or when ``deadline`` (time.perf_counter) comes first."""
        if self.norm is not None:
            return self.norm
        if self.jacobian is None:
            return None
        J = self.jacobian(z)
        return spectral_norm(J if hasattr(J, "toarray") else np.atleast_2d(np.asarray(J, dtype=float)), deadline)


# --------------------------------------------------------------------------- constraint sets


def norm2(v: np.ndarray) -> float:
    """||v||_2 without overflow where v'v overflows but v is finite (then scaled by its largest entry)."""
    with np.errstate(over="ignore"):
        value = math.sqrt(float(v @ v))
    if math.isinf(value) and np.isfinite(v).all():
        top = float(np.max(np.abs(v)))
        w = v / top
        value = top * math.sqrt(float(w @ w))
    return value


@dataclass(frozen=True)
class ConstraintSet:
    """C = R^d (``none``), a box lo <= z <= hi, or a ball ||z - center|| <= radius."""

    kind: str
    lo: np.ndarray | None = None
    hi: np.ndarray | None = None
    center: np.ndarray | None = None
    radius: float | None = None

    def project(self, z: np.ndarray) -> np.ndarray:
        if self.kind == "box":
            return np.minimum(np.maximum(z, self.lo), self.hi)
        if self.kind == "ball":
            v = z - self.center
            r = norm2(v)
            return z if r <= self.radius else self.center + v * (self.radius / r)
        return z

    def violation(self, z: np.ndarray) -> float:
        """How far z lies outside C (0 inside)."""
        if self.kind == "box":
            return float(max(np.max(self.lo - z, initial=0.0), np.max(z - self.hi, initial=0.0)))
        if self.kind == "ball":
            return max(0.0, norm2(z - self.center) - self.radius)
        return 0.0

    def scale(self) -> float:
        """A length of C (for relative tolerances): its half-width, or 1 for R^d."""
        if self.kind == "box":
            w = self.hi - self.lo
            return float(max(np.max(w[np.isfinite(w)], initial=0.0) / 2, 1.0))
        if self.kind == "ball":
            return max(self.radius, 1.0)
        return 1.0

    def describe(self) -> str:
        if self.kind == "box":
            lo, hi = np.unique(self.lo), np.unique(self.hi)
            if lo.size == 1 and hi.size == 1:
                return f"the box [{lo[0]:g}, {hi[0]:g}]^{self.lo.size}"
            return f"a box in R^{self.lo.size}"
        if self.kind == "ball":
            return f"the ball of radius {self.radius:g}"
        return "R^d"


def natural_residual(C: ConstraintSet, z: np.ndarray, Fz: np.ndarray) -> float:
    """||z - P_C(z - F(z))||: zero exactly at the solutions of the VI."""
    return norm2(z - C.project(z - Fz))


# --------------------------------------------------------------------------- library operators


def polar(a: float = 1.0, b: float = 1.0) -> Operator:
    def F(z):
        x, y = z
        r2 = x * x + y * y
        psi = a / 16 * (r2 - 1) * (16 * r2 - 9)
        return np.array([-b * y + psi * x, b * x + psi * y])

    def J(z):
        x, y = z
        r2 = x * x + y * y
        psi = a / 16 * (r2 - 1) * (16 * r2 - 9)
        g = a / 8 * (32 * r2 - 25)  # d psi / d(x, y) = g (x, y)
        return np.array([[psi + g * x * x, -b + g * x * y], [b + g * x * y, psi + g * y * y]])

    return Operator("polar", 2, F, J, z_star=np.zeros(2))


def _phi_forsaken(z):
    return z / 2 - 2 * z ** 3 + z ** 5, 0.5 - 6 * z ** 2 + 5 * z ** 4


def forsaken() -> Operator:
    def F(z):
        x, y = z
        return np.array([y - 0.45 + _phi_forsaken(x)[0], -x + _phi_forsaken(y)[0]])

    def J(z):
        x, y = z
        return np.array([[_phi_forsaken(x)[1], 1.0], [-1.0, _phi_forsaken(y)[1]]])

    return Operator("forsaken", 2, F, J, L=12.4026, rho=-1.5206, z_star=None,
                    notes=["its weak-MVI ratio over the box is -1.5206 (at (-0.258, 0.792)), below -1/L = -0.0806"])


def _phi_global(z):
    return 2 * z / 3 - 4 * z ** 3 / 3 + 4 * z ** 5 / 7, 2 / 3 - 4 * z ** 2 + 20 * z ** 4 / 7


def global_forsaken() -> Operator:
    def F(z):
        x, y = z
        return np.array([y + _phi_global(x)[0], -x + _phi_global(y)[0]])

    def J(z):
        x, y = z
        return np.array([[_phi_global(x)[1], 1.0], [-1.0, _phi_global(y)[1]]])

    return Operator("global-forsaken", 2, F, J, L=2.868, rho=-0.1197, z_star=np.zeros(2))


def linear_game(a: float, b: float, name: str) -> Operator:
    M = np.array([[b, a], [-a, b]])
    L = math.hypot(a, b)
    rho = (b / L) / L if L > 0 else None  # divided twice: L^2 may overflow where L does not
    return Operator(name, 2, lambda z: M @ z, lambda z: M, norm=L, L=L, rho=rho, z_star=np.zeros(2), matrix=M)


def quadratic_game(L: float, rho: float) -> Operator:
    # b = L^2 rho and a = sqrt(L^2 - b^2), written so that no intermediate overflows for a large L
    b = L * (L * rho)
    a = L * math.sqrt(max(1.0 - (L * rho) ** 2, 0.0))
    return linear_game(a, b, "quadratic-game")


def bilinear(d: int, c: float = 0.9) -> Operator:
    n = d // 2

    def F(z):
        return np.concatenate([z[n:] - c, c - z[:n]])

    def J(z):
        import scipy.sparse as sp

        eye = sp.identity(n, format="csr")
        return sp.bmat([[None, eye], [-eye, None]], format="csr")

    return Operator("bilinear", d, F, J, norm=1.0, L=1.0, rho=0.0, z_star=np.full(d, c))


def affine(M, q, norm: float | None = None) -> Operator:
    """F = M z + q; ``norm``: ||M|| when known (otherwise computed once, on first use)."""
    op = Operator("affine", q.size, lambda z: M @ z + q, lambda z: M, norm=norm, matrix=M)
    if norm is None:
        cache = []

        def jacobian_norm(z, deadline=None):
            if not cache:
                value = spectral_norm(M, deadline)
                if value is None:
                    return None
                cache.append(value)
            return cache[0]

        op.jacobian_norm = jacobian_norm
    return op


def minimax_matrix(A, B, C):
    """M = [[A, B], [-B', C]] (sparse when any block is)."""
    import scipy.sparse as sp

    if any(sp.issparse(X) for X in (A, B, C)):
        return sp.bmat([[A, B], [-B.T, C]], format="csr")
    return np.block([[A, B], [-B.T, C]])


# Up to this size ||M|| and lambda_min(sym(M^-1)) come from LAPACK (a sparse M is made dense first).
EXACT_NORM_SIZE = 500
WEAK_MVI_SIZE = 2000
LANCZOS_STEPS = 40
NORM_RTOL = 1e-5
# Seconds per d^3 of a dense inverse plus symmetric eigenvalues, with room for a busy machine.
DENSE_SECONDS_PER_D3 = 3e-9


def spectral_norm(M, deadline: float | None = None) -> float | None:
    """||M||_2, or None when ``deadline`` (a time.perf_counter value) comes before the answer.

    Exact (LAPACK) up to EXACT_NORM_SIZE; larger matrices by Lanczos on M'M with full
    reorthogonalisation, restarted from the top Ritz vector until the estimate of ||M||^2 changes by
    less than NORM_RTOL relative (Golub and Van Loan, *Matrix Computations*, 4th ed., section 10.1).
    The Ritz value never exceeds ||M||^2: on a spectrum clustered at the top the result is a lower
    bound within about NORM_RTOL (a step of 0.999 / L then still contracts).
    """
    import time

    import scipy.sparse as sp

    n = min(M.shape) if len(M.shape) == 2 else 0
    if n == 0:
        return 0.0
    if n <= EXACT_NORM_SIZE:
        dense = M.toarray() if sp.issparse(M) else np.asarray(M, dtype=float)
        return float(np.linalg.norm(dense, 2))
    d = M.shape[1]
    q = np.random.default_rng(0).standard_normal(d)
    theta_prev = -1.0
    while True:
        Q = np.zeros((LANCZOS_STEPS + 1, d))
        Q[0] = q / np.linalg.norm(q)
        alpha, beta = [], []
        for j in range(LANCZOS_STEPS):
            if deadline is not None and time.perf_counter() > deadline:
                return None
            w = M.T @ (M @ Q[j])
            alpha.append(float(Q[j] @ w))
            w -= Q[: j + 1].T @ (Q[: j + 1] @ w)  # full reorthogonalisation (twice is enough)
            w -= Q[: j + 1].T @ (Q[: j + 1] @ w)
            b = float(np.linalg.norm(w))
            if b <= 1e-14 * max(abs(alpha[0]), 1e-300):  # an invariant subspace: the Ritz values are exact
                break
            beta.append(b)
            Q[j + 1] = w / b
        m = len(alpha)
        T = np.diag(alpha) + np.diag(beta[: m - 1], 1) + np.diag(beta[: m - 1], -1)
        vals, vecs = np.linalg.eigh(T)
        theta = max(float(vals[-1]), 0.0)
        if m < LANCZOS_STEPS or abs(theta - theta_prev) <= NORM_RTOL * theta or theta == 0.0:
            return math.sqrt(theta)
        theta_prev = theta
        q = vecs[:, -1] @ Q[:m]


def weak_mvi_of_affine(M, deadline: float | None = None) -> float | None:
    """rho = lambda_min(sym(M^-1)) of an invertible dense M up to d = WEAK_MVI_SIZE (None otherwise,
    and None when the dense factorisations would likely not end before ``deadline``)."""
    import time

    import scipy.sparse as sp

    if sp.issparse(M) or M.shape[0] == 0 or M.shape[0] > WEAK_MVI_SIZE:
        return None
    if deadline is not None and time.perf_counter() + DENSE_SECONDS_PER_D3 * M.shape[0] ** 3 > deadline:
        return None
    try:
        Minv = np.linalg.inv(M)
    except np.linalg.LinAlgError:
        return None
    if not np.isfinite(Minv).all():
        return None
    return float(np.linalg.eigvalsh(0.5 * (Minv + Minv.T))[0])


# --------------------------------------------------------------------------- user operators


def load_user(spec: str, d: int) -> Operator:
    """The user's operator named ``module:function`` (and ``module:function_jacobian`` if defined)."""
    from optsolve.core.registry import load_user_function

    fn, mod = load_user_function(spec, "operator")
    name = spec.split(":")[1]
    jac = getattr(mod, f"{name}_jacobian", None)
    terms, batch = getattr(mod, f"{name}_terms", None), getattr(mod, f"{name}_batch", None)

    def F(z):
        return np.asarray(fn(z), dtype=float).reshape(-1)

    def F_batch(z, idx):
        return np.asarray(batch(z, idx), dtype=float).reshape(-1)

    op = Operator(spec, d, F, jac if callable(jac) else None, user=True)
    if terms is not None or batch is not None:
        op.terms = _term_count(spec, name, terms, batch)
        op.batch = F_batch
    return op


def _term_count(spec: str, name: str, terms, batch) -> int:
    """N of a user operator given as a mean of N terms (``<name>_terms`` with ``<name>_batch``)."""
    from optsolve.core.errors import ParameterError

    if not callable(batch) or terms is None:
        missing = f"{name}_batch(z, idx)" if terms is not None else f"{name}_terms"
        raise ParameterError(f"The '--operator {spec}' module defines half of a sum: it lacks {missing} "
                             f"({name}_terms, the number N of terms, and {name}_batch(z, idx), the mean of the "
                             "terms idx at z, go together).")
    try:
        n = terms() if callable(terms) else terms
    except Exception as exc:  # the user's function
        raise ParameterError(f"The '--operator {spec}' module's {name}_terms() failed ({type(exc).__name__}: "
                             f"{exc}).") from None
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ParameterError(f"The '--operator {spec}' module's {name}_terms must be a positive integer (the "
                             f"number of terms of the sum); got {n!r}.")
    return int(n)
