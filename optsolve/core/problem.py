"""Problem files: reading ``.npz``, ``.json``, ``.mat``, ``.qps`` / ``.mps`` (and JSON on stdin), and checking a schema.

Every solver declares a :class:`Schema` (required and optional keys, their shapes,
dtypes, finiteness, signs and cross-key rules); :func:`load_problem` reads a file and
checks it before any solver runs. Every failure is an :class:`InputError` whose
one-line message names the file and the key, says what was expected and what was found.

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
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from optsolve.core import memory
from optsolve.core.errors import InputError
from optsolve.core.mps import EXTENSIONS as MPS_EXTENSIONS
from optsolve.core.progress import get_logger
from optsolve.core.result import ProblemInfo

EXTENSIONS = (".npz", ".json", ".mat")  # read and written
READ_EXTENSIONS = EXTENSIONS + MPS_EXTENSIONS  # .qps / .mps: QP files, read by HiGHS (core/mps.py), never written
SPARSE_FORMATS = ("csr", "csc", "coo")
_SPARSE_PARTS = {
    "csr": ("data", "indices", "indptr", "shape"),
    "csc": ("data", "indices", "indptr", "shape"),
    "coo": ("data", "row", "col", "shape"),
}


def memory_limit_bytes() -> int:
    """The memory budget (:mod:`optsolve.core.memory`): the most a problem file may make optsolve allocate."""
    return memory.budget_bytes()


_human_bytes = memory.human_bytes
# Parsing JSON holds each number as a Python object: up to this many bytes per byte of text.
JSON_EXPANSION = 16


# --------------------------------------------------------------------------- schema


@dataclass(frozen=True)
class Field:
    """One key of a problem file.

    kind: ``array`` (dense, or scipy sparse where ``sparse`` is true), ``scalar``,
    ``string`` or ``object`` (JSON objects and lists, passed through).
    shape: one entry per dimension: an int, a symbol shared between keys (``"n"``),
    or ``None`` for any length. dtype: ``float``, ``int`` or ``bool``.
    """

    name: str
    kind: str = "array"
    shape: tuple | None = None
    dtype: str = "float"
    required: bool = True
    finite: bool = True
    nonneg: bool = False
    positive: bool = False
    sparse: bool = False
    alt_shape: tuple | None = None  # a second accepted shape, of another number of dimensions
    choices: tuple | None = None
    doc: str = ""

    def describe(self) -> str:
        if self.kind == "array":
            shape = "" if self.shape is None else " of shape (" + ", ".join(
                "?" if s is None else str(s) for s in self.shape) + ("," if len(self.shape) == 1 else "") + ")"
            what = f"an array{shape}"
        elif self.kind == "string":
            what = "a string" + (f" (one of {', '.join(map(repr, self.choices))})" if self.choices else "")
        elif self.kind == "scalar":
            what = f"a {self.dtype} number"
        else:
            what = "an object"
        return f"{what}: {self.doc}" if self.doc else what


@dataclass(frozen=True)
class Schema:
    """The keys of one solver's problem files and the rules that tie them together.

    Each rule is a callable ``rule(problem)`` that raises ``problem.error(...)``.
    """

    name: str
    fields: tuple[Field, ...]
    rules: tuple[Callable[["Problem"], None], ...] = ()

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def validate(self, raw: dict, source: str, path: str | None = None, sha256: str | None = None,
                 log: bool = True) -> "Problem":
        """Check raw values (as read from a file, or given in Python) and return a :class:`Problem`;
        warnings are logged unless ``log`` is false (they stay in ``Problem.warnings``)."""
        problem = Problem(source=source, path=path, sha256=sha256)
        known = {f.name for f in self.fields}
        for key in raw:
            if key not in known:
                msg = (f"ignoring unknown key {key!r} (known keys: {', '.join(sorted(known))}).")
                problem.warnings.append(msg)
                if log:
                    get_logger().warning(f"{source}: {msg}")
        for f in self.fields:
            value = raw.get(f.name)
            if value is None:
                if f.required:
                    raise problem.error(f"missing required key {f.name!r} ({f.describe()}).")
                continue
            problem.data[f.name] = _coerce(problem, f, value)
        for rule in self.rules:
            rule(problem)
        return problem


@dataclass
class Problem:
    """A validated problem: arrays and values by key, the bound dimension symbols, provenance."""

    source: str
    path: str | None = None
    sha256: str | None = None
    data: dict = field(default_factory=dict)
    dims: dict = field(default_factory=dict)
    dim_origin: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)

    def __getitem__(self, key):
        return self.data[key]

    def __contains__(self, key):
        return key in self.data

    def get(self, key, default=None):
        return self.data.get(key, default)

    def error(self, message: str) -> InputError:
        return InputError(f"{self.source}: {message}")

    def info(self, **size) -> ProblemInfo:
        return ProblemInfo(path=self.path, sha256=self.sha256, size={k: int(v) for k, v in size.items()})


def one_of(*alternatives: tuple[str, ...]) -> Callable[[Problem], None]:
    """Rule: exactly one group of keys is given, and all keys of that group."""

    def describe(group):
        return repr(group[0]) if len(group) == 1 else "all of " + ", ".join(map(repr, group))

    def rule(problem: Problem) -> None:
        present = [g for g in alternatives if any(k in problem for k in g)]
        choices = " or ".join(describe(g) for g in alternatives)
        if not present:
            raise problem.error(f"missing keys: give {choices}; found none of them.")
        if len(present) > 1:
            found = ", ".join(repr(next(k for k in g if k in problem)) for g in present)
            raise problem.error(f"give {choices}, not several; found {found}.")
        missing = [k for k in present[0] if k not in problem]
        if missing:
            raise problem.error(f"missing required key {missing[0]!r} (it goes with "
                                f"{', '.join(repr(k) for k in present[0] if k in problem)}).")

    return rule


def _shape_str(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _coerce(problem: Problem, f: Field, value):
    if f.kind == "object":
        text = _as_string(value) if not isinstance(value, (dict, list)) else None
        if text is not None:  # .npz and .mat files hold objects as JSON strings
            depth = memory.text_nesting_depth(text)
            if depth > memory.MAX_NESTING:
                raise problem.error(f"key {f.name!r} holds JSON nested {depth} deep; at most "
                                    f"{memory.MAX_NESTING} levels are accepted.")
            try:
                value = json.loads(text)
            except json.JSONDecodeError as exc:
                raise problem.error(f"key {f.name!r} is a string that is not valid JSON ({exc.msg} at column "
                                    f"{exc.colno}); expected {f.describe()}.") from None
            except RecursionError:
                raise problem.error(f"key {f.name!r} holds JSON nested too deeply.") from None
            except ValueError:  # an integer literal of thousands of digits
                raise problem.error(f"key {f.name!r} holds an integer of more than 4300 digits.") from None
        if not isinstance(value, (dict, list)):
            raise problem.error(f"key {f.name!r} must be {f.describe()}; found {_kind_of(value)}.")
        depth = memory.nesting_depth(value)
        if depth > memory.MAX_NESTING:
            raise problem.error(f"key {f.name!r} is nested more than {memory.MAX_NESTING} levels deep.")
        return value
    if f.kind == "string":
        text = _as_string(value)
        if text is None:
            raise problem.error(f"key {f.name!r} must be a string; found {_kind_of(value)}.")
        if f.choices and text not in f.choices:
            raise problem.error(f"key {f.name!r} is {text!r}, expected one of "
                                f"{', '.join(map(repr, f.choices))}.")
        return text
    if f.kind == "scalar":
        arr = _as_numeric(problem, f, value)
        if arr.size != 1:
            raise problem.error(f"key {f.name!r} must be a single number; found an array of shape "
                                f"{_shape_str(arr.shape)}.")
        arr = arr.reshape(())
        _check_values(problem, f, arr)
        return arr.item()
    # arrays
    if _is_sparse(value):
        if not f.sparse:
            value = _densify(problem, f, value)
        else:
            _check_ndim_shape(problem, f, value.shape)
            _check_values(problem, f, value.data, sparse=True)
            if f.dtype == "float" and value.dtype != np.float64:
                value = value.astype(np.float64)
            return value
    arr = _as_numeric(problem, f, value)
    alt = f.alt_shape is not None and arr.ndim == len(f.alt_shape) and min(arr.shape, default=2) > 1
    if f.shape is not None and arr.ndim != len(f.shape) and not alt:
        arr = _squeeze_to(arr, len(f.shape))
    _check_ndim_shape(problem, f, arr.shape)
    _check_values(problem, f, arr)
    return arr


def _is_sparse(value) -> bool:
    return type(value).__module__.startswith("scipy.sparse")


def _densify(problem, f, value):
    nbytes = 8 * math.prod(value.shape)
    memory.require(problem.source, f"array {f.name!r} (sparse, shape {_shape_str(value.shape)}) as a dense array",
                   nbytes)
    return value.toarray()


def _squeeze_to(arr: np.ndarray, ndim: int) -> np.ndarray:
    """MATLAB stores vectors as n x 1 or 1 x n and scalars as 1 x 1: drop such unit dimensions."""
    if arr.ndim > ndim:
        units = [i for i, s in enumerate(arr.shape) if s == 1]
        extra = arr.ndim - ndim
        if len(units) >= extra:
            return arr.reshape([s for i, s in enumerate(arr.shape) if i not in units[:extra]])
    return arr


def _as_string(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.dtype.kind in "US" and value.size == 1:
        item = value.reshape(()).item()
        return item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
    return None


def _kind_of(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, str):
        short = value if len(value) <= 20 else value[:17] + "..."
        return f"a string ({short!r})"
    if isinstance(value, (bool, np.bool_)):
        return f"a boolean ({bool(value)})"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, int) and abs(value) >= 10**20:
        return f"an integer of {len(str(abs(value)))} digits"
    if isinstance(value, (int, float)):
        return f"a number ({value})"
    if isinstance(value, np.ndarray):
        return f"an array of dtype {value.dtype} and shape {_shape_str(value.shape)}"
    return f"a value of type {type(value).__name__}"


def _as_numeric(problem: Problem, f: Field, value) -> np.ndarray:
    what = "a number" if f.kind == "scalar" else "an array of numbers"
    if isinstance(value, (str, bytes, dict)) or isinstance(value, (bool, np.bool_)) and f.dtype != "bool":
        raise problem.error(f"key {f.name!r} must be {what}; found {_kind_of(value)}.")
    if isinstance(value, list):
        bad = _first_non_number(value, allow_bool=f.dtype == "bool")
        if bad:
            raise problem.error(f"array {f.name!r} must hold only numbers; found {_kind_of(bad[0])}.")
        try:
            arr = np.array(value)
        except ValueError:
            depth = _list_depth(value)
            if depth > 32:
                raise problem.error(f"array {f.name!r} has lists nested {depth} deep, more dimensions than "
                                    f"an array can have; expected {f.describe()}.") from None
            raise problem.error(f"array {f.name!r} is ragged: its nested lists have different lengths.") from None
        if arr.dtype == object:  # integers beyond int64: convert them, or say which one does not fit
            try:
                arr = np.array(value, dtype=np.float64 if f.dtype == "float" else np.int64)
            except (OverflowError, ValueError, TypeError):
                big = _first_huge_int(value)
                found = (f"holds {_kind_of(big)}, too large for {f.dtype} values" if big is not None
                         else "must hold only numbers; found Python objects")
                raise problem.error(f"array {f.name!r} {found}.") from None
        if arr.dtype.kind in "US":
            raise problem.error(f"array {f.name!r} must hold only numbers; found {_kind_of(arr)}.")
        if arr.size == 0 and arr.ndim == 1 and f.dtype == "float":
            arr = arr.astype(np.float64)
    elif isinstance(value, (bool, int, float, np.generic)):
        arr = np.asarray(value)
    elif isinstance(value, np.ndarray):
        arr = value
    else:
        raise problem.error(f"key {f.name!r} must be {what}; found {_kind_of(value)}.")
    kind = arr.dtype.kind
    if kind in "US":
        raise problem.error(f"key {f.name!r} must be {what}; found {_kind_of(arr)}.")
    if kind == "c":
        raise problem.error(f"array {f.name!r} is complex ({arr.dtype}); expected real {f.dtype} values.")
    if kind not in "biuf":
        raise problem.error(f"array {f.name!r} has dtype {arr.dtype}; expected {f.dtype} values.")
    if f.dtype == "float":
        return arr.astype(np.float64, copy=False)
    if f.dtype == "int":
        if kind == "f":
            finite = np.isfinite(arr)
            if not finite.all() or np.any(arr != np.round(arr)):
                idx = np.flatnonzero(~finite | (arr != np.round(np.where(finite, arr, 0))))[0]
                raise problem.error(f"array {f.name!r} must hold integers; found {arr.ravel()[idx].item()!r} "
                                    f"at flat index {idx}.")
        if kind in "fu" and arr.size and (np.abs(arr) >= 2.0**63).any():
            idx = int(np.flatnonzero(np.abs(arr) >= 2.0**63)[0])
            raise problem.error(f"array {f.name!r} holds {arr.ravel()[idx]:.6g} at flat index {idx}, beyond "
                                "the 64-bit integer range.")
        return arr.astype(np.int64, copy=False)
    if f.dtype == "bool":
        if kind not in "bui" and not np.isin(arr, (0, 1)).all():
            raise problem.error(f"array {f.name!r} must hold booleans (0 or 1).")
        return arr.astype(bool, copy=False)
    return arr


def _first_non_number(value, allow_bool: bool = False) -> tuple:
    """The first leaf of nested lists that is not a number (null, a string, an object, a boolean), as a
    1-tuple; ``()`` when every leaf is a number. Numpy numbers and arrays count as numbers here."""
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif isinstance(v, (bool, np.bool_)):
            if not allow_bool:
                return (v,)
        elif not isinstance(v, (int, float, np.number, np.ndarray)):
            return (v,)
    return ()


def _first_huge_int(value):
    stack = [value]
    while stack:
        v = stack.pop()
        if isinstance(v, (list, tuple)):
            stack.extend(reversed(v))
        elif isinstance(v, int) and not -2**63 <= v < 2**64:
            return v
    return None


def _list_depth(value) -> int:
    depth = 0
    while isinstance(value, (list, tuple)) and depth <= 1000:
        depth += 1
        value = value[0] if value else None
    return depth


def _symbolic(spec) -> str:
    return "(" + ", ".join("?" if s is None else str(s) for s in spec) + ("," if len(spec) == 1 else "") + ")"


def _check_ndim_shape(problem: Problem, f: Field, shape: tuple) -> None:
    if f.shape is None:
        return
    spec = f.alt_shape if f.alt_shape is not None and len(shape) == len(f.alt_shape) else f.shape
    if len(shape) != len(spec):
        want = f"{len(spec)} {_symbolic(spec)}"
        if f.alt_shape is not None:
            want += f" or {len(f.alt_shape)} {_symbolic(f.alt_shape)}"
        raise problem.error(f"array {f.name!r} has {len(shape)} dimension{'s' * (len(shape) != 1)} "
                            f"(shape {_shape_str(shape)}), expected {want}.")
    expected = []
    mismatch = None
    own: dict = {}  # symbols first bound by this array (a square matrix repeats one)
    for axis, (want, got) in enumerate(zip(spec, shape)):
        if want is None:
            expected.append(got)
        elif isinstance(want, int):
            expected.append(want)
            if got != want and mismatch is None:
                mismatch = ""
        else:  # a symbol
            if want in problem.dims:
                expected.append(problem.dims[want])
                if got != problem.dims[want] and mismatch is None:
                    origin, oshape = problem.dim_origin[want]
                    mismatch = f" to match {origin!r} {_shape_str(oshape)}"
            elif want in own:
                expected.append(own[want])
                if got != own[want] and mismatch is None:
                    mismatch = f" (its dimensions named {want!r} must be equal)"
            else:
                own[want] = got
                expected.append(got)
    if mismatch is not None:
        raise problem.error(f"array {f.name!r} has shape {_shape_str(shape)}, expected "
                            f"{_shape_str(expected)}{mismatch}.")
    for want, got in zip(spec, shape):
        if isinstance(want, str) and want not in problem.dims:
            problem.dims[want] = int(got)
            problem.dim_origin[want] = (f.name, tuple(int(s) for s in shape))


def _check_values(problem: Problem, f: Field, arr: np.ndarray, sparse: bool = False) -> None:
    if arr.size == 0 or arr.dtype.kind != "f" and not (f.nonneg or f.positive):
        return
    where = "among its stored entries " if sparse else ""
    if f.finite and arr.dtype.kind == "f":
        finite = np.isfinite(arr)
        if not finite.all():
            nan = int(np.isnan(arr).sum())
            inf = int((~finite).sum()) - nan
            idx = np.unravel_index(int(np.flatnonzero(~finite)[0]), arr.shape)
            first = "NaN" if np.isnan(arr[idx]) else str(arr[idx])
            at = f"index {idx[0]}" if len(idx) == 1 else f"index {tuple(int(i) for i in idx)}"
            raise problem.error(f"array {f.name!r} contains {first} at {at} {where}({nan} NaN and {inf} "
                                f"infinite entries in all); expected finite values.")
    if f.nonneg or f.positive:
        bad = arr < 0 if f.nonneg else arr <= 0
        if bad.any():
            count = int(bad.sum())
            flat = np.flatnonzero(bad)
            vals = arr.ravel()[flat]
            k = int(flat[np.argmin(vals)])
            idx = np.unravel_index(k, arr.shape)
            at = f"index {idx[0]}" if len(idx) == 1 else f"index {tuple(int(i) for i in idx)}"
            word = "negative" if f.nonneg else "non-positive"
            raise problem.error(f"array {f.name!r} has {count} {word} entr{'y' if count == 1 else 'ies'} "
                                f"{where}(smallest {arr.ravel()[k]:.6g} at {at}); expected entries "
                                f"{'>= 0' if f.nonneg else '> 0'}.")


# --------------------------------------------------------------------------- reading


def file_label(path: str) -> str:
    return "Problem on stdin" if path == "-" else f"Problem file {path!r}"


def refuse_other_format(path: str, schema: Schema) -> None:
    """A QPS / MPS file holds a quadratic program: refused, in one line, for any schema but qp's."""
    if os.path.splitext(path)[1].lower() in MPS_EXTENSIONS and schema.name != "qp":
        raise InputError(f"{file_label(path)}: a QPS / MPS file holds a quadratic program, for 'optsolve qp'; "
                         f"{schema.name} problems are {', '.join(EXTENSIONS)} files.")


def load_problem(path: str, schema: Schema, stdin=None) -> Problem:
    """Read ``path`` (``-`` for JSON on stdin) and check it against ``schema``."""
    refuse_other_format(path, schema)
    raw, sha = read_raw(path, stdin=stdin)
    return schema.validate(raw, source=file_label(path), path=None if path == "-" else path, sha256=sha)


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
        raise InputError(f"{label}: the top level must be a JSON object of keys; found {_kind_of(doc)}.")
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
    account.add(f"array {key!r} of shape {_shape_str(shape)} and dtype {dtype}", nbytes)
    if nbytes > file_size - header:
        raise InputError(f"{label}: array {key!r} declares shape {_shape_str(shape)} ({nbytes} bytes) "
                         f"but holds only {max(file_size - header, 0)} bytes (truncated or corrupted).")
    arr = np.empty(shape, dtype=dtype, order="F" if fortran else "C")
    view = memoryview(arr.reshape(-1, order="A").view(np.uint8)) if nbytes else memoryview(b"")
    got = 0
    while got < nbytes:
        n = fh.readinto(view[got:])
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

    fmt = _as_string(parts.get("format"))
    if fmt not in SPARSE_FORMATS:
        found = repr(fmt) if fmt is not None else _kind_of(parts.get("format"))
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
                raise ValueError(f"part {p!r} must be one-dimensional, found shape {_shape_str(a.shape)}")
        if len(shape) != 2 or min(shape) < 0:
            raise ValueError(f"shape must be two non-negative integers, found {list(shape)}")
        # each dimension becomes the length of vectors (and of the index pointer of a conversion)
        memory.require(label, f"sparse matrix {key!r} of shape {_shape_str(shape)} (vectors of its dimensions)",
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
        raise ValueError(f"shape must be a pair of whole numbers, found {_kind_of(value if isinstance(value, list) else arr)}")
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
            account.add(f"variable {name!r} of shape {_shape_str(shape)} ({cls})", need)
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


def flatten_arrays(data: dict) -> dict:
    """Arrays for ``numpy.savez``: sparse matrices under prefixed keys, strings as string arrays."""
    flat = {}
    for key, value in data.items():
        if _is_sparse(value):
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
    if _is_sparse(value):
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
    from optsolve.core.result import write_atomic, write_atomic_with

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
