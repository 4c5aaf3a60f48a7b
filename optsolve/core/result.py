"""Results, statuses, certificates and the JSON document every command writes.

A :class:`Result` serialises to one strict JSON document (schema
``optsolve.solution/1``): never ``NaN`` or ``Infinity`` (such values are written as
``null`` and named in ``message``). Vectors are written inline; matrices are kept in
``Result.arrays`` and written only to the ``--arrays`` file.
"""

from __future__ import annotations

import enum
import io
import json
import math
import os
import re
import secrets
import select
import stat
import tempfile
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from optsolve._version import __version__

SCHEMA_ID = "optsolve.solution/1"
VERIFICATION_SCHEMA_ID = "optsolve.verification/1"


class Status(str, enum.Enum):
    """Outcome of a solve (cvxpy's vocabulary with OSQP's split of the limits)."""

    OPTIMAL = "optimal"
    OPTIMAL_INACCURATE = "optimal_inaccurate"
    INFEASIBLE = "infeasible"
    UNBOUNDED = "unbounded"
    MAX_ITER = "max_iter"
    TIME_LIMIT = "time_limit"
    INTERRUPTED = "interrupted"
    NUMERICAL_ERROR = "numerical_error"
    INVALID_INPUT = "invalid_input"
    INTERNAL_ERROR = "internal_error"

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self]

    def __str__(self) -> str:
        return self.value


EXIT_CODES = {
    Status.OPTIMAL: 0,
    Status.INTERNAL_ERROR: 1,
    Status.INFEASIBLE: 3,
    Status.UNBOUNDED: 4,
    Status.MAX_ITER: 5,
    Status.TIME_LIMIT: 5,
    Status.OPTIMAL_INACCURATE: 6,
    Status.NUMERICAL_ERROR: 6,
    Status.INVALID_INPUT: 7,
    Status.INTERRUPTED: 130,  # the command line exits 128 + the signal's number (optsolve.core.signals)
}
USAGE_EXIT_CODE = 2

# From best to worst: the order `optsolve batch` uses to pick its exit code.
EXIT_CODE_SEVERITY = (0, 6, 5, 3, 4, 7, 1, 130)


def worst_exit_code(codes) -> int:
    """The most severe of several exit codes (0 when there are none)."""
    rank = {code: i for i, code in enumerate(EXIT_CODE_SEVERITY)}
    return max(codes, key=lambda c: rank.get(c, len(rank)), default=0)


@dataclass
class Check:
    """One certificate check: a recomputed quantity, its limit, and whether it holds.

    Three kinds, told apart by ``limit`` and ``holds``:

    * a bound (:meth:`at_most`, :meth:`at_least`): ``limit`` is a number, ``holds`` a boolean;
    * a requirement (:meth:`require`): ``limit`` is a short text saying what must be true
      (``"> 0"``, ``"true"``), ``holds`` a boolean;
    * information (:meth:`info`): ``limit`` and ``holds`` are both ``None``. It is reported, never
      counted as a check that holds: a statement that cannot be checked from the problem and the
      solution (an assumption of a method's guarantee, a number with no limit) is information.
    """

    name: str
    value: Any
    limit: float | str | None = None
    holds: bool | None = True
    note: str = ""

    def __post_init__(self):
        if self.limit is None and self.holds is not None:
            self.limit = "true"  # a judged condition always says what it was judged against

    @classmethod
    def at_most(cls, name: str, value, limit: float, note: str = "") -> "Check":
        """Holds when ``value <= limit``; a missing or non-finite value never holds."""
        ok = _finite(value) and float(value) <= limit
        return cls(name, _scalar(value), float(limit), bool(ok), note)

    @classmethod
    def at_least(cls, name: str, value, limit: float, note: str = "") -> "Check":
        """Holds when ``value >= limit``; a missing or non-finite value never holds."""
        ok = _finite(value) and float(value) >= limit
        return cls(name, _scalar(value), float(limit), bool(ok), note)

    @classmethod
    def require(cls, name: str, value, ok: bool, expected: str = "true", note: str = "") -> "Check":
        """A condition that must be true; ``expected`` says what (``"> 0"``, ``"true"``)."""
        return cls(name, _scalar(value), str(expected), bool(ok), note)

    @classmethod
    def info(cls, name: str, value, note: str = "") -> "Check":
        """A reported quantity with no limit attached: neither holds nor fails."""
        return cls(name, _scalar(value), None, None, note)

    @property
    def is_info(self) -> bool:
        return self.holds is None

    def to_dict(self) -> dict:
        d = {"name": self.name, "value": self.value, "limit": self.limit, "holds": self.holds}
        if self.note:
            d["note"] = self.note
        return d


def _finite(value) -> bool:
    """A finite real number (not a boolean, not a string that reads as one)."""
    if value is None or isinstance(value, (str, bytes, bool, np.bool_, list, tuple, dict)):
        return False
    try:
        return math.isfinite(float(value))
    except (TypeError, ValueError, OverflowError):
        return False


@dataclass
class Certificate:
    """The checks recomputed from the problem and the returned solution only.

    It holds when every check that can hold does, and there is at least one such check;
    information lines count for neither.
    """

    checks: list[Check] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        judged = [c.holds for c in self.checks if c.holds is not None]
        return bool(judged) and all(judged)

    def failed(self) -> list[Check]:
        return [c for c in self.checks if c.holds is False]

    def __getitem__(self, name: str) -> Check:
        for c in self.checks:
            if c.name == name:
                return c
        raise KeyError(name)

    def to_dict(self) -> dict:
        return {"holds": self.holds, "checks": [c.to_dict() for c in self.checks]}

    def describe_failures(self) -> str:
        parts = []
        for c in self.failed():
            if isinstance(c.limit, (int, float)) and not isinstance(c.limit, bool):
                side = "<" if _finite(c.value) and float(c.value) < c.limit else ">"
                limit = f" {side} limit {c.limit:.3g}"
            elif c.limit is not None:
                limit = f" (expected {c.limit})"
            else:
                limit = ""
            parts.append(f"{c.name} = {_fmt(c.value)}{limit}")
        if not parts and not self.holds:
            return "no check could be made"
        return "; ".join(parts)


@dataclass(frozen=True)
class Limit:
    """A tolerance or threshold that a certificate is judged against.

    ``name`` is the solve command's parameter (``eps_abs`` for ``--eps-abs``), so that ``optsolve
    verify`` takes the same option; ``public``, where given, is the option's spelling in ``--help``
    (``objective_rtol`` for qp's ``obj_rtol``, whose own spelling stays a hidden alias). ``looser`` says which way a value is more lenient: ``"larger"``
    for a tolerance, ``"smaller"`` for a required level. ``default`` is the documented value that
    verify uses when neither its options nor the problem file set one.
    """

    name: str
    default: float | None
    looser: str = "larger"
    doc: str = ""
    public: str = ""

    @property
    def option(self) -> str:
        return "--" + (self.public or self.name).replace("_", "-")

    def is_looser(self, value, than) -> bool:
        """Whether ``value`` is more lenient than ``than`` (a value that is not a finite number is)."""
        value, than = (int(v) if isinstance(v, (bool, np.bool_)) else v for v in (value, than))  # flags: 0, 1
        if not _finite(value):
            return True
        if than is None:
            return False
        return float(value) > float(than) if self.looser == "larger" else float(value) < float(than)


@dataclass
class ProblemInfo:
    path: str | None = None
    sha256: str | None = None
    size: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return {"path": self.path, "sha256": self.sha256, "size": dict(self.size)}


def joined(message: str, text: str) -> str:
    """``message`` with the sentence ``text`` appended (a document's and a method's message grow alike)."""
    return f"{message} {text}".strip() if message else text


@dataclass
class Result:
    """What a solve returns; ``to_json`` gives the document the command line writes.

    ``qualifier``: what the status is relative to, when the answer is to another problem than the one
    the file states (a regularised one), and how far it is from the stated one, in a few words that the
    summary line and the terminal view print after the status; empty when the answer is to the stated
    problem (written as ``null``)."""

    command: str
    method: str | None
    status: Status
    message: str = ""
    problem: ProblemInfo | None = None
    objective: float | None = None
    solution: dict | None = None
    certificate: Certificate | None = None
    stats: dict = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)
    qualifier: str = ""

    def __post_init__(self):
        self.status = Status(self.status)

    @property
    def exit_code(self) -> int:
        return self.status.exit_code

    def attach_certificate(self, certificate: Certificate) -> None:
        """Store the certificate; a claimed ``optimal`` whose checks fail becomes ``optimal_inaccurate``."""
        self.certificate = certificate
        if self.status is Status.OPTIMAL and not certificate.holds:
            self.status = Status.OPTIMAL_INACCURATE
            self.add_message(f"Certificate checks failed: {certificate.describe_failures()}.")

    def add_message(self, text: str) -> None:
        self.message = joined(self.message, text)

    def to_dict(self, arrays_path: str | None = None) -> dict:
        nonfinite: list[str] = []
        doc = {
            "schema": SCHEMA_ID,
            "optsolve_version": __version__,
            "command": self.command,
            "method": self.method,
            "status": self.status.value,
            "qualifier": self.qualifier or None,
            "message": self.message,
            "problem": self.problem.to_dict() if self.problem else None,
            "objective": to_jsonable(self.objective, "objective", nonfinite),
            "solution": to_jsonable(self.solution, "solution", nonfinite),
            "certificate": to_jsonable(
                self.certificate.to_dict() if self.certificate else None, "certificate", nonfinite
            ),
            "stats": to_jsonable(common_stats(self.stats), "stats", nonfinite),
            "settings": to_jsonable(self.settings, "settings", nonfinite),
        }
        if self.arrays:
            doc["arrays"] = {"path": arrays_path, "keys": {k: _array_info(v) for k, v in self.arrays.items()}}
        if nonfinite:
            shown = ", ".join(nonfinite[:5]) + (f" and {len(nonfinite) - 5} more" if len(nonfinite) > 5 else "")
            note = f"Non-finite values written as null: {shown}."
            doc["message"] = f"{doc['message']} {note}".strip()
        return doc

    def to_json(self, arrays_path: str | None = None, indent: int | None = 2) -> str:
        return dumps(self.to_dict(arrays_path), indent=indent)


# Keys every document's stats has (null where a method does not count them), method-specific ones beside:
# iterations, evaluations (what the method counts as work: README's vocabulary table), and the times
STATS_KEYS = ("iterations", "evaluations")
TIME_KEYS = ("load", "prepare", "solve", "certificate", "total")


def common_stats(stats: dict) -> dict:
    """``stats`` with :data:`STATS_KEYS` first and ``time_s`` holding :data:`TIME_KEYS` (None where missing)."""
    out = {k: stats.get(k) for k in STATS_KEYS}
    out.update((k, v) for k, v in stats.items() if k not in STATS_KEYS)
    times = stats.get("time_s") or {}
    out["time_s"] = {**{k: times.get(k) for k in TIME_KEYS}, **times}
    return out


_PLAIN = {int, float, str, bool, type(None)}


def dumps(doc, indent: int | None = 2) -> str:
    """Strict JSON text (raises ValueError on NaN/Infinity, which ``to_jsonable`` removes). Indented, a
    list of plain values (numbers, strings, booleans, null) stays on one line, written by the C encoder:
    one entry per line made a million-entry list 20 MB and ten times slower to write."""
    if not indent:
        return json.dumps(doc, allow_nan=False, separators=(",", ":"))
    flat = []
    tag = f"\u0000flat{secrets.token_hex(4)}:"  # no string of the document holds a NUL character and this tag

    def pulled(obj):
        if isinstance(obj, dict):
            return {k: pulled(v) for k, v in obj.items()}
        if isinstance(obj, (list, tuple)):
            if obj and set(map(type, obj)) <= _PLAIN:
                flat.append(json.dumps(obj, allow_nan=False, separators=(", ", ": ")))
                return f"{tag}{len(flat) - 1}"
            return [pulled(v) for v in obj]
        return obj

    text = json.dumps(pulled(doc), indent=indent, allow_nan=False, separators=(",", ": "))
    if not flat:
        return text
    quoted = json.dumps(tag)[1:-1]
    return re.sub('"' + re.escape(quoted) + r'(\d+)"', lambda m: flat[int(m.group(1))], text)


def to_jsonable(obj, path: str = "", nonfinite: list | None = None):
    """Plain JSON values from numpy scalars/vectors, dicts, lists and enums.

    Non-finite floats become ``None``; their paths are appended to ``nonfinite``.
    Arrays of two or more dimensions are refused: matrices belong in ``Result.arrays``.
    """
    if nonfinite is None:
        nonfinite = []
    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, enum.Enum):
        return obj.value
    if isinstance(obj, (int, np.integer)) and not isinstance(obj, np.bool_):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    if isinstance(obj, (float, np.floating)):
        x = float(obj)
        if math.isfinite(x):
            return x
        nonfinite.append(f"{path} ({x})")
        return None
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v, f"{path}.{k}", nonfinite) for k, v in obj.items()}
    if isinstance(obj, np.ndarray):
        if obj.ndim > 1:
            raise TypeError(f"{path}: a {obj.ndim}-d array cannot be written inline; put it in Result.arrays")
        if obj.dtype.kind == "f":
            finite = np.isfinite(obj)
            if not finite.all():
                bad = np.flatnonzero(~finite)
                nonfinite.append(f"{path}[{bad[0]}] ({obj[bad[0]]})" + (f" and {bad.size - 1} more entries" if bad.size > 1 else ""))
                return [float(v) if ok else None for v, ok in zip(obj.tolist(), finite.tolist())]
        if obj.dtype.kind in "fiub":
            return obj.tolist()
        return [to_jsonable(v, f"{path}[{i}]", nonfinite) for i, v in enumerate(obj.tolist())]
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v, f"{path}[{i}]", nonfinite) for i, v in enumerate(obj)]
    if type(obj).__module__.split(".")[0] == "cupy":
        from optsolve.core.backend import to_numpy

        return to_jsonable(to_numpy(obj), path, nonfinite)
    raise TypeError(f"{path}: cannot write an object of type {type(obj).__name__} to JSON")


class LazyArray:
    """An array computed when first used: written (``--arrays``), called, converted (``numpy.asarray``),
    indexed, or asked for an attribute the array has (``.sum``, ``.toarray``); then kept."""

    def __init__(self, shape, dtype, compute, format: str | None = None):
        self.shape, self.dtype, self._compute, self.format = tuple(shape), np.dtype(dtype), compute, format
        self._value = None

    def __call__(self):
        if self._value is None:
            self._value = self._compute()
        return self._value

    def __array__(self, dtype=None, copy=None):
        value = self()
        if hasattr(value, "toarray"):
            value = value.toarray()
        return np.asarray(value, dtype=dtype)

    def __getitem__(self, key):
        return self()[key]

    def __getattr__(self, name):  # only for names the proxy lacks
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self(), name)


def _array_info(value) -> dict:
    info = {"shape": [int(s) for s in value.shape], "dtype": str(value.dtype)}
    if isinstance(value, LazyArray) and not value.format:  # a dense array is described without computing it
        return info
    if hasattr(value, "nnz"):
        info.update(format=value.format, nnz=int(value.nnz))
    elif getattr(value, "format", None):
        info["format"] = value.format
    return info


def _scalar(value):
    if isinstance(value, (np.generic,)):
        return value.item()
    return value


def _fmt(value) -> str:
    if isinstance(value, float):
        return f"{value:.3g}"
    return str(value)


def write_atomic(path: str, data: str | bytes) -> None:
    """Write a file so that readers see either the old file or the whole new one."""
    write_atomic_with(path, lambda f: f.write(data.encode() if isinstance(data, str) else data))


def is_special(path: str) -> bool:
    """Whether ``path`` is written in place, never renamed over: it exists and is neither a regular file nor
    a directory (a device, a FIFO, a socket), or it names a descriptor this process has open."""
    if open_descriptor(path) is not None:
        return True
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return False
    return not (stat.S_ISREG(mode) or stat.S_ISDIR(mode))


_DESCRIPTOR_PATH = re.compile(r"/dev/(?:fd/(?P<fd>\d+)|(?P<name>stdout|stderr))|/proc/self/fd/(?P<self>\d+)")


def open_descriptor(path: str) -> int | None:
    """The descriptor that ``path`` names (``/dev/stdout``, ``/dev/stderr``, ``/dev/fd/N``,
    ``/proc/self/fd/N``) when it is open in this process, else None. Opened by name, such a path is the
    file behind the descriptor (``> log`` makes it a regular file, which a rename or a truncating open
    would replace); written through the descriptor, it goes where the shell sent it (``>> log`` appends)."""
    try:
        match = _DESCRIPTOR_PATH.fullmatch(os.path.normpath(os.path.abspath(path)))
    except (TypeError, ValueError):
        return None
    if match is None:
        return None
    fd = {"stdout": 1, "stderr": 2}.get(match["name"]) if match["name"] else int(match["fd"] or match["self"])
    try:
        os.fstat(fd)
    except OSError:
        return None
    return fd


def write_all(fd: int, data) -> None:
    """All of ``data`` to descriptor ``fd`` by ``os.write`` until every byte is out: a write interrupted by a
    signal is resumed where it stopped (PEP 475 retries EINTR; a partial write continues), where CPython's
    buffered writer drops the rest."""
    data = memoryview(data)
    while data:
        try:
            data = data[os.write(fd, data):]
        except BlockingIOError:  # a non-blocking descriptor: wait until the reader makes room
            select.select([], [fd], [])


def write_atomic_with(path: str, writer) -> None:
    """Call ``writer(binary_file)`` on a temporary file beside ``path``, then rename it into place.

    A ``path`` that is a device or a FIFO (``/dev/null``, a named pipe) is written in place instead, and
    one that names an open descriptor (``/dev/stdout``) through that descriptor, from bytes made whole in
    memory first: renaming would replace the device, or the file the shell opened, with a new file.
    A symbolic link is written through (its target is replaced, the link stays)."""
    if is_special(path):
        buffer = io.BytesIO()
        writer(buffer)
        fd = open_descriptor(path)
        if fd is not None:
            write_all(fd, buffer.getbuffer())
            return
        with open(path, "wb") as f:
            f.write(buffer.getbuffer())
        return
    path = os.path.realpath(path)
    directory = os.path.dirname(path)
    fd, tmp = tempfile.mkstemp(prefix=".optsolve-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            writer(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def solution_vector(solution: dict, key: str, size: int) -> np.ndarray:
    """A vector of a solution document as float64 (null entries become NaN), of length ``size``.

    Raises KeyError when it is missing and ValueError when its length is wrong (certificates
    turn both into a failed check).
    """
    values = solution.get(key)
    if values is None:
        raise KeyError(f"solution has no {key!r}")
    if isinstance(values, (str, bytes, dict)) or not hasattr(values, "__len__"):
        raise ValueError(f"solution {key!r} must be a list of {size} numbers; found {type(values).__name__}")
    arr = np.array(values, dtype=np.float64)  # null (None) entries convert to NaN
    if arr.ndim != 1:
        raise ValueError(f"solution {key!r} must be a flat list of {size} numbers; found nested lists of shape "
                         f"{arr.shape}")
    if arr.shape != (size,):
        raise ValueError(f"solution {key!r} has {arr.size} entries, expected {size}")
    return arr
