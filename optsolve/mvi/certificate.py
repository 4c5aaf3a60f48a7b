"""Independent checks of a VI solution, from the problem and the solution only.

The operator is rebuilt from the problem file (or the user's ``--operator``) and the
projection onto C is computed here, apart from the solver's code:

* ``natural_residual``: ||z - P_C(z - F(z))|| at the returned z, at most the solve's
  tolerance (zero exactly at the solutions of the VI);
* ``in_constraint_set``: how far z lies outside C (box or ball), at most 1e-12 times the size
  of C;
* ``residual_matches``: the residual the solver reported against the recomputed one;
* ``distance_to_z_star``: ||z - z*|| when the problem gives a solution z* (reported).
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.result import Certificate, Check


def _project(kind: str, C, z: np.ndarray) -> np.ndarray:
    if kind == "box":
        return np.clip(z, C.lo, C.hi)
    if kind == "ball":
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


def check(problem, solution: dict, *, method=None, objective=None, settings: dict, operator: str | None = None
          ) -> Certificate:
    from optsolve.mvi.problems import prepare

    used = settings.get("operator")
    if used and not operator:
        raise InputError(f"This solution was computed with '--operator {used}'; checking it needs the same "
                         "operator: pass '--operator' to optsolve verify.")
    mp = prepare(problem, operator, constants=False)
    z = np.asarray(solution["z"], dtype=float).reshape(-1)
    if z.shape != (mp.d,):
        raise ValueError(f"z of length {z.size}, expected d = {mp.d}")
    tol = float(settings.get("tol") or 1e-6)
    checks = []
    Fz = np.asarray(mp.op.F(z), dtype=float).reshape(-1)
    if not np.isfinite(Fz).all():
        checks.append(Check("natural_residual", None, tol, False, "F(z) is not finite"))
        return Certificate(checks)
    r = z - _project(mp.C.kind, mp.C, z - Fz)
    res = float(np.sqrt(r @ r))
    checks.append(Check.at_most("natural_residual", res, tol, "||z - P_C(z - F(z))||"))
    size = max(1.0, float(np.abs(z).max(initial=0.0)))
    checks.append(Check.at_most("in_constraint_set", _outside(mp.C, z), 1e-12 * size,
                                f"distance of z outside C ({mp.C.kind})"))
    claimed = solution.get("residual")
    if claimed is not None:
        diff = abs(float(claimed) - res)
        checks.append(Check.at_most("residual_matches", diff, 1e-6 * max(res, 1e-300) + 1e-14,
                                    "the reported residual minus the recomputed one"))
    if mp.z_star is not None and mp.z_star.shape == z.shape:
        checks.append(Check.info("distance_to_z_star", float(np.linalg.norm(z - mp.z_star)), "||z - z*||"))
    if not math.isfinite(res):
        checks[0].holds = False
    return Certificate(checks)
