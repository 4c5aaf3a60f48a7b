"""The picture of an ot answer for ``optsolve plot --problem``: the plan between 2-D points, each pair the plan
links joined by a line whose opacity is its mass (as POT's ``plot2D_samples_mat``), the points sized by their mass."""

from __future__ import annotations

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.plot import cost_text, marker_area, marker_sizes, plain
from optsolve.core.result import solution_vector

PLAN_LINES = 1000  # the plan's largest entries drawn as lines: more hide each other on one figure
PLAN_THRESHOLD = 1e-2  # entries under this share of the largest are not drawn (their lines would be invisible)


def draw_answer(ax, doc: dict, problem) -> None:
    """Draw the plan of the ot solution ``doc`` on ``problem``'s 2-D points into ``ax``."""
    from matplotlib.collections import LineCollection

    from optsolve.ot.certificate import plan_blocks
    from optsolve.ot.problems import grid_points, prepare

    ot = prepare(problem, normalize=bool((doc.get("settings") or {}).get("normalize")))
    x = ot.x if ot.x is not None else grid_points(*ot.grid) if ot.grid is not None else None
    y = ot.y if ot.y is not None else x
    if x is None or x.shape[1] != 2 or y.shape[1] != 2:
        found = "a cost matrix" if x is None else f"{x.shape[1]}-dimensional points"
        raise InputError(f"{problem.source}: the plan is drawn between 2-D points; this problem has {found}.")
    sol = doc["solution"]
    rows, cols, mass = np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64), np.zeros(0)
    try:  # the plan rebuilt as the certificate rebuilds it
        f, g = solution_vector(sol, "f", ot.n), solution_vector(sol, "g", ot.m)
        for j0, j1, _, P in plan_blocks(ot, sol, f, g):  # the largest entries, block by block
            P = np.asarray(P)
            flat = np.flatnonzero(P > 0)
            if flat.size > PLAN_LINES:
                flat = flat[np.argpartition(P.ravel()[flat], -PLAN_LINES)[-PLAN_LINES:]]
            r, c = np.unravel_index(flat, P.shape)
            rows, cols = np.concatenate([rows, r]), np.concatenate([cols, c + j0])
            mass = np.concatenate([mass, P[r, c]])
            if mass.size > PLAN_LINES:
                keep = np.argpartition(mass, -PLAN_LINES)[-PLAN_LINES:]
                rows, cols, mass = rows[keep], cols[keep], mass[keep]
    except (KeyError, ValueError, IndexError) as exc:
        raise InputError(f"{problem.source}: the solution's plan does not fit this problem ({exc}).") from None
    if mass.size:
        keep = mass >= PLAN_THRESHOLD * mass.max()  # POT's plot2D_samples_mat idea: the entries that carry mass
        rows, cols, mass = rows[keep], cols[keep], mass[keep]
        colours = np.zeros((mass.size, 4))
        colours[:, 3] = np.clip(mass / mass.max(), 0.1, 1.0)
        ax.add_collection(LineCollection(np.stack([x[rows], y[cols]], axis=1), colors=colours, linewidths=0.7,
                                         zorder=3, label=f"plan: its {mass.size} largest entries"))
    area = marker_area(ax)
    ax.scatter(x[:, 0], x[:, 1], s=marker_sizes(ot.a, area), c="tab:blue", alpha=0.6, linewidths=0, label="source (a)",
               zorder=2)
    ax.scatter(y[:, 0], y[:, 1], s=marker_sizes(ot.b, area), c="tab:red", marker="s", alpha=0.6, linewidths=0,
               label="target (b)", zorder=2)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title(plain(f"optimal transport plan ({doc.get('method')}{cost_text(doc)})"), fontsize="medium")
