"""Truncation sets described as data, and the membership oracle that counts its calls.

A set is a JSON object (in a ``.npz`` problem file: the same object as a JSON string):

* ``{"type": "box", "lo": [...], "hi": [...]}``: lo <= x <= hi coordinatewise (``null``
  for an unbounded side);
* ``{"type": "ball", "center": [...], "radius": r}``: ||x - center|| <= r;
* ``{"type": "halfspace", "a": [...], "b": b}``: a . x <= b;
* ``{"type": "polytope", "A": [[...], ...], "b": [...]}``: A x <= b;
* ``{"type": "union" | "intersection", "sets": [set, ...]}`` and
  ``{"type": "complement", "set": set}``.

Every set is checked when the problem is read (its type, its keys, the lengths of its
vectors against the dimension d) with the path of the offending part in the message, for
example ``set.sets[1].lo``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from optsolve.core.errors import InputError

TYPES = ("box", "ball", "halfspace", "polytope", "union", "intersection", "complement")
BATCH = 65536  # rows per call of a membership test
POLYTOPE_BLOCK = 1 << 22  # entries of X A' a polytope's test forms at once


class SetError(ValueError):
    """A malformed set description (the message names the part)."""


def _vector(desc: dict, key: str, path: str, d: int, allow_null: bool = False) -> np.ndarray:
    if key not in desc:
        raise SetError(f"'{path}' of type {desc['type']!r} lacks key {key!r}")
    value = desc[key]
    if np.isscalar(value) and not isinstance(value, str):
        value = [value] * d
    if not isinstance(value, (list, tuple, np.ndarray)):
        raise SetError(f"'{path}.{key}' must be a list of {d} numbers; found {type(value).__name__}")
    vals = list(np.asarray(value, dtype=object).ravel()) if isinstance(value, np.ndarray) else list(value)
    if len(vals) != d:
        raise SetError(f"'{path}.{key}' has length {len(vals)}; expected d = {d}")
    out = np.empty(d)
    for i, v in enumerate(vals):
        if v is None and allow_null:
            out[i] = np.nan
        elif isinstance(v, (int, float, np.integer, np.floating)) and not isinstance(v, bool) and np.isfinite(v):
            out[i] = float(v)
        else:
            raise SetError(f"'{path}.{key}[{i}]' is {v!r}; expected a finite number"
                           + (" or null" if allow_null else ""))
    return out


def _number(desc: dict, key: str, path: str) -> float:
    if key not in desc:
        raise SetError(f"'{path}' of type {desc['type']!r} lacks key {key!r}")
    v = desc[key]
    if isinstance(v, (list, tuple)) and len(v) == 1:
        v = v[0]
    if not isinstance(v, (int, float, np.integer, np.floating)) or isinstance(v, bool) or not np.isfinite(v):
        raise SetError(f"'{path}.{key}' is {v!r}; expected a finite number")
    return float(v)


@dataclass(frozen=True)
class TruncationSet:
    """A parsed set: ``contains(X)`` for an (N, d) array gives N booleans."""

    kind: str
    contains: Callable[[np.ndarray], np.ndarray]
    description: dict


def parse_set(desc, d: int, path: str = "set") -> TruncationSet:
    """Check a set description against dimension d; raise :class:`SetError` naming the part."""
    if not isinstance(desc, dict):
        raise SetError(f"'{path}' must be an object with a 'type'; found {type(desc).__name__}")
    kind = desc.get("type")
    if kind not in TYPES:
        raise SetError(f"'{path}.type' is {kind!r}; expected one of {', '.join(TYPES)}")
    allowed = {"box": {"lo", "hi"}, "ball": {"center", "radius"}, "halfspace": {"a", "b"},
               "polytope": {"A", "b"}, "union": {"sets"}, "intersection": {"sets"}, "complement": {"set"}}[kind]
    unknown = sorted(set(desc) - allowed - {"type"})
    if unknown:
        raise SetError(f"'{path}' of type {kind!r} has unknown key {unknown[0]!r}; expected {', '.join(sorted(allowed))}")
    if kind == "box":
        lo = _vector(desc, "lo", path, d, allow_null=True)
        hi = _vector(desc, "hi", path, d, allow_null=True)
        lo = np.where(np.isnan(lo), -np.inf, lo)
        hi = np.where(np.isnan(hi), np.inf, hi)
        bad = np.flatnonzero(lo > hi)
        if bad.size:
            raise SetError(f"'{path}' has lo[{bad[0]}] = {lo[bad[0]]:g} > hi[{bad[0]}] = {hi[bad[0]]:g}: the box is empty")
        return TruncationSet(kind, lambda X: np.all((X >= lo) & (X <= hi), axis=1), desc)
    if kind == "ball":
        c = _vector(desc, "center", path, d)
        r = _number(desc, "radius", path)
        if r <= 0:
            raise SetError(f"'{path}.radius' is {r:g}; expected a positive number")
        return TruncationSet(kind, lambda X: ((X - c) ** 2).sum(axis=1) <= r * r, desc)
    if kind == "halfspace":
        a = _vector(desc, "a", path, d)
        b = _number(desc, "b", path)
        if not np.any(a):
            raise SetError(f"'{path}.a' is zero; expected a nonzero normal")
        return TruncationSet(kind, lambda X: X @ a <= b, desc)
    if kind == "polytope":
        if "A" not in desc or "b" not in desc:
            raise SetError(f"'{path}' of type 'polytope' needs keys 'A' (rows of length d) and 'b'")
        try:
            A = np.asarray(desc["A"], dtype=float)
        except (TypeError, ValueError):
            raise SetError(f"'{path}.A' must be a matrix of numbers") from None
        if A.ndim != 2 or A.shape[1] != d or A.shape[0] < 1:
            raise SetError(f"'{path}.A' has shape {A.shape}; expected (rows, d = {d})")
        if not np.isfinite(A).all():
            raise SetError(f"'{path}.A' holds non-finite values")
        b = _vector(desc, "b", path, A.shape[0])
        step = max(1, POLYTOPE_BLOCK // A.shape[0])  # rows per product: at most POLYTOPE_BLOCK entries of X A'

        def inside(X):
            out = np.empty(X.shape[0], dtype=bool)
            for a in range(0, X.shape[0], step):
                out[a:a + step] = np.all(X[a:a + step] @ A.T <= b, axis=1)
            return out

        return TruncationSet(kind, inside, desc)
    if kind == "complement":
        if "set" not in desc:
            raise SetError(f"'{path}' of type 'complement' lacks key 'set'")
        inner = parse_set(desc["set"], d, f"{path}.set")
        return TruncationSet(kind, lambda X: ~inner.contains(X), desc)
    parts = desc.get("sets")
    if not isinstance(parts, list) or not parts:
        raise SetError(f"'{path}.sets' must be a non-empty list of sets")
    inner = [parse_set(p, d, f"{path}.sets[{i}]") for i, p in enumerate(parts)]
    union = kind == "union"

    def combined(X):  # one running vector, however many parts
        out = np.asarray(inner[0].contains(X), dtype=bool).copy()
        for part in inner[1:]:
            if union:
                out |= part.contains(X)
            else:
                out &= part.contains(X)
        return out

    return TruncationSet(kind, combined, desc)


def load_oracle(spec: str) -> Callable[[np.ndarray], np.ndarray]:
    """The user's vectorised membership function named ``module:function``."""
    from optsolve.core.registry import load_user_function

    return load_user_function(spec, "oracle")[0]


class Oracle:
    """Membership queries in the original coordinates, counted (one call per point asked).

    ``fn``: a parsed set's ``contains`` or a user function (N x d array -> N booleans); ``shift``
    and ``scale`` map the solver's (whitened) points back, x = shift + z @ scale.T."""

    def __init__(self, fn, shift=None, scale=None, label: str = "the truncation set"):
        self.fn = fn
        self.shift = shift
        self.scale = scale
        self.calls = 0
        self.label = label

    def __call__(self, Z: np.ndarray) -> np.ndarray:
        X = Z if self.scale is None else Z @ self.scale.T
        if self.shift is not None:
            X = X + self.shift
        return self.original(X)

    def original(self, X: np.ndarray) -> np.ndarray:
        """The answers for points already in the original coordinates (counted alike)."""
        out = np.empty(X.shape[0], dtype=bool)
        for a in range(0, X.shape[0], BATCH):
            block = X[a:a + BATCH]
            got = np.asarray(self.fn(block))
            if got.shape != (block.shape[0],):
                raise InputError(f"{self.label}: the membership function returned shape {got.shape} for "
                                 f"{block.shape[0]} points; expected ({block.shape[0]},) booleans.")
            out[a:a + block.shape[0]] = got.astype(bool)
        self.calls += X.shape[0]
        return out
