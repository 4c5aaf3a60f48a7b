"""``optsolve ot``: optimal transport between two histograms.

Methods: ``tnt`` (default: MDOT-TNT, truncated Newton on the entropic dual, numpy or
cupy), ``emd`` (exact, POT's network simplex) and ``sinkhorn`` (entropic, POT's
log-domain Sinkhorn). Entropic solutions are rounded onto the transport polytope.
Each solution carries dual potentials ``f``, ``g`` and a certificate of its gap to
the LP optimum (see :mod:`optsolve.ot.certificate`).

    >>> import numpy as np, optsolve.ot
    >>> res = optsolve.ot.solve([0.5, 0.5], [0.5, 0.5], np.array([[0.0, 1.0], [1.0, 0.0]]), method="emd")
    >>> res.status.value, res.objective
    ('optimal', 0.0)
"""

from __future__ import annotations

import time

import numpy as np

from optsolve.core.backend import get_backend
from optsolve.core.errors import ParameterError
from optsolve.core.progress import SILENT, Progress, get_logger
from optsolve.core.result import Result, Status
from optsolve.ot.problems import SCHEMA, prepare

DEFAULT_METHOD = "tnt"
DEFAULT_GAMMA = 1024.0  # gamma_f = max(C) / reg
FLOAT32_MAX_GAMMA = 2.0 ** 10
PCG_MODES = ("discounted", "plain")
DTYPES = ("auto", "float32", "float64")


def _emd(ot, s, backend, progress):
    from optsolve.ot.emd import solve_emd

    if backend.device != "cpu":
        raise ParameterError("Method 'emd' runs on the CPU only; use '--device cpu' or another method.")
    return solve_emd(ot.a, ot.b, ot.C, max_iter=s["max_iter"])


def _sinkhorn(ot, s, backend, progress):
    from optsolve.ot.sinkhorn import solve_sinkhorn

    return solve_sinkhorn(ot.a, ot.b, ot.C, reg=s["reg"], tol=s["tol"], max_iter=s["max_iter"],
                          time_limit=s["time_limit"], backend=backend, progress=progress)


def _tnt(ot, s, backend, progress):
    from optsolve.ot.tnt import solve_tnt

    gap_fn = None
    if s["target_gap"] is not None:
        def gap_fn(f, g, reg):
            return _relative_gap(ot, f, g, reg)

    res = solve_tnt(ot.a, ot.b, ot.C, gamma_f=s["gamma"], tol=s["tol"], pcg_mode=s["pcg"],
                    dtype=np.dtype(s["dtype"]), max_iter=s["max_iter"], time_limit=s["time_limit"],
                    target_gap=s["target_gap"], gap_fn=gap_fn, backend=backend, progress=progress)
    s["reg"] = res.reg
    return {"f": res.f, "g": res.g, "status": res.status, "message": res.message,
            "iterations": res.stats.newton_steps,
            "extra": {"stages": res.stats.stages, "newton_steps": res.stats.newton_steps,
                      "cg_iterations": res.stats.cg_iterations, "sinkhorn_sweeps": res.stats.sinkhorn_sweeps,
                      "passes": res.passes, "final_gamma": res.gamma, "stage_log": res.stats.stage_log}}


def _relative_gap(ot, f, g, reg) -> float:
    """(U - D) / U of the rounded plan: the quantity --target-gap bounds."""
    from optsolve.ot.certificate import dual_bound
    from optsolve.ot.rounding import round_potentials

    f, g, P, _ = round_potentials(ot.a, ot.b, ot.C, f, g, reg)
    U = float((ot.C * P).sum())
    D = dual_bound(ot.a, ot.b, ot.C, f)
    return (U - D) / max(abs(U), 1e-300)


METHODS = {"tnt": _tnt, "emd": _emd, "sinkhorn": _sinkhorn}
ENTROPIC = ("tnt", "sinkhorn")
DEFAULT_TOL = {"emd": None, "sinkhorn": 1e-9, "tnt": None}
DEFAULT_MAX_ITER = {"emd": 1_000_000, "sinkhorn": 100_000, "tnt": None}


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


def _choice(name: str, value, choices):
    if value not in choices:
        raise ParameterError(f"The '--{name}' option must be one of {', '.join(choices)}; got {value!r}.")
    return value


def resolve_settings(method, cmax, *, reg, gamma, target_gap, tol, max_iter, time_limit, pcg, dtype, backend):
    """Check the options and fill in defaults that depend on the problem (max C) and the device."""
    if method not in METHODS:
        raise ParameterError(f"Unknown method {method!r}; expected one of {sorted(METHODS)}")
    reg, gamma = _positive("reg", reg), _positive("gamma", gamma)
    target_gap = _positive("target-gap", target_gap)
    if reg is not None and gamma is not None:
        raise ParameterError("Give at most one of '--reg' and '--gamma' (reg = max(C) / gamma).")
    if target_gap is not None and method != "tnt":
        raise ParameterError("The '--target-gap' option applies to '--method tnt' only.")
    if max_iter is not None and (int(max_iter) != max_iter or max_iter < 1):
        raise ParameterError(f"The '--max-iter' option must be a positive integer; got {max_iter!r}.")
    scale = cmax if cmax > 0 else 1.0
    if method in ENTROPIC:
        if gamma is None:
            gamma = scale / reg if reg is not None else DEFAULT_GAMMA
        reg = scale / gamma
    _choice("pcg", pcg, PCG_MODES)
    _choice("dtype", dtype, DTYPES)
    if dtype == "auto":
        dtype = "float32" if (method == "tnt" and backend.device == "gpu" and target_gap is None
                              and gamma <= FLOAT32_MAX_GAMMA) else "float64"
    elif dtype == "float32" and method != "tnt":
        raise ParameterError(f"The '--dtype float32' option applies to '--method tnt' only; {method} runs in "
                             "float64.")
    elif dtype == "float32" and (target_gap is not None or gamma > FLOAT32_MAX_GAMMA):
        get_logger().warning(f"float32 beyond gamma = {FLOAT32_MAX_GAMMA:g} may fail the line search; the solver "
                             "then falls back to the last stage that succeeded.")
    return {"method": method, "reg": reg, "gamma": gamma if method in ENTROPIC else None,
            "target_gap": target_gap, "tol": _positive("tol", tol) or DEFAULT_TOL[method],
            "max_iter": int(max_iter) if max_iter is not None else DEFAULT_MAX_ITER[method],
            "time_limit": _positive("time-limit", time_limit), "pcg": pcg if method == "tnt" else None,
            "dtype": dtype, "device": backend.device}


def solve_problem(problem, *, method: str | None = None, reg: float | None = None, gamma: float | None = None,
                  target_gap: float | None = None, tol: float | None = None, pcg: str = "discounted",
                  dtype: str = "auto", normalize: bool = False, plan_threshold: float | None = None,
                  max_iter: int | None = None, time_limit: float | None = None, device: str = "auto",
                  seed: int | None = None, progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.ot.problems.SCHEMA`); the certificate is attached.

    ``result.arrays["plan"]`` is the dense plan, or with ``plan_threshold`` a scipy CSR matrix of
    its entries above the threshold.
    """
    from optsolve.ot import certificate
    from optsolve.ot.rounding import round_potentials

    method = method or DEFAULT_METHOD
    backend = get_backend(device)
    if method == "emd" and device in (None, "auto") and backend.device != "cpu":
        backend = get_backend("cpu")
    t0 = time.perf_counter()
    ot = prepare(problem, normalize=normalize)
    s = resolve_settings(method, float(ot.C.max()) if ot.C.size else 0.0, reg=reg, gamma=gamma,
                         target_gap=target_gap, tol=tol, max_iter=max_iter, time_limit=time_limit, pcg=pcg,
                         dtype=dtype, backend=backend)
    s["seed"] = seed
    s["normalize"] = bool(normalize)
    if plan_threshold is not None and not (float(plan_threshold) >= 0):
        raise ParameterError(f"The '--plan-threshold' option must be a float >= 0; got {plan_threshold!r}.")
    t_prep = time.perf_counter()
    out = METHODS[method](ot, s, backend, progress)
    if method in ENTROPIC:
        out["f"], out["g"], out["plan"], out["marginal_error"] = round_potentials(ot.a, ot.b, ot.C, out["f"],
                                                                                  out["g"], s["reg"])
    t_solve = time.perf_counter()

    P = out["plan"]
    objective = float((ot.C * P).sum())
    solution = {"f": out["f"], "g": out["g"], "dual_bound": certificate.dual_bound(ot.a, ot.b, ot.C, out["f"])}
    if method == "emd":
        row, col = np.nonzero(P)
        solution["plan"] = {"format": "coo", "shape": [ot.n, ot.m], "row": row, "col": col, "value": P[row, col]}
    else:
        solution["plan"] = {"format": "gibbs_rounded", "shape": [ot.n, ot.m], "reg": s["reg"]}
    stats = {"iterations": out.get("iterations"), "device": backend.device, "dtype": s["dtype"],
             "time_s": {"prepare": t_prep - t0, "solve": t_solve - t_prep}}
    if out.get("marginal_error") is not None:
        stats["marginal_error_before_rounding"] = out["marginal_error"]
    stats.update(out.get("extra", {}))
    if plan_threshold is not None:
        import scipy.sparse as sp

        P = sp.csr_matrix(np.where(P > plan_threshold, P, 0.0))
    result = Result("ot", method, Status(out["status"]), out.get("message", ""),
                    problem=problem.info(n=ot.n, m=ot.m), objective=objective, solution=solution,
                    stats=stats, settings=s, arrays={"plan": P})
    rounded = "" if method == "emd" else "; the plan is the rounded last iterate"
    if method == "tnt":
        pass  # its messages name the stage returned
    elif result.status is Status.MAX_ITER:
        result.add_message(f"Iteration limit {s['max_iter']} reached{rounded}.")
    elif result.status is Status.TIME_LIMIT:
        result.add_message(f"Time limit {s['time_limit']:g} s reached{rounded}.")
    elif result.status is Status.INTERRUPTED:
        result.add_message(f"Interrupted{rounded}.")
    t_cert = time.perf_counter()
    result.attach_certificate(certificate.check(problem, result.solution, method=method, objective=objective,
                                                settings=s))
    stats["time_s"]["certificate"] = time.perf_counter() - t_cert
    return result


def solve(a, b, C=None, *, x=None, y=None, cost=None, method: str = DEFAULT_METHOD, reg: float | None = None,
          gamma: float | None = None, target_gap: float | None = None, tol: float | None = None,
          pcg: str = "discounted", dtype: str = "auto", normalize: bool = False,
          plan_threshold: float | None = None, max_iter: int | None = None, time_limit: float | None = None,
          device: str = "auto", seed: int | None = None, progress: Progress = SILENT) -> Result:
    """Optimal transport between masses ``a`` and ``b`` with cost ``C`` (or points ``x``, ``y`` and ``cost``).

    Returns a :class:`optsolve.core.result.Result`; ``result.arrays["plan"]`` is the plan.
    Bad input raises :class:`optsolve.core.errors.InputError`, bad options ``ParameterError``.
    """
    raw = {k: v for k, v in dict(a=a, b=b, C=C, x=x, y=y, cost=cost).items() if v is not None}
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, reg=reg, gamma=gamma, target_gap=target_gap, tol=tol, pcg=pcg,
                         dtype=dtype, normalize=normalize, plan_threshold=plan_threshold, max_iter=max_iter, time_limit=time_limit, device=device, seed=seed,
                         progress=progress)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
