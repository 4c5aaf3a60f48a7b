"""Benchmark runs written into a markdown file: ``bin/bench-NAME ... --doc docs/benchmarks.md``.

Each script owns one block of the file, between ``<!-- begin bench-NAME -->`` and
``<!-- end bench-NAME -->``; a run with ``--doc FILE`` prints as usual and, when it ends without
an error, replaces its block with the command line and what it printed (the file and the block
are created where missing; the rest of the file is kept as it is). A script with a mode of its own
(``bin/bench-kmeans --scale``) records it in a second block, named apart.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from contextlib import contextmanager

from optsolve.core.result import write_atomic


def add_option(ap: argparse.ArgumentParser) -> None:
    """The ``--doc FILE`` option, for the script's ``--help`` (:func:`recorded` reads it)."""
    ap.add_argument("--doc", metavar="FILE", default=None,
                    help="also write this run's output into FILE (docs/benchmarks.md), replacing this script's block")


def _markers(name: str) -> tuple[str, str]:
    return f"<!-- begin {name} -->", f"<!-- end {name} -->"


def block(name: str, command: str, printed: str) -> str:
    """The markdown block of a run: the command, then its output, the header lines (``# ...``) as plain
    paragraphs, and the script's own headings (``## ...``) one level down, under the script's section."""
    lines = [f"`{command}`", ""]
    for line in printed.rstrip("\n").splitlines():
        if line.startswith("# "):
            line = f"Run on: {line[2:]}"
        elif line.startswith("#"):
            line = "#" + line
        lines.append(line)
    begin, end = _markers(name)
    return "\n".join([begin, *lines, end])


def replace_block(text: str, name: str, new: str, title: str | None = None) -> str:
    """``text`` with the block of ``name`` replaced by ``new`` (appended, under the heading ``title``, by default
    ``bin/NAME`` as code, where it has none)."""
    begin, end = _markers(name)
    start = text.find(begin)
    stop = text.find(end, start + len(begin)) if start >= 0 else -1
    if start < 0 or stop < 0:
        return text.rstrip("\n") + ("\n\n" if text.strip() else "") + f"## {title or f'`bin/{name}`'}\n\n{new}\n"
    return text[:start] + new + text[stop + len(end):]


class _Tee(io.TextIOBase):
    def __init__(self, out, copy: io.StringIO):
        self._out, self._copy = out, copy

    def write(self, s: str) -> int:
        self._copy.write(s)
        return self._out.write(s)

    def flush(self):
        self._out.flush()


@contextmanager
def recorded(name: str, argv: list[str] | None = None, *, script: str | None = None, title: str | None = None):
    """Run the body with stdout copied; where ``argv`` (default ``sys.argv``) has ``--doc FILE`` and the
    body ends without an exception, write the copy into FILE as the block of ``name``.

    ``script``: the script's name in ``bin/`` where it differs from the block's (the command line shown);
    ``title``: the heading of a block appended (default ``bin/NAME`` as code)."""
    argv = sys.argv if argv is None else argv
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--doc", default=None)
    path = ap.parse_known_args(argv[1:])[0].doc
    if path is None:
        yield
        return
    copy = io.StringIO()
    out = sys.stdout
    sys.stdout = _Tee(out, copy)
    try:
        yield
    finally:
        sys.stdout = out
    old = open(path).read() if os.path.exists(path) else ""
    args = argv[1:]
    shown = [a for i, a in enumerate(args) if a != "--doc" and not a.startswith("--doc=")
             and not (i and args[i - 1] == "--doc")]
    command = " ".join(["bin/" + (script or name), *shown])
    write_atomic(path, replace_block(old, name, block(name, command, copy.getvalue()), title))
