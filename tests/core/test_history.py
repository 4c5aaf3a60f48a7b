"""`--history` on every solve command, and `optsolve plot` drawing histories."""

from __future__ import annotations

import json

import numpy as np
import pytest

from optsolve.core.history import MAX_ROWS, History, recording, trace

COLUMNS = ("iteration", "evaluations", "residual", "time_s")

# command, generator arguments, solve options
CASES = {
    "ot exact": ("ot", ["--family", "clouds", "--n", "60"], []),
    "ot tnt": ("ot", ["--family", "clouds", "--n", "60"], ["--method", "tnt"]),
    "ot sinkhorn": ("ot", ["--family", "clouds", "--n", "60"], ["--method", "sinkhorn", "--reg", "0.05"]),
    "qp admm": ("qp", ["--family", "random", "--n", "40"], ["--method", "admm"]),
    "qp auto": ("qp", ["--family", "random", "--n", "40"], []),
    "qp distributed": ("qp", ["--family", "chain", "--n", "80"], ["--method", "distributed"]),
    "cover greedy": ("cover", ["--family", "karate"], []),
    "kmeans refine": ("kmeans", ["--family", "iris"], ["--lloyd-steps", "5"]),
    "truncated newton": ("truncated", ["--family", "gaussian", "--d", "2"], []),
    "mvi ecppa": ("mvi", ["--family", "polar"], []),
}


@pytest.mark.parametrize("case", CASES)
def test_every_command_records_a_columnar_history(cli, tmp_path, case):
    kind, gen_args, opts = CASES[case]
    path = tmp_path / "p.npz"
    r = cli("gen", kind, *gen_args, "--seed", "1", "-o", path)
    assert r.exit_code == 0, r.stderr
    seed = ["--seed", "0"] if kind in ("cover", "kmeans", "truncated") else []  # the commands that draw
    r = cli(kind, path, *opts, "--history", *seed)
    assert r.exit_code == 0 and r.json()["status"] == "optimal", r.stderr
    doc = r.json()
    stats = doc["stats"]  # the keys every document has
    assert isinstance(stats["iterations"], int) and isinstance(stats["evaluations"], (int, float))
    assert all(isinstance(stats["time_s"][k], float) for k in ("load", "prepare", "solve", "certificate", "total"))
    h = doc["stats"]["history"]
    lengths = {len(h[c]) for c in COLUMNS}
    assert len(lengths) == 1 and lengths.pop() >= 1
    assert isinstance(h["measure"], str) and h["measure"]
    it = [i for i in h["iteration"] if i is not None]
    assert it == sorted(it) and len(it) == len(h["iteration"])
    assert np.all(np.diff(h["time_s"]) >= 0) and h["time_s"][0] >= 0
    evals = [e for e in h["evaluations"] if e is not None]
    assert evals == sorted(evals)
    assert all(v is None or v >= 0 for v in h["residual"])
    # without the flag: no history, and the same answer
    plain = cli(kind, path, *opts, *seed).json()
    assert "history" not in plain["stats"]
    assert plain["status"] == doc["status"]


def test_the_last_qp_point_is_the_termination_check(cli, tmp_path):
    path = tmp_path / "p.npz"
    cli("gen", "qp", "--family", "random", "--n", "40", "--seed", "2", "-o", path)
    doc = cli("qp", path, "--method", "admm", "--history", "--check-every", "5").json()
    h = doc["stats"]["history"]
    assert h["iteration"][-1] == doc["stats"]["iterations"]
    assert h["prim"][-1] == pytest.approx(doc["stats"]["prim_res"])
    assert all(i % 5 == 0 for i in h["iteration"])


def test_trace_outside_a_recording_does_nothing_and_long_traces_are_thinned():
    trace(1, 0.5)  # no active history: no error, nothing kept
    with recording(False) as h:
        assert h is None
        trace(1, 0.5)
    with recording() as h:
        for i in range(3 * MAX_ROWS):
            trace(i, 1.0 / (i + 1), evaluations=i, measure="m", extra=float("nan") if i == 0 else i)
    d = h.to_dict()
    assert len(d["iteration"]) <= MAX_ROWS + 1 and d["iteration"][0] == 0 and d["iteration"][-1] == 3 * MAX_ROWS - 1
    assert d["extra"][0] is None and d["measure"] == "m" and d["evaluations_of"] is None
    assert isinstance(History().to_dict()["residual"], list)


def test_plot_draws_two_solutions_at_the_requested_size(cli, tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    path = tmp_path / "p.npz"
    cli("gen", "qp", "--family", "chain", "--n", "80", "--seed", "3", "-o", path)
    for name, method in (("a.json", "admm"), ("b.json", "distributed")):
        r = cli("qp", path, "--method", method, "--history", "-o", tmp_path / name)
        assert r.exit_code == 0, r.stderr
    fig = tmp_path / "fig.png"
    r = cli("plot", tmp_path / "a.json", tmp_path / "b.json", "-o", fig, "--width", "900", "--height", "400",
            "--title", "chain")
    assert r.exit_code == 0, r.stderr
    assert "wrote" in r.stderr
    with Image.open(fig) as im:
        assert im.size == (900, 400) and im.format == "PNG"


def test_plot_refuses_solutions_without_a_history(cli, tmp_path):
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.npz"
    cli("gen", "qp", "--family", "random", "--n", "20", "--seed", "3", "-o", path)
    cli("qp", path, "-o", tmp_path / "plain.json")
    (tmp_path / "junk.json").write_text("[1, 2")
    fig = tmp_path / "fig.png"
    for bad, needle in (("plain.json", "solve with '--history'"), ("junk.json", "invalid JSON"),
                        ("missing.json", "no such file")):
        r = cli("plot", tmp_path / bad, "-o", fig)
        assert r.exit_code == 7 and needle in r.stderr and bad in r.stderr
        assert len(r.stderr.strip().splitlines()) == 1
        assert not fig.exists()
    (tmp_path / "other.json").write_text(json.dumps({"schema": "something/1"}))
    r = cli("plot", tmp_path / "other.json", "-o", fig)
    assert r.exit_code == 7 and "'schema'" in r.stderr


def test_plot_axes_follow_each_command_and_keep_zeros():
    from optsolve.core.plot import _series, x_column, y_scale

    assert _series({"residual": [1.0, 0.0, None], "iteration": [0, 1, 2]}, "iteration") == ([0, 1], [1.0, 0.0])

    def h(evals, of="operator F"):
        return {"residual": [1.0], "evaluations": evals, "evaluations_of": of}

    assert x_column([("a", h([5]), "mvi"), ("b", h([7], "membership oracle"), "truncated")]) == "evaluations"
    assert x_column([("a", h([5]), "mvi"), ("b", h([7], None), "qp")]) == "iteration"  # one axis for all
    assert x_column([("a", h([None]), "ot")]) == "iteration"  # a method that counts none
    assert y_scale([1.0, 1e-3]) == ("log", {})
    assert y_scale([5.0, 0.0, 1e-2]) == ("symlog", {"linthresh": 1e-2})  # cover's final zero deficit
    assert y_scale([24954.5, 24950.1]) == ("linear", {})  # a cost that moves little


@pytest.mark.parametrize("kind,gen_args,label", [
    ("mvi", ["--family", "polar"], "evaluations: operator F"),
    ("cover", ["--family", "karate"], "evaluations: f (oracle calls)"),
    ("qp", ["--family", "chain", "--n", "80"], "iteration"),
    ("kmeans", ["--family", "iris"], "iteration"),
])
def test_plot_labels_the_axis_its_paper_uses(cli, tmp_path, kind, gen_args, label):
    pytest.importorskip("matplotlib")
    path = tmp_path / "p.npz"
    assert cli("gen", kind, *gen_args, "--seed", "1", "-o", path).exit_code == 0
    assert cli(kind, path, "--history", "-o", tmp_path / "s.json").exit_code == 0
    doc = json.loads((tmp_path / "s.json").read_text())
    r = cli("plot", tmp_path / "s.json", "-o", tmp_path / "f.svg")
    assert r.exit_code == 0, r.stderr
    svg = (tmp_path / "f.svg").read_text()
    assert f"<!-- {label} -->" in svg
    if kind == "cover":  # the last point, a zero deficit, is drawn
        assert doc["stats"]["history"]["residual"][-1] == 0
    measure = doc["stats"]["history"]["measure"]  # the y label in full, wrapped where it is long
    assert "..." not in svg and all(word in svg for word in measure.split())


def test_plot_draws_an_answer_and_refuses_what_has_no_picture(cli, tmp_path):
    pytest.importorskip("matplotlib")
    from PIL import Image

    def solved(kind, *gen_args):
        path, out = tmp_path / f"{kind}.npz", tmp_path / f"{kind}.json"
        assert cli("gen", kind, *gen_args, "--seed", "1", "-o", path).exit_code == 0
        assert cli(kind, path, "-o", out).exit_code == 0
        return path, out

    for kind, args in (("ot", ("--family", "clouds", "--n", "30", "--m", "20", "--d", "2")),
                       ("kmeans", ("--family", "iris"))):
        problem, solution = solved(kind, *args)
        fig = tmp_path / f"{kind}.png"
        r = cli("plot", solution, "--problem", problem, "-o", fig, "--width", "600", "--height", "400")
        assert r.exit_code == 0 and "the answer" in r.stderr, r.stderr
        with Image.open(fig) as im:
            assert im.size == (600, 400)
    problem, solution = solved("ot", "--family", "clouds", "--n", "30", "--m", "20", "--d", "3")
    r = cli("plot", solution, "--problem", problem, "-o", tmp_path / "no.png")
    assert r.exit_code == 7 and "2-D points" in r.stderr and not (tmp_path / "no.png").exists()
    problem, solution = solved("qp", "--family", "random", "--n", "20")
    r = cli("plot", solution, "--problem", problem, "-o", tmp_path / "no.png")
    assert r.exit_code == 7 and "no picture of its answer" in r.stderr
    r = cli("plot", solution, solution, "--problem", problem, "-o", tmp_path / "no.png")
    assert r.exit_code == 2 and "one solution" in r.stderr
    problem, solution = solved("ot", "--family", "clouds", "--n", "30", "--m", "20", "--d", "2")
    doc = json.loads(solution.read_text())
    doc["solution"]["f"] = doc["solution"]["f"][:-1]  # a solution that does not fit its problem
    solution.write_text(json.dumps(doc))
    r = cli("plot", solution, "--problem", problem, "-o", tmp_path / "no.png")
    assert r.exit_code == 7 and "does not fit" in r.stderr and "Traceback" not in r.stderr, r.stderr
