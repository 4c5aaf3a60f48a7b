"""The ``optsolve plot`` command (the drawing is :mod:`optsolve.core.plot`'s)."""

from __future__ import annotations

import os
import sys

import click

from optsolve.cli import CONTEXT_SETTINGS
from optsolve.core.errors import InputError
from optsolve.core.plot import FORMATS, draw, draw_answer, read_history
from optsolve.core.result import Status


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


@click.command(context_settings=CONTEXT_SETTINGS)
@click.argument("solutions", nargs=-1, required=True, metavar="SOLUTION.json...")
@click.option("-o", "--output", required=True, metavar="FIG.png|FIG.pdf|FIG.svg|-",
              help="Where to write the figure, in the format its extension names ('-': stdout, see --format).")
@click.option("--format", "fmt", type=click.Choice(FORMATS), default=None,
              help="png, pdf or svg [default: from the extension of --output; png for '-'].")
@click.option("--width", type=click.IntRange(min=200, max=20000), default=1200, show_default=True,
              help="Width in pixels.")
@click.option("--height", type=click.IntRange(min=150, max=20000), default=500, show_default=True,
              help="Height in pixels.")
@click.option("--title", default=None, help="A title above the figure.")
@click.option("--problem", "problem_path", metavar="PROBLEM", default=None,
              help="Draw the answer of one solution to this problem instead of histories: an ot plan between 2-D "
                   "points (each linked pair joined, opacity by mass), or kmeans clusters on the points' first two "
                   "principal directions with their centres.")
def plot(solutions, output, fmt, width, height, title, problem_path):
    """Draw the convergence histories of solutions written with '--history'.

    Left: residual (or gap) against the work each command's paper counts (evaluations of F for mvi, oracle calls
    for truncated and cover, passes over the cost for ot, iterations for qp and kmeans); right: against elapsed
    time. A log scale where the values span more than a factor 10 (symmetric-log when one is zero), linear
    otherwise; one line per solution labelled 'command method (file)'. Needs matplotlib (pip install
    'optsolve[plot]').
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
    if problem_path is not None and len(solutions) != 1:
        raise click.UsageError(f"'--problem' draws the answer of one solution; {len(solutions)} were given.")
    try:
        if problem_path is not None:
            _answer(solutions[0], problem_path, output, width, height, title, fmt)
            drawn = "the answer"
        else:
            histories = [read_history(p) for p in solutions]
            draw(histories, output, width, height, title=title, fmt=fmt)
            drawn = f"{len(histories)} solution{'s' if len(histories) != 1 else ''}"
    except InputError as exc:
        sys.stderr.write(f"optsolve plot: error: {exc}\n")
        sys.exit(Status.INVALID_INPUT.exit_code)
    where = f"stdout ({fmt})" if output == "-" else output
    sys.stderr.write(f"optsolve plot: wrote {where} ({drawn})\n")


def _answer(solution: str, problem_path: str, output: str, width: int, height: int, title, fmt: str) -> None:
    """Read the solution and its problem (the solution's command's schema), and draw the answer."""
    from optsolve.core.files import load_problem
    from optsolve.core.registry import solver_module
    from optsolve.core.verify import read_solution

    doc = read_solution(solution)
    problem = load_problem(problem_path, solver_module(doc["command"], "problems").SCHEMA, log=False)
    draw_answer(doc, problem, output, width, height, title=title, fmt=fmt)
