"""optsolve truncated's certificate at scale: the structured gradient statistic (conjugate gradients on products
with F from the kept draws) against the dense p x p solve, the blocked moments of the samples against whole-array
numpy, the seed's digest by blocks, the memory guard, and the certificate's independence from the solver."""

from __future__ import annotations

import ast
import hashlib
import math
from pathlib import Path

import numpy as np
import pytest

import optsolve.truncated
from optsolve.truncated import certificate
from optsolve.truncated.certificate import fisher
from optsolve.truncated.problems import DENSE_MAX_P, FAMILIES, SCHEMA, STAT_BLOCK, certificate_bytes, statistics_count
from optsolve.truncated.sets import parse_set


def _case(d, kind, seed):
    rng = np.random.default_rng(seed)
    data = FAMILIES["gaussian"].generate(rng, d=d, n=1500, alpha=0.3, set=kind, cond=5.0)
    X = data["samples"]
    # an estimate near the samples' own fit, so that the gradient is neither zero nor huge
    sol = {"mean": (X.mean(axis=0) + 0.1 * rng.standard_normal(d)).tolist(),
           "covariance": (1.2 * np.cov(X, rowvar=False, bias=True)).tolist()}
    est = certificate.estimate_of(data, sol)
    assert certificate.validity_checks(est)[-1].holds
    return data, est, parse_set(data["set"], d).contains


@pytest.mark.parametrize("d, kind", [(2, "halfspace"), (3, "ball"), (4, "box"), (5, "union"), (6, "halfspace")])
def test_structured_statistic_equals_the_dense_one(d, kind):
    data, est, contains = _case(d, kind, d)
    mom = fisher.sample_moments(data["samples"])
    structured = certificate.draw(data, est, contains, tol=1.0, structured=True)
    # the same draws through the dense path: T formed row by row, F as a p x p matrix
    U = np.vstack(list(structured.kept))
    iu = np.triu_indices(d)
    T = np.hstack([U, U[:, iu[0]] * U[:, iu[1]]])
    dense = certificate.Draws(structured.hits, structured.proposals, structured.wanted, s1=T.sum(axis=0), s2=T.T @ T)
    assert U.shape[0] == structured.hits > T.shape[1]
    G, g, trace, _ = certificate._gradient_statistic(est, dense, mom)
    G_s, g_s, trace_s, solved = certificate._gradient_statistic(est, structured, mom)
    assert solved.converged and solved.residual <= fisher.CG_CHECK_RTOL
    np.testing.assert_allclose(g_s, g, rtol=1e-10, atol=1e-12)
    assert abs(G_s - G) <= 1e-8 * G
    assert trace_s == pytest.approx(trace, rel=1e-10)
    # and the dense path's own draws (another stream) give the same statistic within their noise
    other = certificate._gradient_statistic(est, certificate.draw(data, est, contains, tol=1.0, structured=False), mom)
    assert abs(other[0] - G) < 0.2 * G


def test_redrawn_blocks_are_the_kept_draws(monkeypatch):
    data, est, contains = _case(3, "box", 1)
    kept = certificate.draw(data, est, contains, tol=1.0, structured=True)
    monkeypatch.setattr(fisher, "KEEP_BYTES", 0)
    redrawn = certificate.draw(data, est, contains, tol=1.0, structured=True)
    assert all(isinstance(b, np.ndarray) for b in kept.kept.blocks)
    assert all(isinstance(b, tuple) for b in redrawn.kept.blocks)
    a, b = np.vstack(list(kept.kept)), np.vstack(list(redrawn.kept))
    assert a.shape == (kept.hits, 3) and np.array_equal(a, b)
    mom = fisher.sample_moments(data["samples"])
    assert certificate._gradient_statistic(est, redrawn, mom)[0] == certificate._gradient_statistic(est, kept, mom)[0]


def test_the_statistic_does_not_depend_on_the_threads():
    from optsolve.core import threads

    data, est, contains = _case(20, "ball", 5)
    mom = fisher.sample_moments(data["samples"])
    got = []
    for count in (1, 2, 3):
        with threads.requested(count):
            drawn = certificate.draw(data, est, contains, tol=1.0)
            got.append((drawn.hits, certificate._gradient_statistic(est, drawn, mom)[0],
                        fisher.sample_moments(data["samples"], block=64).scatter))
    assert drawn.kept is not None
    for hits, G, scatter in got[1:]:
        assert hits == got[0][0] and G == got[0][1] and np.array_equal(scatter, got[0][2])


def test_the_preconditioner_inverts_the_gaussian_covariance_of_the_statistics():
    """F of N(m, C) entry by entry (Isserlis' theorem), against the closed-form inverse."""
    rng = np.random.default_rng(0)
    d = 4
    m = rng.standard_normal(d)
    A = rng.standard_normal((d, d))
    C = A @ A.T + d * np.eye(d)
    idx = [(i,) for i in range(d)] + list(zip(*np.triu_indices(d)))

    def cov(s, t):
        if len(s) == 1 and len(t) == 1:
            return C[s[0], t[0]]
        if len(s) == 2 and len(t) == 1:
            s, t = t, s
        if len(s) == 1:
            (i,), (j, k) = s, t
            return m[j] * C[i, k] + m[k] * C[i, j]
        (i, j), (k, l) = s, t
        return (C[i, k] * C[j, l] + C[i, l] * C[j, k] + m[i] * m[k] * C[j, l] + m[i] * m[l] * C[j, k]
                + m[j] * m[k] * C[i, l] + m[j] * m[l] * C[i, k])

    F = np.array([[cov(s, t) for t in idx] for s in idx])
    precondition = fisher.gaussian_preconditioner(m, C)
    for _ in range(3):
        v = rng.standard_normal(F.shape[0])
        np.testing.assert_allclose(precondition(F @ v), v, rtol=1e-9, atol=1e-9)


def test_a_solve_that_fails_is_reported_not_hidden(monkeypatch):
    # 100 draws for p = 230 statistics: F is singular and g is outside its range
    rng = np.random.default_rng(1)
    d = 20
    kept, sums = fisher.KeptDraws(d, None), fisher.DrawSums.zeros(d)
    U = rng.standard_normal((100, d)) ** 3
    kept.add(U, 0, np.ones(100, bool))
    sums.add(U)
    _, _, solved = fisher.gaussian_statistic(kept, sums, np.full(d, 0.3), np.eye(d))
    assert not solved.converged and "100 accepted draws for p = 230" in solved.reason
    # past p draws, a solve that stalls says so (here: too few iterations allowed)
    U = rng.standard_normal((2000, d))
    kept, sums = fisher.KeptDraws(d, None), fisher.DrawSums.zeros(d)
    kept.add(U, 0, np.ones(2000, bool))
    sums.add(U)
    monkeypatch.setattr(fisher, "CG_MAX_ITER", 1)
    _, _, solved = fisher.gaussian_statistic(kept, sums, np.full(d, 0.3), np.eye(d))
    assert not solved.converged and "after 1 iterations" in solved.reason
    # the check then fails, naming why
    data, est, contains = _case(20, "halfspace", 2)
    reason = "conjugate gradients reached a relative residual of 0.5 after 200 iterations, above 1e-06"
    monkeypatch.setattr(certificate, "gaussian_statistic",
                        lambda *a: (np.ones(2), 1.0, fisher.Solve(math.nan, False, 200, 0.5, reason)))
    sol = {"mean": est.mean.tolist(), "covariance": est.cov.tolist()}
    check = certificate.check(data, sol, status=None)["gradient_statistic"]
    assert check.holds is False and check.value is None and reason in check.note


def test_blocked_moments_equal_whole_array_numpy():
    rng = np.random.default_rng(2)
    X = rng.standard_normal((1000, 5)) @ rng.standard_normal((5, 5)) + 50.0
    before = X.copy()
    for rows in (None, np.sort(rng.permutation(1000)[:333])):
        ref = X if rows is None else X[rows]
        for block in (7, 1000, STAT_BLOCK):
            mom = fisher.sample_moments(X, rows, block=block)
            np.testing.assert_allclose(mom.mean, ref.mean(axis=0), rtol=1e-13)
            np.testing.assert_allclose(mom.scatter, np.cov(ref, rowvar=False, bias=True), rtol=1e-10, atol=1e-12)
    assert np.array_equal(X, before)  # blocks of all rows are views: never changed in place
    mom32 = fisher.sample_moments(X.astype(np.float32))
    np.testing.assert_allclose(mom32.mean, X.astype(np.float32).astype(float).mean(axis=0), rtol=1e-12)
    # the samples' mean of T and their NLL from the moments, against T and the density row by row
    data, est, _ = _case(3, "ball", 3)
    Xs = data["samples"]
    mom = fisher.sample_moments(Xs)
    np.testing.assert_allclose(certificate._mean_stats(est, mom), certificate._stats(est, Xs).mean(axis=0),
                               rtol=1e-10, atol=1e-12)
    U = (Xs - est.mean) @ est.chol_inv.T
    nll = (0.5 * (U * U).sum(axis=1)).mean() + np.log(np.diag(est.chol)).sum() + 1.5 * math.log(2 * math.pi)
    assert certificate._nll(est, mom) == pytest.approx(nll, rel=1e-12)


def test_the_seed_digest_by_blocks_is_the_whole_array_digest(monkeypatch):
    rng = np.random.default_rng(4)
    for X in (rng.standard_normal((1000, 3)), rng.standard_normal((1000, 3)).astype(np.float32),
              np.asfortranarray(rng.standard_normal((1000, 3)))):
        problem = {"samples": X, "family": "gaussian"}
        whole = np.ascontiguousarray(np.asarray(X, dtype=np.float64))
        digest = hashlib.sha256(whole.tobytes() + str(whole.shape).encode() + b"gaussian")
        expected = np.random.default_rng([certificate.CERT_SEED, int.from_bytes(digest.digest()[:8], "little"), 0])
        monkeypatch.setattr(certificate, "HASH_ROWS", 77)
        assert np.array_equal(certificate.problem_seed(problem).random(5), expected.random(5))


def test_thirty_dimensions_pass_and_the_naive_fit_fails():
    data = FAMILIES["gaussian"].generate(np.random.default_rng(3), d=30, n=2000, alpha=0.3, set="halfspace", cond=4.0)
    problem = SCHEMA.validate(data, source="test")
    assert statistics_count("gaussian", 30) > DENSE_MAX_P
    res = optsolve.truncated.solve_problem(problem, seed=0)
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    assert "conjugate-gradient" in res.certificate["gradient_statistic"].note
    naive = optsolve.truncated.solve_problem(problem, method="naive")
    assert not naive.certificate["gradient_statistic"].holds
    assert naive.certificate["gradient_statistic"].value > 5 * res.certificate["gradient_statistic"].value


def test_certificate_bytes_at_scale():
    need = certificate_bytes("gaussian", 10 ** 6, 100)
    assert need < 2e9 and need < 24 * 2 ** 30 / 4  # the default budget of a 24 GB machine is a quarter
    assert certificate_bytes("gaussian", 10 ** 5, 100) <= need
    assert certificate_bytes("gaussian", 50, 40) < certificate_bytes("gaussian", 10 ** 6, 40)
    # up to DENSE_MAX_P statistics the p x p matrices are counted
    p = statistics_count("gaussian", 18)
    assert certificate_bytes("gaussian", 1000, 18) > 8 * 3 * p * p


def test_the_certificate_keeps_its_own_copies_of_the_solver_rules():
    from optsolve.truncated import newton, sampling, sgd

    assert certificate.MAX_DOUBLINGS == newton.MAX_DOUBLINGS
    assert certificate.PSGD_MAX_RADIUS == sgd.PSGD_MAX_RADIUS
    for k, N in ((0, 10), (3, 10), (10, 10), (47578, 65536), (1, 4_000_000)):
        assert certificate.clopper_pearson(k, N) == sampling.clopper_pearson(k, N)


def test_the_certificate_imports_no_solver_module():
    allowed = {"optsolve.truncated.problems", "optsolve.truncated.certificate.fisher"}
    root = Path(certificate.__file__).parent
    for name in ("__init__.py", "fisher.py"):
        for node in ast.walk(ast.parse((root / name).read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("optsolve.truncated"):
                assert node.module in allowed, f"{name} imports {node.module}"
            if isinstance(node, ast.Import):
                assert not any(a.name.startswith("optsolve.truncated") for a in node.names), name


@pytest.mark.parametrize("scale, refused", [(1e-9, False), (1e-11, True), (1.0, False)])
def test_the_rank_rule_by_blocks_keeps_its_threshold(scale, refused):
    """Samples whose centred singular values have a ratio near the rule's 1e-10: decided as by the SVD."""
    from optsolve.core.errors import InputError

    X = np.random.default_rng(6).standard_normal((3000, 3))
    X[:, 2] = X[:, 2] * scale + 5.0
    data = {"samples": X, "set": {"type": "ball", "center": [0.0, 0.0, 5.0], "radius": 100.0}}
    s = np.linalg.svd(X - X.mean(axis=0), compute_uv=False)
    assert (s[-1] <= 1e-10 * s[0]) == refused
    if refused:
        with pytest.raises(InputError, match="rank-deficient"):
            SCHEMA.validate(data, source="test")
    else:
        SCHEMA.validate(data, source="test")


@pytest.mark.slow
def test_bench_truncated_certificate_quick():
    import subprocess
    import sys

    script = Path(__file__).resolve().parents[2] / "bin" / "bench-truncated-certificate"
    proc = subprocess.run([sys.executable, str(script), "--quick"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("# bench-truncated-certificate") and "threads" in lines[0]
    rows = [[c.strip() for c in line.strip("|").split("|")] for line in lines if line.startswith("| 20 ")]
    assert {(r[3], r[9]) for r in rows} == {("MLE", "yes"), ("naive", "no")}
    assert len({r[7] for r in rows if r[3] == "MLE"}) == 1  # the same G on 1 and 2 threads


def test_gradient_limit_covers_hotellings_t2_of_draws_whose_covariance_is_their_own():
    """G = g' F^-1 g with g the mean of N_c draws and F their own covariance: its mean is
    p (N_c - 1) / (N_c (N_c - p - 2)), above chi-square's p / N_c; the limit (tol = 0) covers it."""
    from optsolve.truncated.certificate import gradient_limit

    rng = np.random.default_rng(7)
    p, Nc, reps = 40, 800, 3000  # p / N_c = 0.05, twice d = 100's share at the default tol
    G = np.empty(reps)
    for r in range(reps):
        Y = rng.standard_normal((Nc, p))
        g = Y.mean(axis=0)
        F = np.cov(Y, rowvar=False, bias=True)
        G[r] = g @ np.linalg.solve(F, g)
    assert abs(G.mean() / (p * (Nc - 1) / (Nc * (Nc - p - 2))) - 1) < 0.03
    assert G.mean() > 1.04 * p / Nc  # the plain chi-square mean would be exceeded on average
    assert (G > gradient_limit(p, Nc, 0.0, 1)).mean() < 0.01
    assert gradient_limit(p, p + 2, 0.1, 10) == 0.0


@pytest.mark.parametrize("d", [1, 3, 6])
def test_the_certificates_fisher_kernels_equal_the_solvers(d):
    """Two codes for one quantity: the certificate's G = g' F^-1 g (its statistics (u, u_i u_j), conjugate
    gradients on products with F from the draws) against the solver's Newton system on the same draws (statistics
    (y, -y_i^2 / 2, -y_i y_j), newton's own products and solve), on draws of a Gaussian cut by a halfspace (F is not a
    Gaussian's); and the certificate's closed-form Gaussian F^-1 against the solver's inverse Fisher map. The
    statistics differ by the diagonal scaling D = diag(1, coef): g_solver = D g, F_solver = D F D, G is the same."""
    from optsolve.truncated.families import Gaussian
    from optsolve.truncated.newton import _solve
    from optsolve.truncated.sampling import Pool

    rng = np.random.default_rng(40 + d)
    A = rng.standard_normal((d, d))
    U = rng.standard_normal((20000, d)) @ A + rng.standard_normal(d)
    U = U[U @ rng.standard_normal(d) < 0.3]
    N = U.shape[0]
    kept, sums = fisher.KeptDraws(d, None), fisher.DrawSums.zeros(d)
    kept.add(U, 0, np.ones(N, dtype=bool))
    sums.add(U)
    data_mean = U.mean(axis=0) + 0.05 * rng.standard_normal(d)
    data_second = U.T @ U / N + 0.05 * np.eye(d)
    g, _, solved = fisher.gaussian_statistic(kept, sums, data_mean, data_second)
    assert solved.converged

    family = Gaussian(d)
    D = np.concatenate([np.ones(d), family.coef])
    w = np.full(N, 1.0 / N)
    g_solver = family.moments(U, w) - family.moments_from(data_mean, data_second)
    np.testing.assert_allclose(g_solver, D * g, rtol=1e-10, atol=1e-12)
    delta = _solve(family, Pool(Y=U, base=np.zeros(N), proposals=N), w, g_solver)
    np.testing.assert_allclose(solved.value, -g_solver @ delta, rtol=1e-5)

    m, C = U.mean(axis=0), np.cov(U.T, bias=True).reshape(d, d)
    precondition = fisher.gaussian_preconditioner(m, C)
    inverse_fisher = family.inverse_fisher(family.moments_from(m, C + np.outer(m, m)))
    for _ in range(3):
        v = rng.standard_normal(g.size)
        np.testing.assert_allclose(inverse_fisher(v), precondition(v / D) / D, rtol=1e-8, atol=1e-10)
