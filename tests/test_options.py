"""Every command's options are declared as data (its package's OPTIONS, optsolve.core.options.Option) and checked
by one validator with one message shape; this tries every declared bound of every command, through its
solve_problem, as scikit-learn's common tests try every declared constraint."""

from __future__ import annotations

import importlib
import math

import pytest

from optsolve.core.errors import ParameterError
from optsolve.core.files import load_problem
from optsolve.core.options import Option, check

GEN = {"ot": ("--family", "clouds", "--n", "8", "--m", "6"), "qp": ("--family", "chain", "--n", "20"),
       "cover": ("--family", "karate"), "kmeans": ("--family", "iris"),
       "truncated": ("--family", "gaussian", "--d", "2", "--n", "200"), "mvi": ("--family", "polar")}
CASES = [(kind, option, bad) for kind in GEN for option in importlib.import_module(f"optsolve.{kind}").OPTIONS
         for bad in option.outside()]


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    from click.testing import CliRunner

    from optsolve.cli import main

    out = {}
    for kind, args in GEN.items():
        path = tmp_path_factory.mktemp(kind) / "p.npz"
        assert CliRunner().invoke(main, ["gen", kind, *args, "--seed", "2", "-o", str(path)]).exit_code == 0
        out[kind] = load_problem(str(path), importlib.import_module(f"optsolve.{kind}").SCHEMA, log=False)
    return out


@pytest.mark.parametrize("kind,option,bad", CASES, ids=[f"{k}-{o.name}-{b!r}" for k, o, b in CASES])
def test_every_declared_bound_is_refused_in_one_message_shape(problems, kind, option, bad):
    pkg = importlib.import_module(f"optsolve.{kind}")
    with pytest.raises(ParameterError, match=rf"^The '{option.flag}' option must be .*; got .*\.$"):
        pkg.solve_problem(problems[kind], **{option.name: bad})


def test_the_validator_states_each_range_and_keeps_what_is_inside():
    assert Option("alpha", low=0, high=2, low_open=True, high_open=True).describe() == "a float in (0, 2)"
    assert Option("n", "int", low=1).describe() == "an integer >= 1"
    assert Option("alpha", low=0, high=0.5, high_open=True, words=("auto",)).describe() == \
        "'auto' or a float in [0, 0.5)"
    assert Option("seed", "int", low=0, high=2**128, high_open=True).describe() == "an integer in [0, 2^128)"
    assert check((Option("n", "int", low=1), Option("x", low=0)), {"n": 3.0, "x": 0, "other": "kept"}) == \
        {"n": 3, "x": 0.0, "other": "kept"}
    assert Option("seed", "int", low=0, high=2**128, high_open=True).check(2**127 + 1) == 2**127 + 1  # exact
    assert Option("alpha", low=0, high=0.5, high_open=True, words=("auto",)).check("0.25") == 0.25
    for bad in (math.nan, True, "x", 0.5):
        with pytest.raises(ParameterError, match=r"^The '--alpha' option must be 'auto' or a float in \[0, 0.5\)"):
            Option("alpha", low=0, high=0.5, high_open=True, words=("auto",)).check(bad)
