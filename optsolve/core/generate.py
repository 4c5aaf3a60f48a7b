"""Problem generators, for ``optsolve gen KIND --family NAME [options] --seed S -o FILE|-``.

Each solver's ``problems.FAMILIES`` maps a family name to a :class:`Family`: its
parameters (which become command-line options) and a function
``generate(rng, **params) -> dict`` of problem keys.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass(frozen=True)
class Param:
    name: str
    type: Any  # int, float, str, or a tuple of choices
    default: Any
    help: str = ""


@dataclass(frozen=True)
class Family:
    name: str
    help: str
    generate: Callable[..., dict]
    params: tuple[Param, ...] = field(default_factory=tuple)

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}
