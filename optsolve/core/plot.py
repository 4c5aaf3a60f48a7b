"""``optsolve plot SOLUTION.json... -o FIG.png|FIG.pdf|FIG.svg|-``: convergence histories side by side.

Reads the ``stats.history`` that ``--history`` records (see :mod:`optsolve.core.history`) from
one or several solution documents and draws, with matplotlib (the ``plot`` extra), the
residual against iterations and against elapsed time, residuals on a log scale, one line
per solution, labelled ``command method (file)``.
"""

from __future__ import annotations

import json
import math
import os
import sys

from optsolve.core.errors import InputError
from optsolve.core.result import write_atomic_with


def read_history(path: str) -> tuple[str, dict]:
    """(legend label, history) of a solution document; InputError naming the file when it has none."""
    try:
        with (sys.stdin if path == "-" else open(path, encoding="utf-8")) as f:
            doc = json.load(f)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the solution ({exc.strerror or exc}).") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: expected a JSON solution document; found text that is not JSON ({exc}).") from None
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("optsolve.solution/"):
        found = repr(doc.get("schema")) if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{path}: expected an optsolve solution document (field 'schema' = "
                         f"'optsolve.solution/1'); found {found}.")
    history = (doc.get("stats") or {}).get("history")
    if not isinstance(history, dict) or not isinstance(history.get("residual"), list):
        raise InputError(f"{path}: field 'stats.history': expected a convergence history; found none "
                         f"(solve with '--history').")
    if not history["residual"]:
        raise InputError(f"{path}: field 'stats.history': expected at least one point; found an empty history "
                         f"(the method '{doc.get('method')}' records none).")
    name = "stdin" if path == "-" else os.path.splitext(os.path.basename(path))[0]
    return f"{doc.get('command')} {doc.get('method')} ({name})", history


def _series(history: dict, key: str):
    xs, ys = [], []
    for x, y in zip(history.get(key) or [], history["residual"]):
        if x is None or y is None or not (isinstance(y, (int, float)) and y > 0 and math.isfinite(y)):
            continue
        xs.append(x)
        ys.append(y)
    return xs, ys


FORMATS = ("png", "pdf", "svg")


def draw(histories: list, output: str, width: int, height: int, dpi: int = 100, title: str | None = None,
         fmt: str = "png") -> None:
    """Write a figure of ``width`` x ``height`` pixels (at ``dpi``) in ``fmt`` (png, pdf, svg) to ``output``
    (``-``: stdout's binary stream): residual vs iteration (left) and vs time (right)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(width / dpi, height / dpi), dpi=dpi)
    measures = []
    for label, h in histories:
        for ax, key in ((left, "iteration"), (right, "time_s")):
            xs, ys = _series(h, key)
            ax.plot(xs, ys, marker=".", markersize=3, linewidth=1.2, label=label)
        if h.get("measure") and h["measure"] not in measures:
            measures.append(h["measure"])
    ylabel = measures[0] if len(measures) == 1 else "residual or gap (see each solution's stats.history.measure)"
    for ax, xlabel in ((left, "iteration"), (right, "elapsed time (s)")):
        ax.set_yscale("log")
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
