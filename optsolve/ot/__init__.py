"""``optsolve ot``: optimal transport between two histograms.

Methods: ``emd`` (exact, POT's network simplex) and ``sinkhorn`` (entropic, POT's
log-domain Sinkhorn with reg in cost units, rounded onto the transport polytope).
Each solution carries dual potentials ``f``, ``g`` and a certificate of its gap to
the LP optimum (see :mod:`optsolve.ot.certificate`).

    >>> import numpy as np, optsolve.ot
    >>> res = optsolve.ot.solve([0.5, 0.5], [0.5, 0.5], np.array([[0.0, 1.0], [1.0, 0.0]]))
    >>> res.status.value, res.objective
    ('optimal', 0.0)
"""

from __future__ import annotations

import time

import numpy as np

from optsolve.core.backend import get_backend
from optsolve.core.errors import ParameterError
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.ot.problems import SCHEMA, prepare

DEFAULT_METHOD = "emd"
DEFAULT_GAMMA = 1024.0  # default reg = max(C) / DEFAULT_GAMMA


def _emd(ot, *, max_iter, backend, **_):
    from optsolve.ot.emd import solve_emd

    if backend.device != "cpu":
        raise ParameterError("Method 'emd' runs on the CPU only; use '--device cpu' or '--method sinkhorn'.")
    return solve_emd(ot.a, ot.b, ot.C, max_iter=max_iter)


def _sinkhorn(ot, *, reg, tol, max_iter, time_limit, backend, progress):
    from optsolve.ot.sinkhorn import round_potentials, solve_sinkhorn

    out = solve_sinkhorn(ot.a, ot.b, ot.C, reg=reg, tol=tol, max_iter=max_iter, time_limit=time_limit,
                         backend=backend, progress=progress)
    out["f"], out["g"], out["plan"] = round_potentials(ot.a, ot.b, ot.C, out["f"], out["g"], reg)
    return out


METHODS = {"emd": _emd, "sinkhorn": _sinkhorn}
DEFAULT_TOL = {"emd": None, "sinkhorn": 1e-9}
DEFAULT_MAX_ITER = {"emd": 1_000_000, "sinkhorn": 100_000}


def _positive(name: str, value, allow_none: bool = True):
    if value is None and allow_none:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"The '--{name}' option must be a float in (0, inf); got {value!r}.") from None
    if not (x > 0 and np.isfinite(x)):
        raise ParameterError(f"The '--{name}' option must be a float in (0, inf); got {x!r}.")
    return x


def solve_problem(problem, *, method: str | None = None, reg: float | None = None, tol: float | None = None,
                  max_iter: int | None = None, time_limit: float | None = None, device: str = "auto",
                  seed: int | None = None, progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.ot.problems.SCHEMA`); the certificate is attached."""
    from optsolve.ot import certificate

    method = method or DEFAULT_METHOD
    if method not in METHODS:
        raise ParameterError(f"Unknown method {method!r}; expected one of {sorted(METHODS)}")
    reg = _positive("reg", reg)
    tol = _positive("tol", tol) or DEFAULT_TOL[method]
    time_limit = _positive("time-limit", time_limit)
    if max_iter is not None and (int(max_iter) != max_iter or max_iter < 1):
        raise ParameterError(f"The '--max-iter' option must be a positive integer; got {max_iter!r}.")
    max_iter = int(max_iter) if max_iter is not None else DEFAULT_MAX_ITER[method]
    backend = get_backend(device)
    if method == "emd" and device in (None, "auto") and backend.device != "cpu":
        backend = get_backend("cpu")

    t0 = time.perf_counter()
    ot = prepare(problem)
    if method == "sinkhorn" and reg is None:
        reg = float(ot.C.max()) / DEFAULT_GAMMA if ot.C.max() > 0 else 1.0
    t_prep = time.perf_counter()
    out = METHODS[method](ot, reg=reg, tol=tol, max_iter=max_iter, time_limit=time_limit, backend=backend,
                          progress=progress)
    t_solve = time.perf_counter()

    P = out["plan"]
    objective = float((ot.C * P).sum())
    from optsolve.ot.certificate import dual_bound

    solution = {"f": out["f"], "g": out["g"], "dual_bound": dual_bound(ot.a, ot.b, ot.C, out["f"])}
    if method == "emd":
        row, col = np.nonzero(P)
        solution["plan"] = {"format": "coo", "shape": [ot.n, ot.m], "row": row, "col": col, "value": P[row, col]}
    else:
        solution["plan"] = {"format": "gibbs_rounded", "shape": [ot.n, ot.m], "reg": reg}
    settings = {"method": method, "reg": reg, "tol": tol, "max_iter": max_iter, "time_limit": time_limit,
                "device": backend.device, "seed": seed}
    stats = {"iterations": out.get("iterations"), "device": backend.device, "dtype": "float64",
             "time_s": {"prepare": t_prep - t0, "solve": t_solve - t_prep}}
    if out.get("marginal_error") is not None:
        stats["marginal_error_before_rounding"] = out["marginal_error"]
    result = Result("ot", method, Status(out["status"]), out.get("message", ""),
                    problem=problem.info(n=ot.n, m=ot.m), objective=objective, solution=solution,
                    stats=stats, settings=settings, arrays={"plan": P})
    rounded = "" if method == "emd" else "; the plan is the rounded last iterate"
    if result.status is Status.MAX_ITER:
        result.add_message(f"Iteration limit {max_iter} reached{rounded}.")
    elif result.status is Status.TIME_LIMIT:
        result.add_message(f"Time limit {time_limit:g} s reached{rounded}.")
    elif result.status is Status.INTERRUPTED:
        result.add_message(f"Interrupted{rounded}.")
    t_cert = time.perf_counter()
    result.attach_certificate(certificate.check(problem, result.solution, method=method, objective=objective,
                                                settings=settings))
    stats["time_s"]["certificate"] = time.perf_counter() - t_cert
    return result


def solve(a, b, C=None, *, x=None, y=None, cost=None, method: str = DEFAULT_METHOD, reg: float | None = None,
          tol: float | None = None, max_iter: int | None = None, time_limit: float | None = None,
          device: str = "auto", seed: int | None = None, progress: Progress = SILENT) -> Result:
    """Optimal transport between masses ``a`` and ``b`` with cost ``C`` (or points ``x``, ``y`` and ``cost``).

    Returns a :class:`optsolve.core.result.Result`; ``result.arrays["plan"]`` is the plan.
    Bad input raises :class:`optsolve.core.errors.InputError`.
    """
    raw = {k: v for k, v in dict(a=a, b=b, C=C, x=x, y=y, cost=cost).items() if v is not None}
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, reg=reg, tol=tol, max_iter=max_iter, time_limit=time_limit,
                         device=device, seed=seed, progress=progress)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
