"""The memory budget: declared sizes are refused (exit 7, field and size named) before anything is allocated."""

from __future__ import annotations

import io
import json
import zipfile

import numpy as np
import pytest
import scipy.io
import scipy.sparse as sp

from optsolve.core import memory
from optsolve.core.errors import InputError, ParameterError
from optsolve.core.files import read_raw

A, B = np.full(2, 0.5), np.full(3, 1 / 3)
C = np.arange(6.0).reshape(2, 3)


def npy_header(shape, descr="<f8") -> bytes:
    """A .npy header declaring ``shape`` (version 1.0), padded as numpy pads it."""
    header = repr({"descr": descr, "fortran_order": False, "shape": tuple(shape)}).encode()
    pad = 64 - (10 + len(header) + 1) % 64
    header += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header


def write_zip(path, members: dict, compress=zipfile.ZIP_DEFLATED):
    with zipfile.ZipFile(path, "w", compression=compress) as zf:
        for name, data in members.items():
            zf.writestr(name, data)


def npy(arr) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr)
    return buf.getvalue()


def one_line_exit_7(r, *needles):
    assert r.exit_code == 7, (r.exit_code, r.stderr)
    lines = [ln for ln in r.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Traceback" not in r.stderr, r.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_parse_size():
    assert memory.parse_size("512M") == 512 << 20
    assert memory.parse_size("8G") == memory.parse_size("8GB") == memory.parse_size("8GiB") == 8 << 30
    assert memory.parse_size("1e9") == 10**9
    assert memory.parse_size("50%") == memory.physical_memory_bytes() // 2
    for bad in ("", "lots", "-1G", "0", "200%", "nan"):
        with pytest.raises(ParameterError):
            memory.parse_size(bad)


def test_budget_precedence(monkeypatch):
    monkeypatch.delenv(memory.ENV_VAR, raising=False)
    memory.set_budget(None)
    assert memory.budget_bytes() == int(memory.physical_memory_bytes() * memory.DEFAULT_FRACTION)
    monkeypatch.setenv(memory.ENV_VAR, "3M")
    assert memory.budget_bytes() == 3 << 20
    try:
        memory.set_budget("5M")
        assert memory.budget_bytes() == 5 << 20
    finally:
        memory.set_budget(None)


def test_deflated_member_declaring_a_huge_array(tmp_path, cli):
    """A member of a few bytes on disk whose header declares 11 GB: refused from the header, nothing read."""
    path = tmp_path / "bomb.npz"
    write_zip(path, {"a.npy": npy(A), "b.npy": npy(B), "C.npy": npy_header((38_000, 38_000)) + b"\0" * 64})
    with pytest.raises(InputError, match=r"array 'C' of shape \(38000, 38000\).*memory budget"):
        read_raw(str(path))
    one_line_exit_7(cli("ot", path), "'C'", "38000", "memory budget")


def test_total_over_members(tmp_path, cli, monkeypatch):
    """Each member under the budget, their sum over it: refused when the sum passes it."""
    monkeypatch.setenv(memory.ENV_VAR, "1M")
    big = np.zeros(100_000)  # 800 KB each
    path = tmp_path / "many.npz"
    np.savez_compressed(path, a=A, b=B, C=C, x1=big, x2=big)
    with pytest.raises(InputError, match="in all"):
        read_raw(str(path))
    one_line_exit_7(cli("ot", path), "in all", "memory budget")


def test_memory_limit_option_and_env(tmp_path, cli):
    path = tmp_path / "p.npz"
    np.savez(path, a=np.full(300, 1 / 300), b=np.full(300, 1 / 300), C=np.ones((300, 300)))
    one_line_exit_7(cli("ot", path, "--memory-limit", "100K"), "'C'", "memory budget of 100.0 KB")
    one_line_exit_7(cli("ot", path, env={memory.ENV_VAR: "100K"}), "memory budget of 100.0 KB")
    assert cli("ot", path, "--memory-limit", "64M", "--method", "emd").exit_code == 0
    bad = cli("ot", path, "--memory-limit", "lots")
    assert bad.exit_code == 7 and "--memory-limit" in bad.stderr


def test_sparse_shape_is_a_size(tmp_path, cli):
    """A sparse matrix of shape (1e9, 1e9) with one entry: its dimensions are vector lengths."""
    path = tmp_path / "sparse.json"
    path.write_text(json.dumps({"a": [1.0], "b": [1.0], "C": {"format": "coo", "shape": [10**9, 10**9],
                                                             "data": [1.0], "row": [0], "col": [0]}}))
    one_line_exit_7(cli("ot", path), "'C'", "1000000000", "memory budget")
    npz = tmp_path / "sparse.npz"
    np.savez(npz, **{"M.format": np.array("csr"), "M.shape": np.array([10**9, 10**9]),
                     "M.data": np.ones(1), "M.indices": np.zeros(1, dtype=np.int64),
                     "M.indptr": np.array([0, 1])})
    with pytest.raises(InputError, match="'M'.*memory budget"):
        read_raw(str(npz))


def test_nested_json_string_inside_npz(tmp_path, cli):
    """100,000 nested brackets in a string member: a one-line refusal, no RecursionError."""
    path = tmp_path / "deep.npz"
    deep = "[" * 100_000 + "]" * 100_000
    np.savez(path, a=np.full(2, 0.5), b=np.full(2, 0.5), x=np.zeros((2, 1)), y=np.ones((2, 1)),
             cost=np.array("sqeuclidean"), set=np.array(deep))
    r = cli("ot", path)  # the member is an unknown key: ignored with a warning, never parsed
    assert r.exit_code == 0 and "Traceback" not in r.stderr and "RecursionError" not in r.stderr, r.stderr
    obj = tmp_path / "deep.json"
    obj.write_text('{"a": ' + deep + "}")
    one_line_exit_7(cli("ot", obj), "nested 100001 deep")


def test_object_field_nesting(tmp_path):
    """An object field (a JSON string in .npz) nested past the limit is refused naming the key."""
    from optsolve.core.problem import Field, Schema

    schema = Schema("t", (Field("spec", kind="object"),))
    deep = "[" * 100_000 + "]" * 100_000
    with pytest.raises(InputError, match=r"key 'spec' holds JSON nested 100000 deep"):
        schema.validate({"spec": np.array(deep)}, source="Problem file 'x.npz'")
    assert schema.validate({"spec": np.array("[[1], {\"a\": [2]}]")}, source="x")["spec"] == [[1], {"a": [2]}]
    with pytest.raises(InputError, match="nested more than"):
        value = []
        for _ in range(memory.MAX_NESTING + 1):
            value = [value]
        schema.validate({"spec": value}, source="x")


def test_json_text_size(tmp_path, cli, monkeypatch):
    """A JSON file is parsed only when its expansion into Python objects fits the budget."""
    path = tmp_path / "big.json"
    path.write_text(json.dumps({"a": [0.5] * 20_000, "b": [0.5, 0.5]}))
    monkeypatch.setenv(memory.ENV_VAR, "1M")
    one_line_exit_7(cli("ot", path), "JSON", "memory budget")


def test_stdin_size(sh):
    text = json.dumps({"a": [0.5] * 20_000, "b": [0.5, 0.5]})
    r = sh("ot", "-", input=text, env={memory.ENV_VAR: "1M"})
    one_line_exit_7(r, "stdin", "memory budget")


def test_mat_declared_sizes(tmp_path, cli, monkeypatch):
    path = tmp_path / "p.mat"
    scipy.io.savemat(path, {"a": A, "b": B, "C": np.zeros((400, 400))}, do_compression=True)
    monkeypatch.setenv(memory.ENV_VAR, "1M")
    one_line_exit_7(cli("ot", path), "'C'", "(400, 400)", "memory budget")


@pytest.mark.parametrize("compress", [False, True])
def test_mat_sparse_is_charged_by_its_stored_entries(tmp_path, monkeypatch, compress):
    """A sparse .mat variable costs its stored entries, not its shape (the Maros-Meszaros files: AUG2D's P is
    20,200 x 20,200 with 19,800 entries); one with too many entries is still refused."""
    path = tmp_path / "p.mat"
    big = sp.diags(np.ones(50_000), format="csc")  # 50,000 x 50,000: 40 GB as a shape, 1.2 MB as stored
    scipy.io.savemat(path, {"P": big, "q": np.zeros(50_000)}, do_compression=compress)
    monkeypatch.setenv(memory.ENV_VAR, "8M")
    raw, _ = read_raw(str(path))
    assert raw["P"].nnz == 50_000
    monkeypatch.setenv(memory.ENV_VAR, "1M")
    with pytest.raises(InputError, match=r"'P' of shape \(50000, 50000\).*memory budget"):
        read_raw(str(path))


def test_sparse_densified_within_budget(tmp_path, monkeypatch):
    """A sparse matrix given where a dense one is expected is densified only within the budget."""
    from optsolve.core.problem import Field, Schema

    schema = Schema("t", (Field("C", shape=("n", "m")),))
    m = sp.csr_matrix(([1.0], ([0], [0])), shape=(2000, 2000))
    monkeypatch.setenv(memory.ENV_VAR, "1M")
    with pytest.raises(InputError, match=r"array 'C' \(sparse, shape \(2000, 2000\)\) as a dense array"):
        schema.validate({"C": m}, source="x")
    monkeypatch.setenv(memory.ENV_VAR, "64M")
    assert schema.validate({"C": m}, source="x")["C"].shape == (2000, 2000)


def test_nesting_depth_helpers():
    assert memory.text_nesting_depth('{"a": [[1, 2], [3]], "s": "[[[[\\"[["}') == 3
    assert memory.text_nesting_depth(b"[1, 2]") == 1
    assert memory.text_nesting_depth("3") == 0
    assert memory.nesting_depth({"a": [[1], [2, [3]]]}) == 4
    assert memory.nesting_depth(5) == 0


def test_integer_of_thousands_of_digits(tmp_path, cli):
    path = tmp_path / "big.json"
    path.write_text('{"a": [0.5, 0.5], "b": [' + "9" * 5000 + "]}")
    one_line_exit_7(cli("ot", path), "4300 digits")


@pytest.mark.parametrize("shape", [[2.5, 2.0], [[2, 2]], [2, 2, 2], [1e300, 2], ["2", "2"]])
def test_sparse_shape_is_a_pair_of_whole_numbers(tmp_path, cli, shape):
    path = tmp_path / "shape.json"
    path.write_text(json.dumps({"a": [0.5, 0.5], "b": [0.5, 0.5], "C": {
        "format": "csr", "shape": shape, "data": [1.0], "indices": [0], "indptr": [0, 1, 1]}}))
    one_line_exit_7(cli("ot", path), "'C'", "shape")
