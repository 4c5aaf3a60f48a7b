"""cont-thresh-greedy-bi: convert-fair with a continuous-greedy FSM step on the multilinear extension.

Chen, Xing, Zhou and Crawford (ICLR 2025) solve each FSM guess by continuous greedy on the
multilinear extension F(x) = E[f(R(x))] (R(x) contains element i independently with
probability x_i) over the fairness polytope {x in [0, 1]^n : sum x <= k, l_c <= x(U_c) <= u_c},
then round. Guarantee (ln(1/eps) + 1, 1 - 7 eps) for FSM, hence ((1 + alpha)(ln(1/eps) + 1),
1 - O(eps)) for fair cover.

Ours, where the paper is silent:

* The gradient is exact for coverage: with P_j = prod over the elements i covering item j of
  (1 - x_i), dF/dx_i = sum_{j covered by i} w_j P_j / (1 - x_i) (items with a coordinate at 1
  handled by counting them), one sparse product each way, n oracle calls. For facility
  location it is estimated from ``samples`` draws of R(x): the gain of i w.r.t. R(x) minus i,
  from the best and second-best similarity of every client in R (n calls per draw).
* The direction, the best vertex of the polytope for the gradient, is found group by group:
  the l_c best elements of each group, then the best of the rest while groups stay below
  u_c, up to k. Steps of size ``delta`` from x = 0 to time 1, coordinates capped at 1.
* Rounding: greedy restricted to the support of x (the elements continuous greedy moved),
  while the FSM constraints admit the element, until f reaches the target; then the exact
  repair of :mod:`optsolve.cover.greedy`, and the removal of redundant elements of
  :mod:`optsolve.cover.improve` (cheapest loss first, while the set stays fair and f at the
  target), or its whole improvement when asked. (Rounding in the order of x, or of gain times x,
  gave larger sets on facility location.)
"""

from __future__ import annotations


import numpy as np
import scipy.sparse as sp

from optsolve.core.progress import SILENT, Progress
from optsolve.cover.greedy import GAIN_TOL, CoverRun, convert_fair, reached
from optsolve.cover.improve import improve
from optsolve.cover.problems import CoverProblem

DELTA = 0.02  # step of the continuous greedy (50 steps to time 1)
SAMPLES = 8  # draws of R(x) per gradient estimate (facility location)


class Multilinear:
    """Gradient of the multilinear extension of a coverage or facility-location function."""

    def __init__(self, cp: CoverProblem, rng, samples: int = SAMPLES):
        self.cp, self.rng, self.samples = cp, rng, samples
        self.calls = 0
        if cp.kind == "coverage":
            self.MT = sp.csr_matrix(cp.M.T)
            self.has = np.diff(sp.csc_matrix(cp.M).indptr) > 0
        else:
            self.coo = cp.M.tocoo()

    def gradient(self, x: np.ndarray) -> np.ndarray:
        if self.cp.kind == "coverage":
            self.calls += self.cp.n
            return self._coverage(x)
        self.calls += self.cp.n * self.samples
        return self._facility(x)

    def _coverage(self, x):
        cp = self.cp
        full = x >= 1.0 - 1e-12
        one_minus = np.where(full, 1.0, 1.0 - x)
        L = self.MT @ np.log(one_minus)
        z = self.MT @ full.astype(float)
        prod = np.exp(L)
        p0 = cp.weights * prod * (z < 0.5)  # items with no coordinate at 1: prod over all of (1 - x)
        p1 = cp.weights * prod * (np.abs(z - 1) < 0.5)  # exactly one at 1: the product over the others
        return np.where(full, cp.M @ p1, (cp.M @ p0) / one_minus)

    def _facility(self, x):
        cp, coo = self.cp, self.coo
        grad = np.zeros(cp.n)
        clients = cp.M.shape[1]
        for _ in range(self.samples):
            inside = self.rng.random(cp.n) < x
            keep = inside[coo.row]
            r, c, v = coo.row[keep], coo.col[keep], coo.data[keep]
            best, second = np.zeros(clients), np.zeros(clients)
            arg = np.full(clients, -1)
            if v.size:
                o = np.lexsort((-v, c))  # by client, best first
                r, c, v = r[o], c[o], v[o]
                head = np.flatnonzero(np.concatenate([[True], c[1:] != c[:-1]]))
                best[c[head]], arg[c[head]] = v[head], r[head]
                nxt = head + 1
                nxt = nxt[nxt < c.size]
                nxt = nxt[c[nxt] == c[nxt - 1]]
                second[c[nxt]] = v[nxt]
            ref = np.where(arg[coo.col] == coo.row, second[coo.col], best[coo.col])
            grad += np.bincount(coo.row, weights=np.maximum(coo.data - ref, 0.0), minlength=cp.n)
        return grad / self.samples


def best_vertex(g: np.ndarray, groups: np.ndarray, k: int, lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
    """argmax of <g, v> over the 0/1 vertices of {sum v <= k, lo_c <= v(U_c) <= hi_c} (lo summing
    to at most k): each group's lo_c best, then the best positive rest while groups stay below hi_c."""
    n = g.size
    order = np.lexsort((-g, groups))
    starts = np.searchsorted(groups[order], np.arange(lo.size))
    rank = np.empty(n, dtype=np.int64)
    rank[order] = np.arange(n) - np.repeat(starts, np.diff(np.append(starts, n)))
    v = rank < lo[groups]
    room = max(0, k - int(v.sum()))
    cand = np.flatnonzero(~v & (rank < hi[groups]) & (g > 0))
    if room and cand.size:
        top = cand[np.argsort(-g[cand], kind="stable")[:room]]
        v[top] = True
    return v.astype(float)


def continuous_fair(cp: CoverProblem, fn, *, eps: float = 0.1, alpha: float = 0.1, beta="auto",
                    bicriteria: bool = False, deadline: float | None = None, max_rounds: int | None = None,
                    seed: int | None = None, delta: float = DELTA, finish=None,
                    progress: Progress = SILENT) -> CoverRun:
    """convert-fair with the continuous FSM step, rounding, repair and the removal of redundant
    elements (see the module); ``finish``: convert-fair's, in place of that removal."""
    ml = Multilinear(cp, np.random.default_rng(seed))
    steps = max(1, int(round(1.0 / delta)))

    def fsm(fn, admissible, k, target, budget):
        x = np.zeros(cp.n)
        for _ in range(steps):
            x = np.minimum(1.0, x + (1.0 / steps) * best_vertex(ml.gradient(x), cp.groups, k, admissible.lo,
                                                                admissible.hi))
            if budget.out():
                break
        return _round(fn, cp, x, admissible, k, target)

    if finish is None:
        def finish(fn, S, target):
            return improve(cp, fn, S, target, deadline=deadline, polish=False, exchanges=False)[0]

    return convert_fair(cp, fn, eps=eps, alpha=alpha, beta=beta, bicriteria=bicriteria, deadline=deadline,
                        max_rounds=max_rounds, fsm=fsm, finish=finish, oracles=(ml,), progress=progress)


def _round(fn, cp: CoverProblem, x, admissible, k: int, target: float) -> list:
    """Greedy on the support of x (one vectorised gain pass per addition), while the FSM
    constraints admit the element, until f reaches the target or k elements."""
    fn.reset()
    admissible.reset()
    S = []
    cand = np.flatnonzero(x > 0)
    tol = GAIN_TOL * cp.f_all
    alive = np.ones(cand.size, dtype=bool)
    while not reached(fn.value, target) and len(S) < k and alive.any():
        idx = np.flatnonzero(alive)
        gains = fn.gains(cand[idx])
        for j in np.argsort(-gains):
            i = int(cand[idx[j]])
            if gains[j] <= tol:
                alive[idx[j]] = False
                continue
            if not admissible.ok(cp.groups[i]):
                alive[idx[j]] = False
                continue
            fn.add(i)
            admissible.add(cp.groups[i])
            S.append(i)
            alive[idx[j]] = False
            break
        else:
            break
    return S
