"""QPS / MPS problem files (optsolve.core.mps), read through HiGHS."""

from __future__ import annotations

import json

import numpy as np
import pytest
import scipy.sparse as sp

from optsolve.core.files import load_problem, read_raw

highspy = pytest.importorskip("highspy")

# a small QP in fixed-format QPS: a range row, bounds of three kinds, an objective constant (-RHS)
QPEX = """NAME          QPEX
ROWS
 N  obj
 G  c1
 L  c2
COLUMNS
    x1        obj       1.5          c1        2.0
    x1        c2        -1.0
    x2        obj       -2.0         c1        1.0
    x2        c2        2.0
    x3        obj       1.0          c2        1.0
RHS
    RHS1      obj       -4.0
    RHS1      c1        2.0          c2        6.0
RANGES
    RNG       c1        1.0
BOUNDS
 UP BND1      x1        20.0
 LO BND1      x2        -1.0
 UP BND1      x2        3.0
 FR BND1      x3
QUADOBJ
    x1        x1        8.0
    x1        x2        2.0
    x2        x2        10.0
    x3        x3        1.0
ENDATA
"""


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def highs_optimum(path: str) -> float:
    """HiGHS's own QP solver on the file: the reference optimum."""
    import shutil

    copy = path.rsplit(".", 1)[0] + "-ref.mps"
    shutil.copy(path, copy)
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    assert h.readModel(copy) == highspy.HighsStatus.kOk
    h.run()
    return h.getInfo().objective_function_value


def test_qps_keys_follow_the_model(tmp_path):
    raw, _ = read_raw(write(tmp_path, "qpex.qps", QPEX))
    np.testing.assert_array_equal(raw["P"].toarray(), [[8.0, 2.0, 0.0], [2.0, 10.0, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(raw["q"], [1.5, -2.0, 1.0])
    assert raw["r"] == 4.0
    # the two rows, then identity rows for x1 and x2 (x3 is free: no row)
    np.testing.assert_array_equal(raw["A"].toarray(), [[2, 1, 0], [-1, 2, 1], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(raw["l"], [2.0, -np.inf, 0.0, -1.0])
    np.testing.assert_array_equal(raw["u"], [3.0, 6.0, 20.0, 3.0])


def test_qps_solves_to_highs_optimum(cli, tmp_path):
    path = write(tmp_path, "qpex.qps", QPEX)
    out = tmp_path / "sol.json"
    r = cli("qp", path, "--eps-abs", "1e-9", "--eps-rel", "1e-9", "-o", out)
    assert r.exit_code == 0, r.stderr
    doc = json.loads(out.read_text())
    assert doc["status"] == "optimal"
    assert doc["objective"] == pytest.approx(highs_optimum(path), rel=1e-7)
    assert cli("verify", path, out).exit_code == 0


def test_maximisation_is_negated(tmp_path):
    text = QPEX.replace("ROWS", "OBJSENSE\n    MAX\nROWS").replace("x1        x1        8.0", "x1        x1        -8.0")
    text = text.replace("x2        x2        10.0", "x2        x2        -10.0").replace("x3        x3        1.0",
                                                                                  "x3        x3        -1.0")
    text = text.replace("x1        x2        2.0", "x1        x2        -2.0")
    raw, _ = read_raw(write(tmp_path, "max.qps", text))
    np.testing.assert_array_equal(raw["P"].toarray(), [[8.0, 2.0, 0.0], [2.0, 10.0, 0.0], [0.0, 0.0, 1.0]])
    np.testing.assert_array_equal(raw["q"], [-1.5, 2.0, -1.0])
    assert raw["r"] == -4.0


def test_round_trip_through_highs_writer(tmp_path):
    """A generated QP written as MPS by HiGHS reads back as the same P, q, A and bounds."""
    from optsolve.qp.problems import FAMILIES, SCHEMA

    data = FAMILIES["random"].generate(np.random.default_rng(4), n=12)
    P, A = sp.csc_matrix(data["P"]), sp.csc_matrix(data["A"])
    if data.get("P_storage") == "upper":  # the family stores P's upper triangle
        P = (P + sp.triu(P, 1).T).tocsc()
    n, m = P.shape[0], A.shape[0]
    lp = highspy.HighsLp()
    lp.num_col_, lp.num_row_ = n, m
    lp.col_cost_ = np.asarray(data["q"], dtype=float)
    lp.col_lower_, lp.col_upper_ = np.full(n, -highspy.kHighsInf), np.full(n, highspy.kHighsInf)
    lp.row_lower_ = np.where(np.isfinite(data["l"]), data["l"], -highspy.kHighsInf)
    lp.row_upper_ = np.where(np.isfinite(data["u"]), data["u"], highspy.kHighsInf)
    lp.a_matrix_.format_ = highspy.MatrixFormat.kColwise
    lp.a_matrix_.start_, lp.a_matrix_.index_, lp.a_matrix_.value_ = A.indptr, A.indices, A.data
    lp.a_matrix_.num_col_, lp.a_matrix_.num_row_ = n, m
    H = sp.tril(P, format="csc")
    hessian = highspy.HighsHessian()
    hessian.dim_, hessian.format_ = n, highspy.HessianFormat.kTriangular
    hessian.start_, hessian.index_, hessian.value_ = H.indptr, H.indices, H.data
    h = highspy.Highs()
    h.setOptionValue("output_flag", False)
    h.passModel(lp)
    h.passHessian(hessian)
    path = str(tmp_path / "random.mps")
    h.writeModel(path)
    problem = load_problem(path, SCHEMA)
    assert problem.data["A"].shape == (m, n)  # no variable bounds: no identity rows
    np.testing.assert_allclose(problem.data["P"].toarray(), P.toarray(), rtol=1e-12)
    np.testing.assert_allclose(problem.data["A"].toarray(), A.toarray(), rtol=1e-12)
    np.testing.assert_allclose(problem.data["q"], data["q"], rtol=1e-12)


@pytest.mark.parametrize("text, needle", [
    ("NAME BAD\nROWS\n N obj\nCOLUMNS\n  x1 obj 1.0 c9 3\nENDATA\n", "not defined"),
    ("NAME INTQ\nROWS\n N obj\n L c1\nCOLUMNS\n    MARKER  'MARKER'  'INTORG'\n    x1  obj  1.0  c1  1.0\n"
     "    MARKER  'MARKER'  'INTEND'\n    x2  obj  1.0  c1  1.0\nRHS\n    RHS  c1  4.0\nENDATA\n", "integer"),
    ("this is not an MPS file\n", "QPS / MPS"),
])
def test_bad_files_exit_7(cli, tmp_path, text, needle):
    path = write(tmp_path, "bad.qps", text)
    r = cli("qp", path)
    assert r.exit_code == 7, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and needle in lines[0] and path in lines[0], r.stderr
    assert "Running HiGHS" not in r.stderr + r.stdout


def test_a_qps_file_for_another_command_is_refused_in_one_line(cli, tmp_path):
    path = write(tmp_path, "qpex.qps", QPEX)
    r = cli("ot", path)
    lines = r.stderr.strip().splitlines()
    assert r.exit_code == 7 and len(lines) == 1 and "optsolve qp" in lines[0] and path in lines[0], r.stderr


def test_qps_is_read_never_written(cli, tmp_path):
    r = cli("gen", "qp", "--family", "random", "--n", "10", "-o", tmp_path / "x.qps")
    assert r.exit_code == 2 and "Traceback" not in r.stderr and ".npz, .json, .mat" in r.stderr, r.stderr
    assert not (tmp_path / "x.qps").exists()
