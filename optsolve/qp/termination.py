"""OSQP's termination test: the unscaled residuals, the duality gap and their tolerances.

Stellato, Banjac, Goulart, Bemporad and Boyd (2020), "OSQP: an operator splitting solver for
quadratic programs", Math. Prog. Comp. 12, section 3.4: an iterate (x, y, z) of the scaled problem
is optimal to (eps_abs, eps_rel) when its primal and dual residuals, unscaled, are within
eps_abs + eps_rel times their scales; the duality gap is held to the same test, as osqp 1.x does.
Every qp method that iterates (admm, distributed, the peers' answers) is judged by these functions.
"""

from __future__ import annotations

import math

import numpy as np

from optsolve.qp.scaling import Scaled


RESIDUAL_MEASURE = "max(primal, dual) residual (unscaled, OSQP's)"  # what a qp history's residual is
# float64 epsilons of the largest of the gap's three sums (x'Px, q'x, SC(y)) within which the gap counts as zero:
# their own rounding, which no sum of them resolves
GAP_ROUNDING = 2
EPS64 = float(np.finfo(float).eps)
EARLY_MIN = 5  # iterations: the soonest an early check (see next_check) follows a check
EARLY_MARGIN = 1.5  # the iterations the pace predicts, times this


def dual_cone(y, l, u) -> np.ndarray:
    """y without pushes on missing bounds (its projection on the dual cone of [l, u]): an answer's
    duals as the certificate reads them."""
    y = np.where(np.isinf(u) & (y > 0), 0.0, y)
    return np.where(np.isinf(l) & (y < 0), 0.0, y)


def support(y, l, u) -> float:
    """SC(y) = u' max(y, 0) + l' min(y, 0) over the finite bounds (y projected on the polar recession cone);
    every other entry counts as it is, as the certificate's
    (:func:`optsolve.qp.certificate.support_function`) does."""
    pos = np.where(np.isfinite(u), np.maximum(y, 0.0), 0.0)
    neg = np.where(np.isfinite(l), np.minimum(y, 0.0), 0.0)
    return float(np.where(pos > 0, u, 0.0) @ pos + np.where(neg < 0, l, 0.0) @ neg)


def residuals_of(s: Scaled, x, y, z) -> dict:
    """OSQP's termination quantities of (x, y, z) on the scaled problem, unscaled where OSQP tests
    them: residuals, duality gap and the scales their relative tolerances multiply."""
    n, m = s.P.shape[0], s.A.shape[0]
    Dinv, Einv, cinv = 1.0 / s.D, 1.0 / s.E, 1.0 / s.c
    Ax = s.A @ x
    Px = s.P @ x
    Aty = s.A.T @ y
    rp = Ax - z
    rd = s.q + Px + Aty
    out = {"Ax": Ax, "Px": Px, "Aty": Aty, "rows": m,
           "prim_scaled": float(np.abs(rp).max()) if m else 0.0,
           "prim": float(np.abs(Einv * rp).max()) if m else 0.0,
           "dual_scaled": float(np.abs(rd).max()) if n else 0.0,
           "dual": cinv * float(np.abs(Dinv * rd).max()) if n else 0.0}
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging iterate: inf, and numerical_error
        quad, lin, sc = float(Px @ x), float(s.q @ x), support(y, s.l, s.u) if m else 0.0
    out["gap"] = cinv * (quad + lin + sc)
    out["gap_tol_scale"] = cinv * max(abs(quad), abs(lin), abs(sc))
    out["prim_tol_scale"] = max(float(np.abs(Einv * z).max()), float(np.abs(Einv * Ax).max())) if m else 0.0
    out["dual_tol_scale"] = cinv * max(float(np.abs(Dinv * s.q).max()) if n else 0.0,
                                       float(np.abs(Dinv * Aty).max()) if n else 0.0,
                                       float(np.abs(Dinv * Px).max()) if n else 0.0)
    return out


def tolerance_tests(r: dict, eps_abs: float, eps_rel: float) -> tuple[bool, bool, bool]:
    """OSQP's three tests on :func:`residuals_of`'s quantities: (primal, dual, duality gap) within tolerance."""
    prim_ok = r["rows"] == 0 or r["prim"] < eps_abs + eps_rel * r["prim_tol_scale"]
    dual_ok = r["dual"] < eps_abs + eps_rel * r["dual_tol_scale"]
    gap_ok = abs(r["gap"]) < gap_limit(r, eps_abs, eps_rel)
    return prim_ok, dual_ok, gap_ok


def tolerance_distance(r: dict, eps_abs: float, eps_rel: float, gap: bool = True) -> float:
    """How far :func:`residuals_of`'s quantities are from OSQP's test: the largest of the primal residual, the
    dual residual and (with ``gap``) the gap, each over its tolerance (at most 1 where all pass)."""
    tiny = 1e-300
    prim = r["prim"] / max(eps_abs + eps_rel * r["prim_tol_scale"], tiny) if r["rows"] else 0.0
    dual = r["dual"] / max(eps_abs + eps_rel * r["dual_tol_scale"], tiny)
    return max(prim, dual, abs(r["gap"]) / max(gap_limit(r, eps_abs, eps_rel), tiny) if gap else 0.0)


def gap_limit(r: dict, eps_abs: float, eps_rel: float) -> float:
    """OSQP's gap tolerance ``eps_abs + eps_rel * scale``, and no less than the gap's float64 rounding
    (:data:`GAP_ROUNDING` epsilons of the scale, the largest of its sums: at 1e-9 on sums of 1e8 no gap is
    resolved)."""
    return eps_abs + (eps_rel + GAP_ROUNDING * EPS64) * r["gap_tol_scale"]


def passes_termination(s: Scaled, x, y, z, eps_abs: float, eps_rel: float) -> bool:
    """OSQP's termination test (residuals and duality gap) on (x, y, z)."""
    return all(tolerance_tests(residuals_of(s, x, y, z), eps_abs, eps_rel))


def next_check(last: tuple | None, iteration: int, distance: float, every: int) -> int | None:
    """The iteration of an early termination check after a failed one at ``iteration``, ``distance`` from the
    tolerances (:func:`tolerance_distance`), the check before at ``last = (iteration, distance)``: where the log
    distance, falling at the pace between the two, reaches the tolerances (times ``EARLY_MARGIN``, at least
    ``EARLY_MIN`` iterations on) before the next regular check, ``every`` iterations on; else None. A run that
    just misses the tolerances at a regular check (LISWET7 at 1e-3: 1.003 at iteration 75, after 12 at 50) then
    ends at 80, not at 100."""
    if last is None or not (math.isfinite(distance) and 1.0 < distance < last[1]) or iteration <= last[0]:
        return None
    rate = (math.log(last[1]) - math.log(distance)) / (iteration - last[0])
    need = max(EARLY_MIN, math.ceil(EARLY_MARGIN * math.log(distance) / rate))
    return iteration + need if need < every - iteration % every else None
