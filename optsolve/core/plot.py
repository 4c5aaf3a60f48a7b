"""``optsolve plot SOLUTION.json... -o FIG.png|FIG.pdf|FIG.svg|-``: convergence histories side by side.

Reads the ``stats.history`` that ``--history`` records (see :mod:`optsolve.core.history`) from
one or several solution documents and draws, with matplotlib (the ``plot`` extra), the
residual against the work the command's paper counts (evaluations of the operator for mvi,
oracle calls for truncated and cover, passes over the cost for ot; iterations for qp and kmeans)
and against elapsed time, one line per solution, labelled ``command method (file)``. The scale is
logarithmic where the values span more than a factor 10 (symmetric-log where one is zero, so a
zero deficit stays on the plot), linear otherwise.
"""

from __future__ import annotations

import math
import os
import sys
import textwrap

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.result import solution_vector, write_atomic_with

LABEL_WIDTH = 45  # characters a line of an axis label, which is wrapped, never cut


def read_history(path: str) -> tuple[str, dict, str]:
    """(legend label, history, command) of a solution document; InputError naming the file when it has none."""
    from optsolve.core.verify import read_solution

    doc = read_solution(path, answer=False)
    stats = doc.get("stats")
    history = stats.get("history") if isinstance(stats, dict) else None
    if not isinstance(history, dict) or not isinstance(history.get("residual"), list):
        raise InputError(f"{path}: field 'stats.history': expected a convergence history; found none "
                         f"(solve with '--history').")
    if not history["residual"]:
        raise InputError(f"{path}: field 'stats.history': expected at least one point; found an empty history "
                         f"(the method '{doc.get('method')}' records none).")
    name = "stdin" if path == "-" else os.path.splitext(os.path.basename(path))[0]
    # a column that is not a list is left out, as if the method recorded none
    history = {k: v for k, v in history.items() if isinstance(v, list) or k in ("measure", "evaluations_of")}
    return f"{doc.get('command')} {doc.get('method')} ({name})", history, str(doc.get("command"))


def plain(value) -> str:
    """``value`` as text that matplotlib draws as it is: a dollar sign starts no mathtext (a document's
    method or measure such as ``$\\frac`` would otherwise fail to parse when the figure is drawn)."""
    return str(value).replace("$", r"\$")


def _number(v) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)


def cost_text(doc: dict) -> str:
    """``", cost X"`` for a document whose objective is a finite number, else nothing."""
    cost = doc.get("objective")
    return f", cost {cost:.6g}" if _number(cost) else ""


# The work each command's paper plots its progress against: the evaluations column (operator F,
# membership-oracle calls, f's oracle calls, passes over the cost matrix) where the history has it
BY_EVALUATIONS = ("mvi", "truncated", "cover", "ot")


def x_column(histories: list) -> str:
    """``evaluations`` where every history is of a command in BY_EVALUATIONS and has that column, else
    ``iteration`` (one axis for all the lines)."""
    for _, h, command in histories:
        evaluations = h.get("evaluations")
        if command not in BY_EVALUATIONS or not isinstance(evaluations, list) or not evaluations \
                or not all(_number(v) for v in evaluations):
            return "iteration"
    return "evaluations"


def y_scale(values: list) -> tuple[str, dict]:
    """(scale, its options): log for positive values spanning more than a factor 10, symlog where some are
    zero (a zero deficit or residual stays on the plot), linear for a narrow range (a cost that moves
    little)."""
    positive = [v for v in values if v > 0]
    if not positive:
        return "linear", {}
    if len(positive) < len(values):
        return "symlog", {"linthresh": min(positive)}
    return ("log", {}) if max(positive) > 10 * min(positive) else ("linear", {})


def _series(history: dict, key: str):
    xs, ys = [], []
    column = history.get(key)
    for x, y in zip(column if isinstance(column, list) else [], history["residual"]):
        if not (_number(x) and _number(y) and y >= 0):
            continue
        xs.append(x)
        ys.append(y)
    return xs, ys


FORMATS = ("png", "pdf", "svg")


def draw(histories: list, output: str, width: int, height: int, dpi: int = 100, title: str | None = None,
         fmt: str = "png") -> None:
    """Write a figure of ``width`` x ``height`` pixels (at ``dpi``) in ``fmt`` (png, pdf, svg) to ``output``
    (``-``: stdout's binary stream): the residual against :func:`x_column` (left) and against time (right),
    on the scale :func:`y_scale` picks. ``histories``: (label, history, command) as :func:`read_history`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    fig, (left, right) = plt.subplots(1, 2, figsize=(width / dpi, height / dpi), dpi=dpi)
    measures, counted, values = [], [], []
    column = x_column(histories)
    for label, h, _ in histories:
        for ax, key in ((left, column), (right, "time_s")):
            xs, ys = _series(h, key)
            ax.plot(xs, ys, marker=".", markersize=3, linewidth=1.2, label=plain(label))
            values += ys  # the scale fits the residuals of both panels
        if h.get("measure") and plain(h["measure"]) not in measures:
            measures.append(plain(h["measure"]))
        if h.get("evaluations_of") and plain(h["evaluations_of"]) not in counted:
            counted.append(plain(h["evaluations_of"]))
    ylabel = measures[0] if len(measures) == 1 else "residual or gap (see each solution's stats.history.measure)"
    xlabel = "iteration" if column == "iteration" else (
        f"evaluations: {counted[0]}" if len(counted) == 1 else "evaluations (see stats.history.evaluations_of)")
    scale, options = y_scale(values)
    for ax, xlabel in ((left, xlabel), (right, "elapsed time (s)")):
        ax.set_yscale(scale, **options)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(textwrap.fill(ylabel, LABEL_WIDTH))  # a long measure on two or three lines, never cut
        ax.grid(True, which="major", alpha=0.3)
    left.xaxis.set_major_locator(MaxNLocator(integer=True))  # iterations and evaluations are counts
    left.legend(fontsize="small")
    _save(fig, output, fmt, dpi, title)


def _save(fig, output: str, fmt: str, dpi: int, title: str | None) -> None:
    import matplotlib.pyplot as plt

    if title:
        fig.suptitle(plain(title))
    fig.tight_layout()
    if output == "-":
        stream = getattr(sys.stdout, "buffer", sys.stdout)
        fig.savefig(stream, format=fmt, dpi=dpi)
        stream.flush()
    else:
        write_atomic_with(output, lambda f: fig.savefig(f, format=fmt, dpi=dpi))
    plt.close(fig)


PLAN_LINES = 1000  # the plan's largest entries drawn as lines: more hide each other on one figure
PLAN_THRESHOLD = 1e-2  # entries under this share of the largest are not drawn (their lines would be invisible)
MARKER_INK = 0.08  # share of the axes that each side's markers (sources, targets) cover together, at most
MARKER_MAX = 400.0  # points^2: the area of the heaviest marker when few are drawn


def marker_area(ax) -> float:
    """The area of ``ax`` in points^2 (the unit of a scatter's sizes)."""
    box = ax.get_position()
    w, h = ax.figure.get_size_inches()
    return float(box.width * w * box.height * h * 72 * 72)


def _sizes(weights, area: float):
    """Marker areas proportional to ``weights``, the side's markers covering at most MARKER_INK of ``area``
    together (hundreds of points stay apart), none over MARKER_MAX, none under 1."""
    w = np.asarray(weights, dtype=float)
    return np.clip(MARKER_INK * area * w / max(w.sum(), 1e-300), 1.0, MARKER_MAX)
CLUSTER_POINTS = 20000  # at most this many points drawn, and used for the principal directions


def draw_answer(doc: dict, problem, output: str, width: int, height: int, dpi: int = 100, title: str | None = None,
                fmt: str = "png") -> None:
    """Draw what a solution found, for a person to look at: an ot plan between 2-D points (each pair that
    the plan links joined by a line whose opacity is its mass, as POT's ``plot2D_samples_mat``), or kmeans
    clusters on the points' first two principal directions with their centres. ``problem``: the solution's
    problem (:class:`optsolve.core.problem.Problem`). Any other solution is an InputError."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kind = doc.get("command")
    if kind not in ("ot", "kmeans"):
        raise InputError(f"{problem.source}: a {kind} solution has no picture of its answer (one is drawn for ot "
                         "plans between 2-D points and for kmeans clusters); without '--problem' plot draws its "
                         "history.")
    fig, ax = plt.subplots(figsize=(width / dpi, height / dpi), dpi=dpi)
    (_ot_plan if kind == "ot" else _clusters)(ax, doc, problem)
    ax.legend(fontsize="small", loc="best")
    _save(fig, output, fmt, dpi, title)


def _ot_plan(ax, doc: dict, problem) -> None:
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
    ax.scatter(x[:, 0], x[:, 1], s=_sizes(ot.a, area), c="tab:blue", alpha=0.6, linewidths=0, label="source (a)",
               zorder=2)
    ax.scatter(y[:, 0], y[:, 1], s=_sizes(ot.b, area), c="tab:red", marker="s", alpha=0.6, linewidths=0,
               label="target (b)", zorder=2)
    ax.set_aspect("equal", adjustable="datalim")
    ax.set_title(plain(f"optimal transport plan ({doc.get('method')}{cost_text(doc)})"), fontsize="medium")


def _clusters(ax, doc: dict, problem) -> None:
    from optsolve.kmeans.problems import prepare

    X = prepare(problem).X  # possibly a memory map: only the rows drawn are read
    sol = doc["solution"]
    try:
        centres = np.asarray(sol["centres"], dtype=float)
        labels = np.asarray(sol["assignment"], dtype=np.int64)
    except (KeyError, TypeError, ValueError):
        centres, labels = np.zeros(0), np.zeros(0, dtype=np.int64)
    if centres.ndim != 2 or centres.shape[1] != X.shape[1] or labels.shape != (X.shape[0],):
        raise InputError(f"{problem.source}: the solution's centres and assignment do not fit these points.")
    shown = np.sort(np.random.default_rng(0).choice(X.shape[0], CLUSTER_POINTS, replace=False)) \
        if X.shape[0] > CLUSTER_POINTS else np.arange(X.shape[0])
    drawn = np.asarray(X[shown], dtype=float)
    mean = drawn.mean(axis=0)
    if X.shape[1] > 2:  # the first two principal directions of the points drawn
        _, _, vt = np.linalg.svd(drawn - mean, full_matrices=False)
        basis, names = vt[:2].T, ("first principal direction", "second principal direction")
    else:
        basis, names = np.eye(X.shape[1], 2), ("x1", "x2")
    pts, ctr = (drawn - mean) @ basis, (centres - mean) @ basis
    ax.scatter(pts[:, 0], pts[:, 1], c=labels[shown], cmap="tab20", s=6, alpha=0.7, label=f"{shown.size} points")
    ax.scatter(ctr[:, 0], ctr[:, 1], c="black", marker="x", s=120, linewidths=2.5, label=f"{len(ctr)} centres")
    ax.set_xlabel(names[0])
    ax.set_ylabel(names[1])
    ax.set_title(plain(f"k-means clusters ({doc.get('method')}{cost_text(doc)})"), fontsize="medium")
