"""Malformed problem files for ``optsolve ot``: every one exits 7 with a one-line message.

Each case writes one bad file under ``tmp_path`` and runs ``optsolve ot FILE`` in-process.
The contract (STYLE.md, "Errors"): exit code 7; stdout is one JSON document with status
``invalid_input`` and a message; stderr is one line (besides warnings); the message and
that line name the file as given on the command line and the offending key; never a
traceback. The only exception is an unknown extra key, which is a warning (exit 0).
"""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from optsolve.core.errors import InputError
from optsolve.core.files import load_problem, save_problem
from optsolve.ot.problems import SCHEMA

# A valid 2 x 3 problem; each case breaks one thing about it.
A = [0.5, 0.5]
B = [0.25, 0.25, 0.5]
C = [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
X = [[0.0, 0.0], [1.0, 0.0]]
Y = [[0.0, 1.0], [1.0, 1.0], [2.0, 2.0]]


def good(**changes) -> dict:
    doc = {"a": A, "b": B, "C": C}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


def points(**changes) -> dict:
    doc = {"a": A, "b": B, "x": X, "y": Y, "cost": "sqeuclidean"}
    doc.update(changes)
    return {k: v for k, v in doc.items() if v is not None}


# --------------------------------------------------------------------------- file writers
# Each returns the path to put on the command line.


def json_file(doc, name="p.json"):
    def write(tmp):
        path = tmp / name
        path.write_text(doc if isinstance(doc, str) else json.dumps(doc))
        return str(path)

    return write


def npz_file(name="p.npz", **arrays):
    """np.savez, uncompressed, with numpy's defaults (object arrays are pickled)."""

    def write(tmp):
        path = tmp / name
        np.savez(path, **{k: (v if isinstance(v, np.ndarray) else np.asarray(v)) for k, v in arrays.items()})
        return str(path)

    return write


def bytes_file(data: bytes, name):
    def write(tmp):
        path = tmp / name
        path.write_bytes(data)
        return str(path)

    return write


def zip_file(members: dict, name="p.npz"):
    """An archive with raw members: name -> bytes."""

    def write(tmp):
        path = tmp / name
        with zipfile.ZipFile(path, "w") as zf:
            for member, data in members.items():
                zf.writestr(member, data)
        return str(path)

    return write


def npy_bytes(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, np.asarray(arr))
    return buf.getvalue()


def npy_header_only(shape, descr="<f8", payload=b"\0" * 16) -> bytes:
    """A .npy member whose header declares ``shape`` but which holds only ``payload``."""
    buf = io.BytesIO()
    np.lib.format.write_array_header_1_0(buf, {"descr": descr, "fortran_order": False, "shape": shape})
    return buf.getvalue() + payload


def valid_npz_bytes(tmp) -> bytes:
    path = tmp / "valid-source.npz"
    save_problem(str(path), {"a": np.array(A), "b": np.array(B), "C": np.array(C)})
    return path.read_bytes()


def truncated_npz(tmp):
    data = valid_npz_bytes(tmp)
    path = tmp / "truncated.npz"
    path.write_bytes(data[: len(data) // 2])
    return str(path)


def corrupted_npz(tmp):
    """One flipped byte inside the stored 'C' array: the zip CRC must catch it."""
    path = tmp / "corrupted.npz"
    np.savez(path, a=np.array(A), b=np.array(B), C=np.array(C))
    data = bytearray(path.read_bytes())
    at = data.index(np.array(C).tobytes())  # uncompressed: the raw float64 bytes are in the file
    data[at + 7] ^= 0xFF
    path.write_bytes(bytes(data))
    return str(path)


def directory(tmp):
    path = tmp / "adir.npz"
    path.mkdir()
    return str(path)


def missing_path(tmp):
    return str(tmp / "does-not-exist.npz")


def mat_file(name="p.mat", **arrays):
    def write(tmp):
        path = tmp / name
        scipy.io.savemat(path, arrays)
        return str(path)

    return write


def mat_cell(tmp):
    path = tmp / "cell.mat"
    cell = np.empty((1, 2), dtype=object)
    cell[0, 0], cell[0, 1] = np.array([0.5]), np.array([0.5])
    scipy.io.savemat(path, {"a": cell, "b": np.array(B), "C": np.array(C)})
    return str(path)


def sparse_npz(matrix, drop=(), name="sparse.npz", **override):
    """'C' stored as a sparse matrix under prefixed keys, with parts dropped or replaced."""

    def write(tmp):
        from optsolve.core.files import flatten_arrays

        flat = flatten_arrays({"a": np.array(A), "b": np.array(B), "C": matrix})
        for part in drop:
            del flat[f"C.{part}"]
        flat.update({f"C.{k}": np.asarray(v) for k, v in override.items()})
        path = tmp / name
        np.savez(path, **flat)
        return str(path)

    return write


def sparse_and_dense(tmp):
    """A dense 'C' and a sparse 'C.*' group in one archive."""
    from optsolve.core.files import flatten_arrays

    flat = flatten_arrays({"a": np.array(A), "b": np.array(B), "C": CSR})
    flat["C"] = np.array(C)
    path = tmp / "both.npz"
    np.savez(path, **flat)
    return str(path)


CSR = sp.csr_matrix(np.array(C))
NOT_ZIP = b"this is not a zip archive, just some text that ends in .npz\n"

# --------------------------------------------------------------------------- the cases
# (id, writer, keys the message must name)

CASES = [
    # missing keys
    ("missing-a", json_file(good(a=None)), ["a"]),
    ("missing-b", json_file(good(b=None)), ["b"]),
    ("missing-C-and-points", json_file(good(C=None)), ["C", "x", "y", "cost"]),
    ("missing-cost", json_file(points(cost=None)), ["cost"]),
    ("missing-y", npz_file(a=A, b=B, x=X, cost=np.array("euclidean")), ["y"]),
    ("C-and-x-both", json_file(good(x=X, y=Y, cost="euclidean")), ["C", "x"]),
    # shapes
    ("b-wrong-shape", json_file(good(b=[0.5, 0.5])), ["b", "C"]),
    ("a-mismatches-C", npz_file(a=[0.25, 0.25, 0.5], b=B, C=C), ["a", "C"]),
    ("C-one-dim", json_file(good(C=[0.0, 1.0, 2.0])), ["C"]),
    ("a-two-dim", npz_file(a=[[0.25, 0.25], [0.25, 0.25]], b=B, C=C), ["a"]),
    ("a-scalar", json_file(good(a=1.0)), ["a"]),
    ("x-y-different-d", json_file(points(y=[[0.0, 1.0, 0.0], [1.0, 1.0, 0.0], [2.0, 2.0, 0.0]])), ["y", "x"]),
    # values
    ("C-nan", npz_file(a=A, b=B, C=[[0.0, np.nan, 2.0], [3.0, 4.0, 5.0]]), ["C"]),
    ("a-plus-inf", npz_file(a=[np.inf, 0.5], b=B, C=C), ["a"]),
    ("C-minus-inf", npz_file(a=A, b=B, C=[[0.0, 1.0, 2.0], [3.0, -np.inf, 5.0]]), ["C"]),
    ("json-NaN-literal", json_file('{"a": [0.5, NaN], "b": [0.25, 0.25, 0.5], "C": [[0,1,2],[3,4,5]]}'), ["a"]),
    ("json-overflow-to-inf", json_file('{"a": [0.5, 0.5], "b": [0.25, 0.25, 1e400], "C": [[0,1,2],[3,4,5]]}'), ["b"]),
    ("b-negative", json_file(good(b=[0.75, -0.25, 0.5])), ["b"]),
    ("a-zero-mass", json_file(good(a=[0.0, 0.0])), ["a"]),
    ("sums-differ", json_file(good(b=[0.5, 0.5, 0.5])), ["a", "b"]),
    ("C-complex", npz_file(a=A, b=B, C=np.array(C) + 1j), ["C"]),
    ("C-complex-mat", mat_file(a=np.array(A), b=np.array(B), C=np.array(C) * (1 + 1j)), ["C"]),
    # JSON types
    ("json-syntax", json_file('{"a": [0.5, 0.5], "b": [0.25, 0.25, 0.5],, "C": []}'), []),
    ("json-top-list", json_file("[[0.5, 0.5], [0.25, 0.25, 0.5]]"), []),
    ("json-top-number", json_file("42"), []),
    ("json-string-for-array", json_file(good(a="0.5 0.5")), ["a"]),
    ("json-list-of-strings", json_file(good(b=["0.25", "0.25", "0.5"])), ["b"]),
    ("json-ragged", json_file(good(C=[[0.0, 1.0, 2.0], [3.0, 4.0]])), ["C"]),
    ("json-boolean", json_file(good(a=True)), ["a"]),
    ("json-list-of-booleans", json_file(good(a=[True, True])), ["a"]),
    ("json-null-inside", json_file(good(b=[0.25, None, 0.5])), ["b"]),
    ("json-object-for-array", json_file(good(C={"rows": 2})), ["C"]),
    ("json-huge-int", json_file('{"a": [1, 1], "b": [1, 1, 1' + "0" * 400 + '], "C": [[0,1,2],[3,4,5]]}'), ["b"]),
    ("json-too-deep", json_file(good(a=json.loads("[" * 70 + "0.5" + "]" * 70))), ["a"]),
    ("json-not-utf8", bytes_file(b'{"a": [0.5, 0.5], "\xff": 1}', "latin.json"), []),
    ("cost-not-a-choice", json_file(points(cost="manhattan")), ["cost"]),
    ("cost-a-number", npz_file(a=A, b=B, x=X, y=Y, cost=2.0), ["cost"]),
    # sparse C
    ("sparse-missing-indptr", sparse_npz(CSR, drop=("indptr",)), ["C"]),
    ("sparse-missing-format", sparse_npz(CSR, drop=("format",)), ["C.format"]),
    ("sparse-index-out-of-range", sparse_npz(CSR, indices=np.array([1, 7, 0, 1, 2])), ["C"]),
    ("sparse-coo-row-out-of-range",
     sparse_npz(sp.coo_matrix(np.array(C)), row=np.array([0, 5, 1, 1, 1])), ["C"]),
    ("sparse-unknown-format", sparse_npz(CSR, format=np.array("dia")), ["C"]),
    ("sparse-json-missing-data",
     json_file(good(C={"format": "csr", "shape": [2, 3], "indices": [0], "indptr": [0, 1, 1]})), ["C"]),
    ("sparse-and-dense-C", sparse_and_dense, ["C"]),
    # broken .npz archives
    ("npz-object-array", npz_file(a=A, b=B, C=np.array([[0.0, "x", 2.0], [3.0, 4.0, 5.0]], dtype=object)), ["C"]),
    ("npz-pickled-dict", npz_file(a=np.array({"mass": 1.0}, dtype=object), b=B, C=C), ["a"]),
    ("npz-truncated", truncated_npz, []),
    ("npz-corrupted-byte", corrupted_npz, []),
    ("npz-not-a-zip", bytes_file(NOT_ZIP, "text.npz"), []),
    ("npz-huge-header", zip_file({"a.npy": npy_bytes(A), "b.npy": npy_bytes(B),
                                   "C.npy": npy_header_only((10**6, 10**6))}), ["C"]),
    ("npz-header-exceeds-bytes", zip_file({"a.npy": npy_bytes(A), "b.npy": npy_bytes(B),
                                           "C.npy": npy_header_only((100, 100))}), ["C"]),
    ("npz-negative-shape", zip_file({"a.npy": npy_bytes(A), "b.npy": npy_bytes(B),
                                     "C.npy": npy_header_only((-2, 3))}), ["C"]),
    ("npz-member-not-npy", zip_file({"a.npy": npy_bytes(A), "b.npy": npy_bytes(B), "C.txt": b"0 1 2\n3 4 5\n"}),
     ["C.txt"]),
    ("npz-member-garbage", zip_file({"a.npy": npy_bytes(A), "b.npy": npy_bytes(B), "C.npy": b"not an npy"}),
     ["C"]),
    # files that are not problem files at all
    ("empty-npz", bytes_file(b"", "empty.npz"), []),
    ("empty-json", bytes_file(b"", "empty.json"), []),
    ("blank-json", bytes_file(b"  \n\n", "blank.json"), []),
    ("empty-mat", bytes_file(b"", "empty.mat"), []),
    ("directory", directory, []),
    ("missing-path", missing_path, []),
    ("unknown-extension", bytes_file(json.dumps(good()).encode(), "p.txt"), []),
    ("no-extension", bytes_file(json.dumps(good()).encode(), "problem"), []),
    ("mat-not-matlab", bytes_file(b"MATLAB? no: just text pretending to be a .mat file\n" * 4, "fake.mat"), []),
    ("mat-cell-array", mat_cell, ["a"]),
]

def stderr_lines(run) -> list[str]:
    return [line for line in run.stderr.splitlines()
            if line.strip() and not line.startswith("optsolve: WARNING")]


def assert_invalid(run, shown: str, keys) -> None:
    """The exit-7 contract for one bad file shown on the command line as ``shown``."""
    assert "Traceback" not in run.stdout and "Traceback" not in run.stderr, run.stderr
    assert run.exit_code == 7, f"exit {run.exit_code}\nstdout: {run.stdout}\nstderr: {run.stderr}"
    doc = json.loads(run.stdout)
    assert isinstance(doc, dict)
    assert doc["status"] == "invalid_input"
    message = doc["message"]
    assert isinstance(message, str) and message
    lines = stderr_lines(run)
    assert len(lines) == 1, run.stderr
    for text in (message, lines[0]):
        assert shown in text, text
        for key in keys:
            assert repr(key) in text, f"key {key!r} not named in: {text}"
    assert "\n" not in message


def test_at_least_thirty_cases():
    assert len(CASES) >= 30
    assert len({c[0] for c in CASES}) == len(CASES)


@pytest.mark.parametrize("writer, keys", [pytest.param(w, k, id=i) for i, w, k in CASES])
def test_malformed_file_exits_7(cli, tmp_path, writer, keys):
    path = writer(tmp_path)
    run = cli("ot", path)
    assert_invalid(run, path, keys)


# Unequal sums are a property of the solve (--normalize accepts them), not of the file's schema.
SOLVE_TIME = {"sums-differ"}


@pytest.mark.parametrize("writer, keys", [pytest.param(w, k, id=i) for i, w, k in CASES if i not in SOLVE_TIME])
def test_malformed_file_raises_input_error(tmp_path, writer, keys):
    """The same files through the Python API: an InputError naming the file, nothing else."""
    path = writer(tmp_path)
    with pytest.raises(InputError) as info:
        load_problem(path, SCHEMA)
    assert path in str(info.value)


def test_unequal_sums_hint_and_normalize(cli, tmp_path):
    path = json_file(good(b=[0.5, 0.5, 0.5]))(tmp_path)
    run = cli("ot", path)
    assert run.exit_code == 7 and "--normalize" in run.stderr
    run = cli("ot", path, "--normalize", "--method", "emd")
    assert run.exit_code == 0, run.stderr
    doc = run.json()
    assert doc["settings"]["normalize"] is True
    sol = tmp_path / "s.json"
    sol.write_text(run.stdout)
    assert cli("verify", path, sol).exit_code == 6  # the file's masses differ: verify must be told --normalize
    assert cli("verify", path, sol, "--normalize").exit_code == 0


# Finite inputs whose derived quantities (total mass, costs) would overflow.
OVERFLOWS = [
    pytest.param(good(a=[1e308, 1e308], b=[1e308, 1e308, 0.0]), ["a"], id="total-mass-overflows"),
    pytest.param(points(x=[[1e200, 0.0], [0.0, 0.0]]), ["x"], id="cost-from-points-overflows"),
    pytest.param(good(C=[[1e200, 1.0, 1.0], [1.0, 1.0, 1.0]]), ["C"], id="cost-matrix-too-large"),
]


@pytest.mark.parametrize("doc, keys", OVERFLOWS)
def test_overflowing_problem_is_invalid_input(cli, tmp_path, doc, keys):
    path = json_file(doc)(tmp_path)
    assert_invalid(cli("ot", path), path, keys)


def test_unknown_key_is_a_warning_not_an_error(cli, tmp_path):
    path = json_file(good(colour="blue", note=[1, 2, 3]))(tmp_path)
    run = cli("ot", path)
    assert run.exit_code == 0, run.stderr
    assert run.json()["status"] == "optimal"
    warnings = [line for line in run.stderr.splitlines() if line.startswith("optsolve: WARNING")]
    assert len(warnings) == 2
    assert path in warnings[0] and "'colour'" in warnings[0]
    assert "'note'" in warnings[1]
    assert "Traceback" not in run.stderr


def test_unknown_key_in_npz_is_a_warning(cli, tmp_path):
    path = npz_file(a=A, b=B, C=C, extra=np.arange(3))(tmp_path)
    run = cli("ot", path)
    assert run.exit_code == 0, run.stderr
    assert any("'extra'" in line and line.startswith("optsolve: WARNING") for line in run.stderr.splitlines())


def test_quiet_still_prints_the_error_line(cli, tmp_path):
    path = json_file(good(a=None))(tmp_path)
    run = cli("ot", path, "-q")
    assert_invalid(run, path, ["a"])


@pytest.mark.parametrize("text, expect", [
    pytest.param("", "empty", id="empty"),
    pytest.param("   \n", "empty", id="blank"),
    pytest.param("[1, 2]", "object", id="top-list"),
    pytest.param('{"a": [0.5, 0.5], "b": [1.0]}', "'C'", id="missing-C"),
    pytest.param('{"a": [0.5, 0.5], "b": [1.0], "C": [[1], [2]', "JSON", id="syntax"),
])
def test_malformed_stdin(sh, text, expect):
    run = sh("ot", "-", input=text)
    assert_invalid(run, "stdin", [])
    assert expect in run.json()["message"]
    assert run.json()["problem"]["path"] is None


def test_every_flipped_byte_is_an_input_error_or_loads(tmp_path):
    """Flip each byte of a small .npz in turn: load_problem either succeeds or raises InputError."""
    path = tmp_path / "p.npz"
    np.savez_compressed(path, a=np.array(A), b=np.array(B), C=np.array(C))
    data = path.read_bytes()
    bad = tmp_path / "flipped.npz"
    outcomes = set()
    for i in range(0, len(data), 3):
        flipped = bytearray(data)
        flipped[i] ^= 0x5A
        bad.write_bytes(bytes(flipped))
        try:
            problem = load_problem(str(bad), SCHEMA)
        except InputError as exc:
            assert str(bad) in str(exc)
            outcomes.add("error")
        else:
            np.testing.assert_array_equal(problem["C"], C)  # a flip outside the data: same arrays
            outcomes.add("ok")
    assert "error" in outcomes


def test_npz_is_read_without_unpickling(tmp_path, monkeypatch):
    """An object array must be refused from its header, before pickle is ever called."""
    import pickle

    path = npz_file(a=np.array([{"x": 1}], dtype=object), b=B, C=C)(tmp_path)

    def refuse(*args, **kwargs):
        raise AssertionError("pickle.load called on a problem file")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    with pytest.raises(InputError, match="Python objects"):
        load_problem(path, SCHEMA)
