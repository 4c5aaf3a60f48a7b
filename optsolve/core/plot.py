"""``optsolve plot SOLUTION.json... -o FIG.png|FIG.pdf|FIG.svg|-``: convergence histories side by side.

Reads the ``stats.history`` that ``--history`` records (see :mod:`optsolve.core.history`) from
one or several solution documents and draws, with matplotlib (the ``plot`` extra), the
residual against the work the method's paper counts (the history's ``evaluations`` where it names
them in ``evaluations_of``; else iterations) and against elapsed time, one line per solution,
labelled ``command method (file)``. The scale is logarithmic where the values span more than a factor
10 (symmetric-log where one is zero, so a zero deficit stays on the plot), linear otherwise.
"""

from __future__ import annotations

import math
import os
import sys
import textwrap

import numpy as np

from optsolve.core.errors import InputError
from optsolve.core.result import write_atomic_with

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


def x_column(histories: list) -> str:
    """``evaluations`` where every history names what it counts (``evaluations_of``: the work its method's
    paper plots progress against, such as operator evaluations or oracle calls) and has that column, else
    ``iteration`` (one axis for all the lines)."""
    for _, h, _ in histories:
        evaluations = h.get("evaluations")
        if not h.get("evaluations_of") or not isinstance(evaluations, list) or not evaluations \
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


MARKER_INK = 0.08  # share of the axes that each side's markers (sources, targets) cover together, at most
MARKER_MAX = 400.0  # points^2: the area of the heaviest marker when few are drawn


def marker_area(ax) -> float:
    """The area of ``ax`` in points^2 (the unit of a scatter's sizes)."""
    box = ax.get_position()
    w, h = ax.figure.get_size_inches()
    return float(box.width * w * box.height * h * 72 * 72)


def marker_sizes(weights, area: float):
    """Marker areas proportional to ``weights``, the side's markers covering at most MARKER_INK of ``area``
    together (hundreds of points stay apart), none over MARKER_MAX, none under 1."""
    w = np.asarray(weights, dtype=float)
    return np.clip(MARKER_INK * area * w / max(w.sum(), 1e-300), 1.0, MARKER_MAX)
def answer_drawers() -> dict:
    """command -> the ``draw_answer(ax, doc, problem)`` of its package's ``plot`` module, for every installed
    command that has one (found through :mod:`optsolve.core.registry`)."""
    import importlib.util

    from optsolve.core.registry import available_kinds, solver_module

    return {kind: solver_module(kind, "plot").draw_answer for kind in available_kinds()
            if importlib.util.find_spec(f"optsolve.{kind}.plot") is not None}


def draw_answer(doc: dict, problem, output: str, width: int, height: int, dpi: int = 100, title: str | None = None,
                fmt: str = "png") -> None:
    """Draw what a solution found, for a person to look at, by its command's ``plot`` module (ot: the plan
    between 2-D points; kmeans: the clusters). ``problem``: the solution's problem
    (:class:`optsolve.core.problem.Problem`). A solution of a command without one is an InputError."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    kind = doc.get("command")
    drawers = answer_drawers()
    if kind not in drawers:
        raise InputError(f"{problem.source}: a {kind} solution has no picture of its answer (one is drawn for "
                         f"{' and '.join(drawers)} solutions); without '--problem' plot draws its history.")
    fig, ax = plt.subplots(figsize=(width / dpi, height / dpi), dpi=dpi)
    drawers[kind](ax, doc, problem)
    ax.legend(fontsize="small", loc="best")
    _save(fig, output, fmt, dpi, title)
