"""Problem generators, for ``optsolve gen KIND --family NAME [options] --seed S -o FILE|-``.

Each solver's ``problems.FAMILIES`` maps a family name to a :class:`Family`: its
parameters (which become command-line options), a function ``generate(rng, **params) -> dict``
of problem keys, and ``footprint(**params) -> bytes``, about the generator's peak memory,
which :func:`check_budget` holds to the memory budget before anything is drawn.
"""

from __future__ import annotations

import math
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
    footprint: Callable[..., float] | None = None  # peak bytes from the family's parameters; None: a fixed size

    def defaults(self) -> dict:
        return {p.name: p.default for p in self.params}


def check_budget(family: Family, values: dict, given: dict | None = None) -> None:
    """Refuse (ValueError, a usage error of ``optsolve gen``) an integer size below 1, or parameters whose
    generation would need more than the memory budget (:func:`optsolve.core.memory.budget_bytes`), before the
    generator allocates anything. ``values``: every parameter; ``given``: those the user named (in the message)."""
    from optsolve.core import memory

    sizes = {p.name for p in family.params if p.type is int}
    for key in sizes:
        if isinstance(values.get(key), int) and values[key] < 1:
            raise ValueError(f"The '--{key.replace('_', '-')}' option must be an integer >= 1; got {values[key]}.")
    if family.footprint is None:
        return
    need = float(family.footprint(**values))
    budget = memory.budget_bytes()
    if not (math.isfinite(need) and need <= budget):
        named = given if given else {k: values[k] for k in sizes if k in values}
        shown = ", ".join(f"--{k.replace('_', '-')} {v}" for k, v in named.items() if v is not None)
        raise ValueError(f"family {family.name!r} with {shown or 'its defaults'} needs about "
                         f"{memory.human_bytes(need) if math.isfinite(need) else 'more memory than exists'} to "
                         f"generate, more than the memory budget of {memory.human_bytes(budget)} "
                         f"(raise it with {memory.ENV_VAR}).")
