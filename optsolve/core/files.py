"""Problem files: reading ``.npz``, ``.json``, ``.mat``, ``.qps`` / ``.mps`` (and JSON on stdin), and writing them.

:func:`load_problem` reads a file and checks it against the solver's schema
(:class:`optsolve.core.problem.Schema`) before any solver runs. Every failure is an
:class:`InputError` whose one-line message names the file and the key, says what was
expected and what was found.

Layout of the formats:

* ``.npz``: one array per key, read without pickle. A scipy sparse matrix ``A`` is
  stored in scipy's own layout under prefixed keys: ``A.format`` (``csr``, ``csc`` or
  ``coo``), ``A.shape`` and ``A.data`` with ``A.indices``/``A.indptr`` (csr, csc) or
  ``A.row``/``A.col`` (coo). Strings are stored as 0-d string arrays, objects (nested
  descriptions, such as a truncation set) as 0-d strings of their JSON.
* ``.json``: an object whose values are numbers, strings, (nested) lists, or objects;
  a sparse matrix is an object ``{"format": "csr", "shape": [m, n], "data": [...],
  "indices": [...], "indptr": [...]}``.
* ``.mat``: MATLAB files (v5/v7); column or row vectors are accepted where a vector is
  expected, 1 x 1 arrays where a scalar is expected.
* ``.qps`` / ``.mps``: quadratic programs in (free or fixed) MPS with a quadratic section,
  read by HiGHS into the keys of a QP file (:mod:`optsolve.core.mps`).
"""

from __future__ import annotations

import hashlib
import io
import json
import math
import os
import sys
import zipfile
import zlib
from typing import Any

import numpy as np

from optsolve.core import memory
from optsolve.core.errors import InputError
from optsolve.core.mps import EXTENSIONS as MPS_EXTENSIONS
from optsolve.core.problem import Problem, Schema, as_string, is_sparse, kind_of, shape_text
from optsolve.core.result import LazyArray, write_atomic, write_atomic_with

EXTENSIONS = (".npz", ".json", ".mat")  # read and written
READ_EXTENSIONS = EXTENSIONS + MPS_EXTENSIONS  # .qps / .mps: QP files, read by HiGHS (core/mps.py), never written
SPARSE_FORMATS = ("csr", "csc", "coo")
_SPARSE_PARTS = {
    "csr": ("data", "indices", "indptr", "shape"),
    "csc": ("data", "indices", "indptr", "shape"),
    "coo": ("data", "row", "col", "shape"),
}
# Parsing JSON holds each number as a Python object: up to this many bytes per byte of text.
JSON_EXPANSION = 16
READ_CHUNK = 4 << 20  # bytes of an array member read at a time

def file_label(path: str) -> str:
    return "Problem on stdin" if path == "-" else f"Problem file {path!r}"


def refuse_other_format(path: str, schema: Schema) -> None:
    """A QPS / MPS file holds a quadratic program: refused, in one line, for a schema that does not read one
    (``Schema.reads_mps``), naming the commands whose schemas do."""
    if os.path.splitext(path)[1].lower() in MPS_EXTENSIONS and not schema.reads_mps:
        from optsolve.core.registry import kinds_reading_mps

        readers = " or ".join(f"'optsolve {kind}'" for kind in kinds_reading_mps())
        raise InputError(f"{file_label(path)}: a QPS / MPS file holds a quadratic program, for {readers}; "
                         f"{schema.name} problems are {', '.join(EXTENSIONS)} files.")


def refuse_other_kind(path: str, raw: dict, schema: Schema) -> None:
    """A file with keys ``schema`` does not know, whose keys are those of another command's problems, is
    refused in one line that names that command."""
    if set(raw) <= schema.known:
        return
    from optsolve.core.registry import recognise

    kind = recognise(raw, but=schema.name)
    if kind is not None:
        raise InputError(f"{file_label(path)}: its keys ({', '.join(sorted(raw))}) are those of an `optsolve "
                         f"{kind}` problem, not of `optsolve {schema.name}`; run `optsolve {kind} {path}`.")


def load_problem(path: str, schema: Schema, stdin=None, *, log: bool = True, on_read=None) -> Problem:
    """Read ``path`` (``-`` for JSON on stdin) and check it against ``schema``: the one way every command
    loads a problem file. ``on_read(sha256)``: called once the file is read, before the check; ``log``:
    log the check's warnings (they stay in ``Problem.warnings`` either way)."""
    refuse_other_format(path, schema)
    raw, sha = read_raw(path, stdin=stdin)
    if on_read is not None:
        on_read(sha)
    refuse_other_kind(path, raw, schema)
    return schema.validate(raw, source=file_label(path), path=None if path == "-" else path, sha256=sha, log=log)


def read_raw(path: str, stdin=None) -> tuple[dict, str]:
    """The keys of a problem file, unvalidated, and the sha256 of its bytes."""
    label = file_label(path)
    if path == "-":
        data = read_json_bytes(stdin if stdin is not None else sys.stdin, label)
        return _parse_json(data, label), hashlib.sha256(data).hexdigest()
    ext = os.path.splitext(path)[1].lower()
    if os.path.isdir(path):
        raise InputError(f"{label}: is a directory, expected a file.")
    if not os.path.exists(path):
        raise InputError(f"{label}: no such file.")
    if ext not in READ_EXTENSIONS:
        raise InputError(f"{label}: unknown extension {ext or '(none)'!r}; expected one of "
                         f"{', '.join(READ_EXTENSIONS)} (or '-' for JSON on stdin).")
    try:
        size = os.path.getsize(path)
        sha = file_sha256(path)
    except OSError as exc:
        raise InputError(f"{label}: cannot be read ({exc.strerror or exc}).") from None
    if size == 0:
        raise InputError(f"{label}: file is empty; expected a {ext} problem file.")
    try:
        return _read_by_extension(path, ext, label, size), sha
    except InputError as exc:
        exc.sha256 = sha  # a refused file is still named by its hash in the document
        raise


def _read_by_extension(path: str, ext: str, label: str, size: int) -> dict:
    if ext == ".npz":
        return _read_npz(path, label)
    if ext in MPS_EXTENSIONS:
        from optsolve.core import mps

        memory.require(label, f"reading {memory.human_bytes(size)} of QPS / MPS (about {mps.BYTES_PER_FILE_BYTE} "
                              "bytes a byte)", size * mps.BYTES_PER_FILE_BYTE)
        return mps.read_mps(path, label)
    if ext == ".json":
        memory.require(label, f"parsing {memory.human_bytes(size)} of JSON (about {JSON_EXPANSION} bytes a byte)",
                       size * JSON_EXPANSION)
        with open(path, "rb") as fh:
            return _parse_json(fh.read(), label)
    return _read_mat(path, label)


def file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def read_json_bytes(stream, label: str) -> bytes:
    """At most the memory budget's worth of JSON from ``stream`` (stdin, a pipe, a device: nothing to
    measure first), refused past it."""
    most = memory.budget_bytes() // JSON_EXPANSION
    data = stream.buffer.read(most + 1) if hasattr(stream, "buffer") else stream.read(most + 1)
    if isinstance(data, str):
        data = data.encode()
    if len(data) > most:
        raise memory.refusal(label, f"JSON text of more than {memory.human_bytes(most)}", (most + 1) * JSON_EXPANSION)
    return data


def parse_json(data: bytes, label: str, *, what: str = "a JSON object", strict: bool = False):
    """The JSON value of ``data``, its nesting checked before parsing; every failure an InputError
    naming ``label``. ``strict``: NaN and Infinity, which JSON does not have, are refused too."""
    if not data.strip():
        raise InputError(f"{label}: is empty; expected {what}.")
    depth = memory.text_nesting_depth(data)
    if depth > memory.MAX_NESTING:
        raise InputError(f"{label}: {_deepest_key(data, depth)}JSON nested {depth} deep; at most "
                         f"{memory.MAX_NESTING} levels are accepted.")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{label}: is not UTF-8 text (byte {exc.start}); expected {what}.") from None
    try:
        return json.loads(text, parse_constant=_reject_constant if strict else None)
    except json.JSONDecodeError as exc:
        raise InputError(f"{label}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}.") from None
    except RecursionError:
        raise InputError(f"{label}: JSON nested too deeply.") from None
    except _NotJSON as exc:
        raise InputError(f"{label}: {exc}; optsolve documents are strict JSON (null for non-finite "
                         "values).") from None
    except ValueError:  # an integer literal of thousands of digits
        raise InputError(f"{label}: holds an integer of more than 4300 digits; expected numbers that fit a "
                         "64-bit float.") from None


class _NotJSON(ValueError):
    pass


def _reject_constant(name: str):
    raise _NotJSON(f"holds {name}, which is not JSON")


def _parse_json(data: bytes, label: str) -> dict:
    doc = parse_json(data, label)
    if not isinstance(doc, dict):
        raise InputError(f"{label}: the top level must be a JSON object of keys; found {kind_of(doc)}.")
    out = {}
    for key, value in doc.items():
        if isinstance(value, dict) and "format" in value:
            out[key] = _assemble_sparse(label, key, value)
        else:
            out[key] = value
    return out


def _deepest_key(data: bytes, depth: int) -> str:
    """``"key 'a': "`` for the top-level key whose value is nested deepest, where the text parses safely."""
    if depth > 256:
        return ""
    try:
        doc = json.loads(data.decode("utf-8"))
    except (ValueError, RecursionError):
        return ""
    if not isinstance(doc, dict) or not doc:
        return ""
    key = max(doc, key=lambda k: memory.nesting_depth(doc[k], limit=depth))
    return f"key {key!r}: "


def _read_npz(path: str, label: str) -> dict:
    account = memory.Account(label)
    parts: dict[str, np.ndarray] = {}
    try:
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                name = info.filename
                if not name.endswith(".npy"):
                    raise InputError(f"{label}: member {name!r} is not a .npy array; "
                                     "expected an archive written by numpy.savez.")
                key = name[:-4]
                with zf.open(info) as fh:
                    parts[key] = _read_npy_member(fh, info.file_size, key, label, account)
    except InputError:
        raise
    except zipfile.BadZipFile as exc:
        raise InputError(f"{label}: is not a valid .npz archive (truncated or corrupted: {exc}).") from None
    except (zlib.error, EOFError, OSError, ValueError, NotImplementedError) as exc:
        raise InputError(f"{label}: is truncated or corrupted ({type(exc).__name__}: {exc}).") from None
    return _group_sparse(parts, label)


def _read_npy_member(fh, file_size: int, key: str, label: str, account: memory.Account) -> np.ndarray:
    fmt = np.lib.format
    try:
        version = fmt.read_magic(fh)
        if version == (1, 0):
            shape, fortran, dtype = fmt.read_array_header_1_0(fh)
        elif version == (2, 0):
            shape, fortran, dtype = fmt.read_array_header_2_0(fh)
        else:
            raise InputError(f"{label}: array {key!r} uses .npy format version {version}, "
                             "which optsolve does not read; save it with numpy.savez.")
    except InputError:
        raise
    except ValueError as exc:
        raise InputError(f"{label}: array {key!r} has a malformed .npy header ({exc}).") from None
    if any(s < 0 for s in shape):
        raise InputError(f"{label}: array {key!r} has a malformed .npy header (negative shape "
                         f"{tuple(int(s) for s in shape)}).")
    if dtype.hasobject:
        raise InputError(f"{label}: array {key!r} holds Python objects (dtype {dtype}); optsolve never "
                         "unpickles problem files. Store numbers or strings.")
    header = fh.tell()
    nbytes = math.prod(shape) * dtype.itemsize
    account.add(f"array {key!r} of shape {shape_text(shape)} and dtype {dtype}", nbytes)
    if nbytes > file_size - header:
        raise InputError(f"{label}: array {key!r} declares shape {shape_text(shape)} ({nbytes} bytes) "
                         f"but holds only {max(file_size - header, 0)} bytes (truncated or corrupted).")
    arr = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    view = memoryview(arr.reshape(-1, order="A").view(np.uint8)) if nbytes else memoryview(b"")
    got = 0
    while got < nbytes:  # in pieces: a zip member's readinto decompresses all it is asked for into a copy first
        n = fh.readinto(view[got:got + READ_CHUNK])
        if not n:
            break
        got += n
    if got != nbytes:
        raise InputError(f"{label}: array {key!r} is truncated: expected {nbytes} bytes, read {got}.")
    return arr


def _group_sparse(parts: dict, label: str) -> dict:
    out: dict[str, Any] = {}
    groups: dict[str, dict] = {}
    for key, arr in parts.items():
        if "." in key:
            prefix, part = key.rsplit(".", 1)
            groups.setdefault(prefix, {})[part] = arr
        else:
            out[key] = arr.reshape(()).item() if arr.dtype.kind in "US" and arr.size == 1 else arr
    for prefix, group in groups.items():
        if "format" not in group:
            keys = ", ".join(repr(f"{prefix}.{p}") for p in sorted(group))
            raise InputError(f"{label}: keys {keys} look like a sparse matrix but {prefix + '.format'!r} "
                             f"is missing; expected one of {', '.join(SPARSE_FORMATS)}.")
        if prefix in out:
            raise InputError(f"{label}: key {prefix!r} is given both as a dense array and as a sparse matrix.")
        out[prefix] = _assemble_sparse(label, prefix, group)
    return out


def _assemble_sparse(label: str, key: str, parts: dict):
    import scipy.sparse as sp

    fmt = as_string(parts.get("format"))
    if fmt not in SPARSE_FORMATS:
        found = repr(fmt) if fmt is not None else kind_of(parts.get("format"))
        raise InputError(f"{label}: sparse matrix {key!r} has format {found}; expected one of "
                         f"{', '.join(SPARSE_FORMATS)}.")
    needed = _SPARSE_PARTS[fmt]
    missing = [p for p in needed if p not in parts]
    if missing:
        raise InputError(f"{label}: sparse matrix {key!r} ({fmt}) lacks {missing[0]!r}; a {fmt} matrix needs "
                         f"{', '.join(needed)}.")
    unknown = sorted(set(parts) - set(needed) - {"format"})
    if unknown:
        raise InputError(f"{label}: sparse matrix {key!r} ({fmt}) has unknown part {unknown[0]!r}; "
                         f"expected {', '.join(needed)}.")
    try:
        shape = _sparse_shape(parts["shape"])
        arrays = {p: np.asarray(parts[p]) for p in needed if p != "shape"}
        for p, a in arrays.items():
            if a.dtype == object or a.dtype.kind in "USc":
                raise ValueError(f"part {p!r} must hold numbers")
            if p != "data" and a.dtype.kind == "f":
                if np.any(a != np.round(a)):
                    raise ValueError(f"part {p!r} must hold integers")
                arrays[p] = a.astype(np.int64)
            if a.ndim != 1:
                raise ValueError(f"part {p!r} must be one-dimensional, found shape {shape_text(a.shape)}")
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"shape must be two non-negative integers, found {list(shape)}")
        # each dimension becomes the length of vectors (and of the index pointer of a conversion)
        memory.require(label, f"sparse matrix {key!r} of shape {shape_text(shape)} (vectors of its dimensions)",
                       8 * (shape[0] + shape[1] + 2))
        if fmt == "coo":
            m = sp.coo_matrix((arrays["data"], (arrays["row"], arrays["col"])), shape=shape)
        else:
            cls = sp.csr_matrix if fmt == "csr" else sp.csc_matrix
            m = cls((arrays["data"], arrays["indices"], arrays["indptr"]), shape=shape)
            m.check_format(full_check=True)
    except (ValueError, TypeError, IndexError, OverflowError) as exc:
        raise InputError(f"{label}: sparse matrix {key!r} ({fmt}) is malformed: {exc}.") from None
    return m


def _sparse_shape(value) -> tuple:
    """The two dimensions of a sparse matrix: a flat pair of whole numbers (ValueError otherwise)."""
    arr = np.asarray(value)
    if arr.dtype == object or arr.dtype.kind not in "iuf" or arr.ndim != 1 or arr.size != 2:
        raise ValueError(f"shape must be a pair of whole numbers, found {kind_of(value if isinstance(value, list) else arr)}")
    if arr.dtype.kind == "f" and (not np.isfinite(arr).all() or np.any(arr != np.round(arr))):
        raise ValueError(f"shape must be a pair of whole numbers, found {arr.tolist()}")
    if np.any(np.abs(arr.astype(np.float64)) >= 2.0**62):
        raise ValueError(f"shape {arr.tolist()} is beyond any size")
    return tuple(int(s) for s in arr)


def _mat_sparse_entries(path: str) -> dict:
    """{name: entries stored} of the sparse variables of a v5/v7 .mat file, from their headers (``nzmax``),
    read through scipy's own MAT 5 reader; {} where it cannot say (the shape then bounds the memory)."""
    try:
        from scipy.io.matlab._mio5 import MatFile5Reader

        out = {}
        with open(path, "rb") as fh:
            reader = MatFile5Reader(fh)
            reader.initialize_read()
            reader.read_file_header()
            while not reader.end_of_stream():
                header, next_position = reader.read_var_header()
                if getattr(header, "mclass", None) == 5:  # mxSPARSE_CLASS
                    name = header.name.decode("latin-1") if isinstance(header.name, bytes) else str(header.name)
                    out[name] = int(header.nzmax)
                reader.mat_stream.seek(next_position)
        return out
    except Exception:  # noqa: BLE001  not v5/v7, or scipy's reader changed: the shape bounds it
        return {}


def _read_mat(path: str, label: str) -> dict:
    import scipy.io

    try:
        account = memory.Account(label)
        stored = _mat_sparse_entries(path)
        for name, shape, cls in scipy.io.whosmat(path):
            if cls == "sparse" and name in stored:  # its stored entries (value and row index) and column pointers
                need = 16 * stored[name] + 8 * ((shape[1] if len(shape) > 1 else 1) + 1)
            else:
                need = (16 if cls in ("double", "sparse", "cell", "struct") else 8) * math.prod(shape)
            account.add(f"variable {name!r} of shape {shape_text(shape)} ({cls})", need)
        raw = scipy.io.loadmat(path, squeeze_me=False, chars_as_strings=True, mat_dtype=False)
    except NotImplementedError:
        raise InputError(f"{label}: is a MATLAB v7.3 (HDF5) file, which optsolve does not read; "
                         "save it with MATLAB's -v7 option.") from None
    except InputError:
        raise
    except Exception as exc:  # scipy raises several types for corrupt files
        raise InputError(f"{label}: is not a readable MATLAB .mat file ({type(exc).__name__}: {exc}).") from None
    out = {}
    for key, value in raw.items():
        if key.startswith("__"):
            continue
        if isinstance(value, np.ndarray) and value.dtype.kind == "U":
            value = "".join(value.ravel().tolist()) if value.size else ""
        elif isinstance(value, np.ndarray) and value.dtype == object:
            raise InputError(f"{label}: variable {key!r} is a MATLAB cell array or struct; expected a "
                             "numeric array, a sparse matrix or a string.")
        out[key] = value
    return out


# --------------------------------------------------------------------------- writing


def write_arrays(path: str, arrays: dict) -> None:
    """Write named arrays (a result's ``--arrays``) to an ``.npz`` file atomically (dense arrays; scipy sparse
    in prefixed keys; a :class:`~optsolve.core.result.LazyArray` computed as it is written)."""
    flat = flatten_arrays({k: v() if isinstance(v, LazyArray) else v for k, v in arrays.items()})
    write_atomic_with(path, lambda f: np.savez_compressed(f, **flat))


def flatten_arrays(data: dict) -> dict:
    """Arrays for ``numpy.savez``: sparse matrices under prefixed keys, strings as string arrays."""
    flat = {}
    for key, value in data.items():
        if is_sparse(value):
            fmt = value.format if value.format in SPARSE_FORMATS else "csr"
            m = value.asformat(fmt)
            flat[f"{key}.format"] = np.array(fmt)
            flat[f"{key}.shape"] = np.array(m.shape, dtype=np.int64)
            flat[f"{key}.data"] = m.data
            if fmt == "coo":
                flat[f"{key}.row"], flat[f"{key}.col"] = m.row, m.col
            else:
                flat[f"{key}.indices"], flat[f"{key}.indptr"] = m.indices, m.indptr
        elif isinstance(value, str):
            flat[key] = np.array(value)
        elif isinstance(value, (dict, list)) and not _numeric_list(value):
            flat[key] = np.array(json.dumps(value, default=_json_value))  # objects as JSON strings
        else:
            flat[key] = np.asarray(value)
    return flat


def _numeric_list(value) -> bool:
    try:
        return isinstance(value, list) and np.asarray(value).dtype.kind in "biuf"
    except ValueError:
        return False


def _json_value(value):
    if is_sparse(value):
        m = value.tocsr()
        return {"format": "csr", "shape": list(m.shape), "data": m.data.tolist(),
                "indices": m.indices.tolist(), "indptr": m.indptr.tolist()}
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    return value


def save_problem(path: str, data: dict) -> None:
    """Write a problem file (``.npz``, ``.json`` or ``.mat`` by extension) atomically."""

    ext = os.path.splitext(path)[1].lower()
    if ext == ".npz":
        flat = flatten_arrays(data)
        write_atomic_with(path, lambda f: np.savez_compressed(f, **flat))
    elif ext == ".json":
        write_atomic(path, json.dumps({k: _json_value(v) for k, v in data.items()}) + "\n")
    elif ext == ".mat":
        import scipy.io

        buf = io.BytesIO()
        scipy.io.savemat(buf, {k: v for k, v in data.items()}, do_compression=True)
        write_atomic(path, buf.getvalue())
    else:
        raise InputError(f"Output file {path!r}: unknown extension {ext or '(none)'!r}; "
                         f"expected one of {', '.join(EXTENSIONS)}.")
