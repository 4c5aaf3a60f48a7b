"""Independent checks of a VI solution, from the problem and the solution only.

The operator is the problem file's (or the one given to ``optsolve verify --operator``), never
the one a document says it used; the projection onto C is computed here, apart from the
solver's code. Every threshold is a :data:`LIMITS` entry, named as the ``optsolve mvi`` option
that sets it:

* ``natural_residual``: ||z - P_C(z - F(z))|| at the returned z, at most ``tol`` (zero exactly at
  the solutions of the VI);
* ``in_constraint_set``: how far z lies outside C (box or ball), at most ``feas_tol`` times
  max(1, ||z||_inf);
* ``residual_matches``: the residual the solution reports against the recomputed one, within
  ``residual_rtol`` of the recomputed one plus an absolute floor of ``residual_atol`` times
  max(1, ||z||, ||F(z)||) (the size of the rounding errors of the residual), so a zero
  residual is judged too;
* ``distance_to_z_star``: ||z - z*|| when the problem gives a solution z* (information: a VI may
  have other solutions);
* ``objective``: fails when a document reports one (a VI has none).

Only ``optimal`` can be certified (:data:`CLAIMS`): no certificate of infeasibility or
unboundedness exists for these problems, so such a claim fails. The method and the settings
a document records (gamma, rho, the operator, ...) are reported, never used to judge.
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.result import Certificate, Check, Limit, solution_vector

TOL = 1e-6
FEAS_TOL = 1e-12
RESIDUAL_RTOL = 1e-6
RESIDUAL_ATOL = 1e-12

LIMITS = (
    Limit("tol", TOL, "larger", "natural residual ||z - P_C(z - F(z))|| a solution must reach"),
    Limit("feas_tol", FEAS_TOL, "larger", "distance of z outside C, relative to max(1, ||z||_inf)"),
    Limit("residual_rtol", RESIDUAL_RTOL, "larger",
          "relative tolerance between the reported and the recomputed natural residual"),
    Limit("residual_atol", RESIDUAL_ATOL, "larger",
          "absolute floor of that comparison, times max(1, ||z||, ||F(z)||)"),
)
CLAIMS = ("optimal",)
USER_FUNCTIONS = ("operator",)  # the user function verify's --operator passes to check()


def resolve(limits: dict | None) -> dict:
    """Every limit of :data:`LIMITS` as a float: the given values, the documented defaults for the rest."""
    out = {lim.name: lim.default for lim in LIMITS}
    out.update({k: v for k, v in (limits or {}).items() if k in out and v is not None})
    return {k: float(v) for k, v in out.items()}


def _project(C, z: np.ndarray) -> np.ndarray:
    if C.kind == "box":
        return np.clip(z, C.lo, C.hi)
    if C.kind == "ball":
        off = z - C.center
        n = float(np.sqrt(off @ off))
        return z if n <= C.radius else C.center + off * (C.radius / n)
    return z


def _outside(C, z: np.ndarray) -> float:
    if C.kind == "box":
        return float(np.maximum(np.maximum(C.lo - z, z - C.hi), 0).max(initial=0.0))
    if C.kind == "ball":
        return max(0.0, float(np.linalg.norm(z - C.center)) - C.radius)
    return 0.0


def _status_checks(status) -> list[Check]:
    if status in ("infeasible", "unbounded"):
        return [Check.require("status_certificate", status, False, "an optimal claim",
                              f"a VI solution carries no certificate that the problem is {status}; "
                              "only an optimal claim can be established")]
    return []


def check(problem, solution: dict, *, method=None, objective=None, settings: dict | None = None,
          limits: dict | None = None, status="optimal", operator: str | None = None, **extra) -> Certificate:
    """The certificate of ``solution`` for ``problem``, judged against ``limits`` (see :data:`LIMITS`).

    ``operator``: the user operator to evaluate (``module:function``, verify's ``--operator``); else
    the problem file's. ``settings`` (the document's, untrusted) only words the error when the file
    has no operator; ``method`` is not used.
    """
    from optsolve.mvi.problems import prepare

    lim = resolve(limits)
    settings = settings or {}
    used = settings.get("operator")
    if not operator and problem.get("operator") is None and used:
        raise InputError(f"{problem.source}: names no operator, and the solution says it was computed with "
                         f"'--operator {used}': pass the operator to check it with to optsolve verify "
                         "('--operator MODULE:FUNCTION').")
    mp = prepare(problem, operator, constants=False)
    z = solution_vector(solution, "z", mp.d)
    with np.errstate(all="ignore"):  # an overflow gives a non-finite value, which fails its check
        cert = _judge(mp, z, solution, lim, status, operator)
    if objective is not None:
        cert.checks.append(Check.require("objective", objective if isinstance(objective, (int, float)) else
                                         str(objective), False, "null", "a VI has no objective; mvi reports none"))
    return cert


def _judge(mp, z: np.ndarray, solution: dict, lim: dict, status, operator) -> Certificate:
    checks = _status_checks(status)
    checks.append(Check.info("operator", operator or mp.op.name,
                             "the operator evaluated: " + ("verify's --operator" if operator else "the problem file's")))
    Fz, found = np.full(mp.d, np.nan), "z holds entries that are not finite"
    if np.isfinite(z).all():
        try:
            Fz = np.asarray(mp.op.F(z), dtype=float).reshape(-1)
            found = "F(z) is not finite" if Fz.shape == (mp.d,) else f"F(z) has shape {Fz.shape}, expected ({mp.d},)"
        except Exception as exc:  # a user operator may fail anywhere; it is the check that fails
            found = f"the operator failed at z ({type(exc).__name__}: {exc})"
    if Fz.shape != (mp.d,) or not np.isfinite(Fz).all():
        checks.append(Check.at_most("natural_residual", None, lim["tol"], found))
        return Certificate(checks)
    r = z - _project(mp.C, z - Fz)
    top = float(np.max(np.abs(r), initial=0.0))
    res = top * float(np.linalg.norm(r / top)) if 0 < top < math.inf else top  # scaled: r'r may overflow
    checks.append(Check.at_most("natural_residual", res, lim["tol"], "||z - P_C(z - F(z))||"))
    size = max(1.0, float(np.abs(z).max(initial=0.0)))
    checks.append(Check.at_most("in_constraint_set", _outside(mp.C, z), lim["feas_tol"] * size,
                                f"distance of z outside C ({mp.C.kind}); feas_tol times max(1, ||z||_inf)"))
    claimed = solution.get("residual")
    if claimed is None:
        checks.append(Check.info("residual_matches", None, "the solution reports no residual"))
    elif isinstance(claimed, bool) or not isinstance(claimed, (int, float)) or not math.isfinite(claimed):
        checks.append(Check.require("residual_matches", str(claimed), False, "a finite number",
                                    "the reported residual is not a finite number"))
    else:
        scale = max(1.0, float(np.linalg.norm(z)), float(np.linalg.norm(Fz)))
        limit = lim["residual_rtol"] * res + lim["residual_atol"] * scale
        checks.append(Check.at_most("residual_matches", abs(float(claimed) - res), limit,
                                    "|reported - recomputed residual|; residual_rtol times the recomputed one "
                                    "plus residual_atol times max(1, ||z||, ||F(z)||)"))
    if mp.z_star is not None and mp.z_star.shape == z.shape:
        dist = float(np.linalg.norm(z - mp.z_star))
        checks.append(Check.info("distance_to_z_star", dist,
                                 "||z - z*|| to the problem's z* (a VI may have other solutions)"))
        claimed = solution.get("distance_to_z_star")
        if claimed is not None:  # a reported distance is a claim about this z
            ok = isinstance(claimed, (int, float)) and not isinstance(claimed, bool) and math.isfinite(claimed)
            gap = abs(float(claimed) - dist) if ok else None
            checks.append(Check.at_most("distance_matches", gap, lim["residual_rtol"] * dist + lim["residual_atol"]
                                        * max(1.0, float(np.linalg.norm(mp.z_star))),
                                        "|reported - recomputed ||z - z*|||"))
    return Certificate(checks)
