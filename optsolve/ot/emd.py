"""Exact optimal transport by POT's network simplex (``ot.emd``; Bonneel et al. 2011).

Returns the optimal plan and the LP dual potentials POT computes with it.
"""

from __future__ import annotations

import warnings

import numpy as np

from optsolve.core.progress import stdout_to_stderr


def solve_emd(a: np.ndarray, b: np.ndarray, C: np.ndarray, *, max_iter: int) -> dict:
    import ot as pot

    # the network simplex compares reduced costs with absolute tolerances: solve at max C = 1
    scale = float(C.max()) if C.size else 0.0
    scale = scale if scale > 0 and np.isfinite(scale) else 1.0
    with stdout_to_stderr(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns on max_iter; we report it as a status instead
        G, log = pot.emd(a, b, C / scale, numItermax=int(max_iter), log=True, center_dual=True)
    code = int(log.get("result_code", 1))
    status = {1: "optimal", 3: "max_iter"}.get(code, "numerical_error")
    messages = {1: "", 3: "The network simplex stopped before optimality: the plan is its last iterate, not "
                          "optimal, and may violate the marginals."}
    # codes 0 and 2 would say infeasible or unbounded, which equal masses and finite costs never are
    message = messages.get(code, f"The network simplex failed (POT result code {code}: "
                                 f"{log.get('warning') or 'no message'}); the plan is its last iterate.")
    return {"plan": np.asarray(G), "f": np.asarray(log["u"]) * scale, "g": np.asarray(log["v"]) * scale,
            "status": status, "iterations": None, "message": message}
