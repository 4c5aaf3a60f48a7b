"""optsolve qp, issue 'Trust': hostile files, forged documents, limits, degenerate problems, deadlines."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
import scipy.sparse as sp

from optsolve.qp import certificate, solve_problem
from optsolve.qp.admm import ADMMSettings, solve_admm
from optsolve.qp.problems import FAMILIES, SCHEMA, prepare

SMALL = {"P": [[4.0, 1.0], [1.0, 2.0]], "q": [1.0, 1.0], "A": [[1.0, 1.0], [1.0, 0.0], [0.0, 1.0]],
         "l": [1.0, 0.0, 0.0], "u": [1.0, 0.7, 0.7]}


def _solve(cli, tmp_path, data, *args, name="p"):
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data))
    r = cli("qp", path, "-o", "-", "-q", *args)
    return path, r, (json.loads(r.stdout) if r.stdout.strip() else None)




@pytest.mark.parametrize("extra, args", [
    ({"r": np.float64(0.5), "nodes": np.int64(2)}, ("--max-iter", "200")),
    ({"partition": np.array([0, 5, 5])}, ("--method", "distributed", "--max-iter", "200")),
    ({}, ("--method", "osqp", "--max-iter", "200")),
])
def test_hostile_files(hostile, extra, args):
    # numpy arrays, so that the fixture mutates values and shapes too (it leaves lists alone)
    data = {k: np.asarray(v, dtype=float) for k, v in SMALL.items()}
    hostile("qp", dict(data, **extra), args=args, examples=30)


def test_forged_documents_are_rejected(cli, tmp_path, verify_forged):
    path, r, doc = _solve(cli, tmp_path, SMALL, "--eps-abs", "1e-6", "--eps-rel", "1e-6")
    assert r.exit_code == 0 and doc["status"] == "optimal"
    assert verify_forged(path, doc, "-q").exit_code == 0

    moved = json.loads(json.dumps(doc))
    moved["solution"]["x"] = [v + 1 for v in doc["solution"]["x"]]
    assert verify_forged(path, moved, "-q").exit_code == 6

    for name in ("eps_abs", "eps_rel", "cert_tol", "obj_rtol", "obj_atol"):
        loose = json.loads(json.dumps(doc))
        loose["settings"][name] = 1e9
        r = verify_forged(path, loose, "-q")
        assert r.exit_code == 6 and f"setting_{name}" in r.stderr, (name, r.stderr)
    both = json.loads(json.dumps(moved))
    both["settings"].update(eps_abs=1e9, eps_rel=1e9)
    assert verify_forged(path, both, "-q").exit_code == 6

    for status in ("infeasible", "unbounded"):
        for kind in (None, status):
            flipped = json.loads(json.dumps(doc))
            flipped["status"] = status
            if kind:
                flipped["solution"]["certificate_kind"] = kind
            r = verify_forged(path, flipped, "-q")
            assert r.exit_code == 6 and "status_claim" in r.stderr, (status, kind, r.stderr)

    for delta in (1e-6, -1.0):
        shifted = dict(doc, objective=doc["objective"] + delta)
        r = verify_forged(path, shifted, "-q")
        assert r.exit_code == 6 and "objective_matches" in r.stderr

    for key in ("y", "z"):
        partial = json.loads(json.dumps(doc))
        del partial["solution"][key]
        r = verify_forged(path, partial, "-q")
        assert r.exit_code == 6 and f"has_{key}" in r.stderr


def test_a_forged_infeasibility_certificate_is_rejected(cli, tmp_path, verify_forged):
    infeasible = {"q": [1.0], "A": [[1.0], [1.0]], "l": [2.0, -1e20], "u": [1e20, 1.0]}
    path, r, doc = _solve(cli, tmp_path, infeasible)
    assert r.exit_code == 3 and doc["status"] == "infeasible"
    assert verify_forged(path, doc, "-q").exit_code == 0
    wrong = json.loads(json.dumps(doc))
    wrong["solution"]["prim_inf_cert"] = [1.0, 1.0]
    assert verify_forged(path, wrong, "-q").exit_code == 6
    renamed = dict(doc, status="unbounded")
    assert verify_forged(path, renamed, "-q").exit_code == 6
    as_optimal = dict(doc, status="optimal")
    r = verify_forged(path, as_optimal, "-q")
    assert r.exit_code == 6 and "has_x" in r.stderr


def test_loose_tolerance_is_accepted_when_verify_is_given_it(cli, tmp_path, verify_forged):
    data = FAMILIES["random"].generate(np.random.default_rng(3), n=20)
    path = tmp_path / "r.npz"
    np.savez(path, **{k: (v.toarray() if sp.issparse(v) else v) for k, v in data.items()})
    r = cli("qp", path, "--eps-abs", "0.3", "--eps-rel", "0.3", "--no-refine", "-o", "-", "-q")
    doc = json.loads(r.stdout)
    assert doc["status"] == "optimal"
    strict = verify_forged(path, doc, "-q")
    assert strict.exit_code == 6 and "setting_eps_abs" in strict.stderr
    assert verify_forged(path, doc, "-q", "--eps-abs", "0.3", "--eps-rel", "0.3").exit_code == 0


def test_limits_come_from_the_caller_not_the_settings():
    problem = SCHEMA.validate(SMALL, source="test")
    res = solve_problem(problem, eps_abs=1e-8, eps_rel=1e-8)
    sol = {k: list(v) for k, v in res.solution.items()}
    sol["x"] = [v + 0.01 for v in sol["x"]]
    loose = {"eps_abs": 1e9, "eps_rel": 1e9}
    cert = certificate.check(problem, sol, method="admm", objective=res.objective, settings=loose,
                             limits=None, status="optimal")
    assert not cert.holds and not cert["primal_residual"].holds
    assert cert["constraint_violation"].holds is None  # reported, not counted


def test_objective_check_has_an_absolute_floor():
    problem = SCHEMA.validate({"q": [0.0], "A": [[1.0]], "l": [-1.0], "u": [1.0]}, source="test")
    res = solve_problem(problem)
    assert res.status.value == "optimal" and res.objective == 0.0
    sol = {k: list(v) for k, v in res.solution.items()}
    ok = certificate.check(problem, sol, method="admm", objective=0.0, settings={}, status="optimal")
    off = certificate.check(problem, sol, method="admm", objective=1e-6, settings={}, status="optimal")
    assert ok.holds and not off["objective_matches"].holds


def _npz(tmp_path, name, **arrays):
    path = tmp_path / f"{name}.npz"
    np.savez(path, **arrays)
    return path


@pytest.mark.parametrize("method", ["admm", "osqp", "distributed"])
@pytest.mark.parametrize("case, code", [
    ("n1_m0", 0), ("m0", 0), ("A_no_rows", 0), ("equalities", 0), ("all_infinite", 0), ("lp", 0),
    ("P_zero_unbounded", 4), ("empty", 0), ("A_no_cols", 0), ("A_no_cols_infeasible", 3)])
def test_degenerate_problems(cli, tmp_path, method, case, code):
    e2 = np.eye(2)
    q2 = np.array([-1.0, 1.0])
    arrays = {
        "n1_m0": dict(P=np.array([[2.0]]), q=np.array([-1.0])),
        "m0": dict(P=e2, q=q2),
        "A_no_rows": dict(P=e2, q=q2, A=np.zeros((0, 2)), l=np.zeros(0), u=np.zeros(0)),
        "equalities": dict(P=e2, q=q2, A=np.array([[1.0, 1.0], [1.0, -1.0]]), l=np.array([1.0, 0.0]),
                           u=np.array([1.0, 0.0])),
        "all_infinite": dict(P=e2, q=q2, A=e2, l=np.full(2, -np.inf), u=np.full(2, 1e20)),
        "lp": dict(q=np.ones(2), A=e2, l=np.array([0.0, 1.0]), u=np.array([2.0, 3.0])),
        "P_zero_unbounded": dict(P=np.zeros((1, 1)), q=np.array([1.0])),
        "empty": dict(q=np.zeros(0)),
        "A_no_cols": dict(q=np.zeros(0), A=np.zeros((2, 0)), l=-np.ones(2), u=np.ones(2)),
        "A_no_cols_infeasible": dict(q=np.zeros(0), A=np.zeros((2, 0)), l=np.array([-1.0, 1.0]), u=np.ones(2)),
    }[case]
    if method == "distributed" and code == 4:
        code = 5  # DistributedQP has no unboundedness test: the iterate diverges to max_iter
    path = _npz(tmp_path, case, **arrays)
    r = cli("qp", path, "--method", method, "--max-iter", "400", "-o", "-", "-q")
    assert r.exit_code == code, r.stderr
    doc = json.loads(r.stdout)
    if code in (0, 3, 4):
        assert cli("verify", path, "-", "-q", "-o", "/dev/null", input=r.stdout).exit_code == 0
    if case == "A_no_cols_infeasible":
        assert "row 1 excludes Ax = 0" in doc["message"]


@pytest.mark.parametrize("where", ["file", "option"])
def test_huge_node_counts_are_bounded_by_the_rows(cli, tmp_path, where):
    data = dict(SMALL)
    args = ["--method", "distributed"]
    if where == "file":
        data["partition"] = [0, 10**15, 7]
    else:
        args += ["--nodes", str(10**15)]
    path, r, doc = _solve(cli, tmp_path, data, *args)
    assert r.exit_code == 0, r.stderr
    assert doc["stats"]["nodes"] <= 3


def test_nothing_runs_after_the_deadline():
    qp = prepare(SCHEMA.validate(FAMILIES["random"].generate(np.random.default_rng(1), n=30), source="test"))
    st = ADMMSettings(eps_abs=1e-12, eps_rel=1e-12, refine_stalled=True, polish=True)
    r = solve_admm(qp, st, deadline=time.perf_counter() - 1.0)
    assert r.status == "time_limit" and r.polished is None and r.iterations == 1


def test_no_exact_certificate_is_sought_past_the_deadline():
    from optsolve.qp.methods import TIME_FOR_CERTIFICATE, claim_verifier

    qp = prepare(SCHEMA.validate({"q": [1.0, 0.0], "A": [[1.0, 1.0], [1.0, 1.0]], "l": [2.0, -1e20],
                                  "u": [1e20, 1.0]}, source="test"))
    wrong = np.array([1.0, 0.0])  # not a Farkas vector: the exact one needs the LP
    assert claim_verifier(qp, None, time.perf_counter() - 1.0)("infeasible", wrong) == (None, TIME_FOR_CERTIFICATE)
    exact, why = claim_verifier(qp)("infeasible", wrong)
    assert why == "" and np.allclose(exact, [-1.0, 1.0])

@pytest.mark.parametrize("args, expected", [
    (("gen", "qp", "--family", "random", "--n", "0"), "'--n' option must be an integer >= 1; got 0"),
    (("gen", "qp", "--family", "chain", "--n", "40", "--blocks", "-2"), "'--blocks' option must be an integer >= 1"),
    (("gen", "qp", "--family", "svm", "--n", str(10**9)), "more than the memory budget"),
    (("qp-train", "random", "--hidden", str(10**9)), "more than the memory budget"),
    (("qp-train", "random", "--count", str(10**12)), "more than the memory budget"),
    (("qp-train", "random", "--count", "3"), "3 is not in the range x>=4"),
    (("qp-train", "random", "--interval", "0"), "0 is not in the range x>=1"),
])
def test_sizes_given_as_values_are_refused_before_anything_is_allocated(cli, tmp_path, args, expected):
    r = cli(*args, "-o", tmp_path / "out.npz")
    assert r.exit_code == 2 and expected in " ".join(r.stderr.split()), r.stderr
    assert not (tmp_path / "out.npz").exists()


@pytest.mark.parametrize("change, expected", [
    ({"interval": 0}, "header 'interval' is 0, expected an integer >= 1"),
    ({"hidden": 8.5}, "header 'hidden' is 8.5"),
    ({"hidden": 10**12}, "for 1000000000000 hidden units"),  # weights of another size than the header says
    ({"theta": np.full(74, np.nan)}, "must be a vector of finite numbers"),
    ({"theta": np.zeros((1, 74))}, "must be a vector of finite numbers"),
])
def test_a_crafted_policy_file_is_refused(cli, tmp_path, change, expected):
    from optsolve.qp.policy import POLICY_DIR

    with np.load(POLICY_DIR / "random.npz") as shipped:
        header, theta = json.loads(str(shipped["header"])), shipped["theta"]
    theta = change.pop("theta", theta)
    policy = tmp_path / "policy.npz"
    np.savez(policy, header=json.dumps(dict(header, **change)), theta=theta)
    path = tmp_path / "p.json"
    path.write_text(json.dumps(SMALL))
    r = cli("qp", path, "--method", "deepqp", "--policy", policy, "-o", "-", "-q")
    assert r.exit_code == 7 and expected in r.stderr, r.stderr
    assert json.loads(r.stdout)["status"] == "invalid_input"


@pytest.mark.parametrize("args, expected", [
    (("--scaling", str(10**9)), "'--scaling' option must be an integer in [0, 1000]"),
    (("--warm-start", "/dev/zero"), "'/dev/zero' is not a regular file"),
    (("--warm-start", "PROBLEM"), "is not an optsolve solution document"),
])
def test_options_that_would_run_without_bound_are_refused(cli, tmp_path, args, expected):
    path = tmp_path / "p.json"
    path.write_text(json.dumps(SMALL))
    r = cli("qp", path, *[str(path) if a == "PROBLEM" else a for a in args], "-o", "-", "-q")
    assert r.exit_code == 7 and expected in r.stderr, r.stderr


def _split_by_definition(s, part, k):
    """The nodes as split() defines them, one set operation at a time (small problems only)."""
    from scipy.sparse.csgraph import connected_components

    n = s.P.shape[0]
    Ar = s.A.tocsr()
    touched = [set(Ar[np.flatnonzero(part == i)].indices.tolist()) for i in range(k)]
    load = [float(len(t)) for t in touched]
    ncomp, label = connected_components(abs(s.P) + sp.eye(n), directed=False)
    owner = {}
    for c in range(ncomp):
        members = set(np.flatnonzero(label == c).tolist())
        counts = [len(members & t) for t in touched]
        best = max(range(k), key=lambda i: (counts[i], -load[i]))
        owner[c], load[best] = best, load[best] + len(members)
    return [sorted(touched[i] | {j for j in range(n) if owner[label[j]] == i}) for i in range(k)], owner, label


def _loose(rng, n):
    """Rows over the first quarter of the variables only: the rest are components no row touches."""
    P = sp.block_diag([sp.csr_matrix(np.ones((3, 3))) + 3 * sp.eye(3)] * (n // 3) + [sp.eye(n % 3)])
    A = sp.hstack([sp.random(n // 2, n // 4, density=0.3, random_state=1), sp.csr_matrix((n // 2, n - n // 4))])
    return {"P": P.tocsc(), "q": rng.standard_normal(n), "A": A.tocsc(), "l": -np.ones(n // 2), "u": np.ones(n // 2)}


@pytest.mark.parametrize("family, nodes", [("chain", 40), ("random", 7), ("flow", None), ("portfolio", 5),
                                           ("loose", 9)])
def test_split_builds_the_nodes_its_definition_gives(family, nodes):
    from optsolve.qp.scaling import ruiz_scale
    from optsolve.qp.distributed import auto_partition, split

    rng = np.random.default_rng(2)
    data = _loose(rng, 120) if family == "loose" else FAMILIES[family].generate(rng, n=120)
    qp = prepare(SCHEMA.validate(data, source="test"))
    s = ruiz_scale(qp, 10)
    part = np.searchsorted(np.unique(qp.partition), qp.partition) if nodes is None else auto_partition(s.A, nodes)
    k = int(part.max()) + 1
    idx, owner, label = _split_by_definition(s, part, k)
    built = split(s, part, k)
    assert [list(nd.idx) for nd in built] == idx
    for i, nd in enumerate(built):
        assert list(nd.rows) == list(np.flatnonzero(part == i))
        mine = np.array([owner[label[j]] == i for j in nd.idx])
        want = s.P.tocsr()[nd.idx][:, nd.idx].toarray() * np.outer(mine, mine)
        assert np.array_equal(nd.Q.toarray(), want)
        assert np.array_equal(nd.A.toarray(), s.A.tocsr()[nd.rows][:, nd.idx].toarray())
        assert np.array_equal(nd.q, np.where(mine, s.q[nd.idx], 0.0))


def test_distributed_setup_stops_at_the_deadline():
    from optsolve.qp.distributed import solve_distributed

    qp = prepare(SCHEMA.validate(FAMILIES["chain"].generate(np.random.default_rng(0), n=2000), source="test"))
    r = solve_distributed(qp, qp.m, deadline=time.perf_counter() - 1.0)
    assert r.status == "time_limit" and r.iterations == 0 and "while the nodes were set up" in r.message
    assert np.array_equal(r.x, np.zeros(qp.n))


def test_kkt_matrix_beyond_float64_is_a_numerical_error(cli, tmp_path):
    """Constraint entries of 1e300 make the KKT matrix singular in float64: a status, never an internal error."""
    from optsolve.core.files import read_raw, save_problem

    src = tmp_path / "r.npz"
    assert cli("gen", "qp", "--family", "random", "--n", "20", "-o", src).exit_code == 0
    data, _ = read_raw(str(src))
    data["A"] = data["A"].copy()
    data["A"].data[:] = 1e300
    path = tmp_path / "huge.npz"
    save_problem(str(path), data)
    r = cli("qp", path, "--method", "admm")
    assert r.exit_code == 6 and "Traceback" not in r.stderr and "internal_error" not in r.stderr, r.stderr  # numerical


@pytest.mark.parametrize("method", ["admm", "osqp", "distributed", "deepqp", "deepdistributed"])
def test_non_convex_p_beyond_the_dense_check_is_refused(cli, tmp_path, method):
    """2 x 2 blocks [[1, 2], [2, 1]] (eigenvalues 3 and -1) with a box: the minimum is -n/2 at a corner,
    and a solver that took P as convex would report a stationary point. Above the dense eigenvalue
    check's size, the inertia of an LDL' factorisation refuses it, for every method (exit 7)."""
    import scipy.sparse as sp

    from optsolve.core.files import save_problem
    from optsolve.qp.problems import PSD_CHECK_MAX_N

    n = 2 * (PSD_CHECK_MAX_N // 2 + 1)
    P = sp.kron(sp.eye(n // 2), sp.csc_matrix([[1.0, 2.0], [2.0, 1.0]]), format="csc")
    path = tmp_path / "nonconvex.npz"
    save_problem(str(path), {"P": P, "q": np.zeros(n), "A": sp.eye(n, format="csc"), "l": -np.ones(n),
                             "u": np.ones(n), "partition": np.arange(n) % 4})
    out = tmp_path / "out.json"
    r = cli("qp", path, "--method", method, "-o", out)
    assert r.exit_code == 7, r.stderr
    assert "not positive semidefinite" in r.stderr and str(path) in r.stderr and "Traceback" not in r.stderr
    assert not out.exists() or json.loads(out.read_text())["status"] == "invalid_input"


@pytest.mark.parametrize("shift, convex", [(-0.5, False), (1e-3, True)])
def test_dense_p_beyond_the_eigenvalue_check_is_judged_by_cholesky(shift, convex):
    """A P whose rows are full (a sparse factor would fill in) is judged by dense Cholesky of P + delta I."""
    from optsolve.core.errors import InputError
    from optsolve.qp.problems import DENSE_CHOLESKY_ROW_NNZ, PSD_CHECK_MAX_N

    n = PSD_CHECK_MAX_N + 2
    assert n >= DENSE_CHOLESKY_ROW_NNZ
    P = np.ones((n, n)) + shift * np.eye(n)  # eigenvalues n + shift and shift
    raw = {"P": sp.csc_matrix(P), "q": np.zeros(n)}
    if convex:
        SCHEMA.validate(raw, source="dense P")
    else:
        with pytest.raises(InputError, match="not positive semidefinite.*Cholesky"):
            SCHEMA.validate(raw, source="dense P")


def test_piqp_finish_starts_only_with_room_before_the_deadline(monkeypatch):
    """PIQP cannot be stopped: a stalled run hands over to it only when the deadline leaves room for its
    factorisations (FINISH_FACTORISATIONS times the ADMM's setup)."""
    from optsolve.qp import admm

    qp = prepare(SCHEMA.validate(FAMILIES["random"].generate(np.random.default_rng(2), n=30), source="t"))
    calls = []
    monkeypatch.setattr(admm, "piqp_finish", lambda s, st, **kwargs: calls.append(1))
    st = ADMMSettings()
    st.max_iter = 1  # stalls at once
    solve_admm(qp, st, deadline=time.perf_counter() + 100.0)
    assert calls == [1]
    monkeypatch.setattr(admm, "FINISH_FACTORISATIONS", 1e12)
    solve_admm(qp, st, deadline=time.perf_counter() + 100.0)
    assert calls == [1]  # no room: not started
    solve_admm(qp, st)
    assert calls == [1, 1]  # no deadline: started


def test_dense_cholesky_check_stays_within_the_memory_budget(monkeypatch):
    """Where the n x n array would pass half the memory budget, the sparse LDL' judges P instead."""
    from optsolve.core import memory
    from optsolve.core.errors import InputError
    from optsolve.qp.problems import PSD_CHECK_MAX_N

    n = PSD_CHECK_MAX_N + 2
    raw = {"P": sp.csc_matrix(np.ones((n, n)) - 0.5 * np.eye(n)), "q": np.zeros(n)}
    copy = 8 * n * n  # bytes of the dense copy
    monkeypatch.setenv(memory.ENV_VAR, f"{3 * copy // 2}")  # the copy is over half of it
    with pytest.raises(InputError, match="not positive semidefinite.*LDL'"):
        SCHEMA.validate(raw, source="dense P")
