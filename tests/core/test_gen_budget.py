"""`optsolve gen` holds every family's sizes to the memory budget before it draws anything."""

from __future__ import annotations

import tracemalloc

import pytest
from click.testing import CliRunner

BUDGET = 16 << 20

# Sizes whose problem is over BUDGET; each family would draw it in seconds if it did not refuse.
OVER = [
    ("cover", "bipartite", "--n", "200000", "--items", "200000"),
    ("cover", "bipartite", "--n", "100000000", "--items", "100000000"),
    ("cover", "sbm", "--n", "100000"),
    ("cover", "facility", "--n", "300", "--clients", "2000"),
    ("kmeans", "blobs", "--m", "50000", "--d", "20"),
    ("truncated", "gaussian", "--d", "5", "--n", "200000"),
    ("truncated", "exponential", "--d", "5", "--n", "100000"),
    ("mvi", "affine", "--d", "100000"),
    ("mvi", "minimax-quadratic", "--d", "1000"),
    ("mvi", "bilinear", "--d", "1000000"),
    ("ot", "clouds", "--n", "1000", "--m", "1000", "--store", "matrix"),
    ("ot", "images", "--size", "400"),
    ("qp", "random", "--n", "100000"),
]


def _gen(kind, family, *args, out):
    from optsolve.cli import main

    res = CliRunner().invoke(main, ["gen", kind, "--family", family, *args, "-o", str(out)],
                             env={"OPTSOLVE_MEMORY_LIMIT": str(BUDGET)})
    return res.exit_code, res.stderr


@pytest.mark.parametrize("case", OVER, ids=[" ".join(c) for c in OVER])
def test_a_generator_over_the_budget_is_refused_before_it_allocates(tmp_path, case):
    kind, family, *args = case
    out = tmp_path / "p.npz"
    code, err = _gen(kind, family, *args, out=out)  # the first run imports what the command needs
    assert code == 2 and "memory budget" in err and family in err, err
    tracemalloc.start()
    try:
        code, err = _gen(kind, family, *args, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert code == 2 and "memory budget" in err
    assert peak < BUDGET / 4, f"{peak} bytes allocated before the refusal"
    assert not out.exists()


def test_a_generator_within_the_budget_writes_its_problem(tmp_path):
    out = tmp_path / "p.npz"
    code, err = _gen("cover", "bipartite", "--n", "2000", "--items", "2000", out=out)
    assert code == 0 and out.exists(), err


def test_a_size_below_one_is_a_usage_error(tmp_path):
    code, err = _gen("ot", "clouds", "--n", "0", out=tmp_path / "p.npz")
    assert code == 2 and "'--n'" in err and ">= 1" in err, err
