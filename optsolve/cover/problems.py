"""Problem files of ``optsolve cover`` and generators of its benchmark families.

Fair submodular cover (Chen, Xing, Zhou and Crawford, ICLR 2025): find a smallest set S of
elements with ``f(S) >= tau`` whose groups are in proportion,
``ceil(p_c |S|) <= |S n U_c| <= floor(q_c |S|)`` for every group c.

Keys. The function, one of:

* ``cover`` (elements x items, sparse or dense; nonzero = element covers item) with optional
  ``weights`` (one per item, >= 0; default 1): weighted coverage, f(S) = total weight of the
  items some element of S covers;
* ``sim`` (elements x clients, >= 0, sparse or dense): facility location,
  f(S) = sum over clients j of max over i in S of sim[i, j].

``groups`` (one label in 0..G-1 per element); the proportions ``p`` and ``q`` (one per group,
or one number for all), or ``balance`` DELTA (p_c = (1 - DELTA)/G, q_c = (1 + DELTA)/G);
the threshold ``tau`` (absolute) or ``tau_frac`` (a fraction of f(U)). ``family``: the
generator family (labels benchmarks).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp

from optsolve.core.generate import Family, Param
from optsolve.core.problem import Field, Problem, Schema, one_of


def _groups_rule(problem: Problem) -> None:
    g = problem["groups"]
    if g.size == 0:
        raise problem.error("array 'groups' is empty; expected one group label per element.")
    for key in ("p", "q"):
        if key in problem and np.ndim(problem[key]) == 1:
            G = problem[key].shape[0]
            bad = np.flatnonzero(g >= G)
            if bad.size:
                raise problem.error(f"array 'groups' has label {int(g[bad[0]])} at index {int(bad[0])}, but {key!r} "
                                    f"gives proportions for {G} groups (labels 0..{G - 1}).")


def _proportions_rule(problem: Problem) -> None:
    for key in ("p", "q", "balance"):
        if key in problem:
            v = np.atleast_1d(problem[key])
            bad = np.flatnonzero((v < 0) | (v > 1))
            if bad.size:
                raise problem.error(f"{key!r} has {v[bad[0]]:.6g} at index {int(bad[0])}; expected values in [0, 1].")
    if ("p" in problem) != ("q" in problem):
        given, missing = ("p", "q") if "p" in problem else ("q", "p")
        raise problem.error(f"missing key {missing!r}: proportions need both 'p' and 'q' (found {given!r}).")
    if "p" in problem and "balance" in problem:
        raise problem.error("give the proportions 'p' and 'q', or 'balance', not both.")
    if "p" in problem:
        p, q = np.broadcast_arrays(np.atleast_1d(problem["p"]), np.atleast_1d(problem["q"]))
        if p.shape != q.shape:
            raise problem.error(f"'p' has {p.size} entries and 'q' {q.size}; expected as many (one per group).")
        bad = np.flatnonzero(p > q)
        if bad.size:
            i = int(bad[0])
            raise problem.error(f"p > q for group {i} (p = {p[i]:.6g}, q = {q[i]:.6g}); expected p <= q.")


def _function_rule(problem: Problem) -> None:
    if "weights" in problem and "cover" not in problem:
        raise problem.error("key 'weights' goes with 'cover' (item weights of a coverage function); "
                            "a facility-location 'sim' carries its values itself.")
    if "tau" in problem and "tau_frac" in problem:
        raise problem.error("give 'tau' (absolute) or 'tau_frac' (fraction of f(U)), not both.")
    if "tau_frac" in problem and not 0 < problem["tau_frac"] <= 1:
        raise problem.error(f"'tau_frac' is {problem['tau_frac']:.6g}; expected a fraction in (0, 1].")


SCHEMA = Schema(
    name="cover",
    fields=(
        Field("cover", shape=("n", "items"), sparse=True, required=False, nonneg=True,
              doc="incidence, elements x items (nonzero: the element covers the item)"),
        Field("weights", shape=("items",), required=False, nonneg=True, doc="item weights (default 1)"),
        Field("sim", shape=("n", "clients"), sparse=True, required=False, nonneg=True,
              doc="facility-location similarities, elements x clients"),
        Field("groups", shape=("n",), dtype="int", nonneg=True, doc="group label of every element (0..G-1)"),
        Field("p", shape=("G",), alt_shape=(), required=False, doc="lower proportion per group (or one for all)"),
        Field("q", shape=("G",), alt_shape=(), required=False, doc="upper proportion per group (or one for all)"),
        Field("balance", kind="scalar", required=False, doc="DELTA: p_c = (1 - DELTA)/G, q_c = (1 + DELTA)/G"),
        Field("tau", kind="scalar", required=False, positive=True, doc="coverage threshold f(S) >= tau"),
        Field("tau_frac", kind="scalar", required=False, doc="threshold as a fraction of f(U)"),
        Field("family", kind="string", required=False, doc="the generator family it belongs to"),
    ),
    rules=(one_of(("cover",), ("sim",)), _function_rule, _groups_rule, _proportions_rule),
)


@dataclass
class CoverProblem:
    """A validated problem in solver form: the function's matrix (CSR, elements x the items or
    clients some element reaches), item weights (coverage), groups, per-group proportions and the
    absolute threshold.

    Groups are numbered 0..G-1 in the order of the file's labels that have elements (``labels``
    maps back), so no array is sized by a label's value. A label with no element constrains
    only through its lower proportion (it would need ceil(p_c |S|) elements it does not have);
    when some empty group has p_c > 0, the one with the largest p_c is kept as a group of size 0,
    which makes the same sets unfair as all of them together."""

    kind: str  # "coverage" or "facility"
    M: sp.csr_matrix
    weights: np.ndarray | None
    groups: np.ndarray
    p: np.ndarray
    q: np.ndarray
    tau: float
    f_all: float
    labels: np.ndarray | None = None  # the file's label of each group
    declared_groups: int | None = None  # the file's number of groups: largest label + 1, or the proportions given
    p_sum: float | None = None  # sums of the proportions over the declared groups
    q_sum: float | None = None

    def __post_init__(self):
        if self.labels is None:
            self.labels = np.arange(self.p.shape[0])
        if self.declared_groups is None:
            self.declared_groups = int(self.p.shape[0])
        if self.p_sum is None:
            self.p_sum, self.q_sum = float(self.p.sum()), float(self.q.sum())

    @property
    def n(self) -> int:
        return self.M.shape[0]

    @property
    def G(self) -> int:
        return self.p.shape[0]

    def group_sizes(self) -> np.ndarray:
        return np.bincount(self.groups, minlength=self.G)

    def counts_by_label(self, counts: np.ndarray, list_limit: int | None = None):
        """Per-group counts in the file's labels: a list indexed by label when the file declares at
        most ``list_limit`` groups (default: max(n, G)), else ``{label: count}`` of the nonzero ones."""
        limit = max(self.n, self.G) if list_limit is None else list_limit
        counts = np.asarray(counts, dtype=np.int64)
        if self.declared_groups <= limit:
            out = np.zeros(self.declared_groups, dtype=np.int64)
            out[self.labels] = counts
            return out.tolist()
        return {str(int(lab)): int(c) for lab, c in zip(self.labels, counts) if c}


def _label_groups(problem: Problem, balance: float | None):
    """(groups 0..G-1, labels, p, q, declared groups, sum p, sum q): see :class:`CoverProblem`."""
    labels, groups = np.unique(np.asarray(problem["groups"]), return_inverse=True)
    groups = groups.reshape(-1).astype(np.int64)
    lengths = [int(np.size(problem[k])) for k in ("p", "q") if k in problem and np.ndim(problem[k]) == 1]
    declared = max([int(labels[-1]) + 1] + lengths)  # a Python int: labels up to 2^63 allocate nothing
    if balance is None and "p" not in problem:
        balance = problem.get("balance")
    if balance is None and "p" not in problem:
        raise problem.error("no proportions: give 'p' and 'q' (one per group, or one number for all) or "
                            "'balance' in the file, or the '--balance DELTA' option.")
    if balance is not None:
        if not 0 <= balance <= 1:
            raise problem.error(f"balance DELTA is {balance:.6g}; expected a number in [0, 1].")
        pc, qc = (1 - balance) / declared, (1 + balance) / declared
        per_p, per_q = None, None
        p_sum, q_sum = 1.0 - balance, 1.0 + balance
    else:
        pv, qv = np.atleast_1d(problem["p"]).astype(float), np.atleast_1d(problem["q"]).astype(float)
        if pv.size == 1 and qv.size == 1:
            pc, qc, per_p, per_q = float(pv[0]), float(qv[0]), None, None
            p_sum, q_sum = pc * declared, qc * declared
        else:
            per_p, per_q = np.broadcast_to(pv, (declared,)), np.broadcast_to(qv, (declared,))
            p_sum, q_sum = float(per_p.sum()), float(per_q.sum())
    if per_p is None:
        p, q = np.full(labels.size, pc), np.full(labels.size, qc)
        if labels.size < declared and pc > 0:  # some label 0..declared-1 has no element: the first one
            gaps = np.flatnonzero(labels != np.arange(labels.size))
            empty = int(gaps[0]) if gaps.size else labels.size
            labels, p, q = np.append(labels, empty), np.append(p, pc), np.append(q, qc)
    else:
        p, q = per_p[labels].copy(), per_q[labels].copy()
        vacant = np.ones(declared, dtype=bool)
        vacant[labels] = False
        if vacant.any():
            empty = int(np.argmax(np.where(vacant, per_p, -1.0)))
            if per_p[empty] > 0:
                labels, p, q = np.append(labels, empty), np.append(p, per_p[empty]), np.append(q, per_q[empty])
    return groups, labels, p, q, declared, p_sum, q_sum


def proportions(problem: Problem, balance: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(p, q) per group (the groups of :class:`CoverProblem`): from ``balance`` (an option,
    overriding the file), else the file's p and q or its balance; without any of them an error."""
    _, _, p, q, _, _, _ = _label_groups(problem, balance)
    return p, q


WIDE_COLUMNS_PER_ENTRY = 4  # more columns than this per stored entry (plus 2^16): only the reached ones are kept


def _reached_columns(M: sp.csr_matrix) -> tuple[sp.csr_matrix, np.ndarray | None]:
    """M with the columns no element reaches dropped where there are many more columns than entries
    (then every vector stays at most nnz long), and the kept columns (None: all are kept, and a
    column no element reaches adds nothing to f)."""
    if M.shape[1] <= WIDE_COLUMNS_PER_ENTRY * M.nnz + (1 << 16):
        return M, None
    # unique by a sort (numpy's hashing unique is slower), nothing per column
    ordered = np.sort(M.indices)
    used = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))] if ordered.size else ordered
    cols = np.searchsorted(used, M.indices).astype(M.indices.dtype, copy=False)
    return sp.csr_matrix((M.data, cols, M.indptr), shape=(M.shape[0], used.size)), used


def _pattern(A) -> sp.csr_matrix:
    """The incidence pattern of A as a float CSR matrix of ones, A itself where it already is one
    (a file's 1e8 entries are not copied)."""
    if sp.issparse(A) and A.format == "csr" and A.dtype == np.float64 and A.has_canonical_format \
            and bool((A.data == 1.0).all()):
        return A
    M = sp.csr_matrix(A, copy=True)
    M.eliminate_zeros()
    M.sum_duplicates()
    return sp.csr_matrix((np.ones(M.nnz), M.indices, M.indptr), shape=M.shape)


def function_of(problem: Problem) -> tuple[str, sp.csr_matrix, np.ndarray | None, float]:
    """(kind, M, weights, f(U)) of a validated problem, computed once per problem (its arrays are
    read, never written). Coverage: M is the incidence pattern (ones), the weights are zero on the
    items no element covers; both may keep columns no element reaches (see :func:`_reached_columns`)."""
    cached = getattr(problem, "_cover_function", None)
    if cached is not None:
        return cached
    if "cover" in problem:
        M, used = _reached_columns(_pattern(problem["cover"]))
        if "weights" in problem:
            w = np.asarray(problem["weights"], dtype=float)
            w = w[used] if used is not None else w.copy()
        else:
            w = np.ones(M.shape[1])
        if used is None:
            reached = np.zeros(M.shape[1], dtype=bool)
            reached[M.indices] = True
            w[~reached] = 0.0
        with np.errstate(over="ignore"):
            f_all = float(w.sum())
        kind, weights = "coverage", w
        what = "the weights of the covered items"
    else:
        M = sp.csr_matrix(problem["sim"], dtype=float, copy=True)
        M.eliminate_zeros()
        M, _ = _reached_columns(M)
        with np.errstate(over="ignore"):
            f_all = float(M.max(axis=0).toarray().sum()) if M.nnz else 0.0
        kind, weights = "facility", None
        what = "the clients' largest similarities"
    if not np.isfinite(f_all):
        raise problem.error(f"f(U), the sum of {what}, overflows the largest float (1.8e308); scale the "
                            f"{'weights' if kind == 'coverage' else 'similarities'} down.")
    if not M.has_sorted_indices:
        M = M.sorted_indices()  # a copy: the problem's own arrays stay as read
    problem._cover_function = (kind, M, weights, f_all)
    return problem._cover_function


def file_threshold(problem: Problem) -> tuple[float | None, float | None]:
    """(tau, tau_frac) as the file sets them: tau absolute (from tau_frac times f(U) when the file
    gives a fraction; None without either), tau_frac (None unless the file gives it)."""
    if "tau" in problem:
        return float(problem["tau"]), None
    if "tau_frac" in problem:
        _, _, _, f_all = function_of(problem)
        return float(problem["tau_frac"]) * f_all, float(problem["tau_frac"])
    return None, None


def prepare(problem: Problem, *, balance: float | None = None, tau: float | None = None,
            tau_frac: float | None = None) -> CoverProblem:
    """Solver form of a validated problem; options override the file's balance and threshold."""
    kind, M, weights, f_all = function_of(problem)
    groups, labels, p, q, declared, p_sum, q_sum = _label_groups(problem, balance)
    source = "the options"
    if tau is None and tau_frac is None:
        tau, tau_frac, source = problem.get("tau"), problem.get("tau_frac"), "the file"
    if tau is None and tau_frac is None:
        raise problem.error("no threshold: give 'tau' (absolute) or 'tau_frac' (fraction of f(U)) in the file, "
                            "or the '--tau' / '--tau-frac' option.")
    if tau is None:
        if not 0 < tau_frac <= 1:
            raise problem.error(f"tau fraction is {tau_frac:.6g}; expected a number in (0, 1].")
        if not f_all > 0:
            raise problem.error(f"tau_frac = {tau_frac:.6g} (from {source}) of f(U) = 0 gives the threshold 0: "
                                f"{'no element covers an item of positive weight' if kind == 'coverage' else 'every similarity is zero'}, "
                                "so the empty set already meets it; give a positive 'tau' to have it "
                                "declared infeasible.")
        tau = tau_frac * f_all
    if not (tau > 0 and np.isfinite(tau)):
        raise problem.error(f"the threshold tau is {tau:.6g}; expected a positive finite number.")
    return CoverProblem(kind, M, weights, groups, p, q, float(tau), f_all, labels=labels, declared_groups=declared,
                        p_sum=p_sum, q_sum=q_sum)


# --------------------------------------------------------------------------- generators


def _closed_neighbourhoods(adj: sp.spmatrix) -> sp.csr_matrix:
    """Element i covers itself and its neighbours (maximum coverage on a graph)."""
    A = sp.csr_matrix(adj, dtype=float)
    A = ((A + A.T + sp.eye(A.shape[0])) != 0).astype(float)
    return sp.csr_matrix(A)


def _graph_problem(graph, groups, family, balance, tau_frac) -> dict:
    import networkx as nx

    nodes = list(graph.nodes())
    adj = nx.to_scipy_sparse_array(graph, nodelist=nodes, format="csr")
    return {"cover": _closed_neighbourhoods(adj), "groups": np.asarray(groups, dtype=np.int64),
            "balance": float(balance), "tau_frac": float(tau_frac), "family": family}


def gen_les_miserables(rng, balance=0.5, tau_frac=0.5):
    import networkx as nx
    from networkx.algorithms.community import greedy_modularity_communities

    g = nx.les_miserables_graph()
    nodes = list(g.nodes())
    label = {}
    for c, members in enumerate(greedy_modularity_communities(g)):
        for v in members:
            label[v] = c
    return _graph_problem(g, [label[v] for v in nodes], "les_miserables", balance, tau_frac)


def gen_karate(rng, balance=0.5, tau_frac=0.5):
    import networkx as nx

    g = nx.karate_club_graph()
    clubs = sorted({d["club"] for _, d in g.nodes(data=True)})
    return _graph_problem(g, [clubs.index(g.nodes[v]["club"]) for v in g.nodes()], "karate", balance, tau_frac)


def gen_davis(rng, balance=0.5, tau_frac=0.5):
    import networkx as nx

    g = nx.davis_southern_women_graph()
    return _graph_problem(g, [int(g.nodes[v]["bipartite"]) for v in g.nodes()], "davis", balance, tau_frac)


def gen_sbm(rng, n=400, groups=2, skew=0.7, degree=8.0, p_out=0.1, balance=0.5, tau_frac=0.5):
    """Degree-skewed stochastic block model: group sizes in proportion skew^c, expected degree
    ``degree`` with heavy-tailed (Pareto) node weights, a fraction ``p_out`` of edges across groups."""
    if n < groups:
        raise ValueError(f"sbm needs n >= groups (got n = {n}, groups = {groups}).")
    sizes = skew ** np.arange(groups)
    counts = np.maximum(1, np.floor(n * sizes / sizes.sum()).astype(int))
    counts[0] += n - counts.sum()
    label = np.repeat(np.arange(groups), counts)
    weight = rng.pareto(2.5, n) + 1.0
    m = int(round(n * degree / 2))
    src = rng.choice(n, size=m, p=weight / weight.sum())
    cross = rng.random(m) < p_out
    dst = np.empty(m, dtype=np.int64)
    # an edge stays in its source's group (chosen by weight within it) unless it crosses
    order = np.argsort(label, kind="stable")
    starts = np.concatenate([[0], np.cumsum(counts)])
    for c in range(groups):
        members = order[starts[c]:starts[c + 1]]
        pw = weight[members] / weight[members].sum()
        sel = (label[src] == c) & ~cross
        dst[sel] = rng.choice(members, size=int(sel.sum()), p=pw)
    dst[cross] = rng.choice(n, size=int(cross.sum()), p=weight / weight.sum())
    keep = src != dst
    adj = sp.csr_matrix((np.ones(int(keep.sum())), (src[keep], dst[keep])), shape=(n, n))
    return {"cover": _closed_neighbourhoods(adj), "groups": label, "balance": float(balance),
            "tau_frac": float(tau_frac), "family": "sbm"}


def gen_bipartite(rng, n=1000, items=5000, groups=3, zipf=2.0, max_size=200, mean_size=0.0, skew=1.0, balance=0.5,
                  tau_frac=0.5):
    """Random bipartite coverage: element i covers a uniform random set of items whose size is
    Zipf-distributed (exponent ``zipf``) or, with ``mean_size`` > 0, 1 + Poisson(mean_size - 1), capped at
    ``max_size``; groups at random, group c with probability proportional to skew^c (uniform at 1)."""
    cap = min(max_size, items)
    if mean_size > 0:
        sizes = np.minimum(1 + rng.poisson(max(mean_size - 1.0, 0.0), n), cap)
    else:
        sizes = np.minimum(rng.zipf(zipf, n), cap)
    indptr = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(sizes, out=indptr[1:])
    index = np.int32 if items <= np.iinfo(np.int32).max else np.int64
    cols = rng.integers(0, items, size=int(indptr[-1])).astype(index, copy=False)
    # built row by row: the same matrix as from (row, column) pairs, without their index arrays
    M = sp.csr_matrix((np.ones(cols.size), cols, indptr), shape=(n, items))
    M.sum_duplicates()
    M.data[:] = 1.0
    weights = rng.uniform(0.5, 1.5, items)
    if skew == 1.0:
        labels = rng.integers(0, groups, n)
    else:
        share = float(skew) ** np.arange(groups)
        labels = rng.choice(groups, size=n, p=share / share.sum())
    return {"cover": M, "weights": weights, "groups": labels, "balance": float(balance),
            "tau_frac": float(tau_frac), "family": "bipartite"}


def gen_facility(rng, n=300, clients=500, groups=3, clusters=6, balance=0.5, tau_frac=0.8):
    """Facility location on clustered points in the plane: candidate sites and clients drawn
    around ``clusters`` centres, sim = max(0, 1 - distance / 0.5); a site's group is its cluster
    modulo ``groups``."""
    centres = rng.uniform(0, 4, (clusters, 2))
    site_c = rng.integers(0, clusters, n)
    sites = centres[site_c] + 0.3 * rng.standard_normal((n, 2))
    cli = centres[rng.integers(0, clusters, clients)] + 0.3 * rng.standard_normal((clients, 2))
    d = np.sqrt(((sites[:, None, :] - cli[None, :, :]) ** 2).sum(-1))
    sim = np.maximum(0.0, 1.0 - d / 0.5)
    return {"sim": sp.csr_matrix(sim), "groups": site_c % groups, "balance": float(balance),
            "tau_frac": float(tau_frac), "family": "facility"}


def zipf_mean(a: float, cap: int) -> float:
    """E[min(Z, cap)] for Z ~ Zipf(a), the mean size of a bipartite family's set: the sum over k <= cap of
    P(Z >= k); past 10^6 terms each is bounded by the last (an upper bound)."""
    from scipy.special import zeta

    if not a > 1 or cap < 1:  # no such distribution (the generator refuses it): any size
        return float(max(cap, 1))
    k = np.arange(1, min(cap, 10**6) + 1, dtype=float)
    tail = zeta(a, k) / zeta(a)
    return float(tail.sum() + (cap - k.size) * tail[-1])


# Peak bytes of each generator from its sizes (measured with tracemalloc, with a margin): an edge or an
# incidence costs its index arrays, their sparse matrix and its closed-neighbourhood or duplicate-free copy.
def _sbm_bytes(n, degree, **_):
    return 100.0 * n + 100.0 * n * max(float(degree), 0.0)


def _bipartite_bytes(n, items, zipf, max_size, mean_size=0.0, **_):
    cap = min(max_size, items)
    mean = min(float(mean_size), float(cap)) if mean_size > 0 else zipf_mean(zipf, cap)
    return 64.0 * n + 32.0 * items + 40.0 * n * mean


def _facility_bytes(n, clients, **_):
    return 64.0 * float(n) * float(clients) + 128.0 * (n + clients)  # the n x clients distances and similarities


_COMMON = (Param("balance", float, 0.5, "DELTA: p_c = (1 - DELTA)/G, q_c = (1 + DELTA)/G"),
           Param("tau_frac", float, 0.5, "threshold as a fraction of f(U)"))

FAMILIES = {
    "les_miserables": Family("les_miserables", "networkx's les_miserables graph, closed-neighbourhood coverage, "
                             "groups = greedy modularity communities", gen_les_miserables, _COMMON),
    "karate": Family("karate", "Zachary's karate club, closed-neighbourhood coverage, groups = 'club'",
                     gen_karate, _COMMON),
    "davis": Family("davis", "davis_southern_women (bipartite), closed-neighbourhood coverage, groups = the two sides",
                    gen_davis, _COMMON),
    "sbm": Family("sbm", "degree-skewed stochastic block model, closed-neighbourhood coverage", gen_sbm,
                  (Param("n", int, 400, "number of nodes (elements)"), Param("groups", int, 2, "number of groups"),
                   Param("skew", float, 0.7, "group c has size proportional to skew^c"),
                   Param("degree", float, 8.0, "expected degree"),
                   Param("p_out", float, 0.1, "fraction of edges across groups")) + _COMMON, _sbm_bytes),
    "bipartite": Family("bipartite", "random bipartite coverage with Zipf set sizes and item weights", gen_bipartite,
                        (Param("n", int, 1000, "number of elements"), Param("items", int, 5000, "number of items"),
                         Param("groups", int, 3, "number of groups"), Param("zipf", float, 2.0, "Zipf exponent"),
                         Param("max_size", int, 200, "largest set"),
                         Param("mean_size", float, 0.0, "mean set size (1 + Poisson); 0: Zipf sizes"),
                         Param("skew", float, 1.0, "group c drawn with probability proportional to skew^c")) + _COMMON,
                        _bipartite_bytes),
    "facility": Family("facility", "facility location on clustered points", gen_facility,
                       (Param("n", int, 300, "candidate sites (elements)"), Param("clients", int, 500, "clients"),
                        Param("groups", int, 3, "number of groups"), Param("clusters", int, 6, "clusters"),
                        Param("balance", float, 0.5, "DELTA: p_c = (1 - DELTA)/G, q_c = (1 + DELTA)/G"),
                        Param("tau_frac", float, 0.8, "threshold as a fraction of f(U)")), _facility_bytes),
}


def fair_counts(ms: np.ndarray, counts: np.ndarray, sizes: np.ndarray, p: np.ndarray, q: np.ndarray):
    """For each size m in ``ms``: whether a fair set of size m containing ``counts`` exists, and the
    per-group minimum max(counts, ceil(p_c m)) and maximum min(floor(q_c m), |U_c|) of its counts."""
    ms = np.asarray(ms, dtype=float)
    need = np.maximum(counts[None, :], np.ceil(np.outer(ms, p) - 1e-9))
    cap = np.minimum(np.floor(np.outer(ms, q) + 1e-9), sizes[None, :])
    ok = np.all(need <= cap, axis=1) & (need.sum(1) <= ms) & (cap.sum(1) >= ms)
    return ok, need, cap


FAIR_SIZES_BLOCK = 1 << 20  # entries of the (sizes x groups) arrays evaluated at once


def fair_sizes(sizes: np.ndarray, p: np.ndarray, q: np.ndarray, n: int) -> np.ndarray:
    """The set sizes m in 1..n for which a fair set exists: integers s_c with
    ceil(p_c m) <= s_c <= min(floor(q_c m), |U_c|) summing to m (a boolean per m, index 0 unused).

    Groups with the same (p_c, q_c, |U_c|) impose the same bounds, so each distinct triple is
    evaluated once and counted with its multiplicity; sizes go in blocks of bounded memory."""
    triples, mult = np.unique(np.stack([np.asarray(p, float), np.asarray(q, float), np.asarray(sizes, float)], 1),
                              axis=0, return_counts=True)
    up, uq, us = triples[:, 0], triples[:, 1], triples[:, 2]
    ok = np.zeros(n + 1, dtype=bool)
    step = max(1, FAIR_SIZES_BLOCK // max(1, up.size))
    for start in range(1, n + 1, step):
        ms = np.arange(start, min(n, start + step - 1) + 1, dtype=float)
        need = np.maximum(np.ceil(np.outer(ms, up) - 1e-9), 0.0)
        cap = np.minimum(np.floor(np.outer(ms, uq) + 1e-9), us[None, :])
        ok[start:start + ms.size] = np.all(need <= cap, axis=1) & (need @ mult <= ms) & (cap @ mult >= ms)
    return ok


def short_of(tau: float, value: float, scale: float, rtol: float) -> bool:
    """Whether ``value`` falls short of ``tau`` by more than the rounding tolerance rtol * scale."""
    return value < tau - rtol * scale


def infeasibility_reason(cp: CoverProblem, fairness: bool = True, rtol: float = 1e-9) -> str | None:
    """Why no fair set (any set, without ``fairness``) reaches tau, where that is certain (None
    otherwise); a value counts as reaching tau within ``rtol`` times max(tau, f(U)), as the
    certificate judges a returned set."""
    scale = max(cp.tau, cp.f_all)
    over = short_of(cp.tau, cp.f_all, scale, rtol)
    if not fairness:
        return f"tau = {cp.tau:.6g} exceeds f(U) = {cp.f_all:.6g}." if over else None
    if cp.p_sum > 1 + 1e-12:
        return f"the lower proportions sum to {cp.p_sum:.6g} > 1: no set is fair."
    if cp.q_sum < 1 - 1e-12:
        return f"the upper proportions sum to {cp.q_sum:.6g} < 1: no set is fair."
    if over:
        return f"tau = {cp.tau:.6g} exceeds f(U) = {cp.f_all:.6g}: no set reaches it."
    sizes = cp.group_sizes()
    ok = fair_sizes(sizes, cp.p, cp.q, cp.n)
    if not ok.any():
        empty = [c for c in range(cp.G) if sizes[c] == 0 and np.ceil(cp.p[c] * cp.n - 1e-9) > 0]
        why = f" (group {int(cp.labels[empty[0]])} has no element but p = {cp.p[empty[0]]:.3g})" if empty else ""
        return f"no set size 1..{cp.n} admits counts within the proportions and the group sizes{why}."
    largest = int(np.flatnonzero(ok).max())
    if largest < cp.n:
        # f(S) <= sum of its singletons' values (submodularity), and a fair set has at most `largest` elements
        top = float(np.sort(singletons(cp))[::-1][:largest].sum())
        if short_of(cp.tau, top, scale, rtol):
            return (f"a fair set has at most {largest} elements, and the {largest} largest singleton values sum to "
                    f"{top:.6g} < tau = {cp.tau:.6g}.")
    return None


def singletons(cp: CoverProblem) -> np.ndarray:
    """f({i}) for every element."""
    if cp.kind == "coverage":
        return np.asarray(cp.M @ cp.weights).ravel()
    return np.asarray(cp.M.sum(axis=1)).ravel()


def fairness_violation(counts: np.ndarray, p: np.ndarray, q: np.ndarray) -> float:
    """max_c max(ceil(p_c m) - s_c, s_c - floor(q_c m), 0) / m for counts s_c of a set of size m."""
    m = int(counts.sum())
    if m == 0:
        return 0.0
    lo = np.ceil(p * m - 1e-9)
    hi = np.floor(q * m + 1e-9)
    return float(max(0.0, (lo - counts).max(), (counts - hi).max())) / m


__all__ = ["SCHEMA", "FAMILIES", "CoverProblem", "prepare", "file_threshold", "fair_sizes",
           "infeasibility_reason"]
