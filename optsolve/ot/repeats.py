"""Point clouds whose points repeat, solved as the smaller problem of their distinct points.

Points that are equal (coordinate for coordinate, on one side) have equal costs to every point of
the other side, so they act as one point carrying their summed mass: the transport LP of the
distinct points has the same optimum, and its solution gives the original problem's. A plan entry
between two distinct points is split among the points that make them up by a north-west corner
rule per group (:func:`split`): each point receives exactly its mass, and the plan keeps at most
entries + n + m entries. Equal points get their distinct point's potentials, which stay dual
feasible and complementary, with the same dual bound (c-transforms see each distinct point once).

The methods with an explicit plan (tagged ``merged`` in :data:`optsolve.ot.methods.METHODS`) are solved
so; the entropic methods keep the
original problem, whose Gibbs plan and potentials their documents describe.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np



def distinct(points: np.ndarray):
    """``(first, label)``: one index per distinct point (in order of the points sorted), and each
    point's distinct point; None where no two points are equal."""
    n, d = points.shape
    if n < 2:
        return None
    if d == 0:  # points of dimension 0 are all one point
        return np.zeros(1, dtype=np.int64), np.zeros(n, dtype=np.int64)
    order = np.lexsort(points.T[::-1])
    ordered = points[order]
    new = np.concatenate([[True], np.any(ordered[1:] != ordered[:-1], axis=1)])
    if new.all():
        return None
    label = np.empty(n, dtype=np.int64)
    label[order] = np.cumsum(new) - 1
    return order[new], label


@dataclass
class Merge:
    """The original problem's sizes and masses, and each point's distinct point (``label_x``, ``label_y``)."""

    problem: object  # the merged problem (optsolve.core.problem.Problem)
    label_x: np.ndarray
    label_y: np.ndarray
    a: np.ndarray  # the original masses, each scaled to unit mass
    b: np.ndarray
    x: np.ndarray
    y: np.ndarray

    @property
    def n(self) -> int:
        return self.label_x.size

    @property
    def m(self) -> int:
        return self.label_y.size


def find(problem) -> Merge | None:
    """The merge of ``problem``'s equal points (point clouds only), or None where no point repeats."""
    if "x" not in problem or "y" not in problem or problem["a"].ndim != 1:
        return None
    x, y = problem["x"], problem["y"]
    sx, sy = distinct(x), distinct(y)
    if sx is None and sy is None:
        return None
    (fx, lx), (fy, ly) = [s if s is not None else (np.arange(p.shape[0]), np.arange(p.shape[0]))
                          for s, p in ((sx, x), (sy, y))]
    a, b = problem["a"], problem["b"]
    data = dict(problem.data, a=np.bincount(lx, weights=a), b=np.bincount(ly, weights=b), x=x[fx], y=y[fy])
    merged = replace(problem, data=data, dims=dict(problem.dims, n=fx.size, m=fy.size))
    return Merge(merged, lx, ly, np.asarray(a / a.sum(), dtype=np.float64),  # as prepare scales them
                 np.asarray(b / b.sum(), dtype=np.float64), x, y)


def _local_ends(group: np.ndarray, amount: np.ndarray, total: np.ndarray) -> np.ndarray:
    """Cumulative sums of ``amount`` within each group (``group`` sorted), ending exactly at the group's
    ``total`` (rounding is absorbed by each group's last piece)."""
    ends = np.cumsum(amount)
    first = np.concatenate([[True], group[1:] != group[:-1]]) if group.size else group.astype(bool)
    start = (ends - amount)[first]
    ends = np.minimum(ends - np.repeat(start, np.diff(np.append(np.flatnonzero(first), group.size))), total[group])
    last = np.append(first[1:], True) if group.size else first
    ends[last] = total[group[last]]
    return ends


def split(group: np.ndarray, amount: np.ndarray, member_group: np.ndarray, mass: np.ndarray):
    """Pieces ``(item, member, amount)``: the items' amounts laid out along the members of their group,
    each group by the north-west corner rule, so that every member gets its mass and every item its
    amount (up to rounding, taken up by each group's last piece). ``group``: each item's group;
    ``member_group``: each member's."""
    groups = int(max(group.max(initial=-1), member_group.max(initial=-1))) + 1
    total = np.bincount(member_group, weights=mass, minlength=groups)
    io, mo = np.argsort(group, kind="stable"), np.argsort(member_group, kind="stable")
    keys = np.concatenate([group[io], member_group[mo]])
    ends = np.concatenate([_local_ends(group[io], amount[io], total), _local_ends(member_group[mo], mass[mo], total)])
    kind = np.concatenate([np.zeros(io.size, dtype=np.int8), np.ones(mo.size, dtype=np.int8)])
    order = np.lexsort((kind, ends, keys))  # by group, then position; an item's end before a member's there
    keys, ends, kind = keys[order], ends[order], kind[order]
    before = np.concatenate([[0.0], ends[:-1]])
    before[np.concatenate([[True], keys[1:] != keys[:-1]])] = 0.0  # each group starts at 0
    item = np.cumsum(kind == 0) - (kind == 0)  # items ended before: the item this piece belongs to
    member = np.cumsum(kind == 1) - (kind == 1)
    keep = (ends > before) & (item < io.size) & (member < mo.size)
    item, member = item[keep], member[keep]
    keep2 = (group[io[item]] == keys[keep]) & (member_group[mo[member]] == keys[keep])
    return io[item[keep2]], mo[member[keep2]], (ends - before)[keep][keep2]


def expand_plan(merge: Merge, row: np.ndarray, col: np.ndarray, value: np.ndarray):
    """A plan of the distinct points (coo entries) as a plan of the original points: rows split among
    each distinct source point's points, then columns among each target point's."""
    entry, i, w = split(np.asarray(row, dtype=np.int64), np.asarray(value, dtype=np.float64), merge.label_x, merge.a)
    piece, j, w = split(np.asarray(col, dtype=np.int64)[entry], w, merge.label_y, merge.b)
    return i[piece], j, w


def expand_output(merge: Merge, job, out):
    """A method's output (:class:`~optsolve.core.solve.MethodOutput`) on the distinct points as one on the
    original points: the plan's entries split (:func:`expand_plan`), each point given its distinct
    point's potentials, the cost recomputed over the original pairs; the dual bound is unchanged."""
    from optsolve.ot.methods import explicit_plan
    from optsolve.ot.problems import OTProblem, pair_costs

    solution = out.solution
    if solution is None:
        return out
    spec = solution["plan"]
    row, col, value = expand_plan(merge, spec["row"], spec["col"], spec["value"])
    original = OTProblem(a=merge.a, b=merge.b, C=None, mass=1.0, x=merge.x, y=merge.y, cost=job.data.cost)
    out.objective = float(pair_costs(original, row, col) @ value)
    solution.update(f=np.asarray(solution["f"])[merge.label_x], g=np.asarray(solution["g"])[merge.label_y],
                    plan={"format": "coo", "shape": [merge.n, merge.m], "row": row, "col": col, "value": value})
    shape = (merge.n, merge.m)
    out.arrays["plan"] = explicit_plan(shape, row, col, value, job.settings["plan_threshold"],
                                       job.context["plan_needed"])
    out.stats["distinct_points"] = {"n": job.data.n, "m": job.data.m}
    return out
