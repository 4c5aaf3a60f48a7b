"""Learned DeepQP policies: the policy file, convergence under any policy, PAC-Bayes arithmetic, qp-train."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

import optsolve.qp
import optsolve.qp.policy
from optsolve.core.errors import ParameterError
from optsolve.qp.policy import Policy, gaussian_kl, initial_weights, kl_bernoulli, kl_inverse, n_params, pac_bayes_bound
from optsolve.qp.problems import FAMILIES, SCHEMA

SHIPPED = optsolve.qp.policy.POLICY_DIR


def family(name, n=20, seed=1):
    return SCHEMA.validate(FAMILIES[name].generate(np.random.default_rng(seed), n=n), source="test")


@pytest.mark.parametrize("q, c", [(0.0, 0.1), (0.2, 0.05), (0.5, 1e-4), (0.9, 0.3)])
def test_kl_inverse_inverts_kl(q, c):
    p = kl_inverse(q, c)
    assert p >= q
    assert p == 1.0 or kl_bernoulli(q, p) == pytest.approx(c, rel=1e-6, abs=1e-12)
    assert kl_inverse(q, 0.0) == q and kl_inverse(q, c / 2) <= p


def test_gaussian_kl():
    m = np.arange(4.0)
    assert gaussian_kl(m, 0.1, m, 0.1) == 0.0
    assert gaussian_kl(m, 0.1, m + 1, 0.1) == pytest.approx(0.5 * 4 / 0.01)
    assert gaussian_kl(m, 0.2, m, 0.1) > 0


def test_policy_file_round_trip(tmp_path):
    rng = np.random.default_rng(0)
    pol = Policy(initial_weights(6, rng) + 0.1, hidden=6, steps=4, interval=3, header={"family": "x"},
                 start={"rho": 0.05, "mu": 0.3})
    path = tmp_path / "p.npz"
    pol.save(str(path))
    back = Policy.load(str(path))
    np.testing.assert_array_equal(back.theta, pol.theta)
    assert (back.hidden, back.steps, back.interval) == (6, 4, 3) and back.header["family"] == "x"
    assert back.start == {"rho": 0.05, "mu": 0.3}
    assert back(1, 1e-3, 1e-1, 0.1, 1.6) == pol(1, 1e-3, 1e-1, 0.1, 1.6)
    (tmp_path / "bad.npz").write_bytes(b"not a policy")
    with pytest.raises(ParameterError):
        Policy.load(str(tmp_path / "bad.npz"))
    with pytest.raises(ValueError):
        Policy(np.zeros(3), hidden=6)


def test_initial_policy_keeps_rho_and_osqp_alpha():
    pol = Policy(initial_weights(8))
    rho, alpha = pol(1, 1e-2, 1e-4, 0.1, 1.6)
    assert rho == pytest.approx(0.1, rel=0.3) and alpha == pytest.approx(1.6, abs=0.05)
    assert n_params(8) == pol.theta.size


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_any_policy_keeps_convergence(tmp_path, seed):
    """After its K steps the policy hands over to OSQP's rule: even a wild policy reaches the tolerance."""
    wild = Policy(np.random.default_rng(seed).standard_normal(n_params(8)) * 3.0, steps=10, interval=5)
    path = tmp_path / "wild.npz"
    wild.save(str(path))
    for name in ("random", "mpc", "lasso"):
        res = optsolve.qp.solve_problem(family(name, n=60), method="deepqp", policy=str(path), max_iter=20000)
        assert res.status.value == "optimal" and res.certificate.holds


@pytest.mark.parametrize("name", sorted(p.stem for p in SHIPPED.glob("*.npz")))
def test_every_shipped_policy_bound_recomputes(name):
    pol = Policy.load(str(SHIPPED / f"{name}.npz"))
    pb = pol.header["pac_bayes"]
    up = kl_inverse(pb["empirical_loss"], math.log(2 / pb["delta_prime"]) / (pb["N"] * pb["L"]))
    bound = kl_inverse(up, (pb["KL"] + math.log(2 * math.sqrt(pb["N"]) / pb["delta"])) / pb["N"])
    assert up == pytest.approx(pb["empirical_loss_bound"], rel=1e-9)
    assert bound == pytest.approx(pb["bound"], rel=1e-9) and bound < 0.9
    assert pol.kind in (("distributed",) if name.endswith("-distributed") else ("centralised", "rows"))
    assert pol.header["family"] == name.removesuffix("-distributed")


@pytest.mark.skipif(not (SHIPPED / "random.npz").exists(), reason="no shipped policy in data/qp/policies")
def test_shipped_policy_and_its_bound():
    pol = Policy.load(str(SHIPPED / "random.npz"))
    pb = pol.header["pac_bayes"]
    res = optsolve.qp.solve_problem(family("random", n=20, seed=12345), method="deepqp")
    assert res.status.value == "optimal" and res.certificate.holds
    assert res.stats["policy"]["family"] == "random" and res.stats["policy"]["pac_bayes_bound"] == pb["bound"]
    assert res.certificate["pac_bayes_bound"].value == pb["bound"]  # the certificate's PAC-Bayes line


def test_pac_bayes_bound_shape():
    losses = np.full((100, 2), 0.3)
    out = pac_bayes_bound(losses, kl=0.0, delta=0.05, delta_prime=0.05)
    assert 0.3 < out["empirical_loss_bound"] < out["bound"] < 1.0
    assert pac_bayes_bound(losses, kl=50.0, delta=0.05, delta_prime=0.05)["bound"] > out["bound"]


def test_qp_train_cli(cli, tmp_path):
    out = tmp_path / "pol.npz"
    r = cli("qp-train", "mpc", "--n", "12", "--count", "20", "--generations", "2", "--population", "2", "-q",
            "-o", out)
    assert r.exit_code == 0, r.stderr
    summary = json.loads(r.stdout)
    assert set(summary) >= {"family", "training_loss", "held_out_loss", "held_out_iterations", "pac_bayes_bound"}
    pol = Policy.load(str(out))
    assert pol.header["problems"] == {"train": 6, "held_out": 4, "certification": 10}
    assert 0 < pol.header["pac_bayes"]["bound"] <= 1
    assert cli("qp-train", "nosuch", "-o", out).exit_code == 2
    problem = tmp_path / "x.json"
    problem.write_text(json.dumps({"P": [[1.0]], "q": [1.0]}))
    r = cli("qp", problem, "--method", "admm", "--policy", str(out))
    assert r.exit_code == 7 and "--policy" in r.stderr


@pytest.mark.slow
def test_any_node_policy_keeps_distributed_convergence(tmp_path):
    """DeepDistributedQP: after its K steps the nodes' parameters stay fixed, and the ADMM converges."""
    wild = Policy(np.random.default_rng(3).standard_normal(n_params(8)) * 3.0, steps=10, interval=5,
                  kind="distributed")
    path = tmp_path / "wild.npz"
    wild.save(str(path))
    for name in ("chain", "flow", "mpc"):
        problem = family(name, n=60)
        res = optsolve.qp.solve_problem(problem, method="deepdistributed", policy=str(path), nodes=4,
                                        max_iter=50000)
        assert res.status.value == "optimal" and res.certificate.holds
        assert res.stats["nodes"] == 4 and res.stats["policy"]["path"] == str(path)
    with pytest.raises(ParameterError, match="distributed policy"):
        optsolve.qp.solve_problem(family("random"), method="deepqp", policy=str(path))


@pytest.mark.slow
def test_qp_train_distributed_cli(cli, tmp_path):
    out = tmp_path / "pol.npz"
    r = cli("qp-train", "chain", "--n", "30", "--count", "20", "--generations", "1", "--population", "2",
            "--nodes", "4", "-q", "-o", out)
    assert r.exit_code == 0, r.stderr
    pol = Policy.load(str(out))
    assert pol.kind == "distributed" and pol.header["kind"] == "distributed"
    base = pol.header["held_out_iterations"]
    assert {"osqp_defaults", "distributed_untrained", "tuned_constant_rho", "tuned_constant_rho_mu",
            "policy"} <= set(base)
    assert set(pol.start) == {"rho", "mu"} and pol.header["start"] == pol.start
    assert base["tuned_constant_rho_mu"]["rho"] == pol.start["rho"]


def test_node_policy_on_arrays_is_the_policy_of_each_node():
    pol = Policy(np.random.default_rng(4).standard_normal(n_params(8)), kind="distributed")
    prim, cons = np.array([1e-3, 0.2, 5.0]), np.array([1e-1, 1e-6, 0.3])
    rho, mu = np.array([0.1, 1.0, 30.0]), np.array([1.0, 0.01, 2.0])
    r_all, m_all = pol.nodes(3, prim, cons, 1e-2, rho, mu)
    for i in range(3):
        r1, m1 = pol.nodes(3, prim[i:i + 1], cons[i:i + 1], 1e-2, rho[i:i + 1], mu[i:i + 1])
        assert r_all[i] == pytest.approx(r1[0], rel=1e-12) and m_all[i] == pytest.approx(m1[0], rel=1e-12)


def test_row_policy_reads_each_row_alone_and_spans_its_range():
    """A per-row policy is one MLP applied to every row: a row's factor depends on that row's features (and the
    common scale of y) only, and lies in 10^(-ROW_SPAN .. ROW_SPAN)."""
    from optsolve.qp.policy import ROW_SPAN

    pol = Policy(np.random.default_rng(5).standard_normal(n_params(8, "rows")) * 3.0, kind="rows")
    l, u = np.array([0.0, -np.inf, -1.0, 2.0]), np.array([1.0, 3.0, np.inf, 2.0])
    z, y, Ax = np.array([0.0, 1.0, 5.0, 2.0]), np.array([-2.0, 0.0, 1e-9, 0.5]), np.array([-0.1, 1.0, 5.0, 2.3])
    every = pol.rows(2, l, u, z, y, Ax)
    assert every.shape == (4,) and np.all(every >= 10.0 ** -ROW_SPAN) and np.all(every <= 10.0 ** ROW_SPAN)
    moved = z.copy()
    moved[2] = 0.0  # row 2's z moves to its lower bound: only row 2's factor changes
    other = pol.rows(2, l, u, moved, y, Ax)
    assert np.array_equal(np.delete(other, 2), np.delete(every, 2)) and other[2] != every[2]
    with pytest.raises(ValueError, match="kind"):
        Policy(np.zeros(n_params(8)), kind="nodes")


def test_row_policy_factors_apply_to_inequality_rows_only():
    from optsolve.qp.admm import RHO_EQ_FACTOR, RHO_MIN, rho_vector

    l, u = np.array([0.0, 1.0, -np.inf, -np.inf]), np.array([1.0, 1.0, np.inf, 2.0])
    out = rho_vector(0.1, l, u, np.array([10.0, 10.0, 10.0, 0.01]))
    np.testing.assert_allclose(out, [1.0, 0.1 * RHO_EQ_FACTOR, RHO_MIN, 1e-3])
    np.testing.assert_array_equal(rho_vector(0.1, l, u, np.ones(4)), rho_vector(0.1, l, u))


def test_zero_row_policy_is_its_constant_rho_and_any_row_policy_converges(tmp_path):
    """A per-row policy whose output layer is zero gives every row its starting rho (the iterates of that
    constant rho); a wild one still reaches the tolerance (OSQP's rule after its K steps, the factors kept)."""
    from optsolve.qp.admm import ADMMSettings, solve_admm
    from optsolve.qp.problems import prepare

    qp = prepare(family("random", n=30))
    keep = Policy(initial_weights(8, kind="rows"), kind="rows", steps=5, interval=5, start={"rho": 0.3})
    a = solve_admm(qp, ADMMSettings(check_every=5, refine_stalled=False), controller=keep)
    b = solve_admm(qp, ADMMSettings(check_every=5, rho=0.3, refine_stalled=False))
    assert a.status == b.status == "optimal" and a.iterations == b.iterations
    np.testing.assert_allclose(a.x, b.x, rtol=1e-9, atol=1e-12)
    wild = Policy(np.random.default_rng(6).standard_normal(n_params(8, "rows")) * 3.0, kind="rows", steps=10,
                  interval=5)
    path = tmp_path / "rows.npz"
    wild.save(str(path))
    assert Policy.load(str(path)).kind == "rows"
    for name in ("random", "mpc", "lasso", "portfolio"):
        res = optsolve.qp.solve_problem(family(name, n=60), method="deepqp", policy=str(path), max_iter=20000)
        assert res.status.value == "optimal" and res.certificate.holds
    with pytest.raises(ParameterError, match="rows policy"):
        optsolve.qp.solve_problem(family("chain", n=40), method="deepdistributed", policy=str(path))


@pytest.mark.slow
def test_qp_train_per_row_cli(cli, tmp_path):
    out = tmp_path / "rows.npz"
    r = cli("qp-train", "random", "--n", "12", "--count", "20", "--generations", "1", "--population", "2",
            "--per-row", "-q", "-o", out)
    assert r.exit_code == 0, r.stderr
    pol = Policy.load(str(out))
    assert pol.kind == "rows" and pol.header["kind"] == "rows" and set(pol.start) == {"rho"}
    assert {"osqp_defaults", "tuned_initial_rho_adaptive", "policy"} <= set(pol.header["held_out_iterations"])
    r = cli("qp-train", "chain", "--per-row", "--nodes", "4", "-o", tmp_path / "x.npz")
    assert r.exit_code == 2 and "--per-row" in r.stderr


def test_policy_start_replaces_the_initial_parameters():
    """A policy whose output layer is zero keeps its starting rho and mu: the same iterates as fixed ones."""
    from optsolve.qp.distributed import solve_distributed
    from optsolve.qp.problems import prepare

    qp = prepare(family("chain", n=60))
    keep = Policy(initial_weights(8, kind="distributed"), kind="distributed", start={"rho": 0.1, "mu": 0.3})
    a = solve_distributed(qp, rho=1.0, mu=1.0, partition=qp.partition, controller=keep, check_every=5)
    b = solve_distributed(qp, rho=0.1, mu=0.3, partition=qp.partition, check_every=5)
    assert a.iterations == b.iterations and a.status == b.status == "optimal"
    np.testing.assert_allclose(a.x, b.x, rtol=1e-9, atol=1e-12)
    c = solve_distributed(qp, rho=1.0, mu=1.0, partition=qp.partition, check_every=5)
    assert c.iterations != a.iterations


def test_default_method_follows_the_family_and_its_shipped_policy(monkeypatch, tmp_path):
    chain = family("chain", n=40)
    assert chain["family"] == "chain"
    assert optsolve.qp.solve_problem(chain).method == "auto"  # partitioned: the rule all the same (admm is the faster)
    if (SHIPPED / "chain-distributed.npz").exists():
        res = optsolve.qp.solve_problem(chain, method="deepdistributed")
        assert res.status.value == "optimal" and res.certificate.holds
        assert res.settings["policy"].endswith("chain-distributed.npz")  # the family's shipped policy
    assert optsolve.qp.solve_problem(family("random")).method == "auto"
    unnamed = SCHEMA.validate({k: v for k, v in FAMILIES["chain"].generate(np.random.default_rng(1), n=40).items()
                               if k != "family"}, source="test")
    assert optsolve.qp.solve_problem(unnamed).method == "auto"
    res = optsolve.qp.solve_problem(family("mpc", n=40), method="deepqp")
    assert res.settings["policy"].endswith("mpc.npz")  # the family's own policy
    monkeypatch.setattr(optsolve.qp.policy, "POLICY_DIR", tmp_path)  # nothing shipped
    assert optsolve.qp.solve_problem(chain).method == "auto"
    with pytest.raises(ParameterError, match="qp-train"):
        optsolve.qp.solve_problem(chain, method="deepdistributed")


def test_residual_balancing_reaches_the_centralised_answer():
    """--residual-balancing: node-by-node residual balancing, finitely many times; same answer, fewer iterations on a chain."""
    problem = family("chain", n=200)
    ref = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-8, eps_rel=1e-8, max_iter=100000)
    plain = optsolve.qp.solve_problem(problem, method="distributed", eps_abs=1e-6, eps_rel=1e-6, max_iter=20000)
    bal = optsolve.qp.solve_problem(problem, method="distributed", residual_balancing=True, eps_abs=1e-6, eps_rel=1e-6,
                                    max_iter=20000)
    assert bal.status.value == "optimal" and bal.certificate.holds
    assert 1 <= bal.stats["balance_updates"] <= 10 and plain.stats["balance_updates"] == 0
    assert bal.objective == pytest.approx(ref.objective, rel=1e-5, abs=1e-5)
    assert bal.stats["iterations"] < plain.stats["iterations"]
    with pytest.raises(ParameterError, match="--residual-balancing"):
        optsolve.qp.solve_problem(problem, method="admm", residual_balancing=True)


def test_distributed_refines_a_capped_run_under_the_full_termination_test():
    """A capped DistributedQP run is finished by polishing; the answer passes the residual and gap
    tests at the asked tolerance (the certificate agrees)."""
    problem = family("chain", n=200)
    capped = optsolve.qp.solve_problem(problem, method="distributed", eps_abs=1e-8, eps_rel=1e-8, max_iter=40,
                                       refine=False)
    assert capped.status.value == "max_iter"
    refined = optsolve.qp.solve_problem(problem, method="distributed", eps_abs=1e-8, eps_rel=1e-8, max_iter=40)
    assert refined.status.value == "optimal" and refined.certificate.holds
    assert refined.stats["polished"] == "refined a stalled run"
    ref = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-10, eps_rel=1e-10, max_iter=100000)
    assert refined.objective == pytest.approx(ref.objective, rel=1e-7)
