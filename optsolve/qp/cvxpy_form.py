"""Turning a cvxpy problem into optsolve's QP form (cvxpy's own reduction to OSQP's input)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from optsolve.core.errors import ParameterError


def from_cvxpy(problem):
    """``(data, unpack)`` for a cvxpy QP: ``data`` holds P, q, A, l, u and r (the constant), ready for
    :func:`optsolve.qp.solve` or a problem file; ``unpack(x)`` writes a solution x into the
    problem's variables. The problem must be one cvxpy can send to a QP solver (DCP, with a
    convex quadratic objective and affine constraints).
    """
    try:
        import cvxpy as cp
    except ImportError:
        raise ParameterError("optsolve.qp.from_cvxpy needs cvxpy: pip install 'optsolve[cvxpy]'.") from None
    try:
        data, _, _ = problem.get_problem_data(cp.OSQP)
    except cp.error.SolverError as exc:
        raise ParameterError(f"This cvxpy problem is not a QP that can be written in OSQP's form: {exc}") from None
    param = data["param_prob"]
    r = float(param.apply_parameters(quad_obj=True)[2])
    Aeq, b, F, G = data["A"], data["b"], data["F"], data["G"]
    n = int(data["n_var"])
    A = sp.vstack([sp.csc_matrix(Aeq, shape=(Aeq.shape[0], n)), sp.csc_matrix(F, shape=(F.shape[0], n))],
                  format="csc")
    l = np.concatenate([np.asarray(b, dtype=float), np.full(F.shape[0], -np.inf)])
    u = np.concatenate([np.asarray(b, dtype=float), np.asarray(G, dtype=float)])
    out = {"P": sp.csc_matrix(data["P"]), "q": np.asarray(data["q"], dtype=float), "A": A, "l": l, "u": u, "r": r}
    columns = dict(param.var_id_to_col)

    def unpack(x):
        x = np.asarray(x, dtype=float)
        for var in problem.variables():
            start = columns.get(var.id)
            if start is not None:
                var.value = x[start:start + var.size].reshape(var.shape, order="F")

    return out, unpack
