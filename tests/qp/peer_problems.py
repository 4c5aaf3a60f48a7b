"""Quadratic programs from two peers' test suites, in optsolve's form as ``(name, source, data, expected)``.

From qpsolvers (github.com/qpsolvers/qpsolvers): ``tests/problems.py`` (the SD3310 problem, qpmad's demo, the
problem with an infinite inequality bound), ``tests/test_solve_qp.py`` (the dense problem's variants: bounds,
no constraint, inequalities only, equalities only, one inequality, every shape of constraints; the sparse
150-variable problem, with bounds and infeasible; the rank-one cost unbounded below),
``tests/test_unfeasible_problem.py``, and ``qpsolvers/problems.py``, whose QPSUT01-05, QPTEST and QPGURDU/ABS/EQ
``tests/test_solve_problem.py`` solves (with an infinite box bound in QPSUT01 too).
From OSQP's Python interface (github.com/osqp/osqp-python), ``src/osqp/tests/``: ``basic_test.py`` (the basic
QP and its updates of q, l and u), ``feasibility_test.py``, ``polishing_test.py``, ``unconstrained_test.py``,
``primal_infeasibility_test.py``, ``dual_infeasibility_test.py``, ``non_convex_test.py``,
``update_matrices_test.py``, ``warm_start_test.py``, ``codegen_matrices_test.py`` and ``derivative_test.py``.

Matrices and numbers are the peers'; the code that builds them is this module's. qpsolvers' form
``G x <= h, A x = b, lb <= x <= ub`` becomes one ``l <= A x <= u`` block (inequalities, then equalities, then the
box as identity rows). OSQP's tests draw their random problems from ``np.random.seed``; here they are drawn with numpy's
``default_rng`` with the same seeds, sizes, densities and distributions, so the numbers differ from OSQP's
(``sparse_uniform`` stands for ``scipy.sparse.random``: that many uniform entries at distinct places).

``data`` holds dense float arrays: ``P`` (full symmetric), ``q`` and, when there are constraints, ``A``, ``l``,
``u`` (``+-inf`` for a missing side). ``expected`` is the status optsolve must report (``optimal``,
``infeasible``, ``unbounded``), a tuple of the statuses that are all right, or ``invalid_input`` for a cost
that is not convex (refused when the problem is validated). :data:`STATED` holds the solutions the peers'
tests state (rounded as they give them).
"""

from __future__ import annotations

import itertools

import numpy as np

QPSOLVERS = "qpsolvers/qpsolvers"
OSQP = "osqp/osqp-python"
INF = np.inf


def _vec(values) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).ravel()


def from_qpsolvers(P, q, G=None, h=None, A=None, b=None, lb=None, ub=None) -> dict:
    """qpsolvers' ``1/2 x'Px + q'x`` s.t. ``Gx <= h``, ``Ax = b``, ``lb <= x <= ub`` as ``l <= Ax <= u``."""
    P = np.atleast_2d(np.asarray(P, dtype=np.float64))
    n = P.shape[0]
    rows, lows, ups = [], [], []
    if G is not None:
        G = np.asarray(G, dtype=np.float64).reshape(-1, n)  # one row may come as a vector
        rows.append(G)
        lows.append(np.full(G.shape[0], -INF))
        ups.append(_vec(h))
    if A is not None:
        A = np.asarray(A, dtype=np.float64).reshape(-1, n)
        rows.append(A)
        lows.append(_vec(b))
        ups.append(_vec(b))
    if lb is not None or ub is not None:
        rows.append(np.eye(n))
        lows.append(np.full(n, -INF) if lb is None else _vec(lb))
        ups.append(np.full(n, INF) if ub is None else _vec(ub))
    data = {"P": P, "q": _vec(q)}
    if rows:
        data.update(A=np.vstack(rows), l=np.concatenate(lows), u=np.concatenate(ups))
    return data


def sparse_uniform(rng, m: int, n: int, density: float = 0.01) -> np.ndarray:
    """An m x n array with round(density m n) entries, U[0, 1), at distinct random places (dense storage)."""
    k = int(round(density * m * n))
    out = np.zeros(m * n)
    out[rng.choice(m * n, size=k, replace=False)] = rng.random(k)
    return out.reshape(m, n)


# --------------------------------------------------------------------------- qpsolvers

def _sd3310_cost():
    M = np.array([[1.0, 2.0, 0.0], [-8.0, 3.0, 2.0], [0.0, 1.0, 1.0]])
    return M.T @ M, np.array([3.0, 2.0, 3.0]) @ M


SD3310_G = np.array([[1.0, 2.0, 1.0], [2.0, 0.0, 1.0], [-1.0, 2.0, -1.0]])
SD3310_H = np.array([3.0, 2.0, -2.0])


def sd3310_family():
    """The dense 3-variable problem and the variants test_solve_qp.py solves, with their stated solutions."""
    P, q = _sd3310_cost()
    G, h, A, b = SD3310_G, SD3310_H, np.ones((1, 3)), np.array([1.0])
    src = f"{QPSOLVERS}: tests/test_solve_qp.py"
    return [
        ("sd3310", f"{QPSOLVERS}: tests/problems.py", from_qpsolvers(P, q, G, h, A, b), "optimal",
         [0.30769231, -0.69230769, 1.38461538]),
        ("sd3310_bounds", src, from_qpsolvers(P, q, G, h, A, b, [-1.0, -2.0, -0.5], [1.0, -0.2, 1.0]), "optimal",
         [0.41463415, -0.41463415, 1.0]),
        ("sd3310_unconstrained", src, from_qpsolvers(P, q), "optimal", [-0.64705882, -1.17647059, -1.82352941]),
        ("sd3310_inequalities_only", src, from_qpsolvers(P, q, G, h), "optimal",
         [-0.49025721, -1.57755261, -0.66484801]),
        ("sd3310_equality_only", src, from_qpsolvers(P, q, A=A, b=b), "optimal", [0.28026906, -1.55156951, 2.27130045]),
        ("sd3310_one_inequality", src, from_qpsolvers(P, q, G[1], h[1:2], A, b), "optimal",
         [0.30769231, -0.69230769, 1.38461538]),
        # test_unfeasible_problem.py: x1 + x2 + x3 <= 3 against x1 + x2 + x3 = 42
        ("sd3310_equality_42", f"{QPSOLVERS}: tests/test_unfeasible_problem.py",
         from_qpsolvers(P, q, np.vstack([np.ones(3), G[1:]]), SD3310_H, A, [42.0]), "infeasible", None),
    ]


def sd3310_shapes():
    """test_solve_qp.py's all-shapes test: every combination of inequalities (all, the first, none), equalities
    (two rows, the first, none) and box (none, lb, ub, both); DAQP is the reference there. The two combinations
    that repeat a problem of :func:`sd3310_family` are left out."""
    P, q = _sd3310_cost()
    A, b = np.array([[1.0, 0.0, 0.0], [0.0, 0.4, 0.5]]), np.array([-0.5, -1.2])
    lb, ub = np.array([-0.5, -2.0, -0.8]), np.array([1.0, 1.0, 1.0])
    ineq = {"G": (SD3310_G, SD3310_H), "G0": (SD3310_G[0], SD3310_H[:1]), "noG": (None, None)}
    eq = {"A": (A, b), "A0": (A[0], b[:1]), "noA": (None, None)}
    box = {"box": (lb, ub), "lb": (lb, None), "ub": (None, ub), "nobox": (None, None)}
    out = []
    for (gi, (G, h)), (ai, (Aa, bb)), (bi, (lo, hi)) in itertools.product(ineq.items(), eq.items(), box.items()):
        if ai == "noA" and bi == "nobox" and gi in ("G", "noG"):
            continue  # sd3310_inequalities_only and sd3310_unconstrained
        out.append((f"sd3310_shape_{gi}_{ai}_{bi}", f"{QPSOLVERS}: tests/test_solve_qp.py (all shapes)",
                    from_qpsolvers(P, q, G, h, Aa, bb, lo, hi), "optimal", None))
    return out


def _sparse150():
    """test_solve_qp.py's sparse problem: P = M M' with M tridiagonal (1 on the diagonal, 1 below, -1 above, first
    and last rows the identity's), q = -1, x >= 2 written as -x <= -2."""
    n = 150
    M = np.eye(n)
    for i in range(1, n - 1):
        M[i, i + 1], M[i, i - 1] = -1.0, 1.0
    return M @ M.T, -np.ones(n), -np.eye(n), -2.0 * np.ones(n)


def sparse150_family():
    P, q, G, h = _sparse150()
    n, src = q.size, f"{QPSOLVERS}: tests/test_solve_qp.py"
    return [
        ("sparse150", src, from_qpsolvers(P, q, G, h), "optimal", [2.0] * 149 + [3.0]),
        ("sparse150_bounds", src, from_qpsolvers(P, q, G, h, lb=np.full(n, 2.2), ub=np.full(n, 2.4)), "optimal",
         [2.2] * 149 + [2.4]),
        # x >= 2 against x <= 1.5
        ("sparse150_infeasible", src, from_qpsolvers(P, q, G, h, lb=np.full(n, 0.5), ub=np.full(n, 1.5)),
         "infeasible", None),
    ]


def rank_one_unbounded():
    """test_solve_qp.py's unbounded-below test: P = v v' of rank one, q orthogonal to v, no constraint."""
    v = np.array([5.4, -1.2, -1e-2, 1e4])
    return ("rank_one_unbounded", f"{QPSOLVERS}: tests/test_solve_qp.py", from_qpsolvers(np.outer(v, v),
            [-1.0, -2.0, 0.0, 3e-4]), "unbounded", None)


def qpmad_demo():
    """qpmad's demo (tests/problems.py): P = I, q = 1, |sum(x)| <= 1.5, the first four variables fixed at 1..4."""
    lb = np.concatenate([[1.0, 2.0, 3.0, 4.0], np.full(16, -5.0)])
    ub = np.concatenate([[1.0, 2.0, 3.0, 4.0], np.full(16, 0.5)])
    G = np.vstack([np.ones(20), -np.ones(20)])
    return ("qpmad_demo", f"{QPSOLVERS}: tests/problems.py", from_qpsolvers(np.eye(20), np.ones(20), G, [1.5, 1.5],
            lb=lb, ub=ub), "optimal", [1.0, 2.0, 3.0, 4.0] + [-0.71875] * 16)


def _qpsut01(h0=1.0, lb1=-0.4, ub1=1.0):
    P, q = _sd3310_cost()
    return from_qpsolvers(P, q, [[4.0, 2.0, 0.0], [-1.0, 2.0, -1.0]], [h0, -2.0], np.ones((1, 3)), [1.0],
                          [-0.5, lb1, -0.5], [1.0, ub1, 1.0])


def _qpsut02_cost():
    M = np.array([[1.0, -2.0, 0.0, 8.0], [-6.0, 3.0, 1.0, 4.0], [-2.0, 1.0, 0.0, 1.0], [9.0, 9.0, 5.0, 3.0]])
    return M.T @ M, np.array([-3.0, 2.0, 0.0, 9.0]) @ M


# QPGURDU's data (qpsolvers/problems.py): P's upper triangle row by row, then q, G (10 x 10, row by row) and h
QPGURDU_P_UPPER = """
3.57211988 3.04767485 2.81378189 3.10290601 3.70204698 3.21624815 3.07738552 2.97880055 2.87282375 3.13101137
3.29764869 2.96655517 2.99532101 3.27631229 2.95993532 3.36890754 3.41940015 2.71055468 3.48874903
4.07209512 3.15291684 3.25120445 3.16570711 3.29693401 3.57945021 2.38634372 3.56010605
4.18950328 3.80236382 3.30578443 3.86461151 3.73403774 2.65103423 3.69150130
4.49927773 3.71882781 3.72242148 3.36633929 3.07400851 3.44904275
3.54009378 3.36193410 3.45111777 2.52760157 3.47292034
4.18766506 3.91585270 2.73687599 3.94376429
4.41804590 2.50596495 4.25387869
2.74656049 2.54212279
4.63412900
"""
QPGURDU_Q = ("0.49318579 0.82113304 0.67851692 0.34081485 0.14826526 "
             "0.81974126 0.41957706 0.53118637 0.59189664 0.98775649")
QPGURDU_G = """
0.438410058 0.443204832 0.301827071 0.0577725615 0.804962962
0.613555163 0.115255766 0.711331164 0.0771820534 0.386074035
0.847645982 0.937475356 0.354726656 0.964635375 0.595008737
0.465424573 0.36052991 0.583149169 0.551353698 0.8458238
0.000229674075 0.0554870256 0.783869376 0.997727284 0.149512389
0.744775614 0.0876446593 0.257348591 0.728916655 0.59751159
0.692184129 0.904600884 0.757700115 0.776548565 0.531039749
0.832203998 0.427810742 0.192236814 0.291129478 0.776195308
0.473333212 0.0302129792 0.686517354 0.508992776 0.843205462
0.630402967 0.792221172 0.367768984 0.11086499 0.54482894
0.92306098 0.455743966 0.0481958856 0.0547614699 0.823194952
0.240526659 0.933519842 0.540430172 0.627229337 0.427829243
0.239454128 0.129688157 0.764521599 0.266943061 0.494990723
0.38779816 0.576282838 0.887340479 0.54943965 0.29959652
0.0373174589 0.408407618 0.119009418 0.0302572289 0.190287316
0.293975786 0.765243508 0.0864670246 0.390593097 0.133870683
0.910093385 0.0963382642 0.294162739 0.971178995 0.18181146
0.0969904715 0.410693806 0.756873549 0.236595007 0.319756491
0.0858362518 0.0788161645 0.967300428 0.259894669 0.162774911
0.333859109 0.615307748 0.0181164951 0.599620503 0.571512979
"""
QPGURDU_H = ("4.94957567 7.50577326 5.40302286 7.18164978 5.98834884 "
             "6.07449251 5.59605532 3.45542914 5.27449417 4.69303926")


def _numbers(text: str) -> np.ndarray:
    return np.array(text.split(), dtype=np.float64)


def qpgurdu_data():
    """QPGURDU's (P, q, G, h): P symmetric from its upper triangle."""
    n = 10
    P = np.zeros((n, n))
    P[np.triu_indices(n)] = _numbers(QPGURDU_P_UPPER)
    P = P + np.triu(P, 1).T
    return P, _numbers(QPGURDU_Q), _numbers(QPGURDU_G).reshape(n, n), _numbers(QPGURDU_H)


def qpsolvers_problems_py():
    """qpsolvers/problems.py's problems, as tests/test_solve_problem.py solves them, with stated solutions."""
    src = f"{QPSOLVERS}: qpsolvers/problems.py (tests/test_solve_problem.py)"
    P2, q2 = _qpsut02_cost()
    A2 = np.array([[1.0, 1.0, 1.0, 1.0], [1.0, -1.0, -1.0, 1.0]])
    Pg, qg, Gg, hg = qpgurdu_data()
    return [
        ("qpsut01", src, _qpsut01(), "optimal", [0.4, -0.4, 1.0]),
        ("qpsut02", src, from_qpsolvers(P2, q2, [[4.0, 7.0, 0.0, -2.0]], [30.0], A2, [10.0, 0.0],
                                        [-2.0, -1.0, -3.0, 1.0], [4.0, 2.0, 6.0, 10.0]), "optimal",
         [1.36597938, -1.0, 6.0, 3.63402062]),
        # box bounds only, some of them infinite
        ("qpsut03", src, from_qpsolvers(P2, q2, lb=[-INF, -0.4, -INF, -1.0], ub=[INF, INF, 0.5, 1.0]), "optimal",
         [0.18143455, 0.00843864, -2.35442995, 0.35443034]),
        ("qpsut04", src, from_qpsolvers(np.eye(3), np.full(3, 0.01), np.eye(3), np.ones(3), np.ones(3), [1.0]),
         "optimal", [1.0 / 3.0] * 3),
        ("qpsut05", src, from_qpsolvers([[2.0]], [-2.0]), "optimal", [1.0]),
        ("qptest", src, from_qpsolvers([[8.0, 2.0], [2.0, 10.0]], [1.5, -2.0], [[-1.0, 2.0], [-2.0, -1.0]], [6.0, -2.0],
                                       lb=[0.0, 0.0], ub=[20.0, INF]), "optimal", [0.7625, 0.475]),
        ("qpgurdu", src, from_qpsolvers(Pg, qg, Gg, hg), "optimal", None),
        ("qpgurabs", src, from_qpsolvers(Pg, qg, lb=-np.abs(hg), ub=np.abs(hg)), "optimal", None),
        ("qpgureq", src, from_qpsolvers(Pg, qg, A=Gg, b=0.1 * hg), "optimal", None),
        ("qpsut01_infinite_box", f"{QPSOLVERS}: tests/test_solve_problem.py", _qpsut01(lb1=-INF, ub1=INF), "optimal",
         None),
        # QPSUT01 with h[0] = +inf (test_solve_problem.py's infinite linear bounds test solves the same problem)
        ("infinite_inequality", f"{QPSOLVERS}: tests/problems.py", _qpsut01(h0=INF), "optimal", [0.4, -0.4, 1.0]),
    ]


# --------------------------------------------------------------------------- osqp-python

BASIC_A = np.array([[-1.0, 0.0], [0.0, -1.0], [-1.0, -3.0], [2.0, 5.0], [3.0, 4.0]])
BASIC_U = np.array([0.0, 0.0, -15.0, 100.0, 80.0])


def _basic(q=(3.0, 4.0), l=-1e6, u=BASIC_U, p2=0.0, A=BASIC_A):
    """basic_test.py's QP: min 11/2 x1^2 + 3 x1 + 4 x2 over five rows (and its updates)."""
    return {"P": np.diag([11.0, p2]), "q": _vec(q), "A": np.array(A, dtype=np.float64),
            "l": np.full(5, float(l)), "u": np.broadcast_to(_vec(u), (5,)).copy()}


def osqp_fixed():
    """The small problems OSQP's tests write out in full."""
    t = f"{OSQP}: src/osqp/tests/"
    cone = np.array([[1.0, -1.0], [-1.0, 1.0], [1.0, 0.0], [0.0, 1.0]])
    return [
        # solutions/test_basic_QP.npz stores x = (1.5e-6, 5.0), f = 20.0000025: the vertex (0, 5), f = 20
        ("basic_qp", t + "basic_test.py", _basic(), "optimal", [0.0, 5.0]),
        ("basic_qp_update_q", t + "basic_test.py", _basic(q=(10.0, 20.0)), "optimal", None),
        ("basic_qp_update_l", t + "basic_test.py", _basic(l=-50.0), "optimal", None),
        ("basic_qp_update_u", t + "basic_test.py", _basic(u=1000.0), "optimal", None),
        ("basic_qp_update_bounds", t + "basic_test.py", _basic(l=-100.0, u=1000.0), "optimal", None),
        ("polish_simple", t + "polishing_test.py", _basic(l=-1e5), "optimal", None),
        ("codegen_matrices", t + "codegen_matrices_test.py", _basic(l=-INF, p2=0.1), "optimal", None),
        ("codegen_matrices_new_A", t + "codegen_matrices_test.py",
         _basic(l=-INF, p2=0.1, A=np.vstack([BASIC_A[:2], [-2.0, -2.0], BASIC_A[3:]])), "optimal", None),
        # min 2 x1 - x2 over x >= 0: unbounded along (0, 1)
        ("dual_infeasible_lp", t + "dual_infeasibility_test.py",
         {"P": np.zeros((2, 2)), "q": _vec([2.0, -1.0]), "A": np.eye(2), "l": np.zeros(2), "u": np.full(2, INF)},
         "unbounded", None),
        # min 2 x1^2 + 2 x2 with x1 + x2 <= 2, x2 - x1 <= 3: unbounded along (0, -1)
        ("dual_infeasible_qp", t + "dual_infeasibility_test.py",
         {"P": np.diag([4.0, 0.0]), "q": _vec([0.0, 2.0]), "A": np.array([[1.0, 1.0], [-1.0, 1.0]]),
          "l": np.full(2, -INF), "u": _vec([2.0, 3.0])}, "unbounded", None),
        # x1 - x2 >= 1 and x2 - x1 >= 1 (infeasible), and q'd < 0 along d = (1, 1) in x >= 0: either claim is right
        ("primal_and_dual_infeasible", t + "primal_infeasibility_test.py, dual_infeasibility_test.py",
         {"P": np.zeros((2, 2)), "q": _vec([-1.0, -1.0]), "A": cone, "l": _vec([1.0, 1.0, 0.0, 0.0]),
          "u": np.full(4, INF)}, ("infeasible", "unbounded"), None),
        # P = [[2, 5], [5, 1]] (OSQP is given its upper triangle): eigenvalues 1.5 +- 5.02, not convex
        ("non_convex", t + "non_convex_test.py",
         {"P": np.array([[2.0, 5.0], [5.0, 1.0]]), "q": _vec([3.0, 4.0]),
          "A": np.array([[-1.0, 0.0], [0.0, -1.0], [-1.0, 3.0], [2.0, 5.0], [3.0, 4.0]]), "l": np.full(5, -INF),
          "u": BASIC_U.copy()}, "invalid_input", None),
    ]


def _diag_plus(rng, n):
    return np.diag(rng.random(n)) + 0.2 * np.eye(n), rng.standard_normal(n)


def osqp_seeded():
    """OSQP's random problems, drawn again with default_rng and the tests' seeds, sizes and distributions."""
    t = f"{OSQP}: src/osqp/tests/"
    out = []
    rng = np.random.default_rng(4)  # feasibility_test.py: P = 0, q = 0, A dense U[0, 1), l = u
    A, u = sparse_uniform(rng, 30, 30, density=1.0), rng.random(30)
    out.append(("feasibility_30", t + "feasibility_test.py",
                {"P": np.zeros((30, 30)), "q": np.zeros(30), "A": A, "l": u.copy(), "u": u}, "optimal"))
    P, q = _diag_plus(np.random.default_rng(4), 30)  # unconstrained_test.py and polishing_test.py
    out.append(("unconstrained_30", t + "unconstrained_test.py", {"P": P, "q": q}, "optimal"))
    rng = np.random.default_rng(6)  # polishing_test.py: P = Pt'Pt of low rank (9 entries in Pt)
    Pt = sparse_uniform(rng, 30, 30)
    q, A = rng.standard_normal(30), rng.standard_normal((50, 30))
    l, u = -3.0 + rng.standard_normal(50), 3.0 + rng.standard_normal(50)
    out.append(("polish_random_30x50", t + "polishing_test.py", {"P": Pt.T @ Pt, "q": q, "A": A, "l": l, "u": u},
                "optimal"))
    out.append(_primal_infeasible_50x500(t))
    rng = np.random.default_rng(1)  # update_matrices_test.py: P = Pt'Pt + I, l = 0, u = 30 + N(0, 1)
    Pt = sparse_uniform(rng, 5, 5, density=0.7)
    q, A = rng.standard_normal(5), sparse_uniform(rng, 8, 5, density=0.7)
    out.append(("update_matrices_5x8", t + "update_matrices_test.py",
                {"P": Pt.T @ Pt + np.eye(5), "q": q, "A": A, "l": np.zeros(8), "u": 30.0 + rng.standard_normal(8)},
                "optimal"))
    rng = np.random.default_rng(2)  # warm_start_test.py: A and Pt 90 % dense, P = Pt Pt'
    A = sparse_uniform(rng, 200, 100, density=0.9)
    l, u = -2.0 * rng.random(200), 2.0 * rng.random(200)
    Pt = sparse_uniform(rng, 100, 100, density=0.9)
    out.append(("warm_start_100x200", t + "warm_start_test.py",
                {"P": Pt @ Pt.T, "q": rng.standard_normal(100), "A": A, "l": l, "u": u}, "optimal"))
    out += _derivative_problems(t)
    return [item + (None,) for item in out]


def _primal_infeasible_50x500(t):
    """primal_infeasibility_test.py: a random QP whose row n/2 is made a copy of row n/2 + 1 with an interval
    that misses the copy's; P = Pt'Pt with Pt dense U[0, 1)."""
    n, m = 50, 500
    rng = np.random.default_rng(4)
    Pt = rng.random((n, n))
    q, A = rng.random(n), sparse_uniform(rng, m, n)
    u, l = 3.0 + rng.standard_normal(m), -3.0 + rng.standard_normal(m)
    i = n // 2
    A[i] = A[i + 1]
    l[i] = u[i + 1] + 10.0 * rng.random()
    u[i] = l[i] + 0.5
    return ("primal_infeasible_50x500", t + "primal_infeasibility_test.py",
            {"P": Pt.T @ Pt, "q": q, "A": A, "l": l, "u": u}, "infeasible")


def _derivative_problems(t):
    """derivative_test.py's get_prob: P = LL' + 0.1 I (L n x (n-1)), rows A x0 -+ s0 around a point x0; its
    equality test makes the first five rows equalities and frees the others' lower side with OSQP_INFTY."""
    out = []
    for name, n, m in (("derivative_10x3", 10, 3), ("derivative_eq_inf_10x10", 10, 10)):
        rng = np.random.default_rng(1)
        L = rng.standard_normal((n, n - 1))
        x0, s0, A = rng.standard_normal(n), rng.random(m), rng.standard_normal((m, n))
        u, l = A @ x0 + s0, A @ x0 - s0
        q = rng.standard_normal(n)
        if m == 10:
            l[:5] = u[:5]
            l[5:] = -1e30  # OSQP_INFTY: optsolve reads |bound| >= 1e19 as infinite
        out.append((name, t + "derivative_test.py", {"P": L @ L.T + 0.1 * np.eye(n), "q": q, "A": A, "l": l, "u": u},
                    "optimal"))
    return out


# --------------------------------------------------------------------------- the list

def _entries():
    return (sd3310_family() + sd3310_shapes() + sparse150_family() + [rank_one_unbounded()]
            + [qpmad_demo()] + qpsolvers_problems_py() + osqp_fixed() + osqp_seeded())


def all_problems():
    """Every problem, as a list of ``(name, source, data, expected)``."""
    return [(name, source, data, expected) for name, source, data, expected, _ in _entries()]


STATED = {name: np.asarray(x, dtype=np.float64) for name, _, _, _, x in _entries() if x is not None}
