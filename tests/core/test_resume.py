"""batch --resume: a stored answer is kept only when the same options would give it for the problem file
as it is now, and when its certificate holds again; anything else (edited, of other options, damaged) is
solved again, never a traceback."""

from __future__ import annotations

import json

import pytest


def _lines(r) -> list[dict]:
    return [json.loads(line) for line in r.stdout.splitlines()]


def _batch(cli, kind, out, files, *options):
    r = cli("batch", kind, "-j", "1", "-q", "--resume", out, *options, *files)
    assert "Traceback" not in r.stderr, r.stderr
    return r


def test_same_options_resume(cli, small_ot, tmp_path):
    path, _ = small_ot
    out = tmp_path / "out"
    first = _batch(cli, "ot", out, [path])
    assert first.exit_code == 0 and not _lines(first)[0].get("resumed")
    again = _batch(cli, "ot", out, [path], "--time-limit", "100")  # a limit does not change a finished answer
    line = _lines(again)[0]
    assert again.exit_code == 0 and line["resumed"] and line["certificate_holds"]
    assert line["objective"] == _lines(first)[0]["objective"]


def test_edited_objective_is_solved_again(cli, small_ot, tmp_path):
    path, _ = small_ot
    out = tmp_path / "out"
    first = _lines(_batch(cli, "ot", out, [path]))[0]
    doc = json.loads(open(first["output"]).read())
    doc["objective"] = 123.0
    open(first["output"], "w").write(json.dumps(doc))
    line = _lines(_batch(cli, "ot", out, [path]))[0]
    assert not line.get("resumed")
    assert line["status"] == "optimal" and line["objective"] == pytest.approx(first["objective"], rel=1e-9)
    assert json.loads(open(first["output"]).read())["objective"] == pytest.approx(first["objective"], rel=1e-9)


def test_answer_of_other_options_is_solved_again(cli, small_ot, tmp_path):
    path, _ = small_ot
    out = tmp_path / "out"
    entropic = _lines(_batch(cli, "ot", out, [path], "--method", "sinkhorn", "--reg", "0.5"))[0]
    exact = _lines(_batch(cli, "ot", out, [path], "--method", "emd"))[0]
    assert not exact.get("resumed")
    assert json.loads(open(exact["output"]).read())["method"] == "emd"
    assert exact["objective"] < entropic["objective"]  # the LP optimum, below the entropic plan's cost


def test_tighter_tolerance_is_solved_again(cli, tmp_path):
    problem = tmp_path / "p.json"
    problem.write_text(json.dumps({"P": [[4.0, 1.0], [1.0, 2.0]], "q": [1.0, 1.0], "A": [[1.0, 1.0]],
                                   "l": [1.0], "u": [1.0]}))
    out = tmp_path / "out"
    loose = _lines(_batch(cli, "qp", out, [problem], "--eps-abs", "1e-3", "--eps-rel", "1e-3"))[0]
    assert loose["status"] == "optimal"
    tight = _lines(_batch(cli, "qp", out, [problem], "--eps-abs", "1e-9", "--eps-rel", "1e-9"))[0]
    assert not tight.get("resumed")
    assert json.loads(open(tight["output"]).read())["settings"]["eps_abs"] == 1e-9


@pytest.mark.parametrize("damage", ["problem_list", "certificate_list", "solution_list", "status_number"])
def test_damaged_results_are_solved_again(cli, small_ot, tmp_path, damage):
    path, _ = small_ot
    out = tmp_path / "out"
    first = _lines(_batch(cli, "ot", out, [path]))[0]
    doc = json.loads(open(first["output"]).read())
    field, value = {"problem_list": ("problem", [1, 2]), "certificate_list": ("certificate", [1]),
                    "solution_list": ("solution", [0.0]), "status_number": ("status", 7)}[damage]
    doc[field] = value
    open(first["output"], "w").write(json.dumps(doc))
    r = _batch(cli, "ot", out, [path])
    assert r.exit_code == 0, r.stderr
    line = _lines(r)[0]
    assert line["status"] == "optimal" and line["certificate_holds"]
    if damage != "certificate_list":  # the answer itself is whole there: re-checked, it may be kept
        assert not line.get("resumed")
    assert cli("verify", path, first["output"], "-q").exit_code == 0


def test_directory_where_a_solution_was_is_one_line(cli, small_ot, tmp_path):
    path, _ = small_ot
    out = tmp_path / "out"
    first = _lines(_batch(cli, "ot", out, [path]))[0]
    import os
    os.unlink(first["output"])
    os.mkdir(first["output"])
    r = _batch(cli, "ot", out, [path])
    assert r.exit_code == 2 and "is a directory" in r.stderr and r.stdout == ""
