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

from optsolve.core.errors import InputError
from optsolve.core.result import write_atomic_with


def read_history(path: str) -> tuple[str, dict, str]:
    """(legend label, history, command) of a solution document; InputError naming the file when it has none."""
    from optsolve.core.verify import read_solution

    doc = read_solution(path, answer=False)
    history = (doc.get("stats") or {}).get("history")
    if not isinstance(history, dict) or not isinstance(history.get("residual"), list):
        raise InputError(f"{path}: field 'stats.history': expected a convergence history; found none "
                         f"(solve with '--history').")
    if not history["residual"]:
        raise InputError(f"{path}: field 'stats.history': expected at least one point; found an empty history "
                         f"(the method '{doc.get('method')}' records none).")
    name = "stdin" if path == "-" else os.path.splitext(os.path.basename(path))[0]
    return f"{doc.get('command')} {doc.get('method')} ({name})", history, str(doc.get("command"))


# The work each command's paper plots its progress against: the evaluations column (operator F,
# membership-oracle calls, f's oracle calls, passes over the cost matrix) where the history has it
BY_EVALUATIONS = ("mvi", "truncated", "cover", "ot")


def x_column(histories: list) -> str:
    """``evaluations`` where every history is of a command in BY_EVALUATIONS and has that column, else
    ``iteration`` (one axis for all the lines)."""
    for _, h, command in histories:
        if command not in BY_EVALUATIONS or not h.get("evaluations") or any(v is None for v in h["evaluations"]):
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
    for x, y in zip(history.get(key) or [], history["residual"]):
        if x is None or y is None or not (isinstance(y, (int, float)) and y >= 0 and math.isfinite(y)):
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

    fig, (left, right) = plt.subplots(1, 2, figsize=(width / dpi, height / dpi), dpi=dpi)
    measures, counted, values = [], [], []
    column = x_column(histories)
    for label, h, _ in histories:
        for ax, key in ((left, column), (right, "time_s")):
            xs, ys = _series(h, key)
            ax.plot(xs, ys, marker=".", markersize=3, linewidth=1.2, label=label)
        values += _series(h, "time_s")[1]
        if h.get("measure") and h["measure"] not in measures:
            measures.append(h["measure"])
        if h.get("evaluations_of") and h["evaluations_of"] not in counted:
            counted.append(h["evaluations_of"])
    ylabel = measures[0] if len(measures) == 1 else "residual or gap (see each solution's stats.history.measure)"
    xlabel = "iteration" if column == "iteration" else (
        f"evaluations: {counted[0]}" if len(counted) == 1 else "evaluations (see stats.history.evaluations_of)")
    scale, options = y_scale(values)
    for ax, xlabel in ((left, xlabel), (right, "elapsed time (s)")):
        ax.set_yscale(scale, **options)
        ax.set_xlabel(xlabel)
        ax.set_ylabel(ylabel if len(ylabel) <= 60 else ylabel[:57] + "...")
        ax.grid(True, which="major", alpha=0.3)
    left.legend(fontsize="small")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    if output == "-":
        stream = getattr(sys.stdout, "buffer", sys.stdout)
        fig.savefig(stream, format=fmt, dpi=dpi)
        stream.flush()
    else:
        write_atomic_with(output, lambda f: fig.savefig(f, format=fmt, dpi=dpi))
    plt.close(fig)
