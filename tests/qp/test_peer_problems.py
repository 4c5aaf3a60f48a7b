"""optsolve qp's default method on the QP problems of qpsolvers' and OSQP's test suites (tests/qp/peer_problems.py).

Each problem is solved by ``optsolve.qp.solve_problem`` with the default method at the default tolerances (eps_abs =
eps_rel = 1e-3) and at eps_abs = 1e-6, eps_rel = 0. The status must be the expected one (a non-convex cost is
refused when the problem is validated), the certificate must hold, and an infeasibility or unboundedness vector
must also pass the plain checks below. An optimal claim must be feasible to OSQP's primal tolerance and its
objective f must be within OBJ_RTOL max(1, |f*|) of the reference optimum f*: Clarabel's, at 1e-10 (its own
call, not optsolve's ``clarabel`` method), or the closed form where Clarabel cannot give one (a zero cost).
Where P is positive definite the solution is unique, and x must be within sqrt(2 OBJ_RTOL max(1, |f*|) / lambda_min)
of x* (the peer's stated solution, else Clarabel's): strong convexity turns an objective error into that
distance. The same checks hold for this package's OSQP ADMM (``admm``) and for the osqp package (``osqp``).
A few problems go through the command line too, to check its JSON document, exit code and ``verify``.
"""

from __future__ import annotations

import functools
import json
import math

import numpy as np
import pytest
import scipy.sparse as sp

import optsolve.qp
from optsolve.core.errors import InputError
from optsolve.core.files import save_problem
from optsolve.qp.problems import INFINITY, SCHEMA
from peer_problems import STATED, all_problems  # tests/qp is on sys.path: pytest's rootdir-less import mode

PROBLEMS = {name: (source, data, expected) for name, source, data, expected in all_problems()}
NAMES = sorted(PROBLEMS)
CONVEX = [name for name in NAMES if PROBLEMS[name][2] != "invalid_input"]
# the default solve, and a tight one: OSQP's eps_abs with eps_rel = 0
TOLERANCES = {"default": {}, "tight": {"eps_abs": 1e-6, "eps_rel": 0.0}}
EPS = {"default": (1e-3, 1e-3), "tight": (1e-6, 0.0)}
OBJ_RTOL = {"default": 1e-2, "tight": 1e-4}  # 10 and 100 x eps_abs: duals and data of up to ~1e2 scale a residual
REF_TOL = 1e-10  # Clarabel's gap and feasibility tolerances
STATED_TOL = 1e-4  # the peers state x to 8 digits; an interior point method reaches a degenerate vertex to ~1e-5
RAY_RTOL = 1e-8  # leftovers of a ray (A'dy, P dx, A dx off the cone), relative to the sizes of their terms
CLARABEL_STATUS = {"optimal": "Solved", "infeasible": "PrimalInfeasible", "unbounded": "DualInfeasible"}
EXIT = {"optimal": 0, "infeasible": 3, "unbounded": 4}


def validated(data: dict):
    return SCHEMA.validate({k: (sp.csc_matrix(v) if k in ("P", "A") else v) for k, v in data.items()},
                           source="peer problem")


def _rows(data):
    """(A, l, u) with +-inf for a missing side (|bound| >= optsolve's INFINITY), an empty block without rows."""
    n = data["q"].size
    if "A" not in data:
        return np.zeros((0, n)), np.zeros(0), np.zeros(0)
    l, u = np.asarray(data["l"], dtype=float).copy(), np.asarray(data["u"], dtype=float).copy()
    l[l <= -INFINITY], u[u >= INFINITY] = -np.inf, np.inf
    return np.asarray(data["A"], dtype=float), l, u


def clarabel_solve(data):
    """Clarabel on the problem: equalities in a zero cone, each finite side of the other rows a nonnegative slack."""
    import clarabel

    A, l, u = _rows(data)
    eq = np.isfinite(l) & (l == u)
    up, lo = np.isfinite(u) & ~eq, np.isfinite(l) & ~eq
    cones = [clarabel.ZeroConeT(int(eq.sum()))] if eq.any() else []
    if up.any() or lo.any():
        cones.append(clarabel.NonnegativeConeT(int(up.sum() + lo.sum())))
    M = sp.csc_matrix(np.vstack([A[eq], A[up], -A[lo]]))
    b = np.concatenate([u[eq], u[up], -l[lo]])
    settings = clarabel.DefaultSettings()
    settings.verbose = False
    settings.tol_gap_abs = settings.tol_gap_rel = settings.tol_feas = REF_TOL
    sol = clarabel.DefaultSolver(sp.csc_matrix(np.triu(data["P"])), np.asarray(data["q"], dtype=float), M, b, cones,
                                 settings).solve()
    return str(sol.status), float(sol.obj_val), np.array(sol.x)


@functools.lru_cache(maxsize=None)
def reference(name: str):
    """``(status, f*, x*)``: Clarabel's, or for a zero cost over a square nonsingular system l = Ax = u the closed
    form f* = 0 at x* = A^-1 u (Clarabel 0.11 ends NumericalError on feasibility_30)."""
    _, data, _ = PROBLEMS[name]
    A, l, u = _rows(data)
    if not np.any(data["P"]) and not np.any(data["q"]) and A.shape[0] == A.shape[1] and np.array_equal(l, u):
        return "Solved", 0.0, np.linalg.solve(A, u)
    return clarabel_solve(data)


def unique_x(name: str):
    """(x*, lambda_min(P)) where P is positive definite (the peer's stated x* where it gives one), else None."""
    w = np.linalg.eigvalsh(PROBLEMS[name][1]["P"])
    if not w[0] > 1e-9 * max(1.0, w[-1]):
        return None
    return STATED.get(name, reference(name)[2]), float(w[0])


@pytest.mark.parametrize("name", CONVEX)
def test_reference_agrees_with_the_peers(name):
    """The harness: the reference reaches the expected status, and the solution the peer states where it gives one."""
    _, data, expected = PROBLEMS[name]
    status, f_ref, x_ref = reference(name)
    allowed = [CLARABEL_STATUS[e] for e in ((expected,) if isinstance(expected, str) else expected)]
    assert status in allowed, f"{name}: reference status {status!r}, expected one of {allowed}"
    if name in STATED:
        x = STATED[name]
        assert np.abs(x_ref - x).max() <= STATED_TOL * max(1.0, np.abs(x).max()), (name, x_ref, x)


def ray_faults(data, solution, status) -> list[str]:
    """What is wrong with the claim's vector, by the definitions (A'dy = 0 and SC(dy) < 0; P dx = 0, q'dx < 0,
    A dx in the recession cone of [l, u]), each leftover relative to the matrix's largest row sum times the
    vector's largest entry (an ADMM ray's entries off P's null space are rounding of that size)."""
    A, l, u = _rows(data)
    P, q = np.asarray(data["P"], dtype=float), np.asarray(data["q"], dtype=float)
    if status == "infeasible":
        dy = np.asarray(solution.get("prim_inf_cert"), dtype=float)
        lead = RAY_RTOL * np.abs(A).sum(axis=0).max(initial=0.0) * np.abs(dy).max(initial=0.0)
        pos, neg = np.maximum(dy, 0.0), np.minimum(dy, 0.0)
        if np.any((pos > 0) & ~np.isfinite(u)) or np.any((neg < 0) & ~np.isfinite(l)):
            return [f"dy pushes on a missing bound: {dy.tolist()}"]
        sc = float(u[pos > 0] @ pos[pos > 0] + l[neg < 0] @ neg[neg < 0])
        faults = [] if np.all(np.abs(A.T @ dy) <= lead) else [f"A'dy = {(A.T @ dy).tolist()}"]
        return faults + ([] if sc < 0 else [f"SC(dy) = {sc!r} is not negative"])
    dx = np.asarray(solution.get("dual_inf_cert"), dtype=float)
    size = np.abs(dx).max(initial=0.0)
    lead = RAY_RTOL * np.abs(P).sum(axis=1).max(initial=0.0) * size
    faults = [] if np.all(np.abs(P @ dx) <= lead) else [f"P dx = {(P @ dx).tolist()}"]
    Adx, slack = A @ dx, RAY_RTOL * np.abs(A).sum(axis=1).max(initial=0.0) * size
    if np.any(np.isfinite(u) & (Adx > slack)) or np.any(np.isfinite(l) & (Adx < -slack)):
        faults.append(f"A dx = {Adx.tolist()} leaves the recession cone of [l, u]")
    return faults + ([] if q @ dx < 0 else [f"q'dx = {q @ dx!r} is not negative"])


def optimum_faults(name, res, tol) -> list[str]:
    """Feasibility to OSQP's primal tolerance, the objective against f*, and x against a unique x*."""
    _, data, _ = PROBLEMS[name]
    eps_abs, eps_rel = EPS[tol]
    x = np.asarray(res.solution["x"], dtype=float)
    A, l, u = _rows(data)
    faults = []
    Ax = A @ x
    gap = float(np.max(np.maximum(l - Ax, 0.0) + np.maximum(Ax - u, 0.0), initial=0.0))
    limit = eps_abs + eps_rel * float(np.abs(Ax).max(initial=0.0))
    if not gap <= limit:
        faults.append(f"Ax leaves [l, u] by {gap:.3g} (limit {limit:.3g})")
    _, f_ref, _ = reference(name)
    f_tol = OBJ_RTOL[tol] * max(1.0, abs(f_ref))
    f = res.objective
    if f is None or not abs(f - f_ref) <= f_tol:
        faults.append(f"objective {f!r}, reference {f_ref!r}: |f - f*| exceeds {f_tol:.3g}")
    unique = unique_x(name)
    if unique is not None:
        x_ref, lam = unique
        x_tol = math.sqrt(2.0 * f_tol / lam)
        if not np.linalg.norm(x - x_ref) <= x_tol:
            faults.append(f"|x - x*| = {np.linalg.norm(x - x_ref):.3g} exceeds {x_tol:.3g} (lambda_min {lam:.3g})")
    return faults


def claim_faults(name, res, tol) -> list[str]:
    """What is wrong with a solve of problem ``name`` at ``tol``: its status, its certificate, and its claim's
    vector (:func:`ray_faults`) or optimum (:func:`optimum_faults`)."""
    _, data, expected = PROBLEMS[name]
    allowed = (expected,) if isinstance(expected, str) else expected
    faults = [] if res.status.value in allowed else [f"status {res.status.value!r}, expected one of {allowed}"]
    if not res.certificate.holds:
        faults.append("the certificate does not hold")
    if res.status.value in ("infeasible", "unbounded"):
        faults += ray_faults(data, res.solution, res.status.value)
    elif res.status.value == "optimal":
        faults += optimum_faults(name, res, tol)
    return faults


def describe(name, res) -> str:
    source, data, _ = PROBLEMS[name]
    return (f"{name} ({source}): status {res.status.value!r}, objective {res.objective!r}, message {res.message!r}, "
            f"failed checks {[c.to_dict() for c in res.certificate.checks if c.holds is False]}")


@pytest.mark.parametrize("tol", sorted(TOLERANCES))
@pytest.mark.parametrize("name", NAMES)
def test_default_method(name, tol):
    _, data, expected = PROBLEMS[name]
    if expected == "invalid_input":
        with pytest.raises(InputError, match="not positive semidefinite"):
            validated(data)
        with pytest.raises(InputError, match="not positive semidefinite"):
            optsolve.qp.solve(data["P"], data["q"], data.get("A"), data.get("l"), data.get("u"), **TOLERANCES[tol])
        return
    res = optsolve.qp.solve_problem(validated(data), **TOLERANCES[tol])
    faults = claim_faults(name, res, tol)
    if res.method != optsolve.qp.DEFAULT_METHOD or (res.settings["eps_abs"], res.settings["eps_rel"]) != EPS[tol]:
        faults.append(f"ran method {res.method!r} at eps {res.settings['eps_abs']!r}, {res.settings['eps_rel']!r}")
    assert not faults, describe(name, res) + ": " + "; ".join(faults)


@pytest.mark.parametrize("tol", sorted(TOLERANCES))
@pytest.mark.parametrize("method", ["admm", "osqp"])
@pytest.mark.parametrize("name", CONVEX)
def test_admm_methods(name, method, tol):
    """This package's OSQP ADMM, and the osqp package beside it, on the same problems and by the same checks."""
    res = optsolve.qp.solve_problem(validated(PROBLEMS[name][1]), method=method, **TOLERANCES[tol])
    faults = claim_faults(name, res, tol)
    assert not faults, describe(name, res) + ": " + "; ".join(faults)


CLI_CASES = ["qpsut03", "qpmad_demo", "derivative_eq_inf_10x10", "sparse150_infeasible", "rank_one_unbounded",
             "primal_infeasible_50x500"]


@pytest.mark.parametrize("tol", sorted(TOLERANCES))
@pytest.mark.parametrize("name", CLI_CASES)
def test_command_line_document(cli, tmp_path, name, tol):
    """``optsolve qp FILE -o -``: exit code, the JSON document's fields, ``optsolve verify`` of it (exit 0: holds)."""
    _, data, expected = PROBLEMS[name]
    path = tmp_path / f"{name}.npz"
    save_problem(str(path), data)
    eps_abs, eps_rel = EPS[tol]
    r = cli("qp", path, "-o", "-", "-q", "--eps-abs", eps_abs, "--eps-rel", eps_rel)
    doc = json.loads(r.stdout)
    assert r.exit_code == EXIT[expected], (r.exit_code, doc["status"], doc["message"], r.stderr)
    n, m = data["q"].size, data["A"].shape[0] if "A" in data else 0
    assert doc["schema"] == "optsolve.solution/1" and doc["command"] == "qp" and doc["status"] == expected
    assert doc["method"] == optsolve.qp.DEFAULT_METHOD and doc["problem"]["size"] == {"n": n, "m": m}
    assert doc["settings"]["eps_abs"] == eps_abs and doc["settings"]["eps_rel"] == eps_rel
    assert doc["certificate"]["holds"], doc["certificate"]
    if expected == "optimal":
        assert len(doc["solution"]["x"]) == n and len(doc["solution"]["y"]) == m
        f_ref = reference(name)[1]
        assert abs(doc["objective"] - f_ref) <= OBJ_RTOL[tol] * max(1.0, abs(f_ref)), (doc["objective"], f_ref)
    else:
        assert doc["objective"] is None and not ray_faults(data, doc["solution"], expected), doc["solution"]
    out = tmp_path / "solution.json"
    out.write_text(r.stdout)
    v = cli("verify", path, out, "-q", "--eps-abs", eps_abs, "--eps-rel", eps_rel)
    verdict = json.loads(v.stdout)
    assert v.exit_code == 0 and verdict["holds"] and verdict["claimed_status"] == expected, v.stderr


def test_command_line_refuses_a_non_convex_cost(bad_input):
    _, data, _ = PROBLEMS["non_convex"]
    bad_input("qp", {k: np.asarray(v).tolist() for k, v in data.items()}, "not positive semidefinite")
