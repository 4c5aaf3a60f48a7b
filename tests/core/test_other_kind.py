"""A problem file of another command: one line naming that command, exit 7, no warnings before it."""

from __future__ import annotations

import json

import pytest

from conftest import EXAMPLE_OT

# a small file of each command, made by `optsolve gen` (ot's is the bundled example)
GEN = {
    "qp": ("--family", "random", "--n", "10"),
    "cover": ("--family", "karate"),
    "kmeans": ("--family", "iris"),
    "truncated": ("--family", "gaussian", "--n", "200"),
    "mvi": ("--family", "affine", "--d", "10"),
}
KINDS = ("ot", *GEN)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    from click.testing import CliRunner

    from optsolve.cli import main

    folder = tmp_path_factory.mktemp("kinds")
    made = {"ot": str(EXAMPLE_OT)}
    for kind, args in GEN.items():
        made[kind] = str(folder / f"{kind}.npz")
        res = CliRunner().invoke(main, ["gen", kind, *args, "-o", made[kind]])
        assert res.exit_code == 0, res.output
    return made


@pytest.mark.parametrize("command", KINDS)
@pytest.mark.parametrize("owner", KINDS)
def test_file_of_another_command_is_one_line(cli, files, command, owner):
    if command == owner:
        pytest.skip("a command's own file")
    r = cli(command, files[owner])
    assert r.exit_code == 7, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert f"an `optsolve {owner}` problem, not of `optsolve {command}`" in lines[0]
    assert f"run `optsolve {owner} {files[owner]}`" in lines[0]


@pytest.mark.parametrize("owner", ["kmeans", "qp"])
def test_verify_names_the_command_of_the_problem_file(cli, files, tmp_path, owner):
    solution = tmp_path / "ot.json"
    assert cli("ot", files["ot"], "-o", solution, "-q").exit_code == 0
    r = cli("verify", files[owner], solution)
    assert r.exit_code == 7
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert f"an `optsolve {owner}` problem, not of `optsolve ot`" in r.stderr


def test_unrecognised_file_gets_its_first_error_only(cli, tmp_path):
    path = tmp_path / "p.json"
    path.write_text(json.dumps({"colour": "blue", "size": 3, "b": [0.5, 0.5]}))
    r = cli("ot", path)
    assert r.exit_code == 7
    assert r.stderr.strip().splitlines() == [r.stderr.strip()]
    assert "missing required key 'a'" in r.stderr


def test_a_solvable_file_still_warns_of_its_unknown_keys(cli, tmp_path):
    import numpy as np

    path = tmp_path / "p.npz"
    with np.load(EXAMPLE_OT) as data:
        np.savez(path, colour=np.array("blue"), **data)
    r = cli("ot", path, "-o", tmp_path / "s.json")
    assert r.exit_code == 0
    assert "ignoring unknown key 'colour'" in r.stderr


def test_a_schema_recognises_its_marks_and_known_keys_only():
    from optsolve.mvi.problems import SCHEMA as MVI
    from optsolve.ot.problems import SCHEMA as OT

    assert OT.fits({"a", "b", "x", "y"}) and not OT.fits({"a", "b", "colour"}) and not OT.fits({"b", "C"})
    assert MVI.fits({"operator", "M", "q"}) and not MVI.fits({"M", "q"})  # no key required: 'operator' marks it
