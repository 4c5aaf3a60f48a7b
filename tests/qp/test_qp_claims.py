"""Infeasibility and unboundedness claims of optsolve qp: made only where the ray is exact to rounding.

Near-rays (a tiny curvature, a nearly parallel pair of rows) must not be claimed, by any method, and
``verify`` must refute documents that claim them; true claims (small cases written after OSQP's
primal- and dual-infeasibility unit tests, from first principles) must still be made and verify.
"""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pytest
import scipy.sparse as sp

import optsolve.qp
from optsolve.qp import certificate
from optsolve.qp.problems import SCHEMA, prepare

METHODS = ["auto", "admm", "osqp", "piqp", "clarabel"]

# min 1/2 1e-8 x^2 - x: the minimum is -5e7 at x = 1e8; dx'P dx > 0, so no ray exists
TINY_CURVATURE = {"P": [[1e-8]], "q": [-1.0]}
# x1 >= 1 and x1 - 1e-8 x2 <= 0: (1, 1e8) is feasible; dy = (-1, 1) leaves A'dy = (0, -1e-8)
NEAR_PARALLEL = {"P": [[0.0, 0.0], [0.0, 0.0]], "q": [0.0, 0.0], "A": [[1.0, 0.0], [1.0, -1e-8]],
                 "l": [1.0, -1e30], "u": [1e30, 0.0]}


# x1 + x2 >= 1 and x1 + (1 + 1e-8) x2 <= 0: feasible with x2 <= -1e8; dy = (-1, 1) leaves A'dy = (0, 1e-8)
NEAR_CANCELLING = {"P": [[0.0, 0.0], [0.0, 0.0]], "q": [0.0, 0.0], "A": [[1.0, 1.0], [1.0, 1.0 + 1e-8]],
                   "l": [1.0, -1e30], "u": [1e30, 0.0]}


def _scaled(eps):
    """The two near-rays above with 1e-8 replaced by ``eps``."""
    return ({"P": [[eps]], "q": [-1.0]},
            dict(NEAR_PARALLEL, A=[[1.0, 0.0], [1.0, -eps]]))


def _problem(data):
    return SCHEMA.validate({k: (sp.csc_matrix(np.asarray(v, dtype=float)) if k in ("P", "A") else
                                np.asarray(v, dtype=float)) for k, v in data.items()}, source="test")


def _run(cli, tmp_path, data, method, name="p"):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    r = cli("qp", path, "--method", method, "-o", "-", "-q")
    return path, r, json.loads(r.stdout)


@pytest.mark.parametrize("method", METHODS)
def test_a_tiny_curvature_is_not_claimed_unbounded(cli, tmp_path, method):
    pytest.importorskip(method) if method in ("osqp", "piqp", "clarabel") else None
    path, r, doc = _run(cli, tmp_path, TINY_CURVATURE, method)
    assert doc["status"] != "unbounded" and r.exit_code != 4, doc["message"]
    if doc["status"] == "optimal":  # against the closed form: x = 1e8, f = -5e7
        assert doc["solution"]["x"][0] == pytest.approx(1e8, rel=1e-2)
        assert doc["objective"] == pytest.approx(-5e7, rel=1e-4)
        out = tmp_path / "out.json"
        out.write_text(json.dumps(doc))
        assert cli("verify", path, out, "-q").exit_code == 0
    else:
        assert doc["status"] in ("max_iter", "optimal_inaccurate", "numerical_error", "time_limit"), doc["status"]
        assert doc["message"]


@pytest.mark.parametrize("method", METHODS)
def test_a_near_parallel_pair_of_rows_is_not_claimed_infeasible(cli, tmp_path, method):
    pytest.importorskip(method) if method in ("osqp", "piqp", "clarabel") else None
    path, r, doc = _run(cli, tmp_path, NEAR_PARALLEL, method)
    assert doc["status"] != "infeasible" and r.exit_code != 3, doc["message"]
    if doc["status"] == "optimal":  # every feasible point is optimal (objective 0): x must be feasible
        x = np.asarray(doc["solution"]["x"])
        assert x[0] >= 1.0 - 1e-3 * max(1.0, abs(x[0])) and x[0] - 1e-8 * x[1] <= 1e-3 * (1 + 1e-8 * abs(x[1]))
        assert doc["objective"] == 0.0


@pytest.mark.parametrize("eps", [1e-8, 1e-14])
def test_verify_refutes_claims_of_near_rays(cli, tmp_path, verify_forged, eps):
    curvature, parallel = _scaled(eps)
    for data, status, key, vec in ((curvature, "unbounded", "dual_inf_cert", [1.0]),
                                   (parallel, "infeasible", "prim_inf_cert", [-1.0, 1.0]),
                                   (NEAR_CANCELLING, "infeasible", "prim_inf_cert", [-1.0, 1.0])):
        path = tmp_path / f"{status}.json"
        path.write_text(json.dumps(data))
        doc = {"schema": "optsolve.solution/1", "command": "qp", "method": "admm", "status": status,
               "problem": {"path": path.name, "sha256": hashlib.sha256(path.read_bytes()).hexdigest()},
               "objective": None, "solution": {"certificate_kind": status, key: vec}, "settings": {}}
        r = verify_forged(path, doc, "-q")
        assert r.exit_code == 6 and "status_claim" in r.stderr, (status, r.stderr)


@pytest.mark.parametrize("eps", [1e-8, 1e-14])
def test_near_rays_fail_the_certificate_checks(eps):
    curvature, parallel = _scaled(eps)
    unb = certificate.unboundedness_checks(prepare(_problem(curvature)), np.array([1.0]))
    assert [c.name for c in unb if c.holds is False] == ["certificate_Pdx"]
    inf = certificate.infeasibility_checks(prepare(_problem(parallel)), np.array([-1.0, 1.0]))
    assert [c.name for c in inf if c.holds is False] == ["certificate_Aty"]


@pytest.mark.parametrize("eps", [1e-14])
@pytest.mark.parametrize("method", ["auto", "admm"])
def test_smaller_near_rays_are_not_claimed(cli, tmp_path, method, eps):
    curvature, parallel = _scaled(eps)
    for data, claim in ((curvature, "unbounded"), (parallel, "infeasible"), (NEAR_CANCELLING, "infeasible")):
        _, r, doc = _run(cli, tmp_path, data, method, name=claim)
        assert doc["status"] != claim, (claim, doc["message"])


# small cases of the kinds OSQP's own unit tests use for its infeasibility detection
def _two_equal_rows_apart():
    """Primal infeasible: a random feasible QP with one row repeated, the copy's interval disjoint from it."""
    rng = np.random.default_rng(4)
    n, m = 12, 40
    M = sp.random(n, n, density=0.4, random_state=5).toarray()
    A = sp.random(m, n, density=0.5, random_state=6).toarray()
    u = 3.0 + rng.standard_normal(m)
    l = -3.0 + rng.standard_normal(m)
    A[m // 2] = A[m // 2 + 1]
    l[m // 2] = u[m // 2 + 1] + 10.0 * rng.random()
    u[m // 2] = l[m // 2] + 0.5
    return {"P": M @ M.T, "q": rng.standard_normal(n), "A": A, "l": l, "u": u}


CLAIMED = {
    "two_equal_rows_apart": (_two_equal_rows_apart(), "infeasible"),
    # x1 - x2 >= 1 and x2 - x1 >= 1: primal infeasible (and q'd < 0 along d = (1, 1) in the cone)
    "primal_and_dual_infeasible_lp": ({"P": np.zeros((2, 2)), "q": [-1.0, -1.0],
                                       "A": [[1.0, -1.0], [-1.0, 1.0], [1.0, 0.0], [0.0, 1.0]],
                                       "l": [1.0, 1.0, 0.0, 0.0], "u": [np.inf] * 4}, ("infeasible", "unbounded")),
    # min 2 x1 - x2, x >= 0: unbounded along (0, 1)
    "dual_infeasible_lp": ({"P": np.zeros((2, 2)), "q": [2.0, -1.0], "A": np.eye(2), "l": [0.0, 0.0],
                            "u": [np.inf, np.inf]}, "unbounded"),
    # min 2 x1^2 + 2 x2, x1 + x2 <= 2, -x1 + x2 <= 3: unbounded along (0, -1)
    "dual_infeasible_qp": ({"P": np.diag([4.0, 0.0]), "q": [0.0, 2.0], "A": [[1.0, 1.0], [-1.0, 1.0]],
                            "l": [-np.inf, -np.inf], "u": [2.0, 3.0]}, "unbounded"),
}


@pytest.mark.parametrize("method", METHODS)
@pytest.mark.parametrize("case", sorted(CLAIMED))
def test_true_claims_are_made_and_certified(method, case):
    pytest.importorskip(method) if method in ("osqp", "piqp", "clarabel") else None
    data, expected = CLAIMED[case]
    res = optsolve.qp.solve_problem(_problem(data), method=method)
    assert res.status.value in ((expected,) if isinstance(expected, str) else expected), res.message
    assert res.certificate.holds, [c.to_dict() for c in res.certificate.checks if c.holds is False]
