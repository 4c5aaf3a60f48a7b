"""The memory budget: every size a problem file declares is checked against it before anything is allocated.

One budget bounds what an input may make optsolve allocate: the arrays a file declares (each
one and their total), the dimensions of sparse matrices (each becomes the length of vectors),
and values that a solver uses as sizes (group labels, numbers of clusters or draws). A file
that asks for more is refused with exit 7, naming the field and the size, before the
allocation happens.

The budget is, in order of precedence: the ``--memory-limit`` option of a command, the
environment variable ``OPTSOLVE_MEMORY_LIMIT``, or a quarter of this machine's physical
memory. Sizes are written as a number of bytes with an optional unit (``512M``, ``8GB``,
``1.5GiB``; units are powers of 1024) or as a percentage of physical memory (``50%``).
"""

from __future__ import annotations

import contextlib
import math
import os
import re

from optsolve.core.errors import InputError, ParameterError

ENV_VAR = "OPTSOLVE_MEMORY_LIMIT"
DEFAULT_FRACTION = 0.25
# Deepest nesting of lists and objects accepted in a problem file.
MAX_NESTING = 64

_UNITS = {"": 1, "B": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40, "P": 1 << 50}
_override: int | None = None


def physical_memory_bytes() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 << 30


def parse_size(text, what: str = "the memory limit") -> int:
    """Bytes from ``'512M'``, ``'8GB'``, ``'1.5GiB'``, ``'1e9'`` or ``'50%'`` (of physical memory)."""
    s = str(text).strip()
    m = re.fullmatch(r"([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*(%|[KMGTPkmgtp]?(?:i?[Bb])?)", s)
    if not m:
        raise ParameterError(f"{what} must be a size such as 512M, 8G or 50%; got {text!r}.")
    value, unit = float(m.group(1)), m.group(2)
    if unit == "%":
        if not 0 < value <= 100:
            raise ParameterError(f"{what} as a percentage must be in (0, 100]; got {text!r}.")
        return int(physical_memory_bytes() * value / 100)
    nbytes = value * _UNITS[unit[:1].upper() if unit[:1].upper() in _UNITS else ""]
    if not math.isfinite(nbytes) or nbytes < 1:
        raise ParameterError(f"{what} must be at least one byte; got {text!r}.")
    return int(nbytes)


def set_budget(limit) -> None:
    """Set the budget of this process (``None``: back to the environment or the default)."""
    global _override
    _override = None if limit is None else parse_size(limit, "The '--memory-limit' option")


@contextlib.contextmanager
def budget(limit):
    """The budget ``limit`` (a size, or ``None`` for no change) while the block runs, restored after."""
    global _override
    saved = _override
    try:
        if limit is not None:
            set_budget(limit)
        yield
    finally:
        _override = saved


def budget_bytes() -> int:
    """The memory budget in bytes (see the module's docstring)."""
    if _override is not None:
        return _override
    env = os.environ.get(ENV_VAR)
    if env:
        return parse_size(env, f"The environment variable {ENV_VAR}")
    return int(physical_memory_bytes() * DEFAULT_FRACTION)


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB", "PB"):
        if n < 1024 or unit == "PB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} PB"


def refusal(label: str, what: str, nbytes: float) -> InputError:
    limit = budget_bytes()
    return InputError(f"{label}: {what} needs {human_bytes(nbytes)}, more than the memory budget of "
                      f"{human_bytes(limit)} (raise it with --memory-limit or {ENV_VAR}).")


def require(label: str, what: str, nbytes: float) -> None:
    """Refuse (exit 7) when ``nbytes`` exceeds the budget; ``what`` names the field and its size."""
    if not nbytes <= budget_bytes():  # also catches NaN
        raise refusal(label, what, nbytes)


class Account:
    """A running total of declared bytes, refused as soon as it passes the budget."""

    def __init__(self, label: str):
        self.label = label
        self.total = 0
        self.limit = budget_bytes()

    def add(self, what: str, nbytes: float) -> None:
        if not nbytes <= self.limit:
            raise refusal(self.label, what, nbytes)
        self.total += int(nbytes)
        if self.total > self.limit:
            raise InputError(f"{self.label}: its arrays declare {human_bytes(self.total)} in all (the last, {what}, "
                             f"{human_bytes(nbytes)}), more than the memory budget of {human_bytes(self.limit)} "
                             f"(raise it with --memory-limit or {ENV_VAR}).")


def nesting_depth(value, limit: int = MAX_NESTING) -> int:
    """Depth of nested lists, tuples and dicts, counted without recursion; stops past ``limit``."""
    depth = 0
    level = [value]
    while level and depth <= limit:
        nxt = []
        for v in level:
            if isinstance(v, dict):
                nxt.extend(v.values())
            elif isinstance(v, (list, tuple)):
                nxt.extend(v)
        if not nxt and not any(isinstance(v, (dict, list, tuple)) for v in level):
            break
        depth += 1
        level = [v for v in nxt if isinstance(v, (dict, list, tuple))]
    return depth


def text_nesting_depth(text: str | bytes) -> int:
    """Deepest bracket nesting of JSON text, strings skipped, without parsing it (linear time, vectorised)."""
    import numpy as np

    data = text.encode("utf-8", "replace") if isinstance(text, str) else bytes(text)
    if b"[" not in data and b"{" not in data:
        return 0
    if b'"' in data:
        data = _JSON_STRING.sub(b'""', data)
    codes = np.frombuffer(data, dtype=np.uint8)
    step = (codes == ord("[")).astype(np.int32) + (codes == ord("{"))
    step -= (codes == ord("]")).astype(np.int32) + (codes == ord("}"))
    return int(np.cumsum(step).max(initial=0))


_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
