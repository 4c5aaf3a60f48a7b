"""bin/bench-qp --default-fit: the default's first step fitted on a recorded table and checked with each family
left out: a planted rule is found, and the shipped record fits and prints its check."""

from __future__ import annotations

import argparse
import csv
from pathlib import Path

import numpy as np
import pytest

from conftest import ROOT, load_script


def bench_qp():
    return load_script("bench-qp", "bench_qp_fit")


def planted(path: Path, rng, threshold: float = 5000.0):
    """Rows where PIQP is 3x faster than ADMM up to ``threshold`` stored entries and 3x slower above, Clarabel
    always 5x slower than the best, osqp 1.5x; the other features are noise."""
    bq = bench_qp()
    names = ["problem", *bq.FIT_FEATURES, "eq_only"] + [f"{c}{s}" for c in ("osqp", "auto") + bq.FIRSTS
                                                        for s in ("", "_ok")]
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=names)
        w.writeheader()
        for i, entries in enumerate(np.unique(np.round(10 ** rng.uniform(2, 6, 60)))):
            best = float(rng.uniform(0.01, 1.0))
            small = entries <= threshold
            row = {"problem": f"{'abcdefghij'[i % 10]}{i}", "n": int(rng.integers(10, 10**5)),
                   "m": int(rng.integers(10, 10**5)),
                   "entries": int(entries), "eq_share": rng.random(), "box_share": rng.random(),
                   "row_max": int(rng.integers(1, 50)), "p_offdiag_per_col": rng.random() * 10, "eq_only": 0,
                   "piqp": best if small else 3 * best, "admm": 3 * best if small else best,
                   "clarabel": 5 * best, "osqp": 1.5 * best, "auto": best}
            row.update({f"{c}_ok": 1 for c in ("osqp", "auto") + bq.FIRSTS})
            w.writerow(row)


def test_fit_finds_a_planted_threshold(tmp_path):
    bq = bench_qp()
    path = tmp_path / "record.csv"
    planted(path, np.random.default_rng(0))
    feature, threshold, below, above = bq.fit_first_rule(path, depth=1)
    assert (feature, below, above) == ("entries", "piqp", "admm")
    with open(path, newline="") as f:
        entries = sorted(int(r["entries"]) for r in csv.DictReader(f))
    below_max = max(e for e in entries if e <= 5000)
    above_min = min(e for e in entries if e > 5000)
    assert below_max <= threshold <= above_min
    assert bq.fit_first_rule(path, depth=2)[0] == "entries"  # a deeper rule finds nothing better to split on first


def test_the_shipped_record_fits_and_prints_its_left_out_check(capsys):
    record = ROOT / "docs" / "qp-default-record.csv"
    if not record.exists():
        pytest.skip(f"no record at {record}")
    bq = bench_qp()
    bq.default_fit(argparse.Namespace(default_fit=str(record), fit_depth=1))
    out = capsys.readouterr().out
    assert "each family left out of its fit" in out and "As optsolve.qp.auto.FIRST_RULE" in out
    rule = bq.fit_first_rule(record, depth=1)
    assert rule[0] in bq.FIT_FEATURES and {rule[2], rule[3]} <= set(bq.FIRSTS)
