"""Problem files of ``optsolve qp`` and generators of its benchmark families.

The form is OSQP's: minimise ``1/2 x'Px + q'x + r`` subject to ``l <= Ax <= u``, with P
symmetric positive semidefinite (n x n, sparse), A (m x n, sparse) and bounds that may be
infinite. Keys: ``P`` (optional: an LP without it), ``q``, ``A``, ``l``, ``u`` (optional
together: no constraints), ``r`` (objective constant), ``n`` and ``m`` (sizes, checked when
given: the Maros-Meszaros ``.mat`` layout), ``P_storage`` (``full``: P is symmetric;
``upper``: only its upper triangle is stored, as OSQP takes it; absent: ``upper`` when P
has no entries below the diagonal, else ``full``). Bounds with ``|b| >= 1e19`` are infinite
(the Maros-Meszaros files store 1e20 and sometimes 9.999999999999998e19). For the
``distributed`` method: ``partition`` (the node index of every constraint row) or ``nodes``
(how many nodes the automatic partition makes).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from optsolve.core.generate import Family, Param
from optsolve.core.problem import Field, Problem, Schema
from optsolve.qp.ldl import columns

INFINITY = 1e19  # |bound| at or above this is infinite
SYMMETRY_RTOL = 1e-10
PSD_CHECK_MAX_N = 300  # dense eigenvalue check of P up to this size (4 ms here; 0.15 s at 1,500, O(n^3))
# Above it P + delta I is factored: by dense Cholesky (LAPACK) where P's rows hold this many entries on
# average and the n x n array fits (n <= DENSE_CHOLESKY_MAX_N, and half the memory budget), since a sparse
# factor of such a P fills in (docs/benchmarks.md, "Measurements behind the code"); else by sparse LDL'
# (optsolve.qp.ldl).
DENSE_CHOLESKY_ROW_NNZ = 64
DENSE_CHOLESKY_MAX_N = 8000
PSD_RTOL = 1e-5  # eigenvalues above -PSD_RTOL max(1, |lambda|_max) are rounding (VALUES has -1.3e-5 at 10.8)


def _finite_bounds(problem: Problem, key: str) -> None:
    v = problem[key]
    bad = np.flatnonzero(np.isnan(v))
    if bad.size:
        raise problem.error(f"array {key!r} contains NaN at index {int(bad[0])} ({bad.size} NaN entries in all); "
                            "expected numbers (use +-1e20 or +-inf for a missing bound).")


def _bounds_rule(problem: Problem) -> None:
    given = [k for k in ("A", "l", "u") if k in problem]
    if given and len(given) < 3:
        missing = next(k for k in ("A", "l", "u") if k not in problem)
        raise problem.error(f"missing key {missing!r}: constraints need all of 'A', 'l' and 'u' "
                            f"(found {', '.join(repr(k) for k in given)}).")
    if not given:
        return
    for key in ("l", "u"):
        _finite_bounds(problem, key)
    l, u = problem["l"], problem["u"]
    if np.any(l >= INFINITY):
        i = int(np.flatnonzero(l >= INFINITY)[0])
        raise problem.error(f"array 'l' has +infinity at index {i}: no x satisfies that row.")
    if np.any(u <= -INFINITY):
        i = int(np.flatnonzero(u <= -INFINITY)[0])
        raise problem.error(f"array 'u' has -infinity at index {i}: no x satisfies that row.")
    bad = np.flatnonzero(l > u)
    if bad.size:
        i = int(bad[0])
        raise problem.error(f"l > u at row {i} (l = {l[i]:.6g}, u = {u[i]:.6g}; {bad.size} such rows); "
                            "expected l <= u.")


def _sizes_rule(problem: Problem) -> None:
    for key in ("n", "m"):
        if key in problem:
            want = int(problem[key])
            got = problem.dims.get(key, 0)
            if want != problem[key] or want != got:
                raise problem.error(f"key {key!r} is {problem[key]:g}, but the arrays give {key} = {got}.")


def symmetric_P(problem: Problem):
    """P as a full symmetric CSC matrix (zero when absent) and how it was stored ('full' or 'upper'). The usual
    cases by index arithmetic on P's arrays (a few scipy calls cost most of a small problem's solve otherwise);
    a pattern that is not symmetric, and every refusal, by the general path (:func:`_symmetric_general`)."""
    n = problem["q"].shape[0]
    if "P" not in problem:
        return sp.csc_matrix((n, n)), "full"
    P = sp.csc_matrix(problem["P"])
    P.sum_duplicates()
    P.eliminate_zeros()
    rows, cols = P.indices, columns(P)
    below = bool(np.any(rows > cols))
    storage = problem.get("P_storage") or ("full" if below else "upper")
    if storage == "upper" and not below:  # P plus its strict upper triangle's transpose
        up = rows < cols
        return sp.csc_matrix((np.concatenate([P.data, P.data[up]]), (np.concatenate([rows, cols[up]]),
                              np.concatenate([cols, rows[up]]))), shape=P.shape), storage
    if storage == "full":
        T = P.tocsr()  # P' by columns: where P's pattern is symmetric, its arrays are P's, its data P's transposed
        if np.array_equal(T.indptr, P.indptr) and np.array_equal(T.indices, P.indices):
            big = float(np.abs(P.data).max(initial=0.0))
            if float(np.abs(P.data - T.data).max(initial=0.0)) <= SYMMETRY_RTOL * max(big, 1.0):
                half = sp.csc_matrix((P.data + T.data, P.indices.copy(), P.indptr.copy()), shape=P.shape)
                half.eliminate_zeros()  # as scipy's sum P + P' stores it, then halved
                half.data *= 0.5
                return half, storage
    return _symmetric_general(problem, P, storage)


def _symmetric_general(problem: Problem, P: sp.csc_matrix, storage: str):
    """:func:`symmetric_P` by scipy's operations, with its refusals: entries below the diagonal of an 'upper' P,
    or a P that is not symmetric."""
    lower, upper = sp.tril(P, -1), sp.triu(P, 1)
    if storage == "upper":
        if lower.nnz:
            r, c = lower.nonzero()
            raise problem.error(f"P_storage is 'upper' but 'P' has {lower.nnz} entries below the diagonal "
                                f"(first at ({int(r[0])}, {int(c[0])})).")
        return sp.csc_matrix(P + upper.T), storage
    asym = abs(P - P.T)
    big = float(abs(P).max()) if P.nnz else 0.0
    if asym.nnz and float(asym.max()) > SYMMETRY_RTOL * max(big, 1.0):
        coo = asym.tocoo()
        k = int(np.argmax(coo.data))
        i, j = int(coo.row[k]), int(coo.col[k])
        raise problem.error(f"array 'P' is not symmetric: P[{i}, {j}] = {P[i, j]:.6g} but P[{j}, {i}] = {P[j, i]:.6g}. "
                            "Give the full symmetric matrix, or only its upper triangle with P_storage 'upper'.")
    return sp.csc_matrix((P + P.T) * 0.5), storage


def _psd_rule(problem: Problem) -> None:
    P, _ = symmetric_P(problem)
    d = P.diagonal()
    if d.size and d.min() < 0:
        i = int(np.argmin(d))
        raise problem.error(f"array 'P' is not positive semidefinite: its diagonal entry P[{i}, {i}] = {d[i]:.6g} "
                            "is negative (the objective must be convex).")
    n = P.shape[0]
    if 0 < n <= PSD_CHECK_MAX_N and P.nnz:
        w = np.linalg.eigvalsh(P.toarray())
        scale = max(abs(w).max(), 1.0)
        if w[0] < -PSD_RTOL * scale:
            raise problem.error(f"array 'P' is not positive semidefinite: its smallest eigenvalue is {w[0]:.6g} "
                                f"(largest {w[-1]:.6g}); the objective must be convex.")
        if w[0] < 0:
            problem.warnings.append(f"array 'P' has a slightly negative eigenvalue {w[0]:.3g} (largest {w[-1]:.3g}), "
                                    "taken as rounding.")
    elif n > PSD_CHECK_MAX_N and P.nnz:  # larger: P + delta I must factor as a positive definite matrix
        delta = PSD_RTOL * max(1.0, float(abs(P).sum(axis=1).max()))  # |lambda|_max <= the largest row sum
        found = _indefinite_shifted(P, delta, problem.facts)
        if found is not None:
            raise problem.error(f"array 'P' is not positive semidefinite: P + {delta:.3g} I is not positive definite "
                                f"({found}); the objective must be convex.")


def _indefinite_shifted(P: sp.csc_matrix, delta: float, facts: dict | None = None) -> str | None:
    """None where P + delta I is positive definite, else what its factorisation found. Where a sparse factor was
    computed, ``facts["P_fill"]`` is set to its entries over those of P's upper triangle (read by the default method:
    :func:`optsolve.qp.auto.fills_in`); ``facts["P_work"]``, on either factor, to the sum of its squared column
    counts (the work of a factorisation of P, about twice its multiply-adds: :func:`optsolve.qp.auto.choose`)."""
    from optsolve.qp.ldl import NotQuasiDefinite, QuasiDefinite

    from optsolve.core import memory

    n = P.shape[0]
    if P.nnz >= DENSE_CHOLESKY_ROW_NNZ * n and n <= DENSE_CHOLESKY_MAX_N and 8 * n * n <= memory.budget_bytes() // 2:
        from scipy.linalg import lapack

        from optsolve.core.blocks import empty_base_pages

        H = P.toarray(out=empty_base_pages((n, n)))
        H[np.diag_indices(n)] += delta
        _, info = lapack.dpotrf(H.T, lower=1, overwrite_a=1, clean=0)  # H.T: the same matrix, in LAPACK's order
        if facts is not None:  # a dense factor of the columns with entries off the diagonal (1..k entries), and
            # the others' pivots (Q25FV47: 446 of its 1,571 columns)
            k = int(np.count_nonzero(np.diff(P.indptr) - (P.diagonal() != 0)))
            facts["P_work"] = k * (k + 1) * (2 * k + 1) / 6.0 + (n - k)
        return None if info == 0 else f"its Cholesky factorisation meets a non-positive pivot at row {info - 1}"
    try:
        factor = QuasiDefinite(P + delta * sp.eye(n, format="csc"), None, np.zeros(0), check=True)
    except NotQuasiDefinite as exc:
        return "its LDL' factorisation has " + ("a zero pivot" if exc.positive is None else
                                               f"{exc.positive} positive pivots of {n}")
    except RuntimeError as exc:  # non-finite pivots
        return f"it cannot be factored in float64: {exc}"
    if facts is not None:
        facts["P_fill"] = factor.factor_entries() / max(factor.K.nnz, 1)
        facts["P_work"] = factor.work
    return None


SCHEMA = Schema(
    name="qp",
    fields=(
        Field("P", shape=("n", "n"), sparse=True, required=False, doc="quadratic cost (symmetric PSD)"),
        Field("q", shape=("n",), doc="linear cost"),
        Field("A", shape=("m", "n"), sparse=True, required=False, doc="constraint matrix"),
        Field("l", shape=("m",), required=False, finite=False, doc="lower bounds (-inf or <= -1e19: none)"),
        Field("u", shape=("m",), required=False, finite=False, doc="upper bounds (+inf or >= 1e19: none)"),
        Field("r", kind="scalar", required=False, doc="objective constant"),
        Field("n", kind="scalar", required=False, doc="number of variables (checked)"),
        Field("m", kind="scalar", required=False, doc="number of constraints (checked)"),
        Field("P_storage", kind="string", required=False, choices=("full", "upper"),
              doc="'upper' when only the upper triangle of P is stored"),
        Field("partition", shape=("m",), dtype="int", required=False, nonneg=True,
              doc="node index of every constraint row (method distributed)"),
        Field("nodes", kind="scalar", dtype="int", required=False, positive=True,
              doc="number of nodes for the automatic partition (method distributed)"),
        Field("family", kind="string", required=False,
              doc="the generator family it belongs to ('optsolve gen qp' writes it): picks the shipped policy"),
    ),
    rules=(_bounds_rule, _sizes_rule, _psd_rule),
    reads_mps=True,
)


@dataclass
class QPProblem:
    """A QP in the form the solvers use: P full symmetric (CSC), A (CSC), bounds with +-inf."""

    P: sp.csc_matrix
    q: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray
    r: float = 0.0
    P_storage: str = "full"
    partition: np.ndarray | None = None
    nodes: int | None = None
    family: str | None = None
    P_fill: float | None = None  # P's sparse factor's entries over P's, where the file's convexity check factored P
    P_work: float | None = None  # the sum of that factor's squared column counts (sparse or dense), where computed

    @property
    def n(self) -> int:
        return self.q.shape[0]

    @property
    def m(self) -> int:
        return self.l.shape[0]

    def objective(self, x) -> float:
        with np.errstate(over="ignore", invalid="ignore"):  # an overflowed iterate gives inf or nan, said in the result
            return float(0.5 * x @ (self.P @ x) + self.q @ x + self.r)


def prepare(problem: Problem) -> QPProblem:
    P, storage = symmetric_P(problem)
    q = np.asarray(problem["q"], dtype=np.float64)
    n = q.shape[0]
    if "A" in problem:
        A = sp.csc_matrix(problem["A"], dtype=np.float64)
        l = np.where(problem["l"] <= -INFINITY, -np.inf, problem["l"]).astype(np.float64)
        u = np.where(problem["u"] >= INFINITY, np.inf, problem["u"]).astype(np.float64)
    else:
        A, l, u = sp.csc_matrix((0, n)), np.zeros(0), np.zeros(0)
    part = problem.get("partition")
    return QPProblem(P=P, q=q, A=A, l=l, u=u, r=float(problem.get("r", 0.0)), P_storage=storage,
                     P_fill=problem.facts.get("P_fill"), P_work=problem.facts.get("P_work"),
                     partition=None if part is None else np.asarray(part, dtype=np.int64),
                     nodes=None if problem.get("nodes") is None else int(problem["nodes"]),
                     family=problem.get("family"))


# --------------------------------------------------------------------------- generators
# The families of OSQP's benchmark suite (Stellato et al. 2020, "OSQP: an operator splitting
# solver for quadratic programs", section 7), sized by the total number of variables n.


def _sprandn(rng, m, n, density):
    return sp.random(m, n, density=density, format="csc", random_state=rng, data_rvs=rng.standard_normal)


def _qp(P, q, A, l, u) -> dict:
    return {"P": sp.csc_matrix(sp.triu(P)), "P_storage": "upper", "q": np.asarray(q, dtype=float),
            "A": sp.csc_matrix(A), "l": np.asarray(l, dtype=float), "u": np.asarray(u, dtype=float)}


def _density(n: int) -> float:
    """OSQP's 15% up to n = 100, then about 15 nonzeros per row (random sparsity fills a factor fast)."""
    return min(0.15, 15.0 / max(n, 1))


def gen_random(rng, n: int) -> dict:
    """Random QP: P = M M' + 1e-2 I, m = 10 n inequality rows; M and A 15% dense, sparser beyond n = 100."""
    m = 10 * n
    M = _sprandn(rng, n, n, _density(n))
    P = M @ M.T + 1e-2 * sp.eye(n)
    A = _sprandn(rng, m, n, _density(n))
    return _qp(P, rng.standard_normal(n), A, -rng.random(m), rng.random(m))


def gen_eqqp(rng, n: int) -> dict:
    """Equality-constrained QP: m = n / 2 rows l = u = A x0 (densities as for the random QP)."""
    m = max(1, n // 2)
    M = _sprandn(rng, n, n, _density(n))
    P = M @ M.T + 1e-2 * sp.eye(n)
    A = _sprandn(rng, m, n, _density(n))
    b = A @ rng.standard_normal(n)
    return _qp(P, rng.standard_normal(n), A, b, b)


def gen_portfolio(rng, n: int) -> dict:
    """Factor-model portfolio: x in the simplex, y = F'x; minimise x'Dx + y'y - mu'x."""
    k = max(1, n // 100)
    na = n - k
    F = _sprandn(rng, na, k, 0.5)
    D = sp.diags(rng.random(na) * np.sqrt(k))
    mu = rng.standard_normal(na)
    P = sp.block_diag((2.0 * D, 2.0 * sp.eye(k)), format="csc")
    q = np.concatenate([-mu, np.zeros(k)])
    A = sp.vstack([sp.hstack([F.T, -sp.eye(k)]), sp.hstack([np.ones((1, na)), sp.csc_matrix((1, k))]),
                   sp.hstack([sp.eye(na), sp.csc_matrix((na, k))])], format="csc")
    l = np.concatenate([np.zeros(k), [1.0], np.zeros(na)])
    u = np.concatenate([np.zeros(k), [1.0], np.ones(na)])
    return _qp(P, q, A, l, u)


def gen_lasso(rng, n: int) -> dict:
    """Lasso, min ||Ax - b||^2 + lambda ||x||_1 as a QP over (x, y = Ax - b, t >= |x|); p features, 10 p samples."""
    p = max(1, n // 12)
    ms = 10 * p
    Ad = _sprandn(rng, ms, p, 0.15)
    xt = np.where(rng.random(p) > 0.5, rng.standard_normal(p) / np.sqrt(p), 0.0)
    b = Ad @ xt + rng.standard_normal(ms)
    lam = float(np.abs(Ad.T @ b).max()) / 5.0
    P = sp.block_diag((sp.csc_matrix((p, p)), 2.0 * sp.eye(ms), sp.csc_matrix((p, p))), format="csc")
    q = np.concatenate([np.zeros(p + ms), lam * np.ones(p)])
    I = sp.eye(p)
    A = sp.vstack([sp.hstack([Ad, -sp.eye(ms), sp.csc_matrix((ms, p))]),
                   sp.hstack([I, sp.csc_matrix((p, ms)), -I]),
                   sp.hstack([I, sp.csc_matrix((p, ms)), I])], format="csc")
    l = np.concatenate([b, -np.inf * np.ones(p), np.zeros(p)])
    u = np.concatenate([b, np.zeros(p), np.inf * np.ones(p)])
    return _qp(P, q, A, l, u)


def gen_huber(rng, n: int) -> dict:
    """Huber fitting: min sum huber(a_i'x - b_i) as a QP over (x, u, r, s); p features, 10 p samples."""
    p = max(1, n // 31)
    ms = 10 * p
    Ad = _sprandn(rng, ms, p, 0.15)
    xt = rng.standard_normal(p) / np.sqrt(p)
    noise = np.where(rng.random(ms) < 0.95, 0.1 * rng.standard_normal(ms), 10.0 * rng.random(ms))
    b = Ad @ xt + noise
    Im = sp.eye(ms)
    Z = sp.csc_matrix
    P = sp.block_diag((Z((p, p)), 2.0 * Im, Z((2 * ms, 2 * ms))), format="csc")
    q = np.concatenate([np.zeros(p + ms), 2.0 * np.ones(2 * ms)])
    A = sp.vstack([sp.hstack([Ad, -Im, -Im, Im]),
                   sp.hstack([Z((2 * ms, p + ms)), sp.eye(2 * ms)])], format="csc")
    l = np.concatenate([b, np.zeros(2 * ms)])
    u = np.concatenate([b, np.inf * np.ones(2 * ms)])
    return _qp(P, q, A, l, u)


def gen_svm(rng, n: int) -> dict:
    """Support vector machine: min x'x + lambda sum t, t >= diag(b) A x + 1, t >= 0; p features, 10 p samples."""
    p = max(1, n // 11)
    ms = 10 * p
    half = ms // 2
    A_up = _sprandn(rng, half, p, 0.15) + (1.0 / p) * _sprandn(rng, half, p, 0.15).sign()
    A_lo = _sprandn(rng, ms - half, p, 0.15) - (1.0 / p) * _sprandn(rng, ms - half, p, 0.15).sign()
    Ad = sp.vstack([A_up, A_lo], format="csc")
    b = np.concatenate([np.ones(half), -np.ones(ms - half)])
    lam = 1.0
    P = sp.block_diag((2.0 * sp.eye(p), sp.csc_matrix((ms, ms))), format="csc")
    q = np.concatenate([np.zeros(p), lam * np.ones(ms)])
    A = sp.vstack([sp.hstack([sp.diags(b) @ Ad, -sp.eye(ms)]),
                   sp.hstack([sp.csc_matrix((ms, p)), sp.eye(ms)])], format="csc")
    l = np.concatenate([-np.inf * np.ones(ms), np.zeros(ms)])
    u = np.concatenate([-np.ones(ms), np.inf * np.ones(ms)])
    return _qp(P, q, A, l, u)


def gen_mpc(rng, n: int) -> dict:
    """Model predictive control: horizon 10, nx states and nx/2 inputs, dynamics and box constraints."""
    T = 10
    nx = max(2, int(round(n / (1.5 * T + 1))))
    nu = max(1, nx // 2)
    Ad = sp.eye(nx) + _sprandn(rng, nx, nx, 0.1) * 0.1
    Bd = _sprandn(rng, nx, nu, 0.5)
    Q = sp.diags(rng.random(nx) * 10.0)
    R = 0.1 * sp.eye(nu)
    x0 = rng.standard_normal(nx) * 0.5
    nv = (T + 1) * nx + T * nu
    P = sp.block_diag([sp.kron(sp.eye(T + 1), Q), sp.kron(sp.eye(T), R)], format="csc")
    q = np.zeros(nv)
    Ax = sp.kron(sp.eye(T + 1), -sp.eye(nx)) + sp.kron(sp.eye(T + 1, k=-1), Ad)
    Bu = sp.kron(sp.vstack([sp.csc_matrix((1, T)), sp.eye(T)]), Bd)
    Aeq = sp.hstack([Ax, Bu])
    leq = np.concatenate([-x0, np.zeros(T * nx)])
    xmax, umax = 5.0 + 5.0 * rng.random(nx), 1.0 + rng.random(nu)
    A = sp.vstack([Aeq, sp.eye(nv)], format="csc")
    l = np.concatenate([leq, np.tile(-xmax, T + 1), np.tile(-umax, T)])
    u = np.concatenate([leq, np.tile(xmax, T + 1), np.tile(umax, T)])
    return _qp(P, q, A, l, u)


# Network-structured families (ours): each file carries the natural partition of its rows.


def _banded(rng, rows: int, cols: int, width: int = 8) -> sp.coo_matrix:
    """Gaussian entries in a band: row i touches ``width`` columns around i cols/rows (all when fewer)."""
    width = min(width, cols)
    first = np.clip((np.arange(rows) * cols) // max(rows, 1) - width // 2, 0, cols - width)
    c = first[:, None] + np.arange(width)[None, :]
    r = np.repeat(np.arange(rows), width)
    return sp.coo_matrix((rng.standard_normal(rows * width), (r, c.ravel())), shape=(rows, cols))


def _block_qp(rng, k):
    """A banded PSD block M M'/8 + 0.1 I (M with 8 entries a row) and its linear cost: the same
    structure at every size, and large blocks still factor cheaply."""
    M = _banded(rng, k, k).tocsr() / math.sqrt(8.0)
    return sp.coo_matrix(M @ M.T + 0.1 * sp.eye(k)), rng.standard_normal(k)


class _Triplets:
    """A sparse matrix assembled from blocks placed at offsets (duplicates add up)."""

    def __init__(self):
        self.r, self.c, self.v = [], [], []

    def add(self, block: sp.coo_matrix, row0: int, col0: int):
        self.r.append(block.row + row0)
        self.c.append(block.col + col0)
        self.v.append(block.data)

    def matrix(self, shape) -> sp.csc_matrix:
        if not self.r:
            return sp.csc_matrix(shape)
        return sp.csc_matrix((np.concatenate(self.v), (np.concatenate(self.r), np.concatenate(self.c))), shape=shape)


def gen_chain(rng, n: int, blocks: int = 8) -> dict:
    """A chain of blocks of variables, neighbours sharing a quarter of theirs; each block has its own
    banded PSD cost and banded inequality rows over its variables; ``partition`` = the block of
    every row."""
    blocks = max(1, min(blocks, n // 4))
    size = max(4, int(round(n / (0.75 * blocks + 0.25))))
    overlap = size // 4
    step = size - overlap
    nv = step * (blocks - 1) + size
    P, A = _Triplets(), _Triplets()
    q = np.zeros(nv)
    part, lo, hi = [], [], []
    for b in range(blocks):
        off = b * step
        Q, qb = _block_qp(rng, size)
        P.add(Q, off, off)
        q[off:off + size] += qb
        A.add(_banded(rng, size, size, 4), b * size, off)  # banded rows, a unit entry on each diagonal
        A.add(sp.eye(size, format="coo"), b * size, off)
        part.append(np.full(size, b))
        lo.append(-1.0 - rng.random(size))
        hi.append(1.0 + rng.random(size))
    data = _qp(P.matrix((nv, nv)), q, A.matrix((blocks * size, nv)), np.concatenate(lo), np.concatenate(hi))
    data["partition"] = np.concatenate(part).astype(np.int64)
    return data


def gen_grid(rng, n: int, side: int = 3) -> dict:
    """Agents on a side x side grid, each with its own variables, PSD cost and box rows, coupled to its
    right and lower neighbours by rows over both blocks; ``partition`` = the agent of every row."""
    side = max(1, min(side, int(math.sqrt(max(n // 4, 1)))))
    agents = side * side
    size = max(2, n // agents)
    nv = size * agents
    P, A = _Triplets(), _Triplets()
    q = np.zeros(nv)
    part, lo, hi = [], [], []
    row0 = 0
    for a in range(agents):
        Q, qa = _block_qp(rng, size)
        P.add(Q, a * size, a * size)
        q[a * size:(a + 1) * size] = qa
        r, c = divmod(a, side)
        A.add(sp.eye(size, format="coo"), row0, a * size)
        rows_a = size
        for nb in ([a + 1] if c + 1 < side else []) + ([a + side] if r + 1 < side else []):
            k = max(1, size // 2)
            A.add(_banded(rng, k, size), row0 + rows_a, a * size)
            A.add(_banded(rng, k, size), row0 + rows_a, nb * size)
            rows_a += k
        part.append(np.full(rows_a, a))
        lo.append(-1.0 - rng.random(rows_a))
        hi.append(1.0 + rng.random(rows_a))
        row0 += rows_a
    data = _qp(P.matrix((nv, nv)), q, A.matrix((row0, nv)), np.concatenate(lo), np.concatenate(hi))
    data["partition"] = np.concatenate(part).astype(np.int64)
    return data


def gen_flow(rng, n: int, regions: int = 8) -> dict:
    """Min-cost flow with quadratic costs on a random sparse directed graph: conservation at every
    vertex (supplies sum to 0), capacities as bounds; ``partition`` cuts the vertices into regions."""
    edges_target = max(8, n)
    verts = max(4, edges_target // 4)
    regions = max(1, min(regions, verts))  # a region per vertex at most (and no overflow of verts * regions)
    rng_edges = set()
    for v in range(verts):  # a ring keeps the graph connected
        rng_edges.add((v, (v + 1) % verts))
    window = max(3, verts // regions)  # edges stay local, so that regions are loosely coupled
    for _ in range(50 * edges_target):
        if len(rng_edges) >= edges_target:
            break
        a = int(rng.integers(0, verts))
        b = a + int(rng.integers(-window + 1, window))
        if b != a and 0 <= b < verts:
            rng_edges.add((a, b))
    E = np.array(sorted(rng_edges))
    ne = len(E)
    inc = sp.csr_matrix((np.concatenate([-np.ones(ne), np.ones(ne)]),
                         (np.concatenate([E[:, 0], E[:, 1]]), np.concatenate([np.arange(ne)] * 2))),
                        shape=(verts, ne))
    supply = rng.standard_normal(verts)
    supply -= supply.mean()
    cap = 1.0 + 2.0 * rng.random(ne)
    P = sp.diags(0.1 + rng.random(ne))
    q = rng.random(ne)
    A = sp.vstack([inc, sp.eye(ne)], format="csc")
    l = np.concatenate([supply, np.zeros(ne)])
    u = np.concatenate([supply, cap * 10.0])
    region_of_vertex = np.minimum(np.arange(verts) * regions // verts, regions - 1)
    edge_region = region_of_vertex[E[:, 0]]
    data = _qp(P, q, A, l, u)
    data["partition"] = np.concatenate([region_of_vertex, edge_region]).astype(np.int64)
    return data


# Peak bytes of a generator as a + b n per variable (measured at n = 2,000 and 20,000, with a margin):
# the families with a dense block of features (lasso, huber, svm, portfolio, mpc) grow as n^2.
FOOTPRINT = {"random": (12000, 0.0), "eqqp": (9000, 0.0), "portfolio": (1000, 0.5), "lasso": (2000, 1.0),
             "huber": (1000, 0.2), "svm": (4000, 2.5), "mpc": (4000, 2.0), "chain": (2000, 0.0),
             "grid": (2000, 0.0), "flow": (1000, 0.0)}


def generation_bytes(name: str, n: int) -> float:
    """About the peak memory of generating one problem of family ``name`` with ``n`` variables."""
    a, b = FOOTPRINT.get(name, (12000, 2.5))
    return float(n) * (a + b * float(n))


def _check_sizes(name: str, params: dict) -> None:
    """Refuse (ValueError: a usage error of ``optsolve gen``) a size below 1, or an ``n`` whose problem
    would not fit the memory budget (:func:`optsolve.core.memory.budget_bytes`), before anything is drawn."""
    from optsolve.core import memory

    for key, value in params.items():
        if isinstance(value, int) and value < 1:
            raise ValueError(f"The '--{key}' option must be an integer >= 1; got {value}.")
    n = params.get("n", 1)
    need = generation_bytes(name, n)
    if not need <= memory.budget_bytes():
        raise ValueError(f"The '--n' option is {n}: family {name!r} needs about {memory.human_bytes(need)} to "
                         f"generate a problem of that size, more than the memory budget of "
                         f"{memory.human_bytes(memory.budget_bytes())} (raise it with {memory.ENV_VAR}).")


def _tagged(name: str, generate):
    """``generate`` whose problems record their family (it picks the shipped policy), sizes checked first."""
    def tagged(rng, **params):
        _check_sizes(name, params)
        return dict(generate(rng, **params), family=name)

    tagged.__doc__ = generate.__doc__
    return tagged


_N = Param("n", int, 100, "number of variables (about: each family sizes its parts from it)")
FAMILIES = {
    "random": Family("random", "random QP, m = 10 n inequality rows (OSQP benchmark)", gen_random, (_N,)),
    "eqqp": Family("eqqp", "equality-constrained QP, m = n/2", gen_eqqp, (_N,)),
    "portfolio": Family("portfolio", "factor-model portfolio optimisation", gen_portfolio, (_N,)),
    "lasso": Family("lasso", "Lasso regression as a QP", gen_lasso, (_N,)),
    "huber": Family("huber", "Huber fitting as a QP", gen_huber, (_N,)),
    "svm": Family("svm", "support vector machine as a QP", gen_svm, (_N,)),
    "mpc": Family("mpc", "model predictive control, horizon 10", gen_mpc, (_N,)),
    "chain": Family("chain", "a chain of overlapping blocks, partition = blocks (network-structured)", gen_chain,
                    (_N, Param("blocks", int, 8, "blocks in the chain"))),
    "grid": Family("grid", "agents on a grid coupled to their neighbours, partition = agents (network-structured)",
                   gen_grid, (_N, Param("side", int, 3, "agents per side of the grid"))),
    "flow": Family("flow", "quadratic-cost network flow, partition = regions of the graph (network-structured)",
                   gen_flow, (_N, Param("regions", int, 8, "regions of the graph"))),
}
FAMILIES = {name: Family(f.name, f.help, _tagged(name, f.generate), f.params) for name, f in FAMILIES.items()}
