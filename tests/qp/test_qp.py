"""optsolve qp: ADMM against osqp, certificates, infeasibility, problem files and bad inputs."""

from __future__ import annotations

import json

import numpy as np
import osqp
import pytest
import scipy.sparse as sp

import optsolve.qp
from optsolve.core.errors import InputError
from optsolve.core.result import Certificate
from optsolve.qp import certificate
from optsolve.qp.infeasibility import farkas_vector, recession_direction
from optsolve.qp.problems import FAMILIES, SCHEMA, prepare

from conftest import SHARED_DATA

MM = SHARED_DATA / "maros_meszaros"
needs_mm = pytest.mark.skipif(not MM.is_dir(), reason=f"Maros-Meszaros files not found at {MM}")


def family(name, n=60, seed=1):
    return SCHEMA.validate(FAMILIES[name].generate(np.random.default_rng(seed), n=n), source="test")


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_admm_follows_osqp_iterate_for_iterate(name):
    """Same scaling, steps and tests as osqp: same iteration count and the same x."""
    problem = family(name)
    ours = optsolve.qp.solve_problem(problem, method="admm")
    ref = optsolve.qp.solve_problem(problem, method="osqp")
    assert ours.status.value == ref.status.value == "optimal"
    assert ours.stats["iterations"] == ref.stats["iterations"]
    np.testing.assert_allclose(ours.solution["x"], ref.solution["x"], atol=1e-8)
    assert ours.certificate.holds


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_tight_tolerance_agrees_with_osqp(name):
    problem = family(name, seed=2)
    ours = optsolve.qp.solve_problem(problem, eps_abs=1e-9, eps_rel=1e-9, max_iter=100000)
    qp = prepare(problem)
    m = osqp.OSQP()
    m.setup(sp.triu(qp.P, format="csc"), qp.q, qp.A, np.maximum(qp.l, -1e30), np.minimum(qp.u, 1e30),
            eps_abs=1e-10, eps_rel=1e-10, max_iter=200000, verbose=False, polishing=True)
    r = m.solve(raise_error=False)
    assert ours.status.value == "optimal" and ours.certificate.holds
    assert ours.objective == pytest.approx(r.info.obj_val, rel=1e-6, abs=1e-7)


def test_doctest_example_and_shapes():
    res = optsolve.qp.solve(sp.eye(2), [-1.0, -1.0], sp.csc_matrix([[1.0, 1.0]]), [-np.inf], [1.0],
                            eps_abs=1e-9, eps_rel=1e-9)
    assert res.status.value == "optimal"
    np.testing.assert_allclose(res.solution["x"], [0.5, 0.5], atol=1e-7)
    assert res.solution["y"][0] == pytest.approx(0.5, abs=1e-7)  # Px + q + A'y = 0
    assert res.objective == pytest.approx(-0.75, abs=1e-8)


def test_unconstrained_and_objective_constant():
    res = optsolve.qp.solve(sp.diags([2.0, 4.0]), [-2.0, -4.0], r=3.0, eps_abs=1e-10, eps_rel=1e-10)
    assert res.status.value == "optimal"
    assert res.objective == pytest.approx(3.0 - 1.0 - 2.0, abs=1e-8)


def test_upper_triangle_equals_full_P():
    problem = family("random")
    raw = FAMILIES["random"].generate(np.random.default_rng(1), n=60)
    full = dict(raw, P=sp.csc_matrix(raw["P"] + sp.triu(raw["P"], 1).T))
    del full["P_storage"]
    a = optsolve.qp.solve_problem(problem)
    b = optsolve.qp.solve_problem(SCHEMA.validate(full, source="test"))
    np.testing.assert_allclose(a.solution["x"], b.solution["x"], atol=1e-12)
    assert a.stats["P_storage"] == "upper" and "P_storage" not in b.stats


@pytest.mark.parametrize("seed", range(4))
def test_symmetric_P_by_index_arithmetic_is_scipys_sum(seed):
    """symmetric_P's own path (upper storage; a full P with a symmetric pattern, rounding off its symmetry, sums
    that cancel to zero) gives scipy's (P + P') / 2 and P + triu(P, 1)' bit for bit."""
    from optsolve.qp.problems import _symmetric_general, symmetric_P

    rng = np.random.default_rng(seed)
    n = 40
    M = sp.random(n, n, density=0.1, random_state=rng, format="csc")
    M.data = rng.standard_normal(M.nnz) * 10.0 ** rng.uniform(-3, 3, M.nnz)
    S = (M @ M.T + sp.eye(n)).tocoo()  # positive definite, as the file's check asks
    near = S.copy()
    near.data = near.data * (1.0 + 1e-13 * rng.standard_normal(near.nnz))  # symmetric within SYMMETRY_RTOL
    cancel = S.copy()
    off = cancel.row < cancel.col
    cancel.data[off] = 5e-324  # its mirror -5e-324 below: the sum is zero, and scipy's sum drops it
    mirrored = np.isin(cancel.row * n + cancel.col, cancel.col[off] * n + cancel.row[off])
    cancel.data[(cancel.row > cancel.col) & mirrored] = -5e-324
    for P, storage in ((sp.triu(S).tocsc(), None), (sp.triu(S).tocsc(), "upper"), (S.tocsc(), None),
                       (near.tocsc(), "full"), (cancel.tocsc(), None)):
        problem = SCHEMA.validate(dict({"P": P, "q": np.zeros(n)}, **({"P_storage": storage} if storage else {})),
                                  source="test")
        got, kind = symmetric_P(problem)
        Q = sp.csc_matrix(problem["P"])
        Q.sum_duplicates()
        Q.eliminate_zeros()
        want, want_kind = _symmetric_general(problem, Q, kind)
        assert kind == want_kind and got.dtype == want.dtype
        for a, b in ((got.indptr, want.indptr), (got.indices, want.indices), (got.data, want.data)):
            np.testing.assert_array_equal(a, b)


def _infeasible():
    # x1 + x2 >= 2 and x1 + x2 <= 1
    return SCHEMA.validate({"P": sp.eye(2), "q": [0.0, 0.0], "A": sp.csc_matrix([[1.0, 1.0], [1.0, 1.0]]),
                            "l": [2.0, -np.inf], "u": [np.inf, 1.0]}, source="test")


def _unbounded():
    # minimise -x1 - x2 with x1 >= 0, x2 free of any bound, P = diag(1, 0), x2 <= x1 ... unbounded in x2? no:
    # minimise -x2 s.t. x1 >= 0, x2 - x1 <= 0 has P = 0 along (1, 1): unbounded
    return SCHEMA.validate({"P": sp.csc_matrix((2, 2)), "q": [0.0, -1.0],
                            "A": sp.csc_matrix([[1.0, 0.0], [-1.0, 1.0]]), "l": [0.0, -np.inf],
                            "u": [np.inf, 0.0]}, source="test")


@pytest.mark.parametrize("method", ["admm", "osqp"])
def test_infeasible_and_unbounded_problems_carry_certificates_that_verify(method):
    inf = optsolve.qp.solve_problem(_infeasible(), method=method)
    assert inf.status.value == "infeasible" and inf.status.exit_code == 3
    assert inf.certificate.holds
    radius = inf.certificate["infeasibility_radius"].value
    assert radius is None or radius >= 1e7  # None: infinite (A'dy exactly 0)
    unb = optsolve.qp.solve_problem(_unbounded(), method=method)
    assert unb.status.value == "unbounded" and unb.status.exit_code == 4
    assert unb.certificate.holds


def test_exact_certificates_by_lp():
    qp = prepare(_infeasible())
    dy = farkas_vector(qp)
    assert dy is not None and Certificate(certificate.infeasibility_checks(qp, dy)).holds
    dx = recession_direction(prepare(_unbounded()))
    assert dx is not None and Certificate(certificate.unboundedness_checks(prepare(_unbounded()), dx)).holds
    feasible = prepare(family("portfolio"))
    assert farkas_vector(feasible) is None and recession_direction(feasible) is None


def test_a_fake_certificate_fails():
    qp = prepare(family("random"))
    fake = np.zeros(qp.m)
    fake[0] = 1.0
    assert not Certificate(certificate.infeasibility_checks(qp, fake)).holds
    assert not Certificate(certificate.unboundedness_checks(qp, np.ones(qp.n))).holds


def test_tampered_solution_fails_its_certificate():
    problem = family("mpc")
    res = optsolve.qp.solve_problem(problem)
    doc = json.loads(res.to_json())
    sol = doc["solution"]
    limits = {lim.name: doc["settings"][lim.name] for lim in certificate.LIMITS}
    assert certificate.check(problem, sol, method="admm", objective=doc["objective"], settings=doc["settings"],
                             limits=limits, status="optimal").holds
    sol["y"][0] += 1.0
    assert not certificate.check(problem, sol, method="admm", objective=doc["objective"],
                                 settings=doc["settings"], limits=limits, status="optimal").holds


def test_warm_start_and_limits(tmp_path):
    problem = family("lasso")
    first = optsolve.qp.solve_problem(problem, method="admm", eps_abs=1e-6, eps_rel=1e-6)
    path = tmp_path / "s.json"
    path.write_text(first.to_json())
    again = optsolve.qp.solve_problem(problem, eps_abs=1e-6, eps_rel=1e-6, warm_start=str(path))
    assert again.status.value == "optimal" and again.stats["iterations"] <= 25
    capped = optsolve.qp.solve_problem(problem, method="admm", eps_abs=1e-9, eps_rel=1e-9, max_iter=30, refine=False)
    assert capped.status.value == "max_iter" and capped.solution["x"] is not None
    assert capped.status.exit_code == 5
    refined = optsolve.qp.solve_problem(problem, method="admm", eps_abs=1e-9, eps_rel=1e-9, max_iter=30)
    assert refined.status.value == "optimal" and refined.certificate.holds
    assert refined.stats["polished"] == "refined a stalled run" and "polished" in refined.message
    ref = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-10, eps_rel=1e-10, max_iter=100000)
    assert refined.objective == pytest.approx(ref.objective, rel=1e-7)


def test_polish_option_keeps_the_optimum():
    problem = family("portfolio")
    plain = optsolve.qp.solve_problem(problem, method="admm")
    polished = optsolve.qp.solve_problem(problem, method="admm", polish=True)
    assert polished.status.value == "optimal" and polished.certificate.holds
    assert polished.stats["polished"] in ("polished", None)
    assert polished.objective == pytest.approx(plain.objective, rel=1e-3)


def test_cli_gen_solve_verify(cli, tmp_path):
    path = tmp_path / "mpc.npz"
    assert cli("gen", "qp", "--family", "mpc", "--n", "80", "-o", path).exit_code == 0
    sol = tmp_path / "s.json"
    r = cli("qp", path, "-o", sol, "--eps-abs", "1e-5", "--eps-rel", "1e-5")
    assert r.exit_code == 0, r.stderr
    doc = json.loads(sol.read_text())
    assert doc["status"] == "optimal" and doc["certificate"]["holds"]
    assert cli("verify", path, sol).exit_code == 0
    bad = tmp_path / "inf.json"
    bad.write_text(json.dumps({"P": [[1.0, 0.0], [0.0, 1.0]], "q": [0.0, 0.0], "A": [[1.0, 1.0], [1.0, 1.0]],
                               "l": [2.0, -1e20], "u": [1e20, 1.0]}))
    r = cli("qp", bad, "-o", sol)
    assert r.exit_code == 3
    assert cli("verify", bad, sol).exit_code == 0


@pytest.mark.parametrize("doc, needle", [
    ({"P": [[1.0, 2.0], [0.0, 1.0]], "q": [0, 0], "P_storage": "full"}, "not symmetric"),
    ({"P": [[1.0, 0.0], [2.0, 1.0]], "q": [0, 0], "P_storage": "upper"}, "below the diagonal"),
    ({"P": [[-1.0, 0.0], [0.0, 1.0]], "q": [0, 0]}, "not positive semidefinite"),
    ({"P": [[1.0, 2.0], [2.0, 1.0]], "q": [0, 0]}, "smallest eigenvalue"),
    ({"P": [[1.0, 0.0], [0.0, 1.0]], "q": [0, 0], "A": [[1.0, 0.0]], "l": [1.0], "u": [0.0]}, "l > u at row 0"),
    ({"P": [[1.0, 0.0], [0.0, 1.0]], "q": [0, 0], "A": [[1.0, 0.0]], "l": [float("nan")], "u": [0.0]},
     "contains NaN"),
    ({"P": [[1.0, 0.0], [0.0, 1.0]], "q": [0, 0], "A": [[1.0, 0.0]], "l": [1e20], "u": [1e20]}, "+infinity"),
    ({"P": [[1.0, 0.0], [0.0, 1.0]], "q": [0, 0, 0]}, "array 'q' has shape (3,), expected (2,)"),
    ({"P": [[1.0, 0.0], [0.0, 1.0]], "q": [0, 0], "A": [[1.0, 0.0]], "l": [0.0]}, "missing key 'u'"),
    ({"P": [[1.0, 0.0], [0.0, 1.0]], "q": [0, 0], "n": 3}, "key 'n' is 3"),
])
def test_bad_inputs_exit_7(bad_input, doc, needle):
    bad_input("qp", doc, needle)


def test_bad_options():
    from optsolve.core.errors import ParameterError

    problem = family("random", n=20)
    for kw in ({"alpha": 2.5}, {"eps_abs": 0.0, "eps_rel": 0.0}, {"rho": -1.0}, {"method": "nope"}):
        with pytest.raises(ParameterError):
            optsolve.qp.solve_problem(problem, **kw)
    with pytest.raises(InputError):
        optsolve.qp.solve(np.eye(2), [0.0, 0.0], np.eye(2), [1.0, 1.0], [0.0, 0.0])


@needs_mm
@pytest.mark.parametrize("name", ["HS21", "HS35", "HS268", "QAFIRO", "DUALC1", "CVXQP1_S"])
def test_small_maros_meszaros_problems(name):
    from optsolve.core.files import load_problem

    problem = load_problem(str(MM / f"{name}.mat"), SCHEMA)
    res = optsolve.qp.solve_problem(problem, eps_abs=1e-6, eps_rel=0.0, max_iter=10000)
    ref = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-9, eps_rel=0.0, max_iter=100000)
    assert res.status.value == "optimal" and res.certificate.holds
    assert res.objective == pytest.approx(ref.objective, rel=1e-4, abs=1e-4)


@needs_mm
@pytest.mark.parametrize("name", ["QSCAGR7", "QADLITTL"])
def test_stalled_and_marginal_maros_meszaros_runs_finish(name):
    """QSCAGR7 (LP-like, degenerate) stalls at the iteration cap: the interior-point finish and the
    polish centred at its iterate reach the absolute 1e-6 gap. QADLITTL stops at the margin of the
    gap tolerance: the solver's gap uses the certificate's dead zone, so the claim holds."""
    from optsolve.core.files import load_problem

    problem = load_problem(str(MM / f"{name}.mat"), SCHEMA)
    res = optsolve.qp.solve_problem(problem, eps_abs=1e-6, eps_rel=0.0, max_iter=10000)
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    cp = pytest.importorskip("cvxpy")  # an interior-point reference (osqp stalls on QSCAGR7 even at 2e5 iterations)
    qp = prepare(problem)
    x = cp.Variable(qp.n)
    Ax, fin_l, fin_u = qp.A @ x, np.isfinite(qp.l), np.isfinite(qp.u)
    ref = cp.Problem(cp.Minimize(0.5 * cp.quad_form(x, cp.psd_wrap(qp.P)) + qp.q @ x),
                     [Ax[np.flatnonzero(fin_l)] >= qp.l[fin_l], Ax[np.flatnonzero(fin_u)] <= qp.u[fin_u]])
    ref.solve(solver=cp.CLARABEL)
    assert res.objective == pytest.approx(ref.value + qp.r, rel=1e-6)


@needs_mm
def test_false_unboundedness_claim_is_refuted():
    """osqp calls PRIMALC2 unbounded; the LP check refutes the claim and ADMM goes on."""
    from optsolve.core.files import load_problem

    problem = load_problem(str(MM / "PRIMALC2.mat"), SCHEMA)
    osqp_says = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-6, eps_rel=0.0, max_iter=10000)
    ours = optsolve.qp.solve_problem(problem, method="admm", eps_abs=1e-6, eps_rel=0.0, max_iter=2000)
    # osqp's own status is "dual infeasible"; the exact LP finds no ray, so the claim is not made
    assert osqp_says.stats["osqp_status"] == "dual infeasible" and osqp_says.status.value == "numerical_error"
    assert "the claim failed the independent certificate check" in osqp_says.message
    assert ours.status.value != "unbounded"
    assert "failed the independent certificate check" in ours.message
    refined = optsolve.qp.solve_problem(problem, method="admm", eps_abs=1e-6, eps_rel=0.0, max_iter=10000)
    assert refined.status.value == "optimal" and refined.certificate.holds  # the active set, solved exactly


@pytest.mark.parametrize("name", ["mpc", "lasso", "portfolio", "random"])
@pytest.mark.parametrize("nodes", [1, 3, 8])
def test_distributed_reaches_the_centralised_optimum(name, nodes):
    problem = family(name, n=120)
    ref = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-9, eps_rel=1e-9, max_iter=100000)
    res = optsolve.qp.solve_problem(problem, method="distributed", nodes=nodes, eps_abs=1e-6, eps_rel=1e-6,
                                    max_iter=50000, refine=False)
    assert res.status.value == "optimal" and res.certificate.holds, res.message
    assert res.stats["nodes"] == nodes
    assert res.objective == pytest.approx(ref.objective, rel=1e-4, abs=1e-5)


def test_distributed_split_is_exact_and_locally_convex():
    from optsolve.qp.scaling import ruiz_scale
    from optsolve.qp.distributed import auto_partition, split

    qp = prepare(family("mpc", n=150))
    s = ruiz_scale(qp, 10)
    part = auto_partition(s.A, 5)
    assert sorted(np.unique(part)) == list(range(5))
    nodes = split(s, part, 5)
    P = sp.csc_matrix(s.P.shape)
    q = np.zeros(qp.n)
    for k, nd in enumerate(nodes):
        E = sp.csc_matrix((np.ones(nd.idx.size), (np.arange(nd.idx.size), nd.idx)), shape=(nd.idx.size, qp.n))
        P = P + E.T @ nd.Q @ E
        q += E.T @ nd.q
        if nd.idx.size:
            assert np.linalg.eigvalsh(nd.Q.toarray()).min() >= -1e-10
        np.testing.assert_array_equal(np.sort(nd.rows), np.flatnonzero(part == k))
    assert abs(P - s.P).max() < 1e-12 and np.abs(q - s.q).max() < 1e-15
    assert sum(nd.rows.size for nd in nodes) == qp.m


def test_distributed_takes_the_file_partition(cli, tmp_path):
    raw = FAMILIES["lasso"].generate(np.random.default_rng(3), n=100)
    m = raw["A"].shape[0]
    raw["partition"] = (np.arange(m) * 4 // m).astype(np.int64)  # four blocks of rows
    from optsolve.core.files import save_problem

    path = tmp_path / "lasso.npz"
    save_problem(str(path), raw)
    sol = tmp_path / "s.json"
    r = cli("qp", path, "--method", "distributed", "-o", sol)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(sol.read_text())
    assert doc["stats"]["nodes"] == 4 and doc["certificate"]["holds"]
    assert cli("verify", path, sol).exit_code == 0
    r = cli("qp", path, "--method", "admm", "--nodes", "3")
    assert r.exit_code == 7 and "--nodes" in r.stderr


def test_from_cvxpy_round_trip():
    cp = pytest.importorskip("cvxpy")
    x, y = cp.Variable(3), cp.Variable((2, 2))
    objective = cp.Minimize(cp.sum_squares(x - 1) + cp.sum(y) + 0.5 * cp.sum_squares(y) + 1.5)
    problem = cp.Problem(objective, [x >= -1, cp.sum(x) == 1, y <= 3, y >= -2, x[1] + y[0, 1] <= 0.5])
    data, unpack = optsolve.qp.from_cvxpy(problem)
    res = optsolve.qp.solve(**data, eps_abs=1e-9, eps_rel=1e-9, max_iter=100000)
    problem.solve(solver=cp.CLARABEL)
    reference, x_ref, y_ref = problem.value, x.value.copy(), y.value.copy()
    assert res.status.value == "optimal"
    assert res.objective == pytest.approx(reference, rel=1e-6)
    unpack(res.solution["x"])
    np.testing.assert_allclose(x.value, x_ref, atol=1e-5)
    np.testing.assert_allclose(y.value, y_ref, atol=1e-5)
    assert problem.objective.value == pytest.approx(reference, rel=1e-6)


@pytest.mark.parametrize("name, parts", [("chain", 8), ("flow", 8), ("grid", 9)])
def test_network_families_carry_their_partition(name, parts):
    raw = FAMILIES[name].generate(np.random.default_rng(4), n=150)
    problem = SCHEMA.validate(raw, source="test")
    assert raw["partition"].shape == (raw["A"].shape[0],) and len(np.unique(raw["partition"])) == parts
    ref = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-9, eps_rel=1e-9, max_iter=100000)
    res = optsolve.qp.solve_problem(problem, method="distributed", eps_abs=1e-6, eps_rel=1e-6, max_iter=50000)
    assert res.stats["nodes"] == parts and res.status.value == "optimal" and res.certificate.holds
    assert res.objective == pytest.approx(ref.objective, rel=1e-4, abs=1e-5)


@needs_mm
def test_stalled_lp_like_run_is_finished_by_interior_point_steps():
    """QSCAGR7 stalls at the iteration cap (osqp too); the interior-point finish passes the certificate."""
    from optsolve.core.files import load_problem

    problem = load_problem(str(MM / "QSCAGR7.mat"), SCHEMA)
    osqp_says = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-3, eps_rel=0.0, max_iter=10000)
    ref = optsolve.qp.solve_problem(problem, method="osqp", eps_abs=1e-9, eps_rel=0.0, max_iter=200000)
    ours = optsolve.qp.solve_problem(problem, method="admm", eps_abs=1e-3, eps_rel=0.0, max_iter=10000)
    assert osqp_says.status.value != "optimal"
    assert ours.status.value == "optimal" and ours.certificate.holds
    assert ours.stats["polished"] == "refined a stalled run by interior-point steps"
    assert "interior-point" in ours.message
    assert ours.objective == pytest.approx(ref.objective, rel=1e-3)  # a 1e-3 (absolute) answer
    plain = optsolve.qp.solve_problem(problem, method="admm", eps_abs=1e-3, eps_rel=0.0, max_iter=10000,
                                      refine=False)
    assert plain.status.value != "optimal"


@pytest.mark.parametrize("name", ["random", "eqqp", "mpc", "portfolio"])
def test_interior_point_steps_solve_generated_problems(name):
    """From x = 0, the interior-point method alone reaches tight residuals on the scaled problem."""
    from optsolve.qp.termination import support
    from optsolve.qp.scaling import ruiz_scale
    from optsolve.qp.ipm import interior_point
    from optsolve.qp.problems import prepare

    qp = prepare(family(name, n=40))
    s = ruiz_scale(qp, 10)

    def score(x, y, z):  # <= 1: residuals and gap below 1e-8
        gap = abs(x @ (s.P @ x) + s.q @ x + support(y, s.l, s.u))
        return max(float(np.abs(s.A @ x - z).max()), float(np.abs(s.P @ x + s.q + s.A.T @ y).max()), gap) / 1e-8

    x, y, z, accepted = interior_point(s, np.zeros(qp.n), score)
    assert accepted
    ref = optsolve.qp.solve_problem(family(name, n=40), method="osqp", eps_abs=1e-10, eps_rel=1e-10, max_iter=200000)
    assert qp.objective(s.D * x) == pytest.approx(ref.objective, rel=1e-6, abs=1e-6)


def test_interior_point_steps_order_once_and_refactor_numerically(monkeypatch):
    """The interior-point finish factors its quasi-definite system as ADMM does: the ordering and symbolic analysis
    once, one numeric refactorisation per further step (W changes, the pattern does not)."""
    import optsolve.qp.ipm as ipm
    from optsolve.qp.scaling import ruiz_scale
    from optsolve.qp.problems import prepare

    built, updates = [], []

    class Counting(ipm.QuasiDefinite):
        def __init__(self, *args, **kwargs):
            built.append(1)
            super().__init__(*args, **kwargs)

        def update(self, *args, **kwargs):
            updates.append(1)
            super().update(*args, **kwargs)

    monkeypatch.setattr(ipm, "QuasiDefinite", Counting)
    s = ruiz_scale(prepare(family("portfolio", n=40)), 10)
    steps = []

    def score(x, y, z):
        steps.append(1)
        return 10.0 if len(steps) < 6 else 0.5  # five steps, then accepted

    x, y, z, accepted = ipm.interior_point(s, np.zeros(s.P.shape[0]), score)
    assert accepted and len(built) == 1 and len(updates) == 4


def test_support_function_reads_rounding_as_zero_against_the_scale():
    from optsolve.qp.certificate import support_function

    l, u = np.array([-1.0, 0.0]), np.array([np.inf, 2.0])
    y = np.array([1e-17, 0.0])  # an unconstrained optimum's rounding on a row without upper bound
    assert support_function(y, l, u) == np.inf  # relative to ||y|| alone it is a push
    assert support_function(y, l, u, scale=1.0) == 0.0
    assert support_function(np.array([1e-3, 0.0]), l, u, scale=1.0) == np.inf  # a real push stays one
    assert support_function(np.array([-2.0, 1.0]), l, u, scale=1.0) == 4.0


def test_small_duals_on_finite_bounds_count_in_the_gap_as_qpbenchmark_sums_them():
    """A dual of 1e-11 on a bound of 1e4 carries 1e-7 of the duality gap: the certificate and the solver's
    termination test both count it (only a push on a missing bound below the rounding scale reads as zero)."""
    from optsolve.qp.certificate import support_function
    from optsolve.qp.termination import support

    l, u = np.array([-np.inf, -1e4, 0.0]), np.array([1e4, np.inf, 1.0])
    y = np.array([1e-11, -1e-11, 1.0])
    want = 1e-11 * 1e4 + (-1e-11) * (-1e4) + 1.0
    assert support_function(y, l, u, scale=1.0) == pytest.approx(want, rel=1e-15)
    assert support(y, l, u) == pytest.approx(want, rel=1e-15)
    assert support(np.array([1e-3, 0.0, 0.0]), np.array([-np.inf] * 3), np.array([np.inf] * 3)) == 0.0  # projected


def test_a_gap_within_the_rounding_of_its_terms_counts_as_zero_in_the_test_and_the_certificate():
    """Terms of 1e8 resolve no gap below about 1e-8: at eps 1e-12 such a gap passes both the termination test
    and the certificate, while a gap ten times its rounding allowance fails both."""
    from optsolve.qp.certificate import solution_checks
    from optsolve.qp.problems import QPProblem
    from optsolve.qp.scaling import Scaled
    from optsolve.qp.termination import residuals_of, tolerance_tests

    # min 1/2 x^2 - 1e4 x over x <= 1e4: x* = 1e4, y* = 0; the terms x'Px, q'x are 1e8
    P, A = sp.csc_matrix([[1.0]]), sp.csc_matrix([[1.0]])
    qp = QPProblem(P=P, q=np.array([-1e4]), A=A, l=np.array([-np.inf]), u=np.array([1e4]))
    plain = Scaled(P=P, q=qp.q, A=A, l=qp.l, u=qp.u, D=np.ones(1), E=np.ones(1), c=1.0)
    for x, holds in ((1e4 * (1 + 2.0 ** -52), True), (1e4 * (1 + 2.0 ** -40), False)):
        x, y = np.array([x]), np.array([0.0])
        r = residuals_of(plain, x, y, np.minimum(x, qp.u))
        assert bool(tolerance_tests(r, 1e-12, 0.0)[2]) is holds
        gap = next(c for c in solution_checks(qp, x, y, np.minimum(x, qp.u), eps_abs=1e-12, eps_rel=0.0,
                                              objective=qp.objective(x)) if c.name == "duality_gap")
        assert bool(gap.holds) is holds and gap.value > 0
