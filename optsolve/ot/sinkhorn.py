"""Entropic optimal transport by POT's log-domain Sinkhorn (``ot.sinkhorn_log``; Cuturi 2013).

POT runs in chunks of iterations, warm-started from the previous chunk's log
scalings, so that the L1 marginal tolerance, the iteration and time limits, progress
and Ctrl-C are handled here. The result is rounded by :mod:`optsolve.ot.rounding`.
"""

from __future__ import annotations

import warnings

import numpy as np

from optsolve.core.backend import Backend
from optsolve.core.history import trace
from optsolve.core.progress import SILENT, Progress, stdout_to_stderr
from optsolve.ot.deadline import Deadline, after

CHUNK = 25


def solve_sinkhorn(a, b, C, *, reg: float, tol: float, max_iter: int, time_limit: float | None,
                   backend: Backend, progress: Progress = SILENT, deadline: Deadline | None = None) -> dict:
    """``deadline`` (default: ``time_limit`` seconds from now) also keeps time for the rounding and the
    certificate: a chunk is shortened to the iterations that fit before it."""
    import ot as pot

    xp = backend.xp
    deadline = deadline or after(time_limit)
    ia, ib = np.flatnonzero(a > 0), np.flatnonzero(b > 0)
    a_s, b_s = xp.asarray(a[ia]), xp.asarray(b[ib])
    C_s = xp.asarray(C[np.ix_(ia, ib)])
    Mr = C_s / reg
    u = xp.zeros(ia.size)
    v = xp.zeros(ib.size)
    iterations, status, err = 0, "max_iter", float("inf")
    iteration_s = 0.0  # seconds per iteration in the latest chunk, POT's call overhead included
    try:
        while iterations < max_iter:
            steps = min(CHUNK, max_iter - iterations)
            if deadline.end is not None and iteration_s > 0:  # the iterations that fit in the time left
                fit = deadline.remaining() / iteration_s
                if fit < 1:
                    status = "time_limit"
                    break
                steps = min(steps, int(fit))
            elif deadline.end is not None:
                steps = 1  # a first, short chunk measures the iterations' cost
            t_chunk = deadline.clock()
            with stdout_to_stderr(), warnings.catch_warnings():
                warnings.simplefilter("ignore")
                _, log = pot.bregman.sinkhorn_log(a_s, b_s, C_s, reg, numItermax=steps, stopThr=tol,
                                                  log=True, warn=False, warmstart=(u, v))
            u, v = log["log_u"], log["log_v"]
            done = int(log["niter"]) + 1
            iterations += done
            iteration_s = (deadline.clock() - t_chunk) / done
            # rows are exact after POT's last (row) update: the error is in the columns
            t_pass = deadline.clock()
            col = xp.exp(u[:, None] + v[None, :] - Mr).sum(0)
            err = float(xp.abs(col - b_s).sum())
            deadline.measure(deadline.clock() - t_pass)  # one pass over the kernel, as an LSE is
            progress.update(iterations, marginal_l1=err)
            trace(iterations, err, evaluations=iterations, measure="column marginal L1 error (rows exact)",
                  evaluations_of="Sinkhorn iterations (two kernel products each)")
            if not np.isfinite(err):
                status = "numerical_error"
                break
            if err <= tol:
                status = "optimal"
                break
            if deadline.expired():
                status = "time_limit"
                break
    except KeyboardInterrupt:
        status = "interrupted"
    f = np.full(a.shape, -np.inf)
    g = np.full(b.shape, -np.inf)
    f[ia] = reg * backend.to_numpy(u)
    g[ib] = reg * backend.to_numpy(v)
    return {"f": f, "g": g, "status": status, "iterations": iterations, "marginal_error": err}
