"""`optsolve plot` on documents nobody here wrote: one-line errors or a plot without the bad part, never a
traceback; and the picture of an ot plan drawn readable at hundreds of points."""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from click.testing import CliRunner

pytest.importorskip("matplotlib")


def _run(*args):
    from optsolve.cli import main

    res = CliRunner().invoke(main, [str(a) for a in args])
    return res.exit_code, res.stderr, res.exception


@pytest.fixture(scope="module")
def solved(tmp_path_factory):
    """{kind: (problem path, solution document)} for a qp with a history, an ot plan and kmeans clusters."""
    d = tmp_path_factory.mktemp("plot")
    out = {}
    for kind, gen, extra in (("qp", ("--family", "chain", "--n", "40"), ("--history",)),
                             ("ot", ("--family", "clouds", "--n", "30", "--m", "20", "--d", "2"), ()),
                             ("kmeans", ("--family", "iris"), ())):
        problem, solution = d / f"{kind}.npz", d / f"{kind}.json"
        assert _run("gen", kind, *gen, "--seed", "1", "-o", problem)[0] == 0
        assert _run(kind, problem, *extra, "-o", solution)[0] == 0
        out[kind] = (problem, json.loads(solution.read_text()))
    return out


def _history(edit):
    def apply(doc):
        edit(doc["stats"]["history"])
    return apply


def _set(key, value):
    def apply(doc):
        doc[key] = value
    return apply


HOSTILE_HISTORIES = {
    "stats a list": _set("stats", [1, 2]),
    "history a list": lambda doc: doc["stats"].update(history=[1.0]),
    "iteration a number": _history(lambda h: h.update(iteration=5)),
    "time_s a number": _history(lambda h: h.update(time_s=5.0)),
    "iteration of lists and objects": _history(lambda h: h.update(iteration=[[1], {"a": 2}] * len(h["residual"]))),
    "time_s of strings": _history(lambda h: h.update(time_s=["x"] * len(h["residual"]))),
    "residual of strings": _history(lambda h: h.update(residual=["a"] * len(h["residual"]))),
    "measure an object": _history(lambda h: h.update(measure={"a": 1}, evaluations_of=[1])),
    "measure bad mathtext": _history(lambda h: h.update(measure="$x^$")),
    "method bad mathtext": _set("method", "$\\frac$"),
    "command's evaluations a number": lambda doc: (doc.update(command="mvi"),
                                                   doc["stats"]["history"].update(evaluations=7)),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_HISTORIES))
def test_plot_of_a_hostile_history_is_a_figure_or_one_line(solved, tmp_path, case):
    doc = copy.deepcopy(solved["qp"][1])
    HOSTILE_HISTORIES[case](doc)
    path, fig = tmp_path / "s.json", tmp_path / "f.png"
    path.write_text(json.dumps(doc))
    code, err, exc = _run("plot", path, "-o", fig)
    assert exc is None or isinstance(exc, SystemExit), f"{case}: {exc!r}"
    assert "Traceback" not in err
    if code == 0:
        assert fig.stat().st_size > 0
    else:
        assert code == 7 and len(err.strip().splitlines()) == 1 and "s.json" in err, err
        assert not fig.exists()


HOSTILE_ANSWERS = {
    "objective null": _set("objective", None),
    "objective a string": _set("objective", "abc"),
    "objective an object": _set("objective", {"a": 1}),
    "method bad mathtext": _set("method", "$\\frac$"),
}


@pytest.mark.parametrize("kind", ["ot", "kmeans"])
@pytest.mark.parametrize("case", sorted(HOSTILE_ANSWERS))
def test_plot_of_a_hostile_answer_is_a_figure_or_one_line(solved, tmp_path, kind, case):
    problem, doc = solved[kind]
    doc = copy.deepcopy(doc)
    HOSTILE_ANSWERS[case](doc)
    path, fig = tmp_path / "s.json", tmp_path / "f.png"
    path.write_text(json.dumps(doc))
    code, err, exc = _run("plot", path, "--problem", problem, "-o", fig)
    assert exc is None or isinstance(exc, SystemExit), f"{case}: {exc!r}"
    assert code == 0, err  # the bad part (a title's cost, a label) is left out, the answer drawn
    assert fig.stat().st_size > 0


def test_a_title_in_mathtext_that_does_not_parse_is_drawn_as_text(solved, tmp_path):
    path, fig = tmp_path / "s.json", tmp_path / "f.svg"
    path.write_text(json.dumps(solved["qp"][1]))
    code, err, exc = _run("plot", path, "-o", fig, "--title", "cost $\\frac$")
    assert exc is None and code == 0, err


def test_a_plan_of_hundreds_of_points_is_drawn_thinned_and_its_markers_leave_room(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PathCollection

    from optsolve.core.files import load_problem
    from optsolve.ot.plot import PLAN_LINES, draw_answer
    from optsolve.ot.problems import SCHEMA

    problem, solution = tmp_path / "p.npz", tmp_path / "s.json"
    assert _run("gen", "ot", "--family", "clouds", "--n", "700", "--m", "700", "--d", "2", "--seed", "1",
                "-o", problem)[0] == 0
    assert _run("ot", problem, "-o", solution)[0] == 0
    doc = json.loads(solution.read_text())
    fig, ax = plt.subplots(figsize=(9, 7), dpi=100)
    try:
        draw_answer(ax, doc, load_problem(str(problem), SCHEMA, log=False))
        lines = [c for c in ax.collections if isinstance(c, LineCollection)]
        markers = [c for c in ax.collections if isinstance(c, PathCollection)]
        box, (w, h) = ax.get_position(), fig.get_size_inches()
        area = box.width * w * box.height * h * 72 * 72  # points^2, the unit of marker sizes
        assert len(lines) == 1 and 0 < len(lines[0].get_segments()) <= PLAN_LINES
        alpha = lines[0].get_colors()[:, 3]
        assert alpha.max() == 1.0 and alpha.min() >= 0.1  # opacity by mass, the faintest still visible
        assert len(markers) == 2 and all(len(m.get_offsets()) == 700 for m in markers)
        for m in markers:  # each side's markers cover a small share of the axes: lines between them show
            assert m.get_sizes().sum() <= 0.1 * area
    finally:
        plt.close(fig)
