"""Results: statuses and exit codes, strict JSON, certificates, atomic writes."""

from __future__ import annotations

import json
import math
import os

import numpy as np
import pytest

from optsolve.core.result import (EXIT_CODES, Certificate, Check, Result, Status, to_jsonable, worst_exit_code,
                                  write_atomic)


def test_exit_codes_table():
    assert {s.value: s.exit_code for s in Status} == {
        "optimal": 0, "internal_error": 1, "infeasible": 3, "unbounded": 4, "max_iter": 5, "time_limit": 5,
        "optimal_inaccurate": 6, "numerical_error": 6, "invalid_input": 7, "interrupted": 130}
    assert set(EXIT_CODES) == set(Status)


def test_worst_exit_code():
    assert worst_exit_code([]) == 0
    assert worst_exit_code([0, 5, 6]) == 5
    assert worst_exit_code([0, 7, 3]) == 7
    assert worst_exit_code([7, 1]) == 1
    assert worst_exit_code([1, 130, 0]) == 130


def test_check_at_most():
    assert Check.at_most("x", 1.0, 2.0).holds
    assert not Check.at_most("x", 3.0, 2.0).holds
    assert not Check.at_most("x", float("nan"), 2.0).holds
    assert not Check.at_most("x", None, 2.0).holds
    assert not Check.at_most("x", math.inf, math.inf).holds


def test_certificate_downgrades_claimed_optimal():
    r = Result("ot", "emd", "optimal")
    r.attach_certificate(Certificate([Check.at_most("a", 1.0, 2.0), Check.at_most("b", 5.0, 1.0)]))
    assert r.status is Status.OPTIMAL_INACCURATE and r.exit_code == 6
    assert "b = 5 > limit 1" in r.message
    r = Result("ot", "emd", "max_iter")
    r.attach_certificate(Certificate([Check.at_most("b", 5.0, 1.0)]))
    assert r.status is Status.MAX_ITER


def test_strict_json_replaces_non_finite_values():
    r = Result("ot", "sinkhorn", "optimal", objective=float("nan"),
               solution={"f": np.array([1.0, -np.inf, 2.0]), "k": np.int64(3), "flag": np.bool_(True)},
               stats={"time_s": {"total": 0.5}})
    text = r.to_json()
    doc = json.loads(text)  # strict: no NaN or Infinity tokens
    for token in ("NaN", "Infinity"):
        assert token not in text
    assert doc["objective"] is None
    assert doc["solution"] == {"f": [1.0, None, 2.0], "k": 3, "flag": True}
    assert "objective (nan)" in doc["message"] and "solution.f[1]" in doc["message"]


def test_matrices_are_refused_inline():
    with pytest.raises(TypeError, match="Result.arrays"):
        to_jsonable({"P": np.zeros((2, 2))}, "solution")


def test_arrays_listed_with_shapes():
    r = Result("ot", "emd", "optimal", arrays={"plan": np.zeros((3, 4))})
    assert r.to_dict()["arrays"] == {"path": None, "keys": {"plan": {"shape": [3, 4], "dtype": "float64"}}}
    assert r.to_dict("p.npz")["arrays"]["path"] == "p.npz"


def test_write_atomic_keeps_old_file_on_failure(tmp_path):
    path = tmp_path / "out.json"
    write_atomic(str(path), "old")

    class Boom(Exception):
        pass

    from optsolve.core.result import write_atomic_with

    def writer(f):
        f.write(b"partial")
        raise Boom

    with pytest.raises(Boom):
        write_atomic_with(str(path), writer)
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["out.json"]


def test_lazy_array_is_computed_once_on_first_use():
    from optsolve.core.result import LazyArray

    calls = []

    def compute():
        calls.append(1)
        return np.arange(6.0).reshape(2, 3)

    lazy = LazyArray((2, 3), "float64", compute)
    assert lazy.shape == (2, 3) and not calls  # the shape is known without computing
    np.testing.assert_array_equal(lazy.sum(1), [3.0, 12.0])
    assert lazy[1, 2] == 5.0
    np.testing.assert_array_equal(np.asarray(lazy) - 1.0, np.arange(6.0).reshape(2, 3) - 1.0)
    assert lazy() is lazy()
    assert len(calls) == 1
    with pytest.raises(AttributeError):
        lazy._missing


def test_a_dense_lazy_array_is_described_without_computing_it():
    from optsolve.core.result import LazyArray, Result, Status

    def compute():
        raise AssertionError("computed")

    doc = Result("ot", "exact", Status.OPTIMAL, arrays={"plan": LazyArray((3, 4), "float64", compute)}).to_dict()
    assert doc["arrays"]["keys"]["plan"] == {"shape": [3, 4], "dtype": "float64"}


def test_every_document_has_the_common_stats_keys():
    from optsolve.core.result import Result, Status

    doc = Result("qp", None, Status.INVALID_INPUT, "bad", stats={"time_s": {"total": 0.1}, "extra": 1}).to_dict()
    assert list(doc["stats"])[:2] == ["iterations", "evaluations"] and doc["stats"]["iterations"] is None
    assert doc["stats"]["time_s"] == {"load": None, "prepare": None, "solve": None, "certificate": None, "total": 0.1}
    assert doc["stats"]["extra"] == 1
    doc = Result("ot", "tnt", Status.OPTIMAL, stats={"evaluations": 3.5, "iterations": 2,
                                                     "time_s": {"round": 0.2}}).to_dict()
    assert doc["stats"]["evaluations"] == 3.5 and doc["stats"]["time_s"]["round"] == 0.2
