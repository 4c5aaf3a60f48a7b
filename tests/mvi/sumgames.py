"""Games given as a mean of N terms, for the --batch tests: F_i(z) = M z + q + s (E_i z + e_i)."""
import numpy as np

m, N = 4, 2000
_rng = np.random.default_rng(7)
_R, _ = np.linalg.qr(_rng.standard_normal((m, m)))


def _game(b, s):
    a = np.sqrt(1.0 - b * b)
    M = np.block([[b * np.eye(m), a * _R], [-a * _R.T, b * np.eye(m)]])  # ||M|| = 1, rho = b
    E = _rng.standard_normal((N, 2 * m, 2 * m)) / np.sqrt(2 * m)
    e = _rng.standard_normal((N, 2 * m))
    return M, np.linspace(-1.0, 1.0, 2 * m), s * (E - E.mean(axis=0)), s * (e - e.mean(axis=0))


_GAMES = {"weak": _game(-0.2, 0.3), "monotone": _game(0.2, 0.3)}


def _full(name, z):
    M, q, E, e = _GAMES[name]
    return M @ z + q + np.einsum("nij,j->i", E, z) / N + e.mean(axis=0)


def _batch(name, z, idx):
    M, q, E, e = _GAMES[name]
    return M @ z + q + np.einsum("nij,j->i", E[idx], z) / len(idx) + e[idx].mean(axis=0)


def weak(z):
    return _full("weak", z)


def weak_batch(z, idx):
    return _batch("weak", z, idx)


weak_terms = N


def monotone(z):
    return _full("monotone", z)


def monotone_batch(z, idx):
    return _batch("monotone", z, idx)


def monotone_terms():
    return N


def half(z):
    return _full("weak", z)


half_terms = N


def empty(z):
    return _full("weak", z)


def empty_batch(z, idx):
    return _batch("weak", z, idx)


empty_terms = 0


def flat(z):
    return _full("weak", z)


def flat_batch(z, idx):
    return np.zeros(3)


flat_terms = N
