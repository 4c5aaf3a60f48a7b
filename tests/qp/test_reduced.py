"""ADMM's KKT system in reduced form (optsolve.qp.reduced) against the full KKT matrix, and ADMM with it."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

import optsolve.qp.reduced as reduced
from optsolve.qp.admm import ADMMSettings, rho_vector, solve_admm
from optsolve.qp.problems import FAMILIES, SCHEMA, prepare
from optsolve.qp.reduced import Reduced
from optsolve.qp.scaling import ruiz_scale

pytestmark = pytest.mark.skipif(importlib.util.find_spec("cvxopt") is None, reason="cvxopt is not installed")


def kkt(H, A, d):
    return sp.bmat([[H, A.T], [A, sp.diags(-d)]], format="csc")


def setup(rng, n=40, m=60, dense_row=False):
    M = sp.random(n, n, 0.1, random_state=rng)
    H = (M @ M.T + 1e-6 * sp.eye(n)).tocsc()
    A = sp.random(m, n, 0.08, random_state=rng, format="lil")
    if dense_row:
        A[0, :] = rng.standard_normal(n)
    l = rng.standard_normal(m) - 1.0
    u = np.where(np.arange(m) % 3 == 0, l, l + 2.0)  # a third equalities
    l[np.arange(m) % 7 == 1], u[np.arange(m) % 7 == 1] = -np.inf, np.inf  # some free rows
    return H, A.tocsc(), l, u


def small_allowed(monkeypatch):
    monkeypatch.setattr(reduced, "MIN_ENTRIES", 0)
    monkeypatch.setattr(reduced, "MIN_DENSITY", 0.0)


def test_solves_like_the_kkt_matrix_and_refactors_per_class(monkeypatch):
    small_allowed(monkeypatch)
    rng = np.random.default_rng(0)
    H, A, l, u = setup(rng)
    d = 1.0 / rho_vector(0.1, l, u)
    f = Reduced.of(H, A, d)
    assert f is not None
    b = rng.standard_normal(H.shape[0] + A.shape[0])
    np.testing.assert_allclose(f.solve(b), spla.spsolve(kkt(H, A, d), b), rtol=1e-6, atol=1e-8)
    d2 = 1.0 / rho_vector(3.7, l, u)
    f.update(d2)
    np.testing.assert_allclose(f.solve(b), spla.spsolve(kkt(H, A, d2), b), rtol=1e-6, atol=1e-8)
    assert f.factorisations == 2
    d3 = d2 * (1.0 + np.arange(d2.size))  # a rho per row: the weighted Gram matrix itself
    f.update(d3)
    np.testing.assert_allclose(f.solve(b), spla.spsolve(kkt(H, A, d3), b), rtol=1e-6, atol=1e-8)
    # a class whose rows shared a value at the start (rho 1e-6 on inequalities and free rows alike) may split
    g = Reduced.of(H, A, np.full(d.size, 2.0))
    g.update(d)
    np.testing.assert_allclose(g.solve(b), spla.spsolve(kkt(H, A, d), b), rtol=1e-6, atol=1e-8)


def test_declines_small_problems_and_dense_rows(monkeypatch):
    rng = np.random.default_rng(1)
    H, A, l, u = setup(rng)
    d = 1.0 / rho_vector(0.1, l, u)
    assert Reduced.of(H, A, d) is None  # below MIN_ENTRIES
    monkeypatch.setattr(reduced, "MIN_ENTRIES", 0)
    assert Reduced.of(H, A, d) is None  # below MIN_DENSITY: thin supernodes
    small_allowed(monkeypatch)
    assert Reduced.of(H, A, d) is not None
    monkeypatch.setattr(reduced, "GRAM_BOUND", 1.0)
    H, A, l, u = setup(rng, dense_row=True)
    assert Reduced.of(H, A, 1.0 / rho_vector(0.1, l, u)) is None  # A'A as dense as the dense row makes it


@pytest.mark.parametrize("fam", ["random", "mpc", "grid", "eqqp"])
def test_admm_reaches_the_same_answer_in_either_form(monkeypatch, fam):
    small_allowed(monkeypatch)
    qp = prepare(SCHEMA.validate(FAMILIES[fam].generate(np.random.default_rng(3), n=80), source="test"))
    st = ADMMSettings(eps_abs=1e-7, eps_rel=1e-7, max_iter=20000)
    s = ruiz_scale(qp, st.scaling)
    from optsolve.qp.admm import KKT

    assert isinstance(KKT(s, st.sigma, rho_vector(0.1, s.l, s.u)).ldl, Reduced)
    a = solve_admm(qp, st, scaled=s)
    monkeypatch.setattr(reduced.Reduced, "of", classmethod(lambda cls, H, A, d, shift=0.0: None))
    b = solve_admm(qp, st, scaled=s)
    assert a.status == b.status == "optimal"
    assert abs(a.iterations - b.iterations) <= 2 * st.check_every
    assert qp.objective(a.x) == pytest.approx(qp.objective(b.x), rel=1e-5, abs=1e-6)
