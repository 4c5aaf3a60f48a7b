"""The ``optsolve plot`` command (the drawing is :mod:`optsolve.core.plot`'s)."""

from __future__ import annotations

import os
import sys

import click

from optsolve.core.errors import InputError
from optsolve.core.plot import FORMATS, draw, read_history
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
    try:
        histories = [read_history(p) for p in solutions]
    except InputError as exc:
        sys.stderr.write(f"optsolve plot: error: {exc}\n")
        sys.exit(Status.INVALID_INPUT.exit_code)
    draw(histories, output, width, height, title=title, fmt=fmt)
    where = f"stdout ({fmt})" if output == "-" else output
    sys.stderr.write(f"optsolve plot: wrote {where} ({len(histories)} "
                     f"solution{'s' if len(histories) != 1 else ''})\n")
