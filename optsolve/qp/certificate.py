"""Independent checks of a QP solution, recomputed from the problem and the solution only.

For a solution (``x``, ``y``, ``z``; OSQP's signs: ``Px + q + A'y = 0`` at the optimum) the
checks are OSQP's termination conditions, recomputed: ``z`` within ``[l, u]``; primal
residual ``||Ax - z||_inf``; dual residual ``||Px + q + A'y||_inf``; duality gap
``x'Px + q'x + SC(y)`` with the support function ``SC(y) = u'max(y, 0) + l'min(y, 0)``
(infinite when y pushes on a missing bound); each against ``eps_abs + eps_rel * scale``; the
objective recomputed and compared within ``obj_rtol`` relative to it, with ``eps_abs`` as the
absolute floor (a zero optimum). Every tolerance is a :data:`LIMITS` entry, named as the
``optsolve qp`` option that sets it; the caller passes the values (the solver its own settings,
``optsolve verify`` its options or the documented defaults), never the document under test.

For a claim of infeasibility, the certificate vector ``dy`` (Farkas): ``A'dy = 0`` and
``SC(dy) < 0``, with dy in the polar of the bounds' recession cone. For unboundedness,
``dx``: ``q'dx < 0``, ``P dx = 0`` and ``A dx`` in the recession cone of ``[l, u]``. A claim
holds only where its ray is exact to rounding: each entry of ``A'dy``, ``P dx`` and ``A dx``
within :data:`CERT_TOL` of the magnitudes of the terms it sums, and ``SC(dy)``, ``q'dx``
negative by more than that fraction of theirs; entries of the vector below ``SIGN_TOL`` of its
largest count as zero. A direction that only looks like a certificate (a tiny curvature, rows
nearly parallel) is refuted whatever the scale of the data.

A claim (:data:`CLAIMS`) is judged by the certificate of its own kind, whatever the document's
``certificate_kind`` says: ``infeasible`` needs ``prim_inf_cert``, ``unbounded`` needs
``dual_inf_cert``, ``optimal`` needs ``x``, ``y`` and ``z``; a missing vector is a failing check.
The method and the other settings a document records are reported, never used to judge.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import numpy as np

from optsolve.core.result import Certificate, Check, Limit, solution_vector
from optsolve.qp.problems import QPProblem, prepare

DEFAULT_EPS = 1e-3
GAP_ROUNDING = 2  # float64 epsilons of the largest of the gap's three sums: below that, the gap is their rounding
SIGN_TOL = 1e-12  # relative to ||y||_inf: entries below are rounding, not a push on a missing bound
OBJ_RTOL = 1e-9
OBJ_ATOL = 1e-9
# leftovers of infeasibility certificates, each relative to the terms it sums: float64 rounds a sum of k terms
# within k 1.1e-16 of their magnitudes, and the vector itself carries its solver's rounding (an LP vertex is
# exact only to some 1e-12 of its terms); a near-ray leaves leftovers of the order of its terms
CERT_TOL = 1e-10

LIMITS = (
    Limit("eps_abs", DEFAULT_EPS, "larger",
          "absolute part of the residual, gap and bound tolerances (OSQP's eps_abs); also the absolute "
          "floor of the objective comparison"),
    Limit("eps_rel", DEFAULT_EPS, "larger", "relative part of the residual, gap and bound tolerances (OSQP's eps_rel)"),
    Limit("cert_tol", CERT_TOL, "larger",
          "leftovers of an infeasibility or unboundedness certificate, each relative to the magnitudes of the terms "
          "it sums (the scale of its rounding)"),
    Limit("obj_rtol", OBJ_RTOL, "larger",
          "relative difference between the reported and the recomputed objective (against the larger of the "
          "objective and its terms)", public="objective_rtol"),
    Limit("obj_atol", OBJ_ATOL, "larger", "absolute floor of that difference (a zero objective)",
          public="objective_atol"),
)
CLAIMS = ("optimal", "infeasible", "unbounded")


def resolve(limits: dict | None) -> dict:
    """Every limit of :data:`LIMITS` as a float: the given values, the documented defaults for the rest."""
    out = {lim.name: lim.default for lim in LIMITS}
    out.update({k: v for k, v in (limits or {}).items() if k in out and v is not None})
    return {k: float(v) for k, v in out.items()}


def support_function(y, l, u, scale: float = 0.0) -> float:
    """SC(y) = sup over l <= z <= u of y'z: +inf when y_i > 0 with u_i infinite (or y_i < 0 with l_i infinite).

    A push on a missing bound below SIGN_TOL times max(||y||_inf, ``scale``) counts as zero (rounding):
    ``scale`` is the size the multipliers are measured against (for a solution's duals, max(1, ||q||_inf)),
    so that y ~ 1e-17 at an unconstrained optimum is not read as a push on a missing bound. Every entry
    on a finite bound counts as it is, however small: with bounds of 1e4, duals of 1e-11 carry 1e-7 of
    the gap (qpbenchmark's gap sums them too)."""
    tol = SIGN_TOL * max(float(np.abs(y).max()) if y.size else 0.0, scale, 1e-300)
    if np.any((y > tol) & np.isinf(u)) or np.any((y < -tol) & np.isinf(l)):
        return math.inf
    pos = np.where(np.isfinite(u), np.maximum(y, 0.0), 0.0)
    neg = np.where(np.isfinite(l), np.minimum(y, 0.0), 0.0)
    return float(np.where(pos > 0, u, 0.0) @ pos + np.where(neg < 0, l, 0.0) @ neg)


def _cleaned(v):
    """``v`` without its entries below SIGN_TOL ||v||_inf (a solver's rounding noise): the vector that is judged."""
    norm = float(np.abs(v).max()) if v.size else 0.0
    return np.where(np.abs(v) > SIGN_TOL * norm, v, 0.0), norm


def _leftover(res, terms) -> float:
    """max_i |res_i| / terms_i, each entry of a product against the sum of its terms' magnitudes (the scale of
    its rounding); an entry whose terms are all zero is exactly zero and counts as 0."""
    with np.errstate(invalid="ignore", divide="ignore"):
        ratio = np.where(terms > 0, np.abs(res) / np.where(terms > 0, terms, 1.0), 0.0)
    return float(ratio.max()) if ratio.size else 0.0


def infeasibility_checks(qp: QPProblem, dy, eps: float = CERT_TOL) -> list[Check]:
    """Farkas certificate of primal infeasibility: A'dy = 0 and SC(dy) < 0, both beyond rounding.

    Each entry of A'dy is judged against the sum of the magnitudes of its terms (``|A|'|dy|``), and
    SC(dy) against the sum of the magnitudes of its own, so that a near-certificate (rows nearly, not
    exactly, parallel: a feasible x far out) is refuted at any scale of the data. For any x with
    ``l <= Ax <= u``, ``dy'Ax <= SC(dy)`` and ``dy'Ax = (A'dy)'x``: no feasible x has
    ``||x||_inf < |SC(dy)| / ||A'dy||_1``, the radius reported.
    """
    dy, norm = _cleaned(np.asarray(dy, dtype=float))
    scale = max(norm, 1e-300)
    aty_vec = qp.A.T @ dy if norm > 0 else np.zeros(qp.n)
    aty = _leftover(aty_vec, abs(qp.A.T) @ np.abs(dy)) if norm > 0 else math.inf
    sc = support_function(dy, qp.l, qp.u) if norm > 0 else math.inf
    sc_terms = float(np.where(dy > 0, np.abs(np.where(np.isfinite(qp.u), qp.u, 0.0)), 0.0) @ np.abs(dy) +
                     np.where(dy < 0, np.abs(np.where(np.isfinite(qp.l), qp.l, 0.0)), 0.0) @ np.abs(dy))
    margin = sc / sc_terms if math.isfinite(sc) and sc_terms > 0 else None
    l1 = float(np.abs(aty_vec).sum())
    radius = math.inf if l1 == 0 else (-sc / l1 if math.isfinite(sc) else -math.inf)
    return [
        Check.require("certificate_nonzero", norm, norm > 0, "> 0", "||dy||_inf of the infeasibility certificate"),
        Check.at_most("certificate_Aty", aty, eps,
                      "max_j |A'dy|_j / (|A|'|dy|)_j: A'dy = 0 to rounding, each entry against its terms"),
        Check.at_most("certificate_support", margin, -eps,
                      "(u' max(dy, 0) + l' min(dy, 0)) / (|u|' max(dy, 0) + |l|' max(-dy, 0)): negative beyond "
                      "rounding (none where dy pushes on a missing bound)"),
        Check.info("infeasibility_radius", radius if math.isfinite(radius) else None,
                   f"no feasible x has ||x||_inf below |SC(dy)| / ||A'dy||_1 (||dy||_inf = {scale:.6g})"),
    ]


def unboundedness_checks(qp: QPProblem, dx, eps: float = CERT_TOL) -> list[Check]:
    """Certificate of dual infeasibility: P dx = 0, A dx in the recession cone of [l, u] and q'dx < 0, each
    beyond rounding.

    Each entry of P dx and A dx is judged against the sum of the magnitudes of its terms (``|P||dx|``,
    ``|A||dx|``), and q'dx against ``|q|'|dx|``: a direction of tiny curvature (``dx'P dx > 0``, a
    finite minimum far out) is refuted at any scale of the data.
    """
    dx, norm = _cleaned(np.asarray(dx, dtype=float))
    pdx = _leftover(qp.P @ dx, abs(qp.P) @ np.abs(dx)) if qp.n and norm > 0 else math.inf
    viol = 0.0
    if qp.m and norm > 0:
        adx = qp.A @ dx
        out = np.where(np.isfinite(qp.u), np.maximum(adx, 0.0), 0.0) + \
            np.where(np.isfinite(qp.l), np.maximum(-adx, 0.0), 0.0)
        viol = _leftover(out, abs(qp.A) @ np.abs(dx))
    q_terms = float(np.abs(qp.q) @ np.abs(dx)) if qp.n else 0.0
    descent = float(qp.q @ dx) / q_terms if q_terms > 0 else None
    return [
        Check.require("certificate_nonzero", norm, norm > 0, "> 0", "||dx||_inf of the unboundedness certificate"),
        Check.at_most("certificate_Pdx", pdx, eps,
                      "max_j |P dx|_j / (|P||dx|)_j: P dx = 0 to rounding, each entry against its terms"),
        Check.at_most("certificate_recession", viol, eps,
                      "largest step of A dx outside the recession cone of [l, u], each row against (|A||dx|)_i"),
        Check.at_most("certificate_descent", descent, -eps,
                      "q'dx / (|q|'|dx|): negative beyond rounding"),
    ]


def solution_checks(qp: QPProblem, x, y, z, *, eps_abs: float, eps_rel: float, objective,
                    obj_rtol: float = OBJ_RTOL, obj_atol: float = OBJ_ATOL) -> list[Check]:
    Ax, Px, Aty = qp.A @ x, qp.P @ x, qp.A.T @ y

    def inf(v):
        return float(np.abs(v).max()) if v.size else 0.0

    bound = 0.0
    if qp.m:
        bound = max(float(np.maximum(qp.l - z, 0.0).max()), float(np.maximum(z - qp.u, 0.0).max()))
    prim = inf(Ax - z)
    dual = inf(Px + qp.q + Aty)
    sc = support_function(y, qp.l, qp.u, max(1.0, inf(qp.q))) if qp.m else 0.0
    quad, lin = float(x @ Px), float(qp.q @ x)
    gap = quad + lin + sc
    largest = max(abs(quad), abs(lin), abs(sc) if math.isfinite(sc) else 0.0)
    f = qp.objective(x)
    violation = 0.0
    if qp.m:
        violation = max(float(np.maximum(qp.l - Ax, 0.0).max()), float(np.maximum(Ax - qp.u, 0.0).max()))
    checks = [
        Check.at_most("z_within_bounds", bound, eps_abs + eps_rel * inf(z), "largest violation of l <= z <= u"),
        Check.at_most("primal_residual", prim, eps_abs + eps_rel * max(inf(Ax), inf(z)), "||Ax - z||_inf"),
        Check.at_most("dual_residual", dual, eps_abs + eps_rel * max(inf(Px), inf(Aty), inf(qp.q)),
                      "||Px + q + A'y||_inf"),
        Check.at_most("duality_gap", abs(gap) if math.isfinite(gap) else math.inf,
                      eps_abs + (eps_rel + GAP_ROUNDING * np.finfo(float).eps) * largest,
                      "|x'Px + q'x + SC(y)|; infinite when y pushes on a missing bound (limit: eps_abs + eps_rel "
                      f"max(|x'Px|, |q'x|, |SC(y)|), plus {GAP_ROUNDING} float64 epsilons of that largest sum, its "
                      "rounding)"),
        # implied by the two checks above (Ax - z and z - [l, u]), hence a number with no limit of its own
        Check.info("constraint_violation", violation, "largest violation of l <= Ax <= u"),
    ]
    # the objective's terms set the scale of its rounding: a zero optimum of large terms is judged
    # against them, and obj_atol is the floor when every term is zero
    scale = max(abs(f), abs(0.5 * quad), abs(lin), abs(qp.r))
    scale = scale if math.isfinite(scale) else 0.0  # an overflowed objective fails on its value, not its limit
    diff = math.inf if not _is_number(objective) else abs(f - float(objective))
    checks.append(Check.at_most("objective_matches", diff if math.isfinite(diff) else None,
                                obj_rtol * scale + obj_atol,
                                f"|1/2 x'Px + q'x + r - reported objective|, recomputed 1/2 x'Px + q'x + r = {f:.12g} "
                                "(limit: obj_rtol max(|f|, its terms) + obj_atol)"))
    return checks


def _is_number(value) -> bool:
    if value is None or isinstance(value, (bool, str, bytes, list, dict)):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


def _vector(solution: dict, key: str, size: int, what: str):
    """``(vector, None)``, or ``(None, failing check)`` when the solution lacks it or it is not finite."""
    try:
        vec = solution_vector(solution, key, size)
    except KeyError:
        return None, Check.require(f"has_{key}", None, False, f"a list of {size} numbers", f"{what}: missing")
    except (TypeError, ValueError, OverflowError) as exc:
        return None, Check.require(f"has_{key}", None, False, f"a list of {size} numbers", f"{what}: {exc}")
    if not np.all(np.isfinite(vec)):
        return None, Check.require(f"has_{key}", int(np.count_nonzero(~np.isfinite(vec))), False, "0 non-finite",
                                   f"{what}: entries that are null or not finite")
    return vec, None


def check(problem, solution: dict, *, method: str | None, objective, settings: dict, limits: dict | None = None,
          status: str | None = None, **extra) -> Certificate:
    """The certificate of ``solution`` for the claimed ``status``, judged against ``limits`` (:data:`LIMITS`).

    ``infeasible`` and ``unbounded`` are judged by their certificate vectors only, ``optimal`` (and any
    other status whose solution carries ``x``) by the optimality checks. ``settings`` (the document's,
    untrusted) only chooses the reported PAC-Bayes line of a learned policy."""
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):  # overflow fails a check, silently
        return _check(problem, solution, method, objective, settings, limits, status)


def _check(problem, solution, method, objective, settings, limits, status) -> Certificate:
    settings = settings if isinstance(settings, dict) else {}
    lim = resolve(limits)
    qp = prepare(problem)
    kind = status
    if status not in CLAIMS and "x" not in solution:
        kind = solution.get("certificate_kind")  # a downgraded claim (max_iter): its vector is still reported on
    if kind == "infeasible":
        dy, missing = _vector(solution, "prim_inf_cert", qp.m, "the Farkas certificate of infeasibility")
        return Certificate([missing] if missing else infeasibility_checks(qp, dy, lim["cert_tol"]))
    if kind == "unbounded":
        dx, missing = _vector(solution, "dual_inf_cert", qp.n, "the recession direction of unboundedness")
        return Certificate([missing] if missing else unboundedness_checks(qp, dx, lim["cert_tol"]))
    vectors, failures = {}, []
    for key, size, what in (("x", qp.n, "the primal solution"), ("y", qp.m, "the duals"),
                            ("z", qp.m, "z = Ax")):
        vectors[key], missing = _vector(solution, key, size, what)
        if missing:
            failures.append(missing)
    if failures:
        return Certificate(failures)
    checks = solution_checks(qp, vectors["x"], vectors["y"], vectors["z"], eps_abs=lim["eps_abs"],
                             eps_rel=lim["eps_rel"], objective=objective, obj_rtol=lim["obj_rtol"],
                             obj_atol=lim["obj_atol"])
    if method in ("deepqp", "deepdistributed"):
        checks.append(_policy_line(settings.get("policy"), method))
    return Certificate(checks)


POLICY_MAX_BYTES = 64 << 20  # a learned policy's file is a small MLP


SHIPPED_POLICIES = Path(__file__).resolve().parent / "policies"  # the general policies, when none is named


def _policy_header(path: str) -> dict:
    """The JSON header of a policy file (an .npz with ``theta`` and ``header``), read as a problem file is."""
    from optsolve.core.files import read_raw

    raw, _ = read_raw(path)
    header = raw["header"]
    header = json.loads(header if isinstance(header, str) else str(np.asarray(header)))
    if not isinstance(header, dict) or header.get("format") != "optsolve.qp-policy/1":
        raise ValueError("not an optsolve qp policy")
    return header


def _policy_line(path, method) -> Check:
    """The learned policy's PAC-Bayes bound, read from its file: a statement about the family, not this solve."""
    path = path or str(SHIPPED_POLICIES / ("random.npz" if method == "deepqp" else "chain-distributed.npz"))
    if not isinstance(path, str) or not os.path.isfile(path) or os.path.getsize(path) > POLICY_MAX_BYTES:
        # a path from the document under test: only a regular file of a policy's size is opened
        return Check.info("pac_bayes_bound", None, f"policy {path!r} is not a policy file that verify opens")
    try:
        pb = _policy_header(path).get("pac_bayes") or {}
    except Exception as exc:  # noqa: BLE001  a missing or unreadable policy leaves the line empty
        return Check.info("pac_bayes_bound", None, f"policy {path!r} unreadable ({type(exc).__name__})")
    note = (f"policy {path}: E[{pb.get('loss', 'loss')}] over its family <= this, with probability >= "
            f"{1 - pb.get('delta', 0) - pb.get('delta_prime', 0):g} (N = {pb.get('N')}, L = {pb.get('L')}, "
            f"KL = {pb.get('KL')}, empirical loss {pb.get('empirical_loss')})")
    return Check.info("pac_bayes_bound", pb.get("bound"), note)
