"""Problem files: round trips through .npz, .json, .mat and stdin, and the schema rules.

The I/O tests write files both with ``save_problem`` and by hand in the documented
layouts (numpy.savez with prefixed sparse keys, plain JSON, scipy.io.savemat), so a
writer and a reader that agree with each other but not with the docs would still fail.
"""

from __future__ import annotations

import hashlib
import io
import json
import zipfile

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from optsolve.core.errors import InputError
from optsolve.core.files import load_problem, read_raw, save_problem
from optsolve.core.problem import Field, Schema, one_of

# A small schema that uses every kind of field: symbols shared between keys, a fixed
# dimension, an int array, a scalar, a string with choices, a sparse matrix, an object.
SCHEMA = Schema(
    name="demo",
    fields=(
        Field("A", shape=("m", "n"), sparse=True, doc="constraint matrix"),
        Field("b", shape=("m",), doc="right-hand side"),
        Field("c", shape=("n",), required=False),
        Field("box", shape=(2,), required=False),
        Field("idx", shape=(None,), dtype="int", required=False),
        Field("mask", shape=("n",), dtype="bool", required=False),
        Field("k", kind="scalar", dtype="int", required=False),
        Field("scale", kind="scalar", positive=True, required=False),
        Field("mode", kind="string", choices=("fast", "exact"), required=False),
        Field("opts", kind="object", required=False),
        Field("w", shape=("n",), nonneg=True, required=False),
    ),
)
DENSE_ONLY = Schema("dense", (Field("A", shape=("m", "n")), Field("b", shape=("m",))))

A = np.array([[1.0, 0.0, 2.0], [0.0, 3.0, 0.0]])
B = np.array([1.0, -2.0])


def sha256_of(path) -> str:
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def error_of(data: dict, schema=SCHEMA) -> str:
    with pytest.raises(InputError) as info:
        schema.validate(data, source="Problem file 'p.json'")
    message = str(info.value)
    assert message.startswith("Problem file 'p.json': ")
    assert "\n" not in message
    return message


# --------------------------------------------------------------------------- .npz


def test_npz_dense_round_trip(tmp_path):
    path = str(tmp_path / "p.npz")
    data = {"A": A, "b": B, "idx": np.array([3, 1, 4]), "k": 7, "mode": "exact", "box": np.array([0.0, 1.0])}
    save_problem(path, data)
    with zipfile.ZipFile(path) as zf:
        assert sorted(zf.namelist()) == ["A.npy", "b.npy", "box.npy", "idx.npy", "k.npy", "mode.npy"]
    raw, sha = read_raw(path)
    assert sha == sha256_of(path)
    np.testing.assert_array_equal(raw["A"], A)
    assert raw["mode"] == "exact"  # a 0-d string array comes back as a str
    problem = load_problem(path, SCHEMA)
    np.testing.assert_array_equal(problem["A"], A)
    np.testing.assert_array_equal(problem["b"], B)
    assert problem["idx"].dtype == np.int64 and problem["idx"].tolist() == [3, 1, 4]
    assert problem["k"] == 7 and isinstance(problem["k"], int)
    assert problem["mode"] == "exact"
    assert problem.dims == {"m": 2, "n": 3}
    assert problem.path == path and problem.sha256 == sha
    assert problem.warnings == []


def test_npz_written_by_numpy_savez_is_read(tmp_path):
    """Plain numpy.savez (uncompressed), Fortran order and big-endian arrays included."""
    path = tmp_path / "plain.npz"
    np.savez(path, A=np.asfortranarray(A), b=B.astype(">f8"), mode=np.array("fast"))
    problem = load_problem(str(path), SCHEMA)
    np.testing.assert_array_equal(problem["A"], A)
    np.testing.assert_array_equal(problem["b"], B)
    assert problem["mode"] == "fast"


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_npz_sparse_round_trip(tmp_path, fmt):
    M = sp.random(5, 4, density=0.4, format=fmt, random_state=1)
    path = str(tmp_path / "sparse.npz")
    save_problem(path, {"A": M, "b": np.ones(5)})
    parts = ("data", "row", "col") if fmt == "coo" else ("data", "indices", "indptr")
    with zipfile.ZipFile(path) as zf:
        names = set(zf.namelist())
    assert names == {"b.npy"} | {f"A.{p}.npy" for p in (*parts, "shape", "format")}
    raw, _ = read_raw(path)
    assert sp.issparse(raw["A"]) and raw["A"].format == fmt
    problem = load_problem(path, SCHEMA)
    assert sp.issparse(problem["A"]) and problem["A"].dtype == np.float64
    np.testing.assert_array_equal(problem["A"].toarray(), M.toarray())
    assert problem.dims == {"m": 5, "n": 4}
    dense = load_problem(path, DENSE_ONLY)
    assert isinstance(dense["A"], np.ndarray)
    np.testing.assert_array_equal(dense["A"], M.toarray())


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_npz_sparse_documented_layout(tmp_path, fmt):
    """The layout from the module docstring, written by hand with numpy.savez."""
    M = sp.csr_matrix(A).asformat(fmt)
    arrays = {"A.format": np.array(fmt), "A.shape": np.array(M.shape), "A.data": M.data, "b": B}
    if fmt == "coo":
        arrays.update({"A.row": M.row, "A.col": M.col})
    else:
        arrays.update({"A.indices": M.indices, "A.indptr": M.indptr})
    path = tmp_path / "layout.npz"
    np.savez(path, **arrays)
    problem = load_problem(str(path), SCHEMA)
    assert problem["A"].format == fmt
    np.testing.assert_array_equal(problem["A"].toarray(), A)


# --------------------------------------------------------------------------- .json


def test_json_lists_objects_and_scalars(tmp_path):
    doc = {"A": A.tolist(), "b": [1, -2], "k": 3.0, "scale": 0.5, "mode": "fast",
           "opts": {"nested": {"depth": [1, 2, {"x": None}]}, "flag": True},
           "mask": [True, False, True], "w": [0, 1, 2]}
    path = tmp_path / "p.json"
    path.write_text(json.dumps(doc))
    problem = load_problem(str(path), SCHEMA)
    np.testing.assert_array_equal(problem["A"], A)
    assert problem["b"].dtype == np.float64 and problem["b"].tolist() == [1.0, -2.0]  # ints to float
    assert problem["k"] == 3 and isinstance(problem["k"], int)
    assert problem["scale"] == 0.5
    assert problem["opts"] == doc["opts"]  # objects pass through untouched
    assert problem["mask"].dtype == bool and problem["mask"].tolist() == [True, False, True]
    assert problem.sha256 == sha256_of(path)


@pytest.mark.parametrize("fmt", ["csr", "csc", "coo"])
def test_json_sparse_objects(tmp_path, fmt):
    M = sp.csr_matrix(A).asformat(fmt)
    obj = {"format": fmt, "shape": list(M.shape), "data": M.data.tolist()}
    if fmt == "coo":
        obj.update(row=M.row.tolist(), col=M.col.tolist())
    else:
        obj.update(indices=M.indices.tolist(), indptr=M.indptr.tolist())
    path = tmp_path / "sparse.json"
    path.write_text(json.dumps({"A": obj, "b": B.tolist()}))
    problem = load_problem(str(path), SCHEMA)
    assert sp.issparse(problem["A"]) and problem["A"].format == fmt
    np.testing.assert_array_equal(problem["A"].toarray(), A)
    np.testing.assert_array_equal(load_problem(str(path), DENSE_ONLY)["A"], A)


def test_json_round_trip_through_save_problem(tmp_path):
    path = str(tmp_path / "p.json")
    rng = np.random.default_rng(0)
    c = rng.standard_normal(3)
    save_problem(path, {"A": sp.csc_matrix(A), "b": B, "c": c, "k": np.int64(4), "mode": "exact"})
    doc = json.loads(open(path).read())
    assert doc["A"]["format"] == "csr" and doc["A"]["shape"] == [2, 3]
    problem = load_problem(path, SCHEMA)
    np.testing.assert_array_equal(problem["A"].toarray(), A)
    np.testing.assert_array_equal(problem["c"], c)  # floats survive JSON exactly
    assert problem["k"] == 4 and problem["mode"] == "exact"


def test_json_numbers_numpy_would_not_guess(tmp_path):
    """Integers beyond int64 become floats in a float array; JSON's 1e400 becomes inf and is refused."""
    problem = SCHEMA.validate({"A": [[10**30, 0, 1]], "b": [2**63]}, source="p")
    assert problem["A"][0, 0] == 1e30 and problem["b"][0] == 2.0**63
    assert "'b'" in error_of({"A": A, "b": [1, 10**400]})
    assert "infinite" in error_of({"A": A, "b": [1.0, float("inf")]})


# --------------------------------------------------------------------------- .mat


def test_mat_round_trip(tmp_path):
    path = str(tmp_path / "p.mat")
    save_problem(path, {"A": A, "b": B, "c": np.arange(3.0), "mode": "fast", "k": 5})
    raw, _ = read_raw(path)
    assert raw["b"].shape == (1, 2)  # MATLAB has no 1-d arrays: savemat writes rows
    problem = load_problem(path, SCHEMA)
    np.testing.assert_array_equal(problem["A"], A)
    assert problem["b"].shape == (2,) and problem["b"].tolist() == B.tolist()
    assert problem["c"].tolist() == [0.0, 1.0, 2.0]
    assert problem["mode"] == "fast"
    assert problem["k"] == 5
    assert problem.sha256 == sha256_of(path)


def test_mat_column_vectors_and_1x1_scalars(tmp_path):
    path = tmp_path / "cols.mat"
    scipy.io.savemat(path, {"A": A, "b": B[:, None], "c": np.ones((1, 3)), "idx": np.array([[4], [2]]),
                            "scale": np.array([[2.5]]), "k": np.array([[3.0]]), "box": np.array([[0.0], [1.0]])})
    problem = load_problem(str(path), SCHEMA)
    assert problem["b"].shape == (2,) and problem["c"].shape == (3,)
    assert problem["idx"].dtype == np.int64 and problem["idx"].tolist() == [4, 2]
    assert problem["scale"] == 2.5 and problem["k"] == 3 and isinstance(problem["k"], int)
    assert problem["box"].tolist() == [0.0, 1.0]
    # a matrix is not a vector: nothing to squeeze, so the dimension error stands
    scipy.io.savemat(path, {"A": A, "b": np.ones((2, 2))})
    with pytest.raises(InputError, match=r"array 'b' has 2 dimensions \(shape \(2, 2\)\), expected 1"):
        load_problem(str(path), SCHEMA)


def test_mat_sparse(tmp_path):
    path = tmp_path / "sparse.mat"
    scipy.io.savemat(path, {"A": sp.csr_matrix(A), "b": B})
    problem = load_problem(str(path), SCHEMA)
    assert sp.issparse(problem["A"])
    np.testing.assert_array_equal(problem["A"].toarray(), A)
    np.testing.assert_array_equal(load_problem(str(path), DENSE_ONLY)["A"], A)


# --------------------------------------------------------------------------- stdin

STDIN_DOC = json.dumps({"A": A.tolist(), "b": B.tolist(), "mode": "fast"})


@pytest.mark.parametrize("make", [
    pytest.param(lambda text: io.StringIO(text), id="text"),
    pytest.param(lambda text: io.TextIOWrapper(io.BytesIO(text.encode())), id="buffer"),
])
def test_stdin(make):
    problem = load_problem("-", SCHEMA, stdin=make(STDIN_DOC))
    np.testing.assert_array_equal(problem["A"], A)
    assert problem["mode"] == "fast"
    assert problem.path is None and problem.source == "Problem on stdin"
    assert problem.sha256 == hashlib.sha256(STDIN_DOC.encode()).hexdigest()
    raw, sha = read_raw("-", stdin=make(STDIN_DOC))
    assert raw["b"] == B.tolist() and sha == problem.sha256


@pytest.mark.parametrize("text, expect", [
    ("", "Problem on stdin: is empty"),
    ("[1, 2]", "Problem on stdin: the top level must be a JSON object"),
    ("{", "Problem on stdin: invalid JSON at line 1"),
])
def test_stdin_errors(text, expect):
    with pytest.raises(InputError, match=expect):
        load_problem("-", SCHEMA, stdin=io.StringIO(text))


# --------------------------------------------------------------------------- schema rules


def test_symbols_bind_across_keys():
    message = error_of({"A": A, "b": B, "c": [1.0, 2.0, 3.0, 4.0]})
    assert message.endswith("array 'c' has shape (4,), expected (3,) to match 'A' (2, 3).")
    message = error_of({"A": A, "b": [1.0, 2.0, 3.0]})
    assert message.endswith("array 'b' has shape (3,), expected (2,) to match 'A' (2, 3).")
    # the first field in schema order binds the symbol, whatever the order of keys in the file
    message = error_of({"w": [1.0, 1.0], "b": B, "A": A})
    assert message.endswith("array 'w' has shape (2,), expected (3,) to match 'A' (2, 3).")
    problem = SCHEMA.validate({"A": A, "b": B, "c": np.zeros(3)}, source="p")
    assert problem.dims == {"m": 2, "n": 3}
    assert problem.dim_origin["n"] == ("A", (2, 3))


def test_sparse_shape_binds_symbols():
    message = error_of({"A": sp.csr_matrix(A), "b": B, "c": np.zeros(2)})
    assert "to match 'A' (2, 3)" in message


def test_fixed_and_free_dimensions():
    message = error_of({"A": A, "b": B, "box": [0.0, 1.0, 2.0]})
    assert message.endswith("array 'box' has shape (3,), expected (2,).")
    for n in (0, 1, 5):
        assert SCHEMA.validate({"A": A, "b": B, "idx": list(range(n))}, source="p")["idx"].shape == (n,)
    message = error_of({"A": A, "b": B, "idx": [[1, 2], [3, 4]]})
    assert "array 'idx' has 2 dimensions (shape (2, 2)), expected 1 (?,)" in message
    # unit dimensions are dropped (MATLAB's row and column vectors)
    assert SCHEMA.validate({"A": A, "b": B, "idx": [[1, 2]]}, source="p")["idx"].tolist() == [1, 2]


def test_int_coercion():
    problem = SCHEMA.validate({"A": A, "b": B, "idx": np.array([1.0, 2.0, -3.0]), "k": 2.0}, source="p")
    assert problem["idx"].dtype == np.int64 and problem["idx"].tolist() == [1, 2, -3]
    assert problem["k"] == 2 and isinstance(problem["k"], int)
    assert "array 'idx' must hold integers; found 1.5 at flat index 1" in error_of({"A": A, "b": B, "idx": [1, 1.5]})
    assert "'idx'" in error_of({"A": A, "b": B, "idx": [1.0, float("nan")]})
    assert "64-bit integer range" in error_of({"A": A, "b": B, "idx": [1e30]})
    assert "64-bit integer range" in error_of({"A": A, "b": B, "idx": np.array([2**64 - 1], dtype=np.uint64)})
    assert "'k'" in error_of({"A": A, "b": B, "k": 2.5})
    assert "key 'k' must be a single number" in error_of({"A": A, "b": B, "k": [1, 2]})


def test_booleans_are_not_numbers():
    assert "found a boolean (True)" in error_of({"A": A, "b": [True, 1.0]})
    assert "key 'scale' must be a number; found a boolean" in error_of({"A": A, "b": B, "scale": True})
    problem = SCHEMA.validate({"A": A, "b": B, "mask": [1, 0, 1]}, source="p")
    assert problem["mask"].tolist() == [True, False, True]
    assert "'mask'" in error_of({"A": A, "b": B, "mask": [0.5, 0, 1]})


def test_string_choices():
    assert SCHEMA.validate({"A": A, "b": B, "mode": b"exact"}, source="p")["mode"] == "exact"
    assert SCHEMA.validate({"A": A, "b": B, "mode": np.array("fast")}, source="p")["mode"] == "fast"
    message = error_of({"A": A, "b": B, "mode": "quick"})
    assert message.endswith("key 'mode' is 'quick', expected one of 'fast', 'exact'.")
    assert "key 'mode' must be a string; found a number (1)" in error_of({"A": A, "b": B, "mode": 1})
    assert "key 'opts' must be an object" in error_of({"A": A, "b": B, "opts": 3})
    # objects arrive from .npz and .mat files as JSON strings
    assert "key 'opts' is a string that is not valid JSON" in error_of({"A": A, "b": B, "opts": "x"})
    assert SCHEMA.validate({"A": A, "b": B, "opts": np.array('{"k": [1, 2]}')}, source="p")["opts"] == {"k": [1, 2]}


def test_unknown_keys_warn_and_do_not_fail(tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"A": A.tolist(), "b": B.tolist(), "colour": "blue", "z": [1]}))
    problem = load_problem(str(path), SCHEMA)
    assert len(problem.warnings) == 2
    assert "ignoring unknown key 'colour'" in problem.warnings[0]
    assert "'z'" in problem.warnings[1] and "known keys: A, b, box" in problem.warnings[1]
    assert "colour" not in problem and "z" not in problem


def test_missing_and_optional_keys():
    assert error_of({"b": B}).endswith(
        "missing required key 'A' (an array of shape (m, n): constraint matrix).")
    problem = SCHEMA.validate({"A": A, "b": B}, source="p")
    assert "c" not in problem and problem.get("c") is None


def test_sparse_values_are_checked():
    M = sp.csr_matrix(np.array([[1.0, 0.0, np.nan], [0.0, 0.0, 0.0]]))
    assert "among its stored entries" in error_of({"A": M, "b": B})
    problem = SCHEMA.validate({"A": sp.csr_matrix(A.astype(np.float32)), "b": B}, source="p")
    assert problem["A"].dtype == np.float64


def test_value_rules():
    assert "array 'w' has 1 negative entry (smallest -1 at index 2)" in error_of({"A": A, "b": B, "w": [0, 1, -1]})
    assert "'scale'" in error_of({"A": A, "b": B, "scale": 0.0})
    assert "array 'A' contains NaN at index (1, 0)" in error_of({"A": [[1, 2, 3], [float("nan"), 0, 0]], "b": B})
    assert "array 'A' is complex" in error_of({"A": A + 1j, "b": B})


def test_cross_key_rule():
    schema = Schema("alt", (Field("p", shape=(None,), required=False), Field("q", shape=(None,), required=False),
                            Field("r", shape=(None,), required=False)),
                    rules=(one_of(("p",), ("q", "r")),))
    assert "give 'p' or all of 'q', 'r'; found none" in error_of({}, schema)
    assert "not several; found 'p', 'q'" in error_of({"p": [1.0], "q": [1.0]}, schema)
    assert "missing required key 'r' (it goes with 'q')" in error_of({"q": [1.0]}, schema)
    schema.validate({"q": [1.0], "r": [2.0]}, source="p")


def test_save_problem_rejects_unknown_extension_and_writes_atomically(tmp_path):
    with pytest.raises(InputError, match="unknown extension '.txt'"):
        save_problem(str(tmp_path / "p.txt"), {"A": A})
    for ext in (".npz", ".json", ".mat"):
        save_problem(str(tmp_path / f"p{ext}"), {"A": A, "b": B})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["p.json", "p.mat", "p.npz"]


# --------------------------------------------------------------------------- end to end


def test_same_ot_problem_in_every_format_gives_the_same_objective(cli, tmp_path):
    rng = np.random.default_rng(7)
    a, b = rng.dirichlet(np.ones(6)), rng.dirichlet(np.ones(5))
    C = rng.random((6, 5))
    docs = {}
    for ext in (".npz", ".json", ".mat"):
        path = str(tmp_path / f"ot{ext}")
        save_problem(path, {"a": a, "b": b, "C": C})
        run = cli("ot", path, "-q", "--method", "emd")
        assert run.exit_code == 0, run.stderr
        docs[ext] = run.json()
        assert docs[ext]["status"] == "optimal"
        assert docs[ext]["problem"]["path"] == path
        assert docs[ext]["problem"]["sha256"] == sha256_of(path)
        assert docs[ext]["problem"]["size"] == {"n": 6, "m": 5}
    objectives = [d["objective"] for d in docs.values()]
    assert objectives[0] == pytest.approx(objectives[1], rel=1e-12) == pytest.approx(objectives[2], rel=1e-12)
    import ot  # POT, an independent reference

    assert objectives[0] == pytest.approx(ot.emd2(a, b, C), rel=1e-9)


def test_a_symbol_repeated_in_one_array_means_equal_dimensions():
    """A field of shape ("d", "d") is square: (2, 3) is refused, naming both."""
    from optsolve.core.errors import InputError
    from optsolve.core.problem import Field, Schema

    schema = Schema("t", (Field("M", shape=("d", "d")),))
    assert schema.validate({"M": np.eye(3)}, source="x").dims["d"] == 3
    with pytest.raises(InputError, match=r"'M' has shape \(2, 3\), expected \(2, 2\).*'d' must be equal"):
        schema.validate({"M": np.zeros((2, 3))}, source="x")
