"""Ruiz equilibration (optsolve.qp.scaling) against a dense restatement of osqp's passes."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from optsolve.qp.problems import FAMILIES, SCHEMA, QPProblem, prepare
from optsolve.qp.scaling import ruiz_scale


def dense_ruiz(P, q, A, passes):
    """osqp's scaling on dense arrays: each pass divides the KKT matrix's rows and columns by the square root of
    their largest entry (P's columns read from its upper triangle; maxima outside [1e-4, 1e4] count as 1), then
    scales the cost by the mean column maximum of P or the largest |q|."""
    def bounded(v):
        v = np.where(v < 1e-4, 1.0, v)
        return np.minimum(v, 1e4)

    P, q, A = np.triu(P.copy()), q.copy(), A.copy()
    n, m = A.shape[1], A.shape[0]
    D, E, c = np.ones(n), np.ones(m), 1.0
    for _ in range(passes):
        col = np.abs(np.vstack([P, A])).max(axis=0, initial=0.0)
        row = np.abs(A).max(axis=1, initial=0.0)
        dt, et = 1 / np.sqrt(bounded(col)), 1 / np.sqrt(bounded(row))
        P, A, q = dt[:, None] * P * dt[None, :], et[:, None] * A * dt[None, :], dt * q
        D, E = D * dt, E * et
        mean = np.abs(P).max(axis=0, initial=0.0).mean() if n else 0.0
        ct = 1 / bounded(np.array([max(mean, bounded(np.array([np.abs(q).max(initial=0.0)]))[0])]))[0]
        P, q, c = ct * P, ct * q, c * ct
    return D, E, c, q


def random_problem(rng, n, m):
    M = sp.random(n, n, 0.3, random_state=rng)
    P = (M @ M.T).tocsc() * float(10 ** rng.uniform(-3, 3))
    A = sp.random(m, n, 0.3, random_state=rng, format="csc") * float(10 ** rng.uniform(-3, 3))
    return QPProblem(P=P, q=rng.standard_normal(n) * 10 ** rng.uniform(-3, 3), A=A, l=-np.ones(m), u=np.ones(m))


@pytest.mark.parametrize("seed", range(12))
def test_matches_the_dense_passes(seed):
    rng = np.random.default_rng(seed)
    n, m = int(rng.integers(0, 12)), int(rng.integers(0, 12))
    qp = random_problem(rng, n, m)  # empty rows and columns included at this density
    s = ruiz_scale(qp, 10)
    D, E, c, q = dense_ruiz(qp.P.toarray(), qp.q, qp.A.toarray(), 10)
    np.testing.assert_allclose(s.D, D, rtol=1e-12)
    np.testing.assert_allclose(s.E, E, rtol=1e-12)
    assert s.c == pytest.approx(c, rel=1e-12)
    np.testing.assert_allclose(s.q, q, rtol=1e-12, atol=1e-300)
    np.testing.assert_allclose(s.P.toarray(), c * D[:, None] * qp.P.toarray() * D[None, :], rtol=1e-12)
    np.testing.assert_allclose(s.A.toarray(), E[:, None] * qp.A.toarray() * D[None, :], rtol=1e-12)
    np.testing.assert_allclose(s.l, qp.l * E, rtol=1e-12)


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_families_match_the_dense_passes(name):
    qp = prepare(SCHEMA.validate(FAMILIES[name].generate(np.random.default_rng(3), n=40), source="test"))
    s = ruiz_scale(qp, 10)
    D, E, c, _ = dense_ruiz(qp.P.toarray(), qp.q, qp.A.toarray(), 10)
    np.testing.assert_allclose(s.D, D, rtol=1e-11)
    np.testing.assert_allclose(s.E, E, rtol=1e-11)
    assert s.c == pytest.approx(c, rel=1e-11)


@pytest.mark.parametrize("name", ["chain", "lasso", "portfolio"])
def test_row_maxima_in_row_order_give_the_same_scaling(monkeypatch, name):
    """Where np.maximum.at runs slow the row maxima are taken in row order instead, and where the segments are short
    from a padded table: bit for bit the same."""
    import optsolve.qp.scaling as scaling

    qp = prepare(SCHEMA.validate(FAMILIES[name].generate(np.random.default_rng(4), n=80), source="test"))
    padded = ruiz_scale(qp, 10)
    monkeypatch.setattr(scaling, "PAD_SHARE", 0)  # no table: np.maximum.at and reduceat
    at = ruiz_scale(qp, 10)
    for field in ("D", "E", "q"):
        np.testing.assert_array_equal(getattr(padded, field), getattr(at, field))
    np.testing.assert_array_equal(padded.A.data, at.A.data)
    np.testing.assert_array_equal(padded.P.data, at.P.data)
    monkeypatch.setattr(scaling, "AT_PROBE", 16)  # timed on the first 16 entries
    monkeypatch.setattr(scaling, "AT_SLOW", 1.0)  # fast: the rest by np.maximum.at, after the probe
    in_two = ruiz_scale(qp, 10)
    np.testing.assert_array_equal(in_two.E, at.E)
    monkeypatch.setattr(scaling, "AT_SLOW", -1.0)  # every first call counts as slow
    switched = []
    real = scaling._RowMax._by_rows
    monkeypatch.setattr(scaling._RowMax, "_by_rows", lambda self: switched.append(1) or real(self))
    by_rows = ruiz_scale(qp, 10)
    assert switched == [1]
    for field in ("D", "E", "q"):
        np.testing.assert_array_equal(getattr(by_rows, field), getattr(at, field))
    np.testing.assert_array_equal(by_rows.A.data, at.A.data)
    assert by_rows.c == at.c


def test_padded_maxima_of_uneven_segments():
    """The padded table's maxima against a plain loop: segments of uneven lengths, empty ones, entries out of
    segment order; a table too large for the entries is declined."""
    from optsolve.qp.scaling import _Padded

    rng = np.random.default_rng(7)
    seg = rng.integers(0, 50, size=300)
    seg[seg == 3] = 4  # segment 3 empty
    w = rng.random(300)
    table = _Padded.of(seg, 60, adjacent=False)
    expected = np.array([w[seg == k].max() if np.any(seg == k) else 0.0 for k in range(60)])
    np.testing.assert_array_equal(table(w), expected)
    np.testing.assert_array_equal(table(w * 2.0), expected * 2.0)  # the slots rewritten at each call
    order = np.argsort(seg, kind="stable")
    np.testing.assert_array_equal(_Padded.of(seg[order], 60, adjacent=True)(w[order]), expected)
    assert _Padded.of(np.r_[np.zeros(100, dtype=np.intp), np.arange(1, 100)], 100, adjacent=True) is None
    assert _Padded.of(np.zeros(0, dtype=np.intp), 5, adjacent=True) is None
