"""The OT certificate: valid bounds for any potentials, and tampering makes a check fail."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

import optsolve.ot
from optsolve.ot import certificate
from optsolve.ot.problems import SCHEMA, OTProblem, cost_matrix


def _problem(rng, n=12, m=10):
    x, y = rng.random((n, 2)), rng.random((m, 2))
    a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
    return a, b, cost_matrix(x, y, "sqeuclidean")


@settings(max_examples=40, deadline=None)
@given(f=arrays(np.float64, 6, elements=st.floats(-5, 5)), seed=st.integers(0, 2**16))
def test_dual_bound_is_a_lower_bound_for_any_potentials(f, seed):
    rng = np.random.default_rng(seed)
    a, b, C = _problem(rng, 6, 5)
    import ot as pot

    opt = pot.emd2(a, b, C)
    assert certificate.dual_bound_of(OTProblem(a=a, b=b, C=C, mass=1.0), f) <= opt + 1e-12


def _doc(method, rng, **kw):
    a, b, C = _problem(rng)
    res = optsolve.ot.solve(a, b, C, method=method, **kw)
    problem = SCHEMA.validate({"a": a, "b": b, "C": C}, source="test")
    return problem, json.loads(res.to_json())


def _recheck(problem, doc):
    return certificate.check(problem, doc["solution"], method=doc["method"], objective=doc["objective"],
                             settings=doc["settings"])


@pytest.mark.parametrize("method,kw", [("emd", {}), ("sinkhorn", {"reg": 0.02})])
def test_round_trip_through_json_holds(rng, method, kw):
    problem, doc = _doc(method, rng, **kw)
    cert = _recheck(problem, doc)
    assert cert.holds
    assert [c["value"] for c in doc["certificate"]["checks"]] == [c.value for c in cert.checks]


TAMPERS = {
    "potential_f": lambda s: s["f"].__setitem__(0, s["f"][0] + 0.05),
    "potential_g": lambda s: s["g"].__setitem__(1, s["g"][1] - 0.05),
    "dual_bound": lambda s: s.__setitem__("dual_bound", s["dual_bound"] * 1.01),
}


@pytest.mark.parametrize("method,kw", [("emd", {}), ("sinkhorn", {"reg": 0.02})])
@pytest.mark.parametrize("tamper", sorted(TAMPERS))
def test_tampered_solution_fails(rng, method, kw, tamper):
    problem, doc = _doc(method, rng, **kw)
    bad = copy.deepcopy(doc)
    TAMPERS[tamper](bad["solution"])
    assert not _recheck(problem, bad).holds


@pytest.mark.parametrize("method,kw", [("emd", {}), ("sinkhorn", {"reg": 0.02})])
def test_tampered_objective_fails(rng, method, kw):
    problem, doc = _doc(method, rng, **kw)
    doc["objective"] *= 0.99
    cert = _recheck(problem, doc)
    assert not cert["objective_matches"].holds


def test_tampered_emd_plan_fails(rng):
    problem, doc = _doc("emd", rng)
    plan = doc["solution"]["plan"]
    plan["value"][0] += 1e-3
    cert = _recheck(problem, doc)
    assert not cert["marginal_l1"].holds
    plan["value"][0] = -1.0
    assert not _recheck(problem, doc)["nonnegativity"].holds


def test_suboptimal_emd_plan_fails_the_gap(rng):
    a, b, C = _problem(rng)
    problem = SCHEMA.validate({"a": a, "b": b, "C": C}, source="test")
    P = np.outer(a, b)  # feasible, not optimal
    row, col = np.nonzero(P)
    res = optsolve.ot.solve(a, b, C, method="emd")
    sol = dict(res.solution, plan={"format": "coo", "row": row, "col": col, "value": P[row, col]})
    cert = certificate.check(problem, sol, method="emd", objective=float((C * P).sum()), settings={})
    assert cert["marginal_l1"].holds and cert["objective_matches"].holds
    assert not cert["relative_gap"].holds


def test_downgrade_when_certificate_fails(rng, monkeypatch):
    a, b, C = _problem(rng)
    monkeypatch.setattr(certificate, "MARGINAL_LIMIT", -1.0)  # no plan can meet it
    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=0.05)
    assert not res.certificate["marginal_l1"].holds
    assert res.status.value == "optimal_inaccurate"
    assert res.exit_code == 6
    assert "marginal_l1" in res.message
