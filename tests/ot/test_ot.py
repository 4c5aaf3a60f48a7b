"""optsolve ot: exactness against an independent LP solver, Sinkhorn quality, limits, zero masses."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import linprog

import optsolve.ot
from optsolve.core.errors import InputError, ParameterError
from optsolve.ot.problems import cost_matrix


def lp_optimum(a, b, C) -> float:
    """The transport LP solved by HiGHS, independent of POT."""
    n, m = C.shape
    A_eq = np.zeros((n + m, n * m))
    for i in range(n):
        A_eq[i, i * m:(i + 1) * m] = 1
    for j in range(m):
        A_eq[n + j, j::m] = 1
    res = linprog(C.ravel(), A_eq=A_eq, b_eq=np.concatenate([a / a.sum(), b / b.sum()]), bounds=(0, None),
                  method="highs")
    assert res.status == 0
    return res.fun


def random_problem(rng, n, m, d=2, zeros=0):
    x, y = rng.random((n, d)), rng.random((m, d))
    a, b = rng.dirichlet(np.ones(n)), rng.dirichlet(np.ones(m))
    if zeros:
        a[rng.choice(n, zeros, replace=False)] = 0
        b[rng.choice(m, zeros, replace=False)] = 0
        a, b = a / a.sum(), b / b.sum()
    return a, b, x, y


@pytest.mark.parametrize("n,m,zeros", [(12, 9, 0), (25, 25, 0), (20, 15, 3)])
def test_emd_matches_lp(rng, n, m, zeros):
    a, b, x, y = random_problem(rng, n, m, zeros=zeros)
    C = cost_matrix(x, y, "sqeuclidean")
    res = optsolve.ot.solve(a, b, C, method="emd")
    assert res.status.value == "optimal"
    assert res.certificate.holds
    assert res.objective == pytest.approx(lp_optimum(a, b, C), rel=1e-9, abs=1e-12)
    P = res.arrays["plan"]
    assert P.min() >= 0
    np.testing.assert_allclose(P.sum(1), a, atol=1e-12)
    np.testing.assert_allclose(P.sum(0), b, atol=1e-12)


def test_points_and_matrix_agree(rng):
    a, b, x, y = random_problem(rng, 15, 11, d=3)
    for cost in ("sqeuclidean", "euclidean"):
        C = np.array([[np.sum((xi - yj) ** 2) for yj in y] for xi in x])
        if cost == "euclidean":
            C = np.sqrt(C)
        r1 = optsolve.ot.solve(a, b, x=x, y=y, cost=cost, method="emd")
        r2 = optsolve.ot.solve(a, b, C, method="emd")
        assert r1.objective == pytest.approx(r2.objective, rel=1e-12)


def test_unnormalised_masses_are_costs_per_unit_mass(rng):
    a, b, x, y = random_problem(rng, 10, 8)
    C = cost_matrix(x, y, "euclidean")
    r1 = optsolve.ot.solve(a, b, C, method="emd")
    r2 = optsolve.ot.solve(7 * a, 7 * b, C, method="emd")
    assert r1.objective == pytest.approx(r2.objective, rel=1e-12)
    assert r2.problem.size == {"n": 10, "m": 8}


@pytest.mark.parametrize("zeros", [0, 4])
def test_sinkhorn_certified_gap_contains_lp_optimum(rng, zeros):
    a, b, x, y = random_problem(rng, 30, 24, zeros=zeros)
    C = cost_matrix(x, y, "sqeuclidean")
    opt = lp_optimum(a, b, C)
    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=0.01)
    assert res.status.value == "optimal"
    assert res.certificate.holds
    lower = res.certificate["dual_lower_bound"].value
    assert lower <= opt + 1e-12 <= res.objective + 2e-12
    # the rounded entropic plan is close to optimal: within the entropic bias bound
    assert res.objective - opt <= res.certificate["entropic_bias_bound"].value
    P = res.arrays["plan"]
    np.testing.assert_allclose(P.sum(1), a, atol=1e-12)
    np.testing.assert_allclose(P.sum(0), b, atol=1e-12)
    if zeros:
        f = res.solution["f"]
        assert np.all(np.isneginf(f[a == 0]))
        assert "Non-finite values written as null" in res.to_dict()["message"]


def test_sinkhorn_matches_pot_plain_sinkhorn(rng):
    import ot as pot

    a, b, x, y = random_problem(rng, 20, 20)
    C = cost_matrix(x, y, "sqeuclidean")
    reg = 0.05
    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=reg, tol=1e-12)
    ref = pot.sinkhorn(a, b, C, reg, stopThr=1e-14, numItermax=100000)
    assert np.abs(res.arrays["plan"] - ref).sum() < 1e-8


def test_smaller_reg_tightens_the_gap(rng):
    a, b, x, y = random_problem(rng, 25, 25)
    C = cost_matrix(x, y, "sqeuclidean")
    gaps = [optsolve.ot.solve(a, b, C, method="sinkhorn", reg=r).certificate["gap_upper_bound"].value
            for r in (0.1, 0.01)]
    assert gaps[1] < gaps[0]


def test_sinkhorn_default_reg_is_relative_to_cost(rng):
    a, b, x, y = random_problem(rng, 10, 10)
    C = cost_matrix(x, y, "sqeuclidean")
    res = optsolve.ot.solve(a, b, 1000 * C, method="sinkhorn", max_iter=50)
    assert res.settings["reg"] == pytest.approx(1000 * C.max() / 1024)


def test_sinkhorn_limits_return_a_feasible_rounded_plan(rng):
    a, b, x, y = random_problem(rng, 40, 40)
    C = cost_matrix(x, y, "sqeuclidean")
    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=1e-3, max_iter=10)
    assert res.status.value == "max_iter"
    assert res.stats["iterations"] == 10
    assert res.certificate.holds  # rounded plan: feasible, certified gap
    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=1e-4, tol=1e-15, time_limit=1e-3)
    assert res.status.value == "time_limit"
    assert res.certificate["marginal_l1"].holds


def test_sinkhorn_interrupt_returns_last_iterate(rng):
    a, b, x, y = random_problem(rng, 20, 20)
    C = cost_matrix(x, y, "sqeuclidean")

    class Interrupting:
        calls = 0

        def update(self, iteration, **metrics):
            self.calls += 1
            if self.calls == 2:
                raise KeyboardInterrupt

        def close(self):
            pass

    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=1e-3, tol=1e-15, progress=Interrupting())
    assert res.status.value == "interrupted"
    assert res.exit_code == 130
    assert res.certificate["marginal_l1"].holds


def test_emd_max_iter(rng):
    a, b, x, y = random_problem(rng, 30, 30)
    res = optsolve.ot.solve(a, b, x=x, y=y, cost="sqeuclidean", method="emd", max_iter=5)
    assert res.status.value == "max_iter"
    assert res.exit_code == 5
    assert "not optimal" in res.message


def test_python_api_errors(rng):
    a, b, x, y = random_problem(rng, 5, 4)
    C = cost_matrix(x, y, "sqeuclidean")
    with pytest.raises(InputError, match="array 'b' has shape \\(3,\\), expected \\(4,\\) to match 'C' \\(5, 4\\)"):
        optsolve.ot.solve(a, b[:3], C)
    with pytest.raises(ParameterError, match="Unknown method 'simplex'"):
        optsolve.ot.solve(a, b, C, method="simplex")
    with pytest.raises(ParameterError, match="'--reg' option must be a float in \\(0, inf\\); got -1.0"):
        optsolve.ot.solve(a, b, C, method="sinkhorn", reg=-1.0)


def test_identical_marginals_cost_zero():
    a = np.array([0.2, 0.3, 0.5])
    x = np.array([[0.0], [1.0], [2.0]])
    res = optsolve.ot.solve(a, a, x=x, y=x, cost="euclidean", method="emd")
    assert res.objective == pytest.approx(0.0, abs=1e-15)
    assert res.certificate.holds


def test_sinkhorn_on_backend(backend, rng):
    a, b, x, y = random_problem(rng, 15, 12)
    C = cost_matrix(x, y, "sqeuclidean")
    res = optsolve.ot.solve(a, b, C, method="sinkhorn", reg=0.02, device=backend.device)
    assert res.stats["device"] == backend.device
    assert res.certificate.holds
    assert res.objective >= lp_optimum(a, b, C) - 1e-12
