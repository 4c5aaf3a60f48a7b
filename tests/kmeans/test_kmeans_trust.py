"""optsolve kmeans against hostile files, forged documents, degenerate problems and sizes given as values."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest

from optsolve.kmeans import certificate


def small(m=30, seed=0):
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(c, 0.5, size=(m // 3, 2)) for c in ((0, 0), (6, 0), (0, 6))])
    return {"X": X, "labels": np.repeat(np.arange(3), m // 3), "k": np.array(3.0)}  # 0-d: the fixture mutates it


def write(path, data):
    np.savez(path, **data)
    return path


def solve(cli, path, *args):
    r = cli("kmeans", path, *args)
    return r, (json.loads(r.stdout) if r.stdout.strip() else None)


def test_hostile_files(hostile):
    hostile("kmeans", small(), args=("--method", "sample-centre", "--alpha", "0.1"), examples=60)
    hostile("kmeans", small(), args=("--method", "sort-window", "--lloyd-steps", "3"), examples=25)
    hostile("kmeans", small(), args=("--method", "crdest", "--time-limit", "1e-9"), examples=25)


def test_forged_documents_are_rejected(cli, tmp_path):
    path = write(tmp_path / "p.npz", small())
    r, doc = solve(cli, path)
    assert r.exit_code == 0 and doc["status"] == "optimal"

    def verify(d, *args):
        sol = tmp_path / "forged.json"
        sol.write_text(json.dumps(d))
        return cli("verify", path, sol, *args)

    assert verify(doc).exit_code == 0
    forged = {}
    moved = copy.deepcopy(doc)
    moved["solution"]["centres"][1][0] += 0.3
    forged["moved"] = moved
    for name in ("cost_rtol", "cost_atol", "assign_tol", "label_cost_slack"):
        loose = copy.deepcopy(doc)
        loose["settings"][name] = 1e9
        forged[f"loose {name}"] = loose
    for status in ("infeasible", "unbounded"):
        flipped = copy.deepcopy(doc)
        flipped["status"] = status
        forged[status] = flipped
    for factor in (1.001, 0.0):
        changed = copy.deepcopy(doc)
        changed["objective"] = doc["objective"] * factor
        forged[f"objective x {factor}"] = changed
    every_point = copy.deepcopy(doc)  # more centres than k: a zero cost for free
    every_point["solution"]["centres"] = np.asarray(small()["X"]).tolist()
    every_point["solution"]["assignment"] = list(range(30))
    every_point["objective"] = 0.0
    forged["m centres"] = every_point
    for what, d in forged.items():
        v = verify(d)
        assert v.exit_code == 6, (what, v.stderr)


def test_moved_centres_with_a_consistent_objective_are_judged_by_the_label_cost(cli, tmp_path):
    """A forger who moves a centre and reports the matching cost passes every check but the label-cost bound."""
    path = write(tmp_path / "p.npz", small())
    r, doc = solve(cli, path)
    far = copy.deepcopy(doc)
    far["solution"]["centres"] = [[100.0, 100.0]] + doc["solution"]["centres"][1:]
    X = small()["X"]
    C = np.asarray(far["solution"]["centres"])
    d2 = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
    far["solution"]["assignment"] = d2.argmin(axis=1).tolist()
    far["objective"] = float(d2.min(axis=1).sum())
    sol = tmp_path / "far.json"
    sol.write_text(json.dumps(far))
    v = cli("verify", path, sol)
    assert v.exit_code == 6 and "cost_within_label_cost" in v.stderr
    assert "objective_matches" not in v.stderr and "assignment_nearest" not in v.stderr
    assert cli("verify", path, sol, "--label-cost-slack", "1e6").exit_code == 0


def test_non_default_limits_are_accepted_with_the_same_option(cli, tmp_path):
    path = write(tmp_path / "p.npz", small())
    r, doc = solve(cli, path, "--cost-rtol", "1e-3")
    assert r.exit_code == 0 and doc["settings"]["cost_rtol"] == 1e-3
    sol = tmp_path / "s.json"
    sol.write_text(r.stdout)
    v = cli("verify", path, sol)
    assert v.exit_code == 6 and "setting_cost_rtol" in v.stderr
    assert cli("verify", path, sol, "--cost-rtol", "1e-3").exit_code == 0


def test_guarantee_is_information_not_a_holding_check(tmp_path):
    """Labels 80% wrong in one cluster: the guarantee's assumption fails; it is never reported as holding."""
    from optsolve.kmeans import solve

    data = small(m=60)
    labels = data["labels"].copy()
    labels[:16] = 1  # 16 of cluster 0's 20 points labelled 1
    res = solve(data["X"], labels, k=3, method="sort-window", alpha=0.1)
    g = res.certificate["guarantee"]
    assert g.holds is None and g.limit is None and "cannot show" in g.note
    assert all(c.holds is not None for c in res.certificate.checks if c.name not in
               ("cost", "cluster_sizes", "label_centroids_cost", "cost_over_label_cost", "lower_bound",
                "cost_over_lower_bound", "guarantee"))


@pytest.mark.parametrize("name,X,labels", [
    ("k = m", np.arange(12.0).reshape(6, 2) ** 2, np.arange(6)),
    ("all equal", np.full((8, 3), 2.5), np.arange(8) % 3),
    ("one point", np.array([[1.0, -2.0]]), np.array([0])),
    ("duplicates", np.repeat(np.array([[0.0, 0.0], [5.0, 5.0], [1e6, 1e6]]), 4, axis=0), np.arange(12) % 3),
    ("k = 1", np.random.default_rng(1).normal(size=(20, 4)), np.zeros(20, dtype=int)),
])
def test_degenerate_problems_solve_and_verify(cli, tmp_path, name, X, labels):
    path = write(tmp_path / "p.npz", {"X": X, "labels": labels})
    for method in ("sample-centre", "sort-window", "labels", "lloyd"):
        r, doc = solve(cli, path, "--method", method)
        assert r.exit_code == 0 and doc["status"] == "optimal", (name, method, r.stderr)
        sol = tmp_path / "s.json"
        sol.write_text(r.stdout)
        assert cli("verify", path, sol).exit_code == 0, (name, method)
        if name in ("k = m", "all equal", "one point"):
            assert doc["objective"] == pytest.approx(0.0, abs=1e-9)


def test_zero_cost_forged_away_from_zero_fails(cli, tmp_path):
    path = write(tmp_path / "p.npz", {"X": np.arange(12.0).reshape(6, 2), "labels": np.arange(6)})
    r, doc = solve(cli, path)
    assert doc["objective"] == pytest.approx(0.0, abs=1e-12)
    doc["objective"] = 1e-3
    sol = tmp_path / "s.json"
    sol.write_text(json.dumps(doc))
    assert cli("verify", path, sol).exit_code == 6


@pytest.mark.parametrize("data,needle", [
    ({"X": np.zeros((5, 0)), "labels": np.array([0, 0, 1, 1, 0])}, "zero dimensions"),
    ({"X": np.ones((4, 2)), "labels": np.arange(4), "k": 6.0}, "k = 6 exceeds the number of points m = 4"),
    ({"X": np.ones((4, 2)), "labels": np.arange(4), "k": 1e300}, "exceeds the number of points"),
    ({"X": np.ones((4, 2)), "labels": np.array([0, 1, 2, 10**15])}, "exceeds the number of points"),
    ({"X": np.ones((4, 2)), "labels": np.arange(4), "k": 2.5}, "key 'k' is 2.5"),
    ({"X": np.array([[0.0, 1e300], [1.0, 1.0]]), "labels": np.array([0, 1])}, "larger values overflow"),
])
def test_degenerate_problems_refused(cli, tmp_path, data, needle):
    path = write(tmp_path / "p.npz", data)
    r = cli("kmeans", path)
    assert r.exit_code == 7 and needle in r.stderr and "p.npz" in r.stderr, r.stderr
    assert "Traceback" not in r.stderr


def test_points_from_an_npz_archive(cli, tmp_path):
    data = small()
    np.savez(tmp_path / "pts.npz", X=data["X"])
    np.savez(tmp_path / "two.npz", A=data["X"], B=data["X"])
    np.save(tmp_path / "pts.npy", data["X"])
    objectives = []
    for name in ("pts.npz", "pts.npy"):
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps({"X_path": name, "labels": data["labels"].tolist()}))
        r, doc = solve(cli, p)
        assert r.exit_code == 0, r.stderr
        objectives.append(doc["objective"])
    assert objectives[0] == objectives[1]
    p = tmp_path / "two.json"
    p.write_text(json.dumps({"X_path": "two.npz", "labels": data["labels"].tolist()}))
    r = cli("kmeans", p)
    assert r.exit_code == 7 and "'X_path'" in r.stderr and "['A', 'B']" in r.stderr
    (tmp_path / "junk.npz").write_bytes(b"not a zip")
    p.write_text(json.dumps({"X_path": "junk.npz", "labels": data["labels"].tolist()}))
    r = cli("kmeans", p)
    assert r.exit_code == 7 and "'X_path'" in r.stderr and "Traceback" not in r.stderr


def test_x_path_goes_through_the_memory_budget(cli, tmp_path):
    X = np.zeros((20000, 20))
    labels = (np.arange(20000) % 2).tolist()
    for name in ("big.npy", "big.npz"):
        (np.save if name.endswith(".npy") else lambda p, a: np.savez(p, X=a))(tmp_path / name, X)
        p = tmp_path / f"{name}.json"
        p.write_text(json.dumps({"X_path": name, "labels": labels}))
        r = cli("kmeans", p, "--memory-limit", "2M")
        assert r.exit_code == 7 and "memory budget" in r.stderr, (name, r.stderr)


def test_k_as_a_size_is_checked_against_the_budget(cli, tmp_path):
    """k = m = 2,000 distinct labels: choosing alpha needs 12 tables of 2,000 x 2,000; refused under 100 MB."""
    m = 2000
    path = write(tmp_path / "p.npz", {"X": np.random.default_rng(0).normal(size=(m, 2)), "labels": np.arange(m)})
    r = cli("kmeans", path, "--memory-limit", "100M")
    assert r.exit_code == 7 and "memory budget" in r.stderr and "k = 2000" in r.stderr, r.stderr


def test_lower_bound_is_skipped_when_its_tables_exceed_the_budget():
    from optsolve.core import memory

    X = np.random.default_rng(0).normal(size=(1500, 2))
    with memory.budget("10M"):
        bound, note = certificate.lower_bound(X, 3)
    assert bound is None and "memory budget" in note
    bound, note = certificate.lower_bound(X, 3)
    assert bound is not None and bound > 0


@pytest.mark.parametrize("method,args", [
    ("sample-centre", ()),
    ("sort-window", ("--alpha", "0.1")),
    ("crdest", ()),
    ("sample-window", ("--lloyd-steps", "5")),
    ("lloyd", ()),
])
def test_time_limit_reached_writes_the_best_iterate(cli, tmp_path, method, args):
    """A limit that has passed before the estimate starts: status time_limit (exit 5), the cut named
    in the message, a document whose checks still hold (the label-cost check may be left out)."""
    path = write(tmp_path / "p.npz", small(m=60))
    r, doc = solve(cli, path, "--method", method, "--time-limit", "1e-9", *args)
    assert r.exit_code == 5 and doc["status"] == "time_limit", r.stderr
    assert "Time limit" in doc["message"] and doc["settings"]["time_limit"] == 1e-9
    judged = [c for c in doc["certificate"]["checks"] if c["holds"] is not None]
    assert {"objective_matches", "assignment_nearest"} <= {c["name"] for c in judged}
    assert all(c["holds"] for c in judged)
    sol = tmp_path / "s.json"
    sol.write_text(r.stdout)
    v = cli("verify", path, sol, "-o", tmp_path / "v.json")
    assert v.exit_code == 0, v.stderr
    report = json.loads((tmp_path / "v.json").read_text())
    assert any(c["name"] == "cost_within_label_cost" for c in report["checks"])  # verify has no time limit


def test_labels_method_is_final_under_any_time_limit(cli, tmp_path):
    path = write(tmp_path / "p.npz", small())
    r, doc = solve(cli, path, "--method", "labels", "--no-refine", "--time-limit", "1e-9")
    assert r.exit_code == 0 and doc["status"] == "optimal", r.stderr
    r, doc = solve(cli, path, "--method", "labels", "--time-limit", "1e-9")  # the Lloyd steps are cut
    assert r.exit_code == 5 and doc["status"] == "time_limit" and "Lloyd" in doc["message"], r.stderr


def test_crdest_on_tiny_clusters_and_at_alpha_zero(cli, tmp_path):
    """crdest's halves of a 3-point cluster hold no common value; at alpha = 0 it is the centroid."""
    from optsolve.kmeans.estimators import crdest

    P = np.array([[0.0], [1.0], [2.0]])
    assert crdest(P, 0.0, np.random.default_rng(0)) == pytest.approx([1.0])
    path = write(tmp_path / "p.npz", {"X": P, "labels": np.zeros(3, dtype=int)})
    r, doc = solve(cli, path, "--method", "crdest")
    assert r.exit_code == 0 and doc["objective"] == pytest.approx(2.0)
    r, doc = solve(cli, path, "--method", "crdest", "--alpha", "0.1")  # its estimate, judged honestly
    assert (r.exit_code, doc["status"]) in ((0, "optimal"), (6, "optimal_inaccurate"))


def test_lower_bound_is_skipped_when_its_programme_is_too_long():
    """k = m = 2,000: the 1-D programmes would take k m^2 = 8e9 steps; refused with a note."""
    X = np.random.default_rng(0).normal(size=(2000, 2))
    bound, note = certificate.lower_bound(X, 2000)
    assert bound is None and "k m^2" in note
    bound, note = certificate.lower_bound(X[:200], 200)  # within the limit; 200 distinct values: zero
    assert bound == pytest.approx(0.0, abs=1e-9)


def test_overflowing_centres_and_bad_limit_options_in_verify(cli, tmp_path):
    path = write(tmp_path / "p.npz", small())
    r, doc = solve(cli, path)
    huge = copy.deepcopy(doc)
    huge["solution"]["centres"][0] = [1e300, -1e300]
    sol = tmp_path / "s.json"
    sol.write_text(json.dumps(huge))
    v = cli("verify", path, sol, "-o", tmp_path / "v.json")
    assert v.exit_code == 6 and "solution_shape" in v.stderr and "Warning" not in v.stderr
    note = {c["name"]: c for c in json.loads((tmp_path / "v.json").read_text())["checks"]}["solution_shape"]["note"]
    assert "overflow" in note
    sol.write_text(r.stdout)
    for value in ("-1", "nan", "inf"):
        v = cli("verify", path, sol, "--objective-rtol", value)
        assert v.exit_code == 7 and "'--objective-rtol'" in v.stderr and "finite number >= 0" in v.stderr


def test_x_path_that_is_no_array_file(cli, tmp_path):
    labels = list(range(3))
    (tmp_path / "text.npy").write_text("root:x:0:0")
    for target, needle in (("text.npy", "neither a .npy array nor a .npz archive"),
                           ("/dev/zero", "not a regular file"), ("p.json", "neither a .npy array")):
        p = tmp_path / "p.json"
        p.write_text(json.dumps({"X_path": target, "labels": labels}))
        r = cli("kmeans", p)
        assert r.exit_code == 7 and needle in r.stderr and "'X_path'" in r.stderr, (target, r.stderr)


def test_many_centres_are_assigned_in_smaller_blocks(monkeypatch):
    """With k as large as m, a block of rows holds at most TABLE_ENTRIES distances; the results are
    those of the whole table."""
    from optsolve.kmeans import estimators

    rng = np.random.default_rng(3)
    X, C = rng.normal(size=(500, 3)), rng.normal(size=(60, 3))
    whole = ((X[:, None, :] - C[None]) ** 2).sum(axis=2)
    monkeypatch.setattr(estimators, "TABLE_ENTRIES", 100)  # one row per block
    monkeypatch.setattr(certificate, "TABLE_ENTRIES", 100)
    nearest, dist = estimators.assign(X, C)
    np.testing.assert_array_equal(nearest, whole.argmin(axis=1))
    np.testing.assert_allclose(dist, whole.min(axis=1), rtol=1e-10, atol=1e-10)
    from optsolve.kmeans.problems import SCHEMA

    problem = SCHEMA.validate({"X": X, "labels": np.arange(500) % 60}, source="test")
    cert = certificate.check(problem, {"centres": C.tolist(), "assignment": nearest.tolist()}, method="labels",
                             objective=float(whole.min(axis=1).sum()), limits={}, status="optimal")
    assert cert["objective_matches"].holds and cert["assignment_nearest"].holds


def test_points_far_from_the_origin(cli, tmp_path):
    """Blobs translated by 1e7: the distances are computed between shifted points and centres, so
    every method's assignment is the nearest and its objective the cost (no cancellation)."""
    rng = np.random.default_rng(0)
    X = 1e7 + np.vstack([rng.normal(c, 1.0, size=(60, 3)) for c in (0.0, 0.5, 4.0)])
    path = write(tmp_path / "p.npz", {"X": X, "labels": np.repeat(np.arange(3), 60)})
    for method in ("sample-centre", "sample-window", "sort-window", "crdest", "labels"):
        r, doc = solve(cli, path, "--method", method)
        assert r.exit_code == 0 and doc["status"] == "optimal", (method, r.stderr)


def test_float32_points_a_wrong_centre_is_caught_and_a_tie_is_not():
    """Float32 points are compared with every centre in float32 first: a point given its second-nearest
    centre still fails assignment_nearest, by the exact excess; a point exactly between two centres
    passes with either."""
    from optsolve.kmeans import solve
    from optsolve.kmeans.problems import SCHEMA

    rng = np.random.default_rng(5)
    X = np.concatenate([rng.normal(c, 2.0, (300, 4)) for c in (0.0, 1.5, 3.0)]).astype(np.float32)
    X[0] = 0.0
    X[1] = 1.0  # between centres at 0 and 2 along every coordinate
    labels = np.repeat(np.arange(3), 300)
    res = solve(X, labels, seed=0)
    assert res.certificate.holds and res.stats["dtype"] == "float32"
    problem = SCHEMA.validate({"X": X, "labels": labels}, source="test")
    C = np.array([[0.0] * 4, [2.0] * 4, [9.0] * 4])
    d2 = ((X.astype(float)[:, None, :] - C[None]) ** 2).sum(axis=2)
    a = d2.argmin(axis=1)
    for tie in (0, 1):
        a[1] = tie
        sol = {"centres": C.tolist(), "assignment": a.tolist()}
        cert = certificate.check(problem, sol, method="labels", objective=float(d2[np.arange(900), a].sum()))
        assert cert["assignment_nearest"].holds and cert["objective_matches"].holds
    second = int(np.argsort(d2[2])[1])
    a[2] = second
    sol = {"centres": C.tolist(), "assignment": a.tolist()}
    cert = certificate.check(problem, sol, method="labels", objective=float(d2[np.arange(900), a].sum()))
    assert not cert["assignment_nearest"].holds
    assert cert["assignment_nearest"].value == pytest.approx(d2[2, second] - d2[2].min(), rel=1e-9)


def test_float32_points_beyond_float32_squares_a_wrong_centre_is_still_caught():
    """Squared distances past float32's range make the float32 comparison say nothing (inf, NaN): those
    points are judged in float64, so a point given a far centre still fails."""
    from optsolve.kmeans.problems import SCHEMA

    rng = np.random.default_rng(6)
    X = np.concatenate([rng.normal(c, 1e18, (100, 3)) for c in (-3e19, 3e19)]).astype(np.float32)
    labels = np.repeat(np.arange(2), 100)
    problem = SCHEMA.validate({"X": X, "labels": labels}, source="test")
    C = np.array([[-3e19] * 3, [3e19] * 3])
    d2 = ((X.astype(float)[:, None, :] - C[None]) ** 2).sum(axis=2)
    a = d2.argmin(axis=1)
    sol = {"centres": C.tolist(), "assignment": a.tolist()}
    cert = certificate.check(problem, sol, method="labels", objective=float(d2.min(axis=1).sum()))
    assert cert["assignment_nearest"].holds and cert["objective_matches"].holds
    a[3] = 1 - a[3]
    sol = {"centres": C.tolist(), "assignment": a.tolist()}
    cert = certificate.check(problem, sol, method="labels", objective=float(d2[np.arange(200), a].sum()))
    assert not cert["assignment_nearest"].holds
