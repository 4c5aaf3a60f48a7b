"""The exact fair cover by mixed-integer programming (scipy.optimize.milp, i.e. HiGHS).

The LP of :func:`optsolve.cover.certificate.lp_system` with the element variables binary:
min |S| subject to f(S) >= tau (coverage: item variables below the elements covering them;
facility location: assignment variables below their site, one per client) and the
proportions p_c |S| <= |S n U_c| <= q_c |S|. With a time limit, the incumbent and HiGHS's dual
bound (a lower bound on |OPT|) are reported.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
from scipy.optimize import Bounds, LinearConstraint, milp

from optsolve.core import memory
from optsolve.cover.certificate import lp_entries, lp_system
from optsolve.cover.problems import CoverProblem

PRESOLVE_S_PER_ENTRY = 2e-4  # time presolve is given per constraint entry before it is used under a time limit
MILP_BYTES_PER_ENTRY = 400  # HiGHS's working memory per constraint-matrix entry, roughly (presolve, LU, tree)


@dataclass
class MILPRun:
    selected: list | None
    status: str  # optimal, time_limit (incumbent or none), infeasible
    dual_bound: float | None
    message: str = ""
    nodes: int | None = None


def solve_milp(cp: CoverProblem, *, time_limit: float | None = 60.0, tau: float | None = None,
               label: str = "Problem", max_size: int | None = None) -> MILPRun:
    """The exact fair cover (threshold ``tau``, default the problem's); the system's size is checked
    against the memory budget first (``label`` names the problem in the refusal). ``max_size``: only
    sets of at most this many elements (infeasible: none of them is a fair cover)."""
    entries = lp_entries(cp)
    memory.require(label, f"the MILP of about {entries} constraint entries ('--method milp' is for small instances)",
                   entries * MILP_BYTES_PER_ENTRY)
    c, A, b, bounds, n = lp_system(cp, tau)
    if max_size is not None:
        A = sp.vstack([A, sp.csr_matrix((np.ones(n), (np.zeros(n, dtype=np.int64), np.arange(n))),
                                        shape=(1, A.shape[1]))], format="csr")
        b = np.append(b, float(max_size))
    lo = np.array([bd[0] for bd in bounds])
    hi = np.array([bd[1] for bd in bounds])
    integrality = np.concatenate([np.ones(n), np.zeros(c.size - n)])
    options = {"disp": False}
    if time_limit is not None:
        options["time_limit"] = float(time_limit)
        # HiGHS's presolve checks the time limit only between its passes and overruns it on large
        # systems: it runs only when the time allows it to finish
        options["presolve"] = time_limit >= 1.0 + PRESOLVE_S_PER_ENTRY * entries
    res = milp(c, constraints=LinearConstraint(A, -np.inf, b), integrality=integrality, bounds=Bounds(lo, hi),
               options=options)
    dual = getattr(res, "mip_dual_bound", None)
    dual = None if dual is None or not math.isfinite(dual) else float(dual)
    nodes = getattr(res, "mip_node_count", None)
    if res.status == 2:
        within = "" if max_size is None else f" with at most {max_size} elements"
        return MILPRun(None, "infeasible", None, f"HiGHS proves that no fair set{within} reaches the threshold.",
                       nodes)
    if res.x is None:
        return MILPRun(None, "time_limit", dual, f"HiGHS found no fair cover within the time limit ({res.message})",
                       nodes)
    x = res.x[:n] > 0.5  # binary to HiGHS's integrality tolerance
    selected = np.flatnonzero(x).tolist()
    if res.status == 0:
        return MILPRun(selected, "optimal", float(len(selected)), "", nodes)
    return MILPRun(selected, "time_limit", dual, f"HiGHS stopped at the time limit; the incumbent is written "
                   f"(dual bound {dual if dual is not None else 'unknown'}).", nodes)
