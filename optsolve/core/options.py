"""Options declared as data, checked by one validator with one message shape.

Each solver package declares its options' ranges in an ``OPTIONS`` tuple of :class:`Option` (after
scikit-learn's ``_param_validation``: constraints as data, one validator, tests that try every declared
bound); :func:`check` turns the values given into checked ones, or raises the one message shape every
command speaks: ``The '--max-iter' option must be an integer >= 1; got 0.`` Rules that tie options
together (one excludes another, one applies to some methods) stay with the package.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

from optsolve.core.errors import ParameterError


@dataclass(frozen=True)
class Option:
    """One option's range: ``kind`` 'float', 'int' or 'choice'; the bounds ``low``/``high`` (None: none), each
    excluded where ``*_open``; ``choices`` of a 'choice'; ``words``: literal values also accepted (``'auto'``;
    such an option also reads a number from text). None always passes (the option not given)."""

    name: str
    kind: str = "float"
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple = ()
    words: tuple = ()

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    def describe(self) -> str:
        """What the option must be, in words (``a float in (0, 2)``, ``an integer >= 1``, ``one of a, b``)."""
        if self.kind == "choice":
            return "one of " + ", ".join(str(c) for c in self.choices)
        noun = "an integer" if self.kind == "int" else "a float"
        if self.low is not None and self.high is not None:
            text = (f"{noun} in {'(' if self.low_open else '['}{_num(self.low)}, {_num(self.high)}"
                    f"{')' if self.high_open else ']'}")
        elif self.low is not None:
            text = f"{noun} {'>' if self.low_open else '>='} {_num(self.low)}"
        elif self.high is not None:
            text = f"{noun} {'<' if self.high_open else '<='} {_num(self.high)}"
        else:
            text = f"a finite {noun.split()[1]}"
        return " or ".join([*(repr(w) for w in self.words), text]) if self.words else text

    def check(self, value):
        """``value`` checked and converted (an int, a float, a choice, a word); None stays None."""
        if value is None or (self.words and isinstance(value, str) and value in self.words):
            return value
        if self.kind == "choice":
            if value not in self.choices:
                self._refuse(value)
            return value
        if isinstance(value, bool) or (isinstance(value, str) and not self.words):
            self._refuse(value)  # an option that also takes words ('auto') takes its numbers as text too
        if self.kind == "int" and isinstance(value, numbers.Integral):  # exact, however large (a seed)
            if not self._within(value):
                self._refuse(value)
            return int(value)
        try:
            x = float(value)
        except (TypeError, ValueError):
            self._refuse(value)
        if not math.isfinite(x) or (self.kind == "int" and x != int(x)) or not self._within(x):
            self._refuse(value)
        return int(x) if self.kind == "int" else x

    def _within(self, x) -> bool:
        """Whether the number ``x`` lies in the declared range."""
        return not ((self.low is not None and (x < self.low or (self.low_open and x == self.low)))
                    or (self.high is not None and (x > self.high or (self.high_open and x == self.high))))

    def outside(self) -> list:
        """Values just outside the declared range (for tests that try every bound)."""
        if self.kind == "choice":
            return ["no-such-choice"]
        out = ["text", math.nan, math.inf]
        for bound, is_open, step in ((self.low, self.low_open, -1), (self.high, self.high_open, 1)):
            if bound is not None and math.isfinite(bound):
                out.append(bound if is_open else bound + step * (1 if self.kind == "int" else max(1e-9, abs(bound))))
        if self.kind == "int":
            out.append((self.low if self.low is not None and not self.low_open else 1) + 0.5)
        return out

    def _refuse(self, value):
        raise ParameterError(f"The '{self.flag}' option must be {self.describe()}; got {value!r}.")


def _num(x: float) -> str:
    if isinstance(x, int) and x >= 1 << 20 and x & (x - 1) == 0:
        return f"2^{x.bit_length() - 1}"  # a power of two, as a seed's range is stated
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else f"{x:g}"


def check(declared: tuple, values: dict) -> dict:
    """Every declared option of ``values`` checked (:meth:`Option.check`); the others are returned as they are."""
    out = dict(values)
    for option in declared:
        if option.name in out:
            out[option.name] = option.check(out[option.name])
    return out


def positive(name: str) -> Option:
    """A float in (0, inf)."""
    return Option(name, low=0, high=math.inf, low_open=True, high_open=True)


def count(name: str, least: int = 1) -> Option:
    """An integer >= ``least``."""
    return Option(name, "int", low=least)
