"""Exact optimal transport by POT's network simplex (``ot.emd``; Bonneel et al. 2011).

Returns the optimal plan and the LP dual potentials POT computes with it.
"""

from __future__ import annotations

import warnings

import numpy as np

from optsolve.core.progress import stdout_to_stderr


def solve_emd(a: np.ndarray, b: np.ndarray, C: np.ndarray, *, max_iter: int) -> dict:
    import ot as pot

    with stdout_to_stderr(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns on max_iter; we report it as a status instead
        G, log = pot.emd(a, b, C, numItermax=int(max_iter), log=True, center_dual=True)
    code = int(log.get("result_code", 1))
    status = {1: "optimal", 3: "max_iter", 0: "infeasible", 2: "unbounded"}.get(code, "numerical_error")
    return {"plan": np.asarray(G), "f": np.asarray(log["u"]), "g": np.asarray(log["v"]),
            "status": status, "iterations": None,
            "message": "" if code == 1 else "The network simplex stopped before optimality: the plan is its "
                                            "last iterate, not optimal, and may violate the marginals."}
