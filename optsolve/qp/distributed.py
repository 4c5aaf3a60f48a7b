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
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field

import numpy as np
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from optsolve.core.errors import SolverError
from optsolve.core.progress import SILENT, Progress
from optsolve.qp.admm import ACTIVE_SET_ROUNDS, REFINED, RHO_EQ_FACTOR, RHO_TOL, Scaled, polish, ruiz_scale, support
from optsolve.qp.problems import QPProblem


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


@dataclass
class Node:
    rows: np.ndarray  # global constraint rows
    idx: np.ndarray  # global variables copied here
    Q: sp.csc_matrix
    q: np.ndarray
    A: sp.csc_matrix
    l: np.ndarray
    u: np.ndarray
    rho: np.ndarray = None
    rho_scalar: float = 1.0
    mu: float = 1.0
    lu: object = None
    x: np.ndarray = None
    s: np.ndarray = None
    lam: np.ndarray = None
    y: np.ndarray = None

    def factor(self):
        """Factor ``[Q + mu I, A'; A, -diag(1/rho)]``: solving it with right-hand side (b, 0) gives
        ``(Q + mu I + A' diag(rho) A) x = b`` without forming A'A (dense when A has a dense row)."""
        k, r = self.idx.size, self.rows.size
        K = sp.vstack([sp.hstack([self.Q + self.mu * sp.eye(k), self.A.T]),
                       sp.hstack([self.A, sp.diags(-1.0 / self.rho) if r else sp.csc_matrix((0, 0))])], format="csc")
        try:
            self.lu = spla.splu(K, permc_spec="MMD_AT_PLUS_A", diag_pivot_thresh=0.0,
                                options={"SymmetricMode": True})
        except (MemoryError, RuntimeError) as exc:
            raise SolverError(f"the local system of a node ({k} variables, {r} rows) could not be factored "
                              f"({exc}); try another number of nodes, or method admm.") from None

    def solve(self, b):
        return self.lu.solve(np.concatenate([b, np.zeros(self.rows.size)]))[: self.idx.size]


def split(s: Scaled, part: np.ndarray, n_nodes: int) -> list[Node]:
    """Nodes of the scaled problem for a row partition (see the module docstring)."""
    from scipy.sparse.csgraph import connected_components

    n = s.P.shape[0]
    Ar = s.A.tocsr()
    var_sets = []
    for i in range(n_nodes):
        rows = np.flatnonzero(part == i)
        var_sets.append(set(np.unique(Ar[rows].indices).tolist()))
    # components of P (and lone variables): each goes whole to one node
    Pg = s.P.copy().tocsr()
    Pg.data[:] = 1.0
    ncomp, label = connected_components(Pg + sp.eye(n, format="csr"), directed=False)
    members = [[] for _ in range(ncomp)]
    for j, c in enumerate(label):
        members[c].append(j)
    owner_of_comp = np.zeros(ncomp, dtype=np.int64)
    load = np.array([len(v) for v in var_sets], dtype=float)
    for c, vars_c in enumerate(members):
        counts = [sum(1 for j in vars_c if j in vs) for vs in var_sets]
        best = max(range(n_nodes), key=lambda i: (counts[i], -load[i]))
        owner_of_comp[c] = best
        var_sets[best].update(vars_c)
        load[best] += len(vars_c)
    nodes = []
    Pc = s.P.tocsc()
    for i in range(n_nodes):
        idx = np.array(sorted(var_sets[i]), dtype=np.int64)
        rows = np.flatnonzero(part == i)
        mine = np.zeros(n, dtype=bool)
        mine[[j for j in idx if owner_of_comp[label[j]] == i]] = True
        keep = mine[idx]
        Qfull = Pc[idx][:, idx]
        Dk = sp.diags(keep.astype(float))
        Q = sp.csc_matrix(Dk @ Qfull @ Dk)  # whole components only: rows and columns it owns
        q = np.where(keep, s.q[idx], 0.0)
        A = sp.csc_matrix(Ar[rows][:, idx])
        nodes.append(Node(rows=rows, idx=idx, Q=Q, q=q, A=A, l=s.l[rows], u=s.u[rows]))
    return nodes


def _set_rho(nd, rho: float):
    """The node's per-row rho from its scalar: 1e3 x on equality rows, 1e-6 on free rows (as OSQP)."""
    eq = np.abs(nd.u - nd.l) < RHO_TOL
    loose = np.isinf(nd.l) & np.isinf(nd.u)
    nd.rho_scalar = rho
    nd.rho = np.where(loose, 1e-6, np.where(eq, RHO_EQ_FACTOR * rho, rho))


def _apply_node_policy(policy, k, nodes, w, s: Scaled, n):
    """New (rho, mu) for every node from its residuals; refactors the nodes that changed; new mu counts."""
    lam = np.zeros(s.A.shape[0])
    for nd in nodes:
        lam[nd.rows] = nd.lam
    Pw, Atl = s.P @ w, s.A.T @ lam
    dual_rel = float(np.abs(Pw + s.q + Atl).max()) / (max(float(np.abs(Pw).max()), float(np.abs(Atl).max()),
                                                          float(np.abs(s.q).max())) + 1e-30) if n else 0.0
    counts = np.zeros(n)
    for nd in nodes:
        z = nd.A @ nd.x
        prim = float(np.abs(z - nd.s).max()) / (max(float(np.abs(z).max()), float(np.abs(nd.s).max())) + 1e-30) \
            if nd.rows.size else 0.0
        wt = w[nd.idx]
        cons = float(np.abs(nd.x - wt).max()) / (max(float(np.abs(nd.x).max()), float(np.abs(wt).max())) + 1e-30) \
            if nd.idx.size else 0.0
        new_rho, new_mu = policy.node(k, prim, cons, dual_rel, nd.rho_scalar, nd.mu)
        if abs(math.log(new_rho / nd.rho_scalar)) > 0.01 or abs(math.log(new_mu / nd.mu)) > 0.01:
            _set_rho(nd, new_rho)
            nd.mu = new_mu
            nd.factor()
        counts[nd.idx] += nd.mu
    counts[counts == 0] = 1.0
    return counts


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
    message: str = ""
    polished: str | None = None
    time_s: dict = field(default_factory=dict)


def solve_distributed(qp: QPProblem, n_nodes: int | None = None, partition=None, *, rho: float = 1.0,
                      mu: float = 1.0, alpha: float = 1.6, scaling: int = 10, eps_abs: float = 1e-3,
                      eps_rel: float = 1e-3, max_iter: int = 4000, check_every: int = 25,
                      refine_stalled: bool = True, deadline: float | None = None,
                      progress: Progress = SILENT, controller=None, scaled: Scaled | None = None,
                      ) -> DistributedResult:
    """DistributedQP on ``qp`` over ``n_nodes`` nodes (automatic partition) or the given row ``partition``.

    ``controller``: a learned node policy (DeepDistributedQP, :class:`optsolve.qp.policy.Policy` of
    kind 'distributed'): every ``controller.interval`` iterations, for ``controller.steps`` calls,
    each node's rho and mu follow it (the node refactors); then they stay fixed.
    """
    t0 = time.perf_counter()
    s = scaled if scaled is not None else ruiz_scale(qp, scaling)
    n, m = qp.n, qp.m
    if partition is not None:
        part = np.asarray(partition, dtype=np.int64)
        labels = np.unique(part)
        part = np.searchsorted(labels, part)
        n_nodes = int(labels.size) if part.size else 1
    else:
        n_nodes = max(1, min(int(n_nodes or 1), max(m, 1)))
        part = auto_partition(s.A, n_nodes)
    nodes = split(s, part, n_nodes)
    counts = np.zeros(n)
    for nd in nodes:
        _set_rho(nd, rho)
        nd.mu = mu
        nd.factor()
        nd.x = np.zeros(nd.idx.size)
        nd.s = np.zeros(nd.rows.size)
        nd.lam = np.zeros(nd.rows.size)
        nd.y = np.zeros(nd.idx.size)
        counts[nd.idx] += nd.mu
    orphan = counts == 0  # variables in no node: none, by construction of split()
    counts[orphan] = 1.0
    w = np.zeros(n)
    t_setup = time.perf_counter()
    Dinv, Einv, cinv = 1.0 / s.D, 1.0 / s.E, 1.0 / s.c
    status, it = "max_iter", 0
    info = {}

    def assemble():
        lam, sv = np.zeros(m), np.zeros(m)
        for nd in nodes:
            lam[nd.rows] = nd.lam
            sv[nd.rows] = nd.s
        return lam, sv

    def residuals():
        lam, sv = assemble()
        Aw, Pw, Atl = s.A @ w, s.P @ w, s.A.T @ lam
        cons = max((float(np.abs(Dinv[nd.idx] * (nd.x - w[nd.idx])).max()) if nd.idx.size else 0.0)
                   for nd in nodes)
        prim = float(np.abs(Einv * (Aw - sv)).max()) if m else 0.0
        dual = cinv * float(np.abs(Dinv * (Pw + s.q + Atl)).max()) if n else 0.0
        ptol = eps_abs + eps_rel * max(float(np.abs(Einv * Aw).max()) if m else 0.0,
                                       float(np.abs(Einv * sv).max()) if m else 0.0)
        dtol = eps_abs + eps_rel * cinv * max(float(np.abs(Dinv * Pw).max()) if n else 0.0,
                                              float(np.abs(Dinv * Atl).max()) if n else 0.0,
                                              float(np.abs(Dinv * s.q).max()) if n else 0.0)
        quad, lin, sc = float(Pw @ w), float(s.q @ w), support(lam, s.l, s.u) if m else 0.0
        gap = cinv * abs(quad + lin + sc)
        gtol = eps_abs + eps_rel * cinv * max(abs(quad), abs(lin), abs(sc))
        return {"prim": max(prim, cons), "dual": dual, "cons": cons, "gap": gap,
                "ok": max(prim, cons) < ptol and dual < dtol and gap < gtol, "lam": lam, "s": sv}

    try:
        for it in range(1, max_iter + 1):
            w_old = w
            for nd in nodes:
                wt = w[nd.idx]
                rhs = -nd.q + nd.mu * wt - nd.y + nd.A.T @ (nd.rho * nd.s - nd.lam)
                nd.x = nd.solve(rhs)
                z = nd.A @ nd.x
                zr = alpha * z + (1.0 - alpha) * nd.s
                s_new = np.clip(zr + nd.lam / nd.rho, nd.l, nd.u)
                nd.lam = nd.lam + nd.rho * (zr - s_new)
                nd.s = s_new
            acc = np.zeros(n)
            for nd in nodes:
                np.add.at(acc, nd.idx, nd.mu * nd.x)
            w = alpha * (acc / counts) + (1.0 - alpha) * w_old
            for nd in nodes:
                nd.y = nd.y + nd.mu * (alpha * nd.x + (1.0 - alpha) * w_old[nd.idx] - w[nd.idx])
            if (controller is not None and it % controller.interval == 0
                    and it // controller.interval <= controller.steps):
                counts = _apply_node_policy(controller, it // controller.interval, nodes, w, s, n)
            if it % check_every == 0:
                info = residuals()
                progress.update(it, prim=info["prim"], dual=info["dual"])
                if info["ok"]:
                    status = "optimal"
                    break
                if not (math.isfinite(info["prim"]) and math.isfinite(info["dual"])):
                    status = "numerical_error"
                    break
            if deadline is not None and time.perf_counter() > deadline:
                status = "time_limit"
                break
    except KeyboardInterrupt:
        status = "interrupted"
    if not info or status in ("max_iter", "time_limit", "interrupted"):
        info = residuals()
        if info["ok"]:
            status = "optimal"
    lam = info["lam"]
    polished = None
    if refine_stalled and status in ("max_iter", "time_limit") and m:
        out = polish(s, w, lam, s.A @ w, 1e-6, 3, rounds=ACTIVE_SET_ROUNDS)
        if out is not None:
            xp, yp, zp = out
            rp = float(np.abs(Einv * (s.A @ xp - zp)).max())
            rd = cinv * float(np.abs(Dinv * (s.P @ xp + s.q + s.A.T @ yp)).max())
            if rp < eps_abs and rd < eps_abs:
                w, lam, status, polished = xp, yp, "optimal", REFINED
    t_end = time.perf_counter()
    return DistributedResult(x=s.D * w, y=cinv * s.E * lam, z=Einv * (s.A @ w), status=status, iterations=it,
                             prim_res=info["prim"], dual_res=info["dual"], consensus_res=info["cons"],
                             nodes=n_nodes, copies=int(sum(nd.idx.size for nd in nodes)), polished=polished,
                             time_s={"setup": t_setup - t0, "iterations": t_end - t_setup})
