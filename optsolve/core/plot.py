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

import click

from optsolve.core.errors import InputError
from optsolve.core.result import Status, write_atomic_with


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


def figure_format(output: str, fmt: str | None) -> str:
    """The format to write: ``fmt`` when given, else the extension of ``output`` (png for stdout, ``-``).
    A usage error when the extension is not one of FORMATS or disagrees with ``fmt``."""
    ext = "" if output == "-" else os.path.splitext(output)[1].lower().lstrip(".")
    if fmt is not None:
        if ext and ext != fmt:
            raise click.BadParameter(f"{output!r} names a .{ext} file, but '--format {fmt}' asks for {fmt}; "
                                     "give one or make them agree.", param_hint="'--format'")
        return fmt
    if output == "-":
        return "png"
    if ext not in FORMATS:
        raise click.BadParameter(f"{output!r}: expected a file name ending in {', '.join('.' + f for f in FORMATS)} "
                                 "(or '--format').", param_hint="'-o' / '--output'")
    return ext


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


@click.command(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.argument("solutions", nargs=-1, required=True, metavar="SOLUTION.json...")
@click.option("-o", "--output", required=True, metavar="FIG.png|FIG.pdf|FIG.svg|-",
              help="Where to write the figure, in the format its extension names ('-': stdout, see --format).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="png, pdf or svg [default: from the extension of --output; png for '-'].")
@click.option("--width", type=click.IntRange(min=200, max=20000), default=1200, show_default=True,
              help="Width in pixels.")
@click.option("--height", type=click.IntRange(min=150, max=20000), default=500, show_default=True,
              help="Height in pixels.")
@click.option("--title", default=None, help="A title above both panels.")
def plot(solutions, output, fmt, width, height, title):
    """Draw the convergence histories of solutions written with '--history'.

    Left: residual (or gap) against iterations; right: against elapsed time; a log scale for the residual, one
    line per solution labelled 'command method (file)'. Needs matplotlib (pip install 'optsolve[plot]').
    """
    from optsolve.cli import check_writable

    fmt = figure_format(output, fmt)
    if output == "-" and fmt != "svg" and sys.stdout.isatty():
        raise click.BadParameter(f"'-' writes {fmt} bytes to stdout, which is a terminal; redirect it or name a "
                                 "file.", param_hint="'-o' / '--output'")
    check_writable(output, "'-o' / '--output'")
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        sys.stderr.write("optsolve plot: error: matplotlib is not installed; install it with "
                         "pip install 'optsolve[plot]'.\n")
        sys.exit(Status.INTERNAL_ERROR.exit_code)
    try:
        histories = [read_history(p) for p in solutions]
    except InputError as exc:
        sys.stderr.write(f"optsolve plot: error: {exc}\n")
        sys.exit(Status.INVALID_INPUT.exit_code)
    draw(histories, output, width, height, title=title, fmt=fmt)
    where = f"stdout ({fmt})" if output == "-" else output
    sys.stderr.write(f"optsolve plot: wrote {where} ({len(histories)} "
                     f"solution{'s' if len(histories) != 1 else ''})\n")
