"""optsolve truncated at scale: the Gaussian's structured pieces (its inverse Fisher information, blocked
statistics, single-precision Newton products, in-place kept draws, mean-shifted proposals and the streamed
final step) against their dense or plain counterparts."""

from __future__ import annotations

import numpy as np
import pytest

from optsolve.truncated import families as fam
from optsolve.truncated import newton
from optsolve.truncated.problems import FAMILIES, SCHEMA, centred_r, mean_and_covariance, prepare
from optsolve.truncated.sampling import SOBOL_CHUNK, Pool, PoolSet, Sampler, sobol_count


def _dense_T(family, Y):
    """The sufficient statistics as an N x p array (small cases only)."""
    return np.stack([family.moments(Y[i:i + 1], np.ones(1)) for i in range(Y.shape[0])])


def _random_theta(family, rng):
    d = family.d
    A = rng.standard_normal((d, d))
    P = A @ A.T / d + np.eye(d)
    return family.join(rng.standard_normal(d), P)


@pytest.mark.parametrize("d", [1, 3, 6])
def test_inverse_fisher_is_the_jacobian_of_from_moments_and_the_inverse_of_the_fisher(d):
    rng = np.random.default_rng(d)
    g = fam.Gaussian(d)

    def mean_T(th):  # E_theta[T], the gradient of A, from the mean and covariance
        prm = g.params(th)
        mu, S = prm["mean"], prm["covariance"]
        return g.moments_from(mu, S + np.outer(mu, mu))

    theta = _random_theta(g, rng)
    m = mean_T(theta)
    J = np.column_stack([g.inverse_fisher(m)(e) for e in np.eye(g.p)])
    eps = 1e-6
    num = np.column_stack([(g.from_moments(m + eps * e) - g.from_moments(m - eps * e)) / (2 * eps) for e in np.eye(g.p)])
    assert np.allclose(J, J.T, atol=1e-8 * np.abs(J).max())
    assert np.allclose(J, num, rtol=1e-5, atol=1e-6 * np.abs(J).max())
    # the Fisher information is the Jacobian of E_theta[T]: J is its inverse
    F = np.column_stack([(mean_T(theta + eps * e) - mean_T(theta - eps * e)) / (2 * eps) for e in np.eye(g.p)])
    assert np.allclose(J @ F, np.eye(g.p), atol=1e-5)


def test_blocked_dot_moments_and_statistics_equal_the_dense_ones(monkeypatch):
    monkeypatch.setattr(fam, "ROWS", 7)
    rng = np.random.default_rng(1)
    g = fam.Gaussian(4)
    Y = rng.standard_normal((50, 4))
    theta = _random_theta(g, rng)
    w = rng.random(50)
    T = _dense_T(g, Y)
    assert np.allclose(g.dot(Y, theta), T @ theta)
    assert np.allclose(g.moments(Y, w), w @ T)
    data = FAMILIES["gaussian"].generate(rng, d=3, n=500, alpha=0.3)
    tp = prepare(SCHEMA.validate(data, source="test"))
    Z = tp.whiten(tp.X)
    assert np.allclose(tp.mean_statistics(), g.__class__(3).moments(Z, np.full(500, 1 / 500)))
    rows = np.sort(rng.choice(500, 123, replace=False))
    assert np.allclose(tp.mean_statistics(rows), fam.Gaussian(3).moments(Z[rows], np.full(123, 1 / 123)))
    mean, cov = mean_and_covariance(tp.X)
    assert np.allclose(mean, tp.X.mean(axis=0)) and np.allclose(cov, np.cov(tp.X, rowvar=False, bias=True))
    R = centred_r(tp.X, mean)
    assert np.allclose(np.linalg.svd(R, compute_uv=False), np.linalg.svd(tp.X - mean, compute_uv=False))


def test_single_precision_newton_products_give_the_double_precision_direction(monkeypatch):
    rng = np.random.default_rng(2)
    g = fam.Gaussian(20)  # p = 230, over SCALE_FROM_P
    theta = _random_theta(g, rng)
    Y = g.sample(theta, 30_000, rng)
    pool = Pool(Y, np.zeros(Y.shape[0]), Y.shape[0])
    w = np.full(Y.shape[0], 1.0 / Y.shape[0])
    grad = rng.standard_normal(g.p) * 1e-2
    single = newton._solve(g, pool, w, grad, rtol=1e-8)
    assert pool.single().dtype == np.float32
    monkeypatch.setattr(newton, "SCALE_FROM_P", 10 ** 9)
    double = newton._solve(g, Pool(Y, pool.base, Y.shape[0]), w, grad, rtol=1e-8)
    assert np.linalg.norm(single - double) <= 1e-4 * np.linalg.norm(double)


class _Half:
    """x_1 >= 1, counted."""

    def __init__(self):
        self.calls = 0

    def __call__(self, X):
        self.calls += X.shape[0]
        return X[:, 0] >= 1.0


def test_sobol_counts_and_kept_draws_written_in_place():
    assert [sobol_count(x, nets=False) for x in (1, 3, 1000, SOBOL_CHUNK)] == [2, 4, 1024, SOBOL_CHUNK]
    assert sobol_count(5.5 * SOBOL_CHUNK) == 8 * SOBOL_CHUNK
    assert sobol_count(SOBOL_CHUNK + 1, nets=False) == 2 * SOBOL_CHUNK and sobol_count(5.5 * SOBOL_CHUNK, False) == 6 * SOBOL_CHUNK
    g = fam.Gaussian(2)
    oracle = _Half()
    pools = PoolSet(g, Sampler(g, oracle, np.random.default_rng(0)))
    pools.reserve(100)  # too little: the kept rows grow, keeping what they hold
    theta = g.join(np.zeros(2), np.eye(2))
    pools.draw(theta, 4096)
    first = pools.pool().Y.copy()
    pools.draw(g.join(np.array([1.0, 0.0]), np.eye(2)), 4096)
    pool = pools.pool()
    assert np.array_equal(pool.Y[:first.shape[0]], first) and pool.Y.shape[0] == pools.accepted_count()
    assert (pool.Y[:, 0] >= 1.0).all() and pool.proposals == 8192 and oracle.calls == 8192
    assert np.array_equal(pool.single(), pool.Y.astype(np.float32))
    # the balance-heuristic weights give p_theta(S) = P(x_1 >= 1) = 0.1587 for N(0, I)
    assert abs(pool.survival(g, theta)[0] - 0.158655) < 0.01
    pools.forget()
    assert pools.accepted_count() == 0 and pools.batches == []


def test_mean_shifted_proposal_spends_fewer_draws_and_the_streamed_step_finds_the_pools_optimum():
    """On a halfspace far in the tail, the shifted proposal's effective draws per proposal beat
    rejection from p_theta; a streamed final step from the kept pool's optimum lands on the optimum
    of a pool with all those draws (within the Monte-Carlo error of the streamed draws)."""
    rng = np.random.default_rng(4)
    g = fam.Gaussian(2)
    oracle = _Half()
    theta = g.join(np.zeros(2), np.eye(2))  # mass 0.159 on S
    pools = PoolSet(g, Sampler(g, oracle, rng))
    pools.draw(theta, 1 << 15)
    pool = pools.pool()
    rate = pool.survival(g, theta)[0]
    q, eff = newton.proposal(g, pool, theta, rate)
    assert eff > 2 * rate and not np.allclose(q, theta)
    Tbar = g.moments(pool.Y, np.full(pool.Y.shape[0], 1.0 / pool.Y.shape[0]))
    L = lambda th: 0.0  # noqa: E731  (no region bound in this check)
    fit, dec, steps, why = newton.saa_newton(g, pool, theta, Tbar, L, 1.0, 1e-12)
    assert why == "converged"
    new, ess, drawn = newton.stream_step(g, pools, pool, fit, Tbar, L, 1.0, 8 * pool.ess(g, fit))
    assert ess >= 7.9 * pool.ess(g, fit) and drawn > 0
    # the data are themselves draws of p_theta | S: both estimates sit near theta
    for th in (fit, new):
        assert fam.kl_gaussian(np.zeros(2), np.eye(2), g.params(th)["mean"], g.params(th)["covariance"]) < 0.01
