"""Monte-Carlo draws for the truncated likelihood: rejection sampling into S, and the
importance-sampling pool the Newton method reuses.

Every proposal costs one oracle call (:class:`optsolve.truncated.sets.Oracle` counts them).
Rejection sampling draws in vectorised batches sized from the acceptance seen so far and
never loops forever: when the acceptance falls below ``floor`` it raises
:class:`AcceptanceCollapse`; a batch that would pass the oracle budget raises
:class:`BudgetExhausted` before any of it is asked, and the deadline is looked at between
chunks of at most 2^16 proposals (:class:`TimeUp`).
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
from scipy.special import logsumexp

ACCEPTANCE_FLOOR = 1e-6  # below this acceptance rate the sampler gives up


class AcceptanceCollapse(RuntimeError):
    """The acceptance rate of proposals fell below the floor."""


class BudgetExhausted(RuntimeError):
    """The oracle-call budget is spent."""


class TimeUp(RuntimeError):
    """The deadline passed."""


class DrawLimit(RuntimeError):
    """The next batch of draws would pass a limit other than the oracle budget (the length of one
    Sobol sequence, the memory budget)."""


STOPPED = (BudgetExhausted, AcceptanceCollapse, TimeUp, DrawLimit)
SOBOL_MAX = 1 << 30  # points one scrambled Sobol sequence of scipy gives


def stop_of(exc: Exception) -> tuple[str, str]:
    """(stop, reason) for a run that ended on one of :data:`STOPPED`."""
    if isinstance(exc, TimeUp):
        return "time_limit", "the time limit was reached"
    if isinstance(exc, DrawLimit):
        return "limit", str(exc)
    return ("budget" if isinstance(exc, BudgetExhausted) else "collapse"), str(exc)


def check_time(deadline) -> None:
    if deadline is not None and time.perf_counter() > deadline:
        raise TimeUp()


class Sampler:
    """Draws from p_theta restricted to S by rejection, counting oracle calls against a budget."""

    def __init__(self, family, oracle, rng, *, max_calls: int | None = None, floor: float = ACCEPTANCE_FLOOR,
                 deadline: float | None = None):
        self.family = family
        self.oracle = oracle
        self.rng = rng
        self.max_calls = max_calls
        self.floor = floor
        self.deadline = deadline
        self.accepted = 0  # accepted draws, over all calls
        self.rate = 0.5  # running acceptance estimate, for batch sizes

    def ask(self, Y):
        """The oracle's answers for the points ``Y``, counted against the budget (BudgetExhausted first)."""
        self.afford(Y.shape[0])
        return self.oracle(Y)

    def afford(self, proposals: int) -> None:
        """Raise :class:`BudgetExhausted` when ``proposals`` more calls would pass the budget."""
        if self.max_calls is not None and self.oracle.calls + proposals > self.max_calls:
            raise BudgetExhausted(f"the oracle budget of {self.max_calls} calls is spent ({self.oracle.calls} "
                                  f"made; the next batch needs {proposals})")

    def accepted_draws(self, theta, k: int) -> tuple[np.ndarray, int]:
        """k draws of p_theta | S and the number of proposals they took. Proposals are asked in
        vectorised batches; those after the k-th accepted one are not counted (a sequential
        sampler would not have asked them)."""
        got, total, proposals = [], 0, 0
        while total < k:
            check_time(self.deadline)
            batch = int(min(1_000_000, max(1, math.ceil(1.3 * (k - total) / max(self.rate, self.floor)))))
            Y = self.family.sample(theta, batch, self.rng)
            inside = self.ask(Y)
            hits = np.flatnonzero(inside)
            if hits.size > k - total:  # stop at the k-th acceptance
                last = int(hits[k - total - 1]) + 1
                self.oracle.calls -= batch - last
                Y, inside, batch = Y[:last], inside[:last], last
            proposals += batch
            kept = Y[inside]
            got.append(kept)
            total += kept.shape[0]
            self.rate = 0.9 * self.rate + 0.1 * kept.shape[0] / batch
            if proposals >= 1000 and (total + 1) / proposals < self.floor:
                raise AcceptanceCollapse(f"the acceptance rate of p_theta on the set fell to {total}/{proposals} "
                                         f"(below the floor {self.floor:g})")
        self.accepted += k
        return np.vstack(got)[:k], proposals


@dataclass
class Pool:
    """Accepted draws of p_theta_k | S from several batches of proposals (batch k: N_k proposals of
    p_theta_k, kept where the oracle said yes), with per point log h(y) - log q(y) for the
    balance-heuristic mixture q = sum_k (N_k / N) p_theta_k: the self-normalised importance
    weights of p_theta | S are softmax(theta . T(y) + base), for any theta near the theta_k."""

    Y: np.ndarray
    base: np.ndarray
    proposals: int  # N, all proposals (accepted or not)
    _single: object = field(default=None, repr=False)  # the draws in single precision, or what gives them

    def single(self) -> np.ndarray:
        """The draws in single precision (made once): the rows of the Newton systems' products."""
        if callable(self._single):
            self._single = self._single()
        if self._single is None:
            self._single = self.Y.astype(np.float32)
        return self._single

    def log_weights(self, family, theta):
        return family.dot(self.Y, theta) + self.base

    def weights(self, family, theta):
        s = self.log_weights(family, theta)
        return np.exp(s - logsumexp(s))

    def ess(self, family, theta) -> float:
        w = self.weights(family, theta)
        return float(1.0 / (w @ w))

    def survival(self, family, theta) -> tuple[float, float]:
        """The importance estimate of p_theta(S) = E_q[1_S p_theta / q] and its standard error."""
        r = np.exp(self.log_weights(family, theta) - family.A(theta))
        N = self.proposals
        mean = r.sum() / N
        var = max((r @ r) / N - mean * mean, 0.0)
        return float(mean), float(math.sqrt(var / N))


SOBOL_CHUNK = 1 << 16


def sobol_count(x: float, nets: bool = True) -> int:
    """The number of Sobol points to draw for at least x: a power of 2 (the sequence's first 2^m
    points are a net: in few dimensions their averages are far more accurate than other counts'),
    or with ``nets`` False beyond SOBOL_CHUNK a multiple of it (where a net's balance gains little,
    as in many dimensions, rounding up to a power of 2 would draw up to twice what is needed)."""
    if nets or x <= SOBOL_CHUNK:
        return 1 << max(1, int(math.ceil(math.log2(max(x, 2.0)))))
    return SOBOL_CHUNK * int(math.ceil(x / SOBOL_CHUNK))


def sobol_normals(N: int, d: int, rng):
    """N standard normal rows from one scrambled Sobol sequence, in chunks of at most 2^16 rows
    (randomised quasi-Monte Carlo: each row is N(0, I), and averages over the N rows vary far
    less than over independent draws)."""
    from scipy.special import ndtri
    from scipy.stats import qmc

    engine = qmc.Sobol(d, scramble=True, seed=rng)
    for a in range(0, N, SOBOL_CHUNK):
        U = engine.random(min(SOBOL_CHUNK, N - a))
        yield ndtri(np.clip(U, 1e-16, 1 - 1e-16, out=U), out=U)


class PoolSet:
    """Batches of rejection draws at successive proposals (members of the family), combined into one
    :class:`Pool`."""

    def __init__(self, family, sampler: Sampler):
        self.family = family
        self.sampler = sampler
        self.batches = []  # (theta_k, N_k, first row, end row) of the kept draws
        self._rows = None  # the kept draws of every batch, one after another
        self._used = 0
        self._single, self._cast = None, 0  # their single-precision copy, and the rows cast so far

    def accepted(self, theta, N: int):
        """The accepted draws of N proposals of p_theta, chunk by chunk, with the chunk's proposals
        (scrambled Sobol points, one oracle call each; the budget is checked for all N first, the
        deadline between chunks).
        Where the family's draws are affine in the normals, each chunk goes to the oracle in the
        original coordinates by one matrix product, and only the accepted rows are whitened."""
        if N > SOBOL_MAX:
            raise DrawLimit(f"the next batch needs {N} proposals, more than the {SOBOL_MAX} of one Sobol sequence")
        self.sampler.afford(N)
        oracle = self.sampler.oracle
        affine = self.family.affine(theta) if hasattr(oracle, "original") else None
        if affine is not None:
            mu, M = affine
            scale = oracle.scale if oracle.scale is not None else np.eye(self.family.d)
            Mo, co = M @ scale.T, scale @ mu + (oracle.shift if oracle.shift is not None else 0.0)
        for Zc in sobol_normals(N, self.family.d, self.sampler.rng):
            check_time(self.sampler.deadline)
            if affine is None:
                Y = self.family.transform(theta, Zc)
                yield Y[self.sampler.ask(Y)], Zc.shape[0]
            else:
                Xc = Zc @ Mo
                Xc += co
                yield mu + Zc[oracle.original(Xc)] @ M, Zc.shape[0]

    def draw(self, theta, N: int) -> None:
        """A batch: the accepted draws of N proposals of p_theta, written after the rows kept so far."""
        start = self._used
        for Y, _ in self.accepted(theta, N):
            self._append(Y)
        k = self._used - start
        if k < 2 or k / N < self.sampler.floor:
            self._used = start
            if k < 2:
                raise AcceptanceCollapse(f"{k} of {N} proposals of the current estimate fell in the set")
            raise AcceptanceCollapse(f"the acceptance rate of the current estimate fell to {k / N:.3g} "
                                     f"(below the floor {self.sampler.floor:g})")
        self.sampler.accepted += k
        self.batches.append((np.array(theta), N, start, self._used))

    def reserve(self, rows: int) -> None:
        """Room for ``rows`` kept draws in all (memory is taken as rows are written, not here): with
        room reserved, batches are written in place and no pool is ever copied."""
        if self._rows is None or self._rows.shape[0] < rows:
            new = np.empty((int(rows), self.family.d))
            if self._rows is not None:
                new[:self._used] = self._rows[:self._used]
            self._rows, self._single, self._cast = new, None, 0

    def _append(self, Y) -> None:
        end = self._used + Y.shape[0]
        if self._rows is None or end > self._rows.shape[0]:
            self.reserve(max(end, 2 * (self._rows.shape[0] if self._rows is not None else 0), 1 << 14))
        self._rows[self._used:end] = Y
        self._used = end

    def accepted_count(self, last: bool = False) -> int:
        """Draws kept in all batches (``last``: in the last one)."""
        if last:
            return self.batches[-1][3] - self.batches[-1][2]
        return self._used

    def _single_rows(self) -> np.ndarray:
        """The kept draws in single precision, cast as they come (one buffer beside the rows)."""
        if self._single is None or self._single.shape[0] < self._rows.shape[0]:
            self._single, self._cast = np.empty(self._rows.shape, dtype=np.float32), 0
        self._single[self._cast:self._used] = self._rows[self._cast:self._used]
        self._cast = self._used
        return self._single[:self._used]

    def pool(self) -> Pool:
        """Every batch kept as one pool (views of the kept rows: no copy)."""
        Y = self._rows[:self._used]
        N = sum(b[1] for b in self.batches)
        logq = logsumexp(np.stack([math.log(b[1] / N) + self.family.logpdf(b[0], Y) for b in self.batches]), axis=0)
        return Pool(Y, self.family.log_h(Y) - logq, N, self._single_rows)

    def forget(self) -> None:
        """Drop every batch (those drawn before the estimate settled); their room is reused."""
        self.batches = []
        self._used = self._cast = 0


def clopper_pearson(k: int, N: int, level: float = 0.95) -> tuple[float, float]:
    """The exact binomial confidence interval for a proportion k / N (beta quantiles through
    scipy.special, which the solver has loaded already; scipy.stats takes a second to import)."""
    from scipy.special import betaincinv

    a = (1 - level) / 2
    lo = 0.0 if k == 0 else float(betaincinv(k, N - k + 1, a))
    hi = 1.0 if k == N else float(betaincinv(k + 1, N - k, 1 - a))
    return lo, hi
