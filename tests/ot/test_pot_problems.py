"""optsolve ot on the problems of POT's own test suite (tests/ot/pot_problems.py), against POT's ``emd2``.

The default solve, ``target_gap=1e-3`` and ``method="tnt"`` with ``target_gap=1e-3`` must end ``optimal``
within a relative gap of 1e-3 of the optimum, with an absolute floor at float64 rounding (1e-12 max C x
mass) for optima at zero; ``method="emd"`` must be exact; the
reported dual bound must never exceed the optimum. A failure message names the problem and gives
the objective, the optimum, the gap, the status and the solver's message.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import optsolve.ot
from pot_problems import GENERATORS  # tests/ot is on sys.path: pytest's rootdir-less import mode

TARGET = 1e-3  # relative gap asked of the default solve and of target_gap
FLOOR = 1e-12  # absolute floor of the gap, as a fraction of max C x mass: float64 rounding (zero optima)
FEAS_RTOL = 1e-8  # L1 marginal error plus negative mass, per unit mass
EXACT_RTOL, EXACT_ATOL = 1e-9, 1e-12  # method="emd": relative, and absolute per max C x mass
DUAL_RTOL = 1e-9  # a dual bound above the optimum by more than this (x max(1, |OPT|)) is not a bound

NAMES = [gen.__name__ for gen in GENERATORS]
BY_NAME = dict(zip(NAMES, GENERATORS))


@functools.lru_cache(maxsize=None)
def problem(name: str):
    """``(a, b, C, OPT)``, OPT from POT's network simplex with an iteration limit it never reaches here."""
    import ot

    label, a, b, C = BY_NAME[name]()
    assert label == name, f"generator {name} returned the name {label!r}"
    opt, log = ot.emd2(a, b, C, numItermax=10**7, log=True)
    assert log["warning"] is None, f"{name}: POT's emd2 gave no reference optimum: {log['warning']}"
    return a, b, C, float(opt)


def scale(a, C) -> float:
    """max C x mass: the cost of the worst plan, the unit of every absolute tolerance here."""
    return float(C.max()) * float(a.sum())


def allowed_gap(opt: float, a, C) -> float:
    return TARGET * abs(opt) + FLOOR * scale(a, C)


def dense_plan(res) -> np.ndarray:
    plan = res.arrays["plan"]
    if callable(plan) and not hasattr(plan, "shape"):
        plan = plan()
    if hasattr(plan, "toarray"):
        plan = plan.toarray()
    return np.asarray(plan, dtype=np.float64)


def describe(name: str, res, opt: float) -> str:
    U = res.objective
    D = res.solution.get("dual_bound")
    gap = None if U is None else U - opt
    rel = None if gap is None or opt == 0 else gap / abs(opt)
    return (f"{name}: status {res.status.value!r}, objective U={U!r}, OPT={opt!r}, U - OPT={gap!r} "
            f"(relative {rel!r}), dual bound D={D!r}, message {res.message!r}")


def plan_faults(P, a, b, C, objective) -> list[str]:
    """What is wrong with a plan claimed for (a, b, C) at cost ``objective``: shape, marginals, sign, cost."""
    if P.shape != C.shape:
        return [f"plan has shape {P.shape}, expected {C.shape}"]
    faults = []
    mass = float(a.sum())
    neg = float(-np.minimum(P, 0.0).sum())
    for what, err in (("rows", np.abs(P.sum(1) - a).sum()), ("columns", np.abs(P.sum(0) - b).sum())):
        if not err + neg <= FEAS_RTOL * mass:
            faults.append(f"plan {what} miss their marginal by {err:.3g} in L1 (negative mass {neg:.3g}), "
                          f"limit {FEAS_RTOL:g} x mass {mass:g}")
    cost = float((C * P).sum())
    if objective is None or not abs(objective - cost) <= EXACT_RTOL * abs(cost) + EXACT_ATOL * scale(a, C):
        faults.append(f"objective {objective!r} is not the cost <C, P> = {cost!r} of the returned plan")
    return faults


def gap_faults(res, a, b, C, opt: float) -> list[str]:
    """The checks of an optimal claim within the target gap: status, distance to OPT, the plan."""
    faults = []
    if res.status.value != "optimal":
        faults.append(f"status {res.status.value!r}, expected 'optimal'")
    allowed = allowed_gap(opt, a, C)
    U = res.objective
    if U is None or not U - opt <= allowed:
        faults.append(f"U - OPT = {None if U is None else U - opt!r} exceeds the allowed {allowed:.3g} "
                      f"(= {TARGET:g} |OPT| + {FLOOR:g} max C x mass)")
    faults += plan_faults(dense_plan(res), a, b, C, U)
    return faults


@pytest.mark.parametrize("name", NAMES)
def test_pot_plan_passes_the_same_checks(name):
    """The harness itself: each instance is balanced, and POT's exact plan meets every check below."""
    import ot

    a, b, C, opt = problem(name)
    assert a.dtype == b.dtype == C.dtype == np.float64 and C.shape == (a.size, b.size) and C.size <= 500 * 500
    assert abs(a.sum() - b.sum()) <= 1e-12 * a.sum(), f"{name}: masses {a.sum()!r} and {b.sum()!r} differ"
    P = ot.emd(a, b, C, numItermax=10**7)
    faults = plan_faults(P, a, b, C, opt)
    assert not faults, f"{name}: POT's plan: " + "; ".join(faults)


@pytest.mark.parametrize("name", NAMES)
def test_default_is_within_target_of_the_optimum(name):
    a, b, C, opt = problem(name)
    res = optsolve.ot.solve(a, b, C)
    faults = gap_faults(res, a, b, C, opt)
    assert not faults, describe(name, res, opt) + ": " + "; ".join(faults)


@pytest.mark.parametrize("name", NAMES)
def test_target_gap_ends_optimal(name):
    a, b, C, opt = problem(name)
    res = optsolve.ot.solve(a, b, C, target_gap=TARGET)
    faults = gap_faults(res, a, b, C, opt)
    assert not faults, describe(name, res, opt) + ": " + "; ".join(faults)


@pytest.mark.parametrize("name", NAMES)
def test_tnt_target_gap_ends_optimal(name):
    a, b, C, opt = problem(name)
    res = optsolve.ot.solve(a, b, C, method="tnt", target_gap=TARGET)
    faults = gap_faults(res, a, b, C, opt)
    assert not faults, describe(name, res, opt) + ": " + "; ".join(faults)


@pytest.mark.parametrize("name", NAMES)
def test_emd_method_ends_optimal(name):
    a, b, C, opt = problem(name)
    res = optsolve.ot.solve(a, b, C, method="emd")
    faults = []
    if res.status.value != "optimal":
        faults.append(f"status {res.status.value!r}, expected 'optimal'")
    allowed = EXACT_RTOL * abs(opt) + EXACT_ATOL * scale(a, C)
    U = res.objective
    if U is None or not abs(U - opt) <= allowed:
        faults.append(f"|U - OPT| = {None if U is None else abs(U - opt)!r} exceeds {allowed:.3g} "
                      f"(= {EXACT_RTOL:g} |OPT| + {EXACT_ATOL:g} max C x mass)")
    faults += plan_faults(dense_plan(res), a, b, C, U)
    assert not faults, describe(name, res, opt) + ": " + "; ".join(faults)


@pytest.mark.parametrize("name", NAMES)
def test_certified_bound_is_never_below_the_true_gap(name):
    """U - D >= U - OPT, i.e. D <= OPT, for the reported D and the certificate's own recomputation.

    The slack is DUAL_RTOL max(1, |OPT|) plus EXACT_ATOL max C x mass: D is a sum of c-transforms of
    potentials as large as max C, so float64 cannot place it closer than that to OPT where max C = 1e8.
    """
    a, b, C, opt = problem(name)
    res = optsolve.ot.solve(a, b, C)
    U = res.objective
    tol = DUAL_RTOL * max(1.0, abs(opt)) + EXACT_ATOL * scale(a, C)
    faults = []
    bounds = {"solution['dual_bound']": res.solution.get("dual_bound")}
    try:
        bounds["certificate dual_lower_bound"] = res.certificate["dual_lower_bound"].value
    except KeyError:
        faults.append("the certificate has no 'dual_lower_bound' check")
    for what, D in bounds.items():
        if D is None or math.isnan(D):
            faults.append(f"{what} is {D!r}, not a number")
        elif not D <= opt + tol:
            faults.append(f"{what} D = {D!r} exceeds OPT by {D - opt!r} (tolerance {tol:.3g}): the certified "
                          f"gap U - D = {U - D!r} is below the true gap U - OPT = {U - opt!r}")
    try:
        certified = res.certificate["gap_upper_bound"].value
    except KeyError:
        certified = None
        faults.append("the certificate has no 'gap_upper_bound' check")
    # None stands for an infinite U - D (strict JSON), which bounds any gap.
    if certified is not None and not certified >= (U - opt) - tol:
        faults.append(f"certificate gap_upper_bound {certified!r} is below the true gap U - OPT = {U - opt!r} "
                      f"(tolerance {tol:.3g})")
    assert not faults, describe(name, res, opt) + ": " + "; ".join(faults)
