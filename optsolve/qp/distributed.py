"""DistributedQP: OSQP-style ADMM over a graph of nodes that agree on shared variables.

Saravanos, Kuperman, Oshin, Abdul, Pacelli and Theodorou (2025), "Deep Distributed
Optimization for Large-Scale Quadratic Programming", ICLR: each node i owns a block of
constraint rows and a local copy x_i of the variables its rows (and its share of the cost)
touch; consensus ``x_i = w[idx_i]`` with a global vector w. One iteration, with per-node
penalties rho_i (constraints; 1e3 x on equality rows) and mu_i (consensus), relaxation alpha:

1. every node: ``(Q_i + mu_i I + A_i' R_i A_i) x_i = -q_i + mu_i w~_i - y_i + A_i'(R_i s_i - lam_i)``,
   ``z_i = A_i x_i`` (``R_i = diag(rho_i)``; the node's quasi-definite KKT matrix is factored once);
2. ``s_i = Proj_[l_i, u_i](alpha z_i + (1 - alpha) s_i + lam_i / rho_i)``, and every global entry
   becomes the mu-weighted mean of its copies, relaxed: ``w = alpha mean + (1 - alpha) w``;
3. ``lam_i += rho_i (alpha z_i + (1 - alpha) s_i_old - s_i)``,
   ``y_i += mu_i (alpha x_i + (1 - alpha) w~_i_old - w~_i)``.

A relaxed two-block ADMM: it converges for fixed rho, mu > 0 and alpha in (0, 2). The
problem is Ruiz-scaled as a whole before it is split (as :func:`optsolve.qp.admm.ruiz_scale`).

Splitting the cost: every local Q_i must be PSD. Each connected component of P's graph goes
whole to one node (a principal submatrix of a PSD matrix is PSD), the node that already holds
most of its variables; q goes with it. Partition: the constraint rows in reverse
Cuthill-McKee order of the variable-constraint graph, cut into N equal blocks; or the
node index of every row given by the problem file.

Over MPI ranks (:class:`optsolve.qp.ranks.MPIRanks`, the nodes spread by :func:`assign_nodes`), every rank runs
:func:`solve_distributed` with the same problem and settings. Per iteration the ranks exchange one
Allreduce (the consensus sums of the variables copied on more than one rank, overlapped with the
rows' updates); a termination check adds three (the whole w, the nodes' duals and rows, and the
largest consensus residual). The iterates equal the single-process ones up to the order of
floating-point sums.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp

from optsolve.core.errors import ParameterError, SolverError
from optsolve.core.history import trace
from optsolve.core import signals
from optsolve.core.progress import SILENT, Progress
from optsolve.qp import defaults
from optsolve.qp.admm import REFINED, rho_vector
from optsolve.qp.ranks import OneProcess, assign_nodes
from optsolve.qp.polish import ACTIVE_SET_ROUNDS, polish
from optsolve.qp.ldl import QuasiDefinite
from optsolve.qp.problems import QPProblem
from optsolve.qp.scaling import Scaled, ruiz_scale, segment_max, segments
from optsolve.qp.termination import RESIDUAL_MEASURE, dual_cone, gap_limit, passes_termination, support


def auto_partition(A: sp.csc_matrix, n_nodes: int) -> np.ndarray:
    """Node index per row: rows in reverse Cuthill-McKee order of the graph [0 A'; A 0], cut in equal blocks."""
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    m, n = A.shape
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    B = sp.bmat([[None, A.T], [A, None]], format="csr")
    B.data[:] = 1.0
    order = reverse_cuthill_mckee(B, symmetric_mode=True)
    rows = order[order >= n] - n
    part = np.empty(m, dtype=np.int64)
    part[rows] = np.minimum(np.arange(m) * n_nodes // m, n_nodes - 1)
    return part


def node_costs(nodes: list, comm, repeats: int = 5) -> np.ndarray:
    """The time of one iteration's local work at each node, measured: each node alone, factored,
    and the best of ``repeats`` runs of its solve and its products with A_i and A_i', the nodes
    taken in turn as in an iteration (so that the others' factors pass through the caches between
    two runs of one). The fill of the factors, and so the solve's time, depends on the node's
    structure in ways a count of nonzeros does not predict. Each rank measures every size-th node;
    one Allreduce shares the times."""
    rng = np.random.default_rng(0)
    mine = []
    for i in range(comm.rank, len(nodes), comm.size):
        nd = nodes[i]
        if nd.idx.size:
            alone = Blocks([nd], int(nd.idx.max()) + 1)
            alone.set_parameters(np.ones(1), np.ones(1))
            mine.append((i, alone, rng.standard_normal(nd.idx.size), rng.standard_normal(nd.rows.size)))
    cost = np.zeros(len(nodes))
    cost[[i for i, *_ in mine]] = math.inf
    for _ in range(repeats):
        for i, alone, b, r in mine:
            t = time.perf_counter()
            x = alone.solve(b - alone.AT @ r)
            np.clip(alone.A @ x, alone.l, alone.u)
            cost[i] = min(cost[i], time.perf_counter() - t)
    return comm.sum(cost)


@dataclass
class Node:
    """One node's share of the scaled problem: its rows, the variables it copies, its cost part."""

    rows: np.ndarray  # global constraint rows
    idx: np.ndarray  # global variables copied here
    Q: sp.csc_matrix
    q: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray


def split(s: Scaled, part: np.ndarray, n_nodes: int, deadline: float | None = None) -> list[Node] | None:
    """Nodes of the scaled problem for a row partition (see the module docstring).

    Node i gets its rows and copies every variable they touch; each connected component of P
    (a lone variable is one) goes whole to the node whose rows touch most of its variables (the
    least loaded among those, then the first), or, when no row touches it, to the least loaded
    node. Every step is a sort or a sparse product over the nonzeros, none a pass over all the
    rows or variables per node, so that a node per row stays cheap. None when ``deadline`` (a
    ``time.perf_counter()`` value) passes before every node is built."""
    import heapq

    from scipy.sparse.csgraph import connected_components

    n, m = s.P.shape[0], s.A.shape[0]
    A = s.A.tocoo()
    row_order = np.argsort(part, kind="stable")  # node i's rows: row_order[row_ptr[i]:row_ptr[i + 1]], ascending
    row_ptr = np.searchsorted(part[row_order], np.arange(n_nodes + 1))
    local_row = np.empty(m, dtype=np.int64)
    local_row[row_order] = np.arange(m) - np.repeat(row_ptr[:-1], np.diff(row_ptr))
    touch = sp.csr_matrix((np.ones(A.nnz), (part[A.row], A.col)), shape=(n_nodes, n))
    touch.sum_duplicates()  # sorted column indices: the variables node i's rows touch
    touch.data[:] = 1.0
    Pg = s.P.copy().tocsr()
    Pg.data[:] = 1.0
    ncomp, label = connected_components(Pg + sp.eye(n, format="csr"), directed=False)
    counts = (touch @ sp.csr_matrix((np.ones(n), (np.arange(n), label)), shape=(n, ncomp))).tocsc()
    load = np.diff(touch.indptr).astype(float)
    size = np.bincount(label, minlength=ncomp).astype(float)
    heap = [(load[i], i) for i in range(n_nodes)]  # (load, node), stale entries skipped
    heapq.heapify(heap)
    owner = np.zeros(ncomp, dtype=np.int64)
    for c in range(ncomp):
        lo, hi = counts.indptr[c], counts.indptr[c + 1]
        if hi > lo:
            cand, cnt = counts.indices[lo:hi], counts.data[lo:hi]
            top = cand[cnt == cnt.max()]
            best = int(top[np.lexsort((top, load[top]))[0]])
        else:
            while heap[0][0] != load[heap[0][1]]:
                heapq.heapreplace(heap, (load[heap[0][1]], heap[0][1]))
            best = heap[0][1]
        owner[c] = best
        load[best] += size[c]
        heapq.heappush(heap, (load[best], best))
    own = owner[label]  # the node that owns each variable's component
    var_order = np.argsort(own, kind="stable")
    var_ptr = np.searchsorted(own[var_order], np.arange(n_nodes + 1))
    P = s.P.tocoo()
    p_node = own[P.row]  # an entry of P joins two variables of one component
    p_order = np.argsort(p_node, kind="stable")
    p_ptr = np.searchsorted(p_node[p_order], np.arange(n_nodes + 1))
    a_order = np.argsort(part[A.row], kind="stable")
    a_ptr = np.searchsorted(part[A.row][a_order], np.arange(n_nodes + 1))
    nodes = []
    for i in range(n_nodes):
        if deadline is not None and i % 256 == 255 and time.perf_counter() > deadline:
            return None
        idx = np.union1d(touch.indices[touch.indptr[i]:touch.indptr[i + 1]], var_order[var_ptr[i]:var_ptr[i + 1]])
        rows = row_order[row_ptr[i]:row_ptr[i + 1]]
        k = idx.size
        e = p_order[p_ptr[i]:p_ptr[i + 1]]
        Q = sp.csc_matrix((P.data[e], (np.searchsorted(idx, P.row[e]), np.searchsorted(idx, P.col[e]))), shape=(k, k))
        Q.eliminate_zeros()  # whole components only: the rows and columns it owns
        e = a_order[a_ptr[i]:a_ptr[i + 1]]
        Ai = sp.csc_matrix((A.data[e], (local_row[A.row[e]], np.searchsorted(idx, A.col[e]))), shape=(rows.size, k))
        q = np.where(own[idx] == i, s.q[idx], 0.0)
        nodes.append(Node(rows=rows, idx=idx, Q=Q, q=q, A=Ai, l=s.l[rows], u=s.u[rows]))
    return nodes


BALANCE_EVERY = 50  # iterations between residual-balancing updates (balance=True)
BALANCE_MAX = 10  # updates at most: the parameters then stay fixed, where the ADMM converges
BALANCE_FACTOR = 5.0  # an update only when some node's parameter moves by more than this factor


def _segment_max(v: np.ndarray, ptr: np.ndarray) -> np.ndarray:
    """max |v| over each segment ptr[i]:ptr[i+1] (0 for an empty one)."""
    return segment_max(np.abs(v), *segments(np.diff(ptr)))


class Blocks:
    """The nodes side by side: local copies and rows concatenated in node order, the local
    matrices block-diagonal. The nodes' KKT systems form one block-diagonal matrix, factored
    once per parameter change (the fill stays inside the blocks: these are the local
    factorisations) and solved for all nodes at once every iteration."""

    def __init__(self, nodes: list[Node], n: int, comm=OneProcess):
        self.comm = comm
        self.count = len(nodes)
        self.n = n
        ks = np.array([nd.idx.size for nd in nodes], dtype=np.int64)
        rs = np.array([nd.rows.size for nd in nodes], dtype=np.int64)
        self.copy_ptr = np.concatenate([[0], np.cumsum(ks)])
        self.row_ptr = np.concatenate([[0], np.cumsum(rs)])
        self.node_of_copy = np.repeat(np.arange(self.count), ks)
        self.node_of_row = np.repeat(np.arange(self.count), rs)
        self.gidx = np.concatenate([nd.idx for nd in nodes]) if nodes else np.zeros(0, dtype=np.int64)
        self.rows = np.concatenate([nd.rows for nd in nodes]) if nodes else np.zeros(0, dtype=np.int64)
        self.Q = sp.block_diag([nd.Q for nd in nodes], format="csc")
        self.A = sp.block_diag([nd.A for nd in nodes], format="csc")
        self.AT = self.A.T.tocsr()
        self.q = np.concatenate([nd.q for nd in nodes])
        self.l = np.concatenate([nd.l for nd in nodes])
        self.u = np.concatenate([nd.u for nd in nodes])
        self.q_diagonal = self.Q.diagonal()
        self.ldl = None

    def set_parameters(self, rho: np.ndarray, mu: np.ndarray):
        """Per-node rho and mu; rows get 1e3 x rho when they are equalities, 1e-6 when free (as OSQP)."""
        self.rho_node, self.mu_node = rho, mu
        self.rho = rho_vector(rho[self.node_of_row], self.l, self.u)
        self.mu = mu[self.node_of_copy]
        self.counts = self.comm.sum(np.bincount(self.gidx, weights=self.mu, minlength=self.n))
        self.counts[self.counts == 0] = 1.0  # no variable is left out by split(); kept finite regardless
        C = self.gidx.size
        try:
            if self.ldl is None:  # pattern, ordering and elimination tree once
                self.ldl = QuasiDefinite(self.Q + sp.diags(self.mu), self.A if self.rows.size else None,
                                         1.0 / self.rho)
            else:
                self.ldl.update(1.0 / self.rho, h_diagonal=self.q_diagonal + self.mu)
        except (MemoryError, RuntimeError) as exc:
            raise SolverError(f"the nodes' local systems ({C} copied variables, {self.rows.size} rows) could not "
                              f"be factored ({exc}); try another number of nodes, or method admm.") from None

    @property
    def factorisations(self) -> int:
        return 0 if self.ldl is None else self.ldl.factorisations

    def solve(self, b: np.ndarray) -> np.ndarray:
        """``(Q_i + mu_i I + A_i' R_i A_i) x_i = b_i`` for every node, through the quasi-definite KKT form."""
        if not self.rows.size:
            return self.ldl.solve(b)
        return self.ldl.solve(np.concatenate([b, np.zeros(self.rows.size)]))[: self.gidx.size]


def _node_residuals(B: Blocks, X, sl, w):
    """Every node's relative primal and consensus residuals (OSQP's normalisation)."""
    z = B.A @ X
    prim = _segment_max(z - sl, B.row_ptr) / (np.maximum(_segment_max(z, B.row_ptr), _segment_max(sl, B.row_ptr))
                                              + 1e-30)
    wt = w[B.gidx]
    cons = _segment_max(X - wt, B.copy_ptr) / (np.maximum(_segment_max(X, B.copy_ptr),
                                                          _segment_max(wt, B.copy_ptr)) + 1e-30)
    return prim, cons


def _balance(B: Blocks, X, sl, w, dual_rel) -> bool:
    """Residual balancing per node (OSQP's adaptive rule, node by node): rho_i by sqrt(primal_i / dual),
    mu_i by sqrt(consensus_i / dual); applied when some node's factor passes BALANCE_FACTOR."""
    prim, cons = _node_residuals(B, X, sl, w)
    d = max(dual_rel, 1e-30)
    rho = np.clip(B.rho_node * np.sqrt(np.maximum(prim, 1e-30) / d), 1e-6, 1e6)
    mu = np.clip(B.mu_node * np.sqrt(np.maximum(cons, 1e-30) / d), 1e-6, 1e6)
    jump = np.maximum(np.abs(np.log(rho / B.rho_node)), np.abs(np.log(mu / B.mu_node)))
    if B.comm.max(jump.max(initial=0.0)) <= math.log(BALANCE_FACTOR):  # the same decision on every rank
        return False
    B.set_parameters(rho, mu)
    return True


def _apply_node_policy(policy, k, B: Blocks, X, sl, w, dual_rel):
    """New (rho, mu) of every node from its residuals; refactors when any moved by more than 1%."""
    prim, cons = _node_residuals(B, X, sl, w)
    rho, mu = policy.nodes(k, prim, cons, dual_rel, B.rho_node, B.mu_node)
    moved = max(np.abs(np.log(rho / B.rho_node)).max(initial=0.0), np.abs(np.log(mu / B.mu_node)).max(initial=0.0))
    if B.comm.max(moved) > 0.01:
        B.set_parameters(rho, mu)


@dataclass
class DistributedResult:
    x: np.ndarray
    y: np.ndarray
    z: np.ndarray
    status: str
    iterations: int
    prim_res: float
    dual_res: float
    consensus_res: float
    nodes: int
    copies: int
    factorisations: int = 0
    balance_updates: int = 0
    message: str = ""
    polished: str | None = None
    time_s: dict = field(default_factory=dict)


def _unstarted(qp: QPProblem, n_nodes: int, t0: float) -> DistributedResult:
    """The time limit passed while the nodes were set up: the starting point x = 0, y = 0 is the last iterate."""
    z = np.clip(np.zeros(qp.m), qp.l, qp.u)
    return DistributedResult(x=np.zeros(qp.n), y=np.zeros(qp.m), z=np.zeros(qp.m), status="time_limit", iterations=0,
                             prim_res=float(np.abs(z).max()) if qp.m else 0.0,
                             dual_res=float(np.abs(qp.q).max()) if qp.n else 0.0, consensus_res=0.0, nodes=n_nodes,
                             copies=0, message="The time limit passed while the nodes were set up.",
                             time_s={"setup": time.perf_counter() - t0, "iterations": 0.0})


def _rank_nodes(s: Scaled, n_nodes, partition, deadline, comm):
    """(this rank's nodes, the number of nodes): the given row partition, else an automatic one of ``n_nodes``,
    split into nodes (None where the deadline came first) and, over MPI ranks, this rank's share of them."""
    if partition is not None:
        part = np.asarray(partition, dtype=np.int64)
        labels = np.unique(part)
        part = np.searchsorted(labels, part)
        n_nodes = int(labels.size) if part.size else 1
    else:
        n_nodes = max(1, min(int(n_nodes or 1), max(s.A.shape[0], 1)))
        part = auto_partition(s.A, n_nodes)
    nodes = split(s, part, n_nodes, deadline if comm.size == 1 else None)  # ranks stop together, at checks
    if nodes is None or comm.size == 1:
        return nodes, n_nodes
    if n_nodes < comm.size:
        raise ParameterError(f"{comm.size} MPI ranks need at least {comm.size} nodes; this partition has "
                             f"{n_nodes} (give '--nodes' >= {comm.size}, or run fewer ranks).")
    return [nodes[i] for i in assign_nodes(node_costs(nodes, comm), comm.size)[comm.rank]], n_nodes


class _Exchange:
    """Which variables the ranks exchange. w is kept at this rank's variables only (``var``; ``local``: each
    copy's place in var): the consensus sums of a variable no other rank copies need no reduction, and only the
    shared ones travel (the Allreduce and the update of w are O(n / ranks + shared), not O(n)). ``everywhere``:
    the variables copied on more than one rank; ``shared``: this rank's among them (places in var); ``slot``:
    their places in the exchanged vector; ``owned``: the variables this rank writes into the whole w."""

    def __init__(self, gidx: np.ndarray, n: int, comm):
        self.n, self.comm = n, comm
        self.var = np.unique(gidx)
        self.local = np.searchsorted(self.var, gidx)
        here = np.zeros(n)
        here[self.var] = 1.0
        holders = comm.sum(here)
        self.everywhere = np.flatnonzero(holders > 1)
        self.shared = np.flatnonzero(holders[self.var] > 1)
        self.slot = np.searchsorted(self.everywhere, self.var[self.shared])
        owner = comm.max_array(np.where(here > 0, float(comm.rank), -1.0))  # who writes a variable into w
        self.owned = np.flatnonzero(owner[self.var] == comm.rank)

    def whole(self, wl: np.ndarray) -> np.ndarray:
        """w at every variable, on every rank (collective: every rank calls it at the same iterations)."""
        out = np.zeros(self.n)
        out[self.var[self.owned]] = wl[self.owned]
        return self.comm.sum(out)


def _residuals(s: Scaled, B, comm, w, X, lam, sl, eps_abs: float, eps_rel: float) -> dict:
    """The termination test of the consensus iterate (every node's rows gathered on every rank): primal
    (with the consensus residual), dual and gap, unscaled, and whether they pass at (eps_abs, eps_rel)."""
    n, m = s.P.shape[0], s.A.shape[0]
    Dinv, Einv, cinv = 1.0 / s.D, 1.0 / s.E, 1.0 / s.c
    both = np.zeros(2 * m)
    both[B.rows], both[m + B.rows] = lam, sl
    both = comm.sum(both)  # every node's rows: on every rank
    lam_g, s_g = both[:m], both[m:]
    Aw, Pw, Atl = s.A @ w, s.P @ w, s.A.T @ lam_g
    cons = comm.max(float(np.abs(Dinv[B.gidx] * (X - w[B.gidx])).max()) if B.gidx.size else 0.0)
    prim = float(np.abs(Einv * (Aw - s_g)).max()) if m else 0.0
    rd = Pw + s.q + Atl
    dual = cinv * float(np.abs(Dinv * rd).max()) if n else 0.0
    ptol = eps_abs + eps_rel * max(float(np.abs(Einv * Aw).max()) if m else 0.0,
                                   float(np.abs(Einv * s_g).max()) if m else 0.0)
    dscale = cinv * max(float(np.abs(Dinv * Pw).max()) if n else 0.0, float(np.abs(Dinv * Atl).max()) if n else 0.0,
                        float(np.abs(Dinv * s.q).max()) if n else 0.0)
    dtol = eps_abs + eps_rel * dscale
    with np.errstate(over="ignore", invalid="ignore"):  # a diverging iterate: inf, and numerical_error
        quad, lin, sc = float(Pw @ w), float(s.q @ w), support(lam_g, s.l, s.u) if m else 0.0
    gap = cinv * abs(quad + lin + sc)
    gtol = gap_limit({"gap_tol_scale": cinv * max(abs(quad), abs(lin), abs(sc))}, eps_abs, eps_rel)
    dual_rel = (float(np.abs(rd).max()) / (max(float(np.abs(Pw).max()), float(np.abs(Atl).max()),
                                               float(np.abs(s.q).max())) + 1e-30)) if n else 0.0
    return {"prim": max(prim, cons), "dual": dual, "cons": cons, "gap": gap, "dual_rel": dual_rel,
            "ok": max(prim, cons) < ptol and dual < dtol and gap < gtol, "lam": lam_g, "s": s_g}


def _blocks(nodes, n: int, comm, controller, rho: float, mu: float):
    """The nodes' blocks with their starting rho and mu (a policy's own, fitted with it, where it has them)."""
    B = Blocks(nodes, n, comm)
    if controller is not None:
        rho, mu = controller.start.get("rho", rho), controller.start.get("mu", mu)
    B.set_parameters(np.full(B.count, float(rho)), np.full(B.count, float(mu)))
    return B


def _iterate(B, ex: _Exchange, X, Y, sl, lam, wl, alpha: float):
    """One iteration: the nodes' x-updates, the consensus sums (the shared variables' exchanged between ranks
    while the rows update), the rows' and the consensus variables' relaxed updates and the duals. Returns
    (X, Y, sl, lam, wl, whether some rank received a stopping signal)."""
    w_old = wl
    wt = wl[ex.local]
    X = B.solve(-B.q + B.mu * wt - Y + B.AT @ (B.rho * sl - lam))
    sums = np.bincount(ex.local, weights=B.mu * X, minlength=ex.var.size)  # the consensus sums
    exchange = np.zeros(ex.everywhere.size + 1)  # the last entry: ranks that received a stopping signal
    exchange[ex.slot] = sums[ex.shared]
    exchange[-1] = float(signals.received() is not None)
    pending = ex.comm.start_sum(exchange)
    zr = alpha * (B.A @ X) + (1.0 - alpha) * sl  # the rows' updates, while the sums travel
    s_new = np.clip(zr + lam / B.rho, B.l, B.u)
    lam = lam + B.rho * (zr - s_new)
    sl = s_new
    exchanged = ex.comm.finish_sum(pending)
    sums[ex.shared] = exchanged[ex.slot]
    wl = alpha * (sums / B.counts[ex.var]) + (1.0 - alpha) * w_old
    Y = Y + B.mu * (alpha * X + (1.0 - alpha) * wt - wl[ex.local])
    return X, Y, sl, lam, wl, exchanged[-1] > 0


def _judged(it: int, info: dict, progress) -> str | None:
    """A check's verdict ('optimal', 'numerical_error', None: go on), traced and shown as progress."""
    progress.update(it, prim=info["prim"], dual=info["dual"])
    trace(it, max(info["prim"], info["dual"]), measure=RESIDUAL_MEASURE, prim=info["prim"], dual=info["dual"],
          consensus=info["cons"], gap=info["gap"])
    if info["ok"]:
        return "optimal"
    return None if math.isfinite(info["prim"]) and math.isfinite(info["dual"]) else "numerical_error"


def _polish_stalled(s: Scaled, w, lam_g, eps_abs: float, eps_rel: float, deadline):
    """(x, y) of the polished iterate where it passes the termination test, else None."""
    out = polish(s, w, lam_g, s.A @ w, 1e-6, 3, rounds=ACTIVE_SET_ROUNDS, deadline=deadline)
    if out is None:
        return None
    x_pol, y_pol, z_pol = out
    y_pol = dual_cone(y_pol, s.l, s.u)
    return (x_pol, y_pol) if passes_termination(s, x_pol, y_pol, z_pol, eps_abs, eps_rel) else None


def solve_distributed(qp: QPProblem, n_nodes: int | None = None, partition=None, *, rho: float = 1.0,
                      mu: float = 1.0, alpha: float = defaults.ALPHA, scaling: int = defaults.SCALING,
                      eps_abs: float = defaults.EPS, eps_rel: float = defaults.EPS, max_iter: int = 4000,
                      check_every: int = defaults.CHECK_EVERY, refine_stalled: bool = True, deadline=None,
                      progress: Progress = SILENT, controller=None, scaled: Scaled | None = None,
                      balance: bool = False, comm=OneProcess) -> DistributedResult:
    """DistributedQP on ``qp`` over ``n_nodes`` nodes (automatic partition) or the given row ``partition``.

    ``controller``: a learned node policy (DeepDistributedQP, :class:`optsolve.qp.policy.Policy` of kind
    'distributed'): every ``controller.interval`` iterations, for ``controller.steps`` calls, each node's rho
    and mu follow it (the nodes refactor), its ``start`` replacing ``rho`` and ``mu``. ``balance``: then (or
    from the start) every BALANCE_EVERY iterations OSQP's residual balancing node by node (:func:`_balance`),
    at most BALANCE_MAX times. ``comm``: :class:`optsolve.qp.ranks.MPIRanks` to spread the nodes over MPI ranks (see the
    module's notes).
    """
    t0 = time.perf_counter()
    s = scaled if scaled is not None else ruiz_scale(qp, scaling)
    n, m = qp.n, qp.m
    nodes, n_nodes = _rank_nodes(s, n_nodes, partition, deadline, comm)
    if nodes is None or (comm.size == 1 and deadline is not None and time.perf_counter() > deadline):
        return _unstarted(qp, n_nodes, t0)
    B = _blocks(nodes, n, comm, controller, rho, mu)
    C, M = B.gidx.size, B.rows.size
    X, Y, sl, lam = np.zeros(C), np.zeros(C), np.zeros(M), np.zeros(M)
    ex = _Exchange(B.gidx, n, comm)
    wl, w = np.zeros(ex.var.size), np.zeros(n)
    t_setup = time.perf_counter()
    status, it, info, balanced = "max_iter", 0, {}, 0
    learned_until = controller.interval * controller.steps if controller is not None else 0  # then balancing

    def residuals():
        nonlocal w
        w = ex.whole(wl)
        return _residuals(s, B, comm, w, X, lam, sl, eps_abs, eps_rel)

    try:
        for it in range(1, max_iter + 1):
            X, Y, sl, lam, wl, signalled = _iterate(B, ex, X, Y, sl, lam, wl, alpha)
            if signalled:  # a rank was signalled: all stop after this same iteration
                status = "interrupted"
                break
            checking = it % check_every == 0
            if checking:
                info = residuals()
                status = _judged(it, info, progress) or status
                if status != "max_iter":
                    break
            policy_turn = (controller is not None and it % controller.interval == 0
                           and it // controller.interval <= controller.steps)
            balance_turn = balance and it > learned_until and it % BALANCE_EVERY == 0 and balanced < BALANCE_MAX
            if policy_turn or balance_turn:
                dual_rel = (info if checking else residuals())["dual_rel"]  # residuals() has gathered w
                if policy_turn:
                    _apply_node_policy(controller, it // controller.interval, B, X, sl, w, dual_rel)
                if balance_turn and _balance(B, X, sl, w, dual_rel):
                    balanced += 1
            if deadline is not None and (checking or comm.size == 1):  # ranks decide together, at checks
                if comm.max(float(time.perf_counter() > deadline)) > 0:
                    status = "time_limit"
                    break
    except KeyboardInterrupt:
        status = "interrupted"
    if not info or status in ("max_iter", "time_limit", "interrupted"):
        info = residuals()
        if info["ok"]:
            status = "optimal"
    lam_g = info["lam"]
    w = ex.whole(wl)
    polished = None
    # a time_limit status means the deadline has passed (all ranks agreed): no polishing after it
    if refine_stalled and status == "max_iter" and m and (deadline is None or time.perf_counter() < deadline):
        refined = _polish_stalled(s, w, lam_g, eps_abs, eps_rel, deadline)
        if refined is not None:
            w, lam_g, status, polished = *refined, "optimal", REFINED
    t_end = time.perf_counter()
    return DistributedResult(x=s.D * w, y=(1.0 / s.c) * s.E * lam_g, z=(1.0 / s.E) * (s.A @ w), status=status,
                             iterations=it, prim_res=info["prim"], dual_res=info["dual"], consensus_res=info["cons"],
                             nodes=n_nodes, copies=int(comm.sum(np.array([C]))[0]), factorisations=B.factorisations,
                             balance_updates=balanced, polished=polished,
                             time_s={"setup": t_setup - t0, "iterations": t_end - t_setup})
