"""Problem schemas: every solver declares a :class:`Schema` (required and optional keys, their
shapes, dtypes, finiteness, signs and cross-key rules), and :meth:`Schema.validate` checks a
problem's data against it before any solver runs. Every failure is an :class:`InputError` whose
one-line message names the file and the key, says what was expected and what was found.

The files themselves are read and written by :mod:`optsolve.core.files`.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

from optsolve.core import memory
from optsolve.core.errors import InputError
from optsolve.core.progress import get_logger
from optsolve.core.result import ProblemInfo


def memory_limit_bytes() -> int:
    """The memory budget (:mod:`optsolve.core.memory`): the most a problem file may make optsolve allocate."""
    return memory.budget_bytes()


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
    float32: bool = False  # a float32 array stays float32 (no float64 copy); other floats become float64
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

    Each rule is a callable ``rule(problem)`` that raises ``problem.error(...)``. ``marks``: the keys whose
    presence identifies a file of this schema (default: the required keys), so that a file given to another
    command is recognised (:func:`optsolve.core.registry.recognise`). ``reads_mps``: whether a QPS / MPS file
    (read by :mod:`optsolve.core.mps` into a quadratic program's keys) is a problem of this schema.
    """

    name: str
    fields: tuple[Field, ...]
    rules: tuple[Callable[["Problem"], None], ...] = ()
    marks: tuple[str, ...] | None = None
    reads_mps: bool = False

    @property
    def known(self) -> set[str]:
        return {f.name for f in self.fields}

    @property
    def identifying_keys(self) -> tuple[str, ...]:
        return self.marks if self.marks is not None else tuple(f.name for f in self.fields if f.required)

    def fits(self, keys) -> bool:
        """Whether a file with ``keys`` recognisably is one of this schema: its identifying keys are there
        and every key is one of this schema's."""
        keys = set(keys)
        return bool(self.identifying_keys) and set(self.identifying_keys) <= keys <= self.known

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name:
                return f
        raise KeyError(name)

    def validate(self, raw: dict, source: str, path: str | None = None, sha256: str | None = None,
                 log: bool = True) -> "Problem":
        """Check raw values (as read from a file, or given in Python) and return a :class:`Problem`;
        the unknown keys' warnings are logged once the problem passes, unless ``log`` is false (they stay
        in ``Problem.warnings``): a refused file gets its one error line only."""
        problem = Problem(source=source, path=path, sha256=sha256)
        known = self.known
        unknown = [f"ignoring unknown key {key!r} (known keys: {', '.join(sorted(known))})."
                   for key in raw if key not in known]
        problem.warnings.extend(unknown)
        for f in self.fields:
            value = raw.get(f.name)
            if value is None:
                if f.required:
                    raise problem.error(f"missing required key {f.name!r} ({f.describe()}).")
                continue
            problem.data[f.name] = _coerce(problem, f, value)
        for rule in self.rules:
            rule(problem)
        for msg in unknown if log else ():
            get_logger().warning(f"{source}: {msg}")
        return problem


@dataclass
class Problem:
    """A validated problem: arrays and values by key, the bound dimension symbols, provenance, and ``facts``: what
    its validation measured that a solver may read instead of measuring again."""

    source: str
    path: str | None = None
    sha256: str | None = None
    data: dict = field(default_factory=dict)
    dims: dict = field(default_factory=dict)
    dim_origin: dict = field(default_factory=dict)
    warnings: list = field(default_factory=list)
    facts: dict = field(default_factory=dict)

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


def shape_text(shape) -> str:
    return "(" + ", ".join(str(int(s)) for s in shape) + ("," if len(shape) == 1 else "") + ")"


def _coerce(problem: Problem, f: Field, value):
    if f.kind == "object":
        text = as_string(value) if not isinstance(value, (dict, list)) else None
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
            raise problem.error(f"key {f.name!r} must be {f.describe()}; found {kind_of(value)}.")
        depth = memory.nesting_depth(value)
        if depth > memory.MAX_NESTING:
            raise problem.error(f"key {f.name!r} is nested more than {memory.MAX_NESTING} levels deep.")
        return value
    if f.kind == "string":
        text = as_string(value)
        if text is None:
            raise problem.error(f"key {f.name!r} must be a string; found {kind_of(value)}.")
        if f.choices and text not in f.choices:
            raise problem.error(f"key {f.name!r} is {text!r}, expected one of "
                                f"{', '.join(map(repr, f.choices))}.")
        return text
    if f.kind == "scalar":
        arr = _as_numeric(problem, f, value)
        if arr.size != 1:
            raise problem.error(f"key {f.name!r} must be a single number; found an array of shape "
                                f"{shape_text(arr.shape)}.")
        arr = arr.reshape(())
        _check_values(problem, f, arr)
        return arr.item()
    # arrays
    if is_sparse(value):
        if not f.sparse:
            value = _densify(problem, f, value)
        else:
            _check_ndim_shape(problem, f, value.shape)
            _check_values(problem, f, value.data, sparse=True)
            if value.format == "coo" and f.dtype == "float" and value.dtype != np.float64:
                value = value.tocsr()  # the same matrix: COO's astype sums its duplicates by a sort, CSR's by rows
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


def is_sparse(value) -> bool:
    return type(value).__module__.startswith("scipy.sparse")


def _densify(problem, f, value):
    nbytes = 8 * math.prod(value.shape)
    memory.require(problem.source, f"array {f.name!r} (sparse, shape {shape_text(value.shape)}) as a dense array",
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


def as_string(value) -> str | None:
    if isinstance(value, str):
        return value
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, np.ndarray) and value.dtype.kind in "US" and value.size == 1:
        item = value.reshape(()).item()
        return item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
    return None


def kind_of(value) -> str:
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
        return f"an array of dtype {value.dtype} and shape {shape_text(value.shape)}"
    return f"a value of type {type(value).__name__}"


def _as_numeric(problem: Problem, f: Field, value) -> np.ndarray:
    what = "a number" if f.kind == "scalar" else "an array of numbers"
    if isinstance(value, (str, bytes, dict)) or isinstance(value, (bool, np.bool_)) and f.dtype != "bool":
        raise problem.error(f"key {f.name!r} must be {what}; found {kind_of(value)}.")
    if isinstance(value, list):
        bad = _first_non_number(value, allow_bool=f.dtype == "bool")
        if bad:
            raise problem.error(f"array {f.name!r} must hold only numbers; found {kind_of(bad[0])}.")
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
                found = (f"holds {kind_of(big)}, too large for {f.dtype} values" if big is not None
                         else "must hold only numbers; found Python objects")
                raise problem.error(f"array {f.name!r} {found}.") from None
        if arr.dtype.kind in "US":
            raise problem.error(f"array {f.name!r} must hold only numbers; found {kind_of(arr)}.")
        if arr.size == 0 and arr.ndim == 1 and f.dtype == "float":
            arr = arr.astype(np.float64)
    elif isinstance(value, (bool, int, float, np.generic)):
        arr = np.asarray(value)
    elif isinstance(value, np.ndarray):
        arr = value
    else:
        raise problem.error(f"key {f.name!r} must be {what}; found {kind_of(value)}.")
    kind = arr.dtype.kind
    if kind in "US":
        raise problem.error(f"key {f.name!r} must be {what}; found {kind_of(arr)}.")
    if kind == "c":
        raise problem.error(f"array {f.name!r} is complex ({arr.dtype}); expected real {f.dtype} values.")
    if kind not in "biuf":
        raise problem.error(f"array {f.name!r} has dtype {arr.dtype}; expected {f.dtype} values.")
    if f.dtype == "float":
        return arr if f.float32 and arr.dtype == np.float32 else arr.astype(np.float64, copy=False)
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
                            f"(shape {shape_text(shape)}), expected {want}.")
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
                    mismatch = f" to match {origin!r} {shape_text(oshape)}"
            elif want in own:
                expected.append(own[want])
                if got != own[want] and mismatch is None:
                    mismatch = f" (its dimensions named {want!r} must be equal)"
            else:
                own[want] = got
                expected.append(got)
    if mismatch is not None:
        raise problem.error(f"array {f.name!r} has shape {shape_text(shape)}, expected "
                            f"{shape_text(expected)}{mismatch}.")
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
