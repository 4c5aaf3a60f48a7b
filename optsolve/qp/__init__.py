"""``optsolve qp``: convex quadratic programs in OSQP's form.

    minimise 1/2 x'Px + q'x + r   subject to   l <= Ax <= u

Methods: ``auto`` (the default: a KKT solve for equality-only problems, PIQP for small ones,
else ADMM handed over to PIQP or Clarabel when it is slow, see :mod:`optsolve.qp.auto`), ``admm`` (OSQP's
ADMM in numpy/scipy, with independently re-checked infeasibility claims, see
:mod:`optsolve.qp.admm`), ``distributed`` (DistributedQP over N nodes,
:mod:`optsolve.qp.distributed`), ``deepqp`` (admm whose rho and alpha follow a learned policy
for its first K steps, :mod:`optsolve.qp.policy`), ``deepdistributed`` (DistributedQP whose
nodes' rho and mu follow a learned policy), and the packages ``osqp``, ``piqp`` and
``clarabel`` called on the problem (:mod:`optsolve.qp.peers`). Solutions carry ``x``, the duals ``y`` (OSQP's signs:
``Px + q + A'y = 0``) and ``z = Ax``; infeasible and unbounded problems carry a certificate
vector instead. Tolerances ``eps_abs`` and ``eps_rel`` default to 1e-3, as in OSQP.

    >>> import numpy as np, scipy.sparse as sp, optsolve.qp
    >>> res = optsolve.qp.solve(sp.eye(2), [-1.0, -1.0], sp.csc_matrix([[1.0, 1.0]]), [-np.inf], [1.0],
    ...                         eps_abs=1e-8, eps_rel=1e-8)
    >>> res.status.value, round(res.objective, 6)
    ('optimal', -0.75)
"""

from __future__ import annotations


import numpy as np

from optsolve.core.errors import InputError, ParameterError
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.core.options import Option, check, count, positive
from optsolve.core.solve import Job, Solver, run, tagged
from optsolve.qp import defaults
from optsolve.qp.methods import METHODS, no_variables
from optsolve.qp.problems import SCHEMA, QPProblem, prepare

DEFAULT_METHOD = "auto"  # the rule of optsolve.qp.auto: a KKT solve, PIQP, or ADMM handed over to PIQP
DEFAULT_EPS = defaults.EPS
MAX_SCALING_PASSES = 1000  # --scaling: Ruiz passes at most (its fixed point comes within about a hundred)


OPTIONS = (count("max_iter"), Option("alpha", low=0, high=2, low_open=True, high_open=True),
           Option("scaling", "int", low=0, high=MAX_SCALING_PASSES), count("check_every"), Option("eps_abs", low=0),
           Option("eps_rel", low=0), count("nodes"), positive("mu"), positive("rho"), positive("sigma"),
           positive("eps_prim_inf"), positive("eps_dual_inf"), Option("engine", "choice", choices=("local", "mpi")),
           positive("cert_tol"), positive("obj_rtol"), positive("obj_atol"))


def _warm_start(warm_start, qp: QPProblem):
    """x0, y0 from a previous solution (a dict, or the path of a solution JSON)."""
    if warm_start is None:
        return None, None
    doc = warm_start
    if isinstance(warm_start, str):
        import os

        from optsolve.core.verify import read_solution

        if os.path.exists(warm_start) and not os.path.isfile(warm_start):  # a device or a pipe has no size to check
            raise ParameterError(f"The '--warm-start' file {warm_start!r} is not a regular file; expected a solution "
                                 "document.")
        try:  # read as verify reads a solution: within the memory budget, an optsolve document
            doc = read_solution(warm_start)
        except InputError as exc:
            raise ParameterError(f"The '--warm-start' file is not a usable solution document: {exc}") from None
    sol = doc.get("solution") if isinstance(doc, dict) and "solution" in doc else doc
    try:
        x0 = np.array([np.nan if v is None else v for v in sol["x"]], dtype=float)
        y0 = np.array([np.nan if v is None else v for v in sol.get("y", [0.0] * qp.m)], dtype=float)
    except (KeyError, TypeError, ValueError):
        raise ParameterError("The '--warm-start' solution has no usable 'x' (and 'y').") from None
    if x0.shape != (qp.n,) or y0.shape != (qp.m,) or not (np.isfinite(x0).all() and np.isfinite(y0).all()):
        raise ParameterError(f"The '--warm-start' solution has x of size {x0.size} and y of size {y0.size} "
                             f"(finite values expected); this problem has n = {qp.n}, m = {qp.m}.")
    return x0, y0


DEFAULT_RHO = 0.1  # OSQP's; a method's entry may give its own (distributed: 1.0)
DEFAULT_MAX_ITER = 4000


def _applies(option: str, tag: str, method: str) -> None:
    """Refuse ``--option`` for a method whose entry lacks ``tag``, naming the methods that take it."""
    if tag not in METHODS[method].tags:
        takers = " and ".join(tagged(METHODS, tag))
        raise ParameterError(f"The '--{option}' option applies to the methods {takers} only.")


def resolve_settings(method, *, eps_abs, eps_rel, max_iter, time_limit, rho, sigma, alpha, scaling, adaptive_rho,
                     check_every, eps_prim_inf, eps_dual_inf, polish=False, refine=True, mu=1.0, nodes=None,
                     policy=None, residual_balancing=False, engine="local", cert_tol=None, obj_rtol=None,
                     obj_atol=None):
    from optsolve.qp.certificate import LIMITS

    o = check(OPTIONS, dict(max_iter=max_iter, alpha=alpha, scaling=scaling, check_every=check_every, eps_abs=eps_abs,
                            eps_rel=eps_rel, nodes=nodes, mu=mu, rho=rho, sigma=sigma, eps_prim_inf=eps_prim_inf,
                            eps_dual_inf=eps_dual_inf, engine=engine, cert_tol=cert_tol, obj_rtol=obj_rtol,
                            obj_atol=obj_atol))
    max_iter, alpha, scaling, check_every, nodes = o["max_iter"], o["alpha"], o["scaling"], o["check_every"], o["nodes"]
    eps_abs, eps_rel = o["eps_abs"], o["eps_rel"]
    if eps_abs == 0 and eps_rel == 0:
        raise ParameterError("At least one of '--eps-abs' and '--eps-rel' must be positive.")
    entry = METHODS[method]
    if nodes is not None:
        _applies("nodes", "distributed", method)
    rho = o["rho"] if o["rho"] is not None else entry.default("rho", DEFAULT_RHO)
    if residual_balancing:
        _applies("residual-balancing", "distributed", method)
    if policy is not None:
        _applies("policy", "learned", method)
    if engine == "mpi" and "distributed" not in entry.tags:
        raise ParameterError(f"'--engine mpi' runs the methods {' and '.join(tagged(METHODS, 'distributed'))}; got "
                             f"method {method!r} (add '--method distributed').")
    return {"method": method, "eps_abs": eps_abs, "eps_rel": eps_rel, "mu": o["mu"],
            "nodes": None if nodes is None else int(nodes),
            "max_iter": int(max_iter) if max_iter is not None else entry.default("max_iter", DEFAULT_MAX_ITER),
            "time_limit": time_limit, "rho": rho,
            "sigma": o["sigma"], "alpha": alpha, "scaling": scaling,
            "adaptive_rho": bool(adaptive_rho), "check_every": int(check_every),
            "eps_prim_inf": o["eps_prim_inf"], "eps_dual_inf": o["eps_dual_inf"], "polish": bool(polish),
            "refine": bool(refine) and "no_refine" not in entry.tags, "policy": policy,
            "residual_balancing": bool(residual_balancing), "engine": engine,
            **{lim.name: float(lim.default if o[lim.name] is None else o[lim.name]) for lim in LIMITS
               if lim.name in ("cert_tol", "obj_rtol", "obj_atol")}}


CLAIMS = {"infeasible": "Primal infeasible: prim_inf_cert dy has A'dy ~ 0 and u'max(dy, 0) + l'min(dy, 0) < 0.",
          "unbounded": "Unbounded (dual infeasible): dual_inf_cert dx has q'dx < 0, P dx ~ 0 and A dx in the bounds' "
                       "cone."}


class QPSolver(Solver):
    blas_threads = 1  # its default thread count: see "BLAS threads" in docs/benchmarks.md
    thread_libraries = ()  # numpy's BLAS only (scipy's LAPACK serves the file's convexity check, before the limit):
    # importing scipy.linalg would cost each command 57 ms, a sixth of a small file's
    command = "qp"
    methods = METHODS
    default_method = DEFAULT_METHOD

    def setup(self, problem, method, options, deadline, progress) -> Job:
        qp = prepare(problem)
        settings = resolve_settings(method, **{k: v for k, v in options.items() if k not in ("device", "warm_start")})
        warm_start = options["warm_start"]
        x0_y0 = _warm_start(warm_start, qp)
        settings["warm_start"] = warm_start if isinstance(warm_start, str) else (None if warm_start is None else "given")
        return Job(method, qp, settings, problem.info(n=qp.n, m=qp.m), deadline=deadline, progress=progress,
                   context={"warm_start": x0_y0})

    def screen(self, job):
        return no_variables(job.data) if job.data.n == 0 else None

    def finish(self, job, out):
        """What a claim's vector shows, and which limit stopped the method, said in the message."""
        claim = CLAIMS.get(out.status.value)
        if claim:
            out.message = f"{claim} {out.message}".strip()
        if out.status is Status.MAX_ITER:
            out.add_message(f"Iteration limit {job.settings['max_iter']} reached; the last iterate is written.")
        elif out.status is Status.TIME_LIMIT:
            out.add_message(f"Time limit {job.settings['time_limit']:g} s reached; the last iterate is written.")
        if job.data.P_storage == "upper":
            out.stats["P_storage"] = "upper"
        return out

    def certify(self, job, result, out):
        from optsolve.qp import certificate

        settings = job.settings
        limits = {lim.name: settings[lim.name] for lim in certificate.LIMITS}
        return certificate.check(job.problem, result.solution, method=job.method, objective=result.objective,
                                 settings=settings, limits=limits, status=result.status.value)

    def judge(self, job, result):
        claim = result.solution.get("certificate_kind")
        if claim in ("infeasible", "unbounded") and not result.certificate.holds:
            result.status = Status.MAX_ITER
            result.add_message(f"The {claim} claim failed its certificate "
                               f"({result.certificate.describe_failures()}); reported as max_iter.")


SOLVER = QPSolver()


def solve_problem(problem, *, method: str | None = None, eps_abs: float = DEFAULT_EPS, eps_rel: float = DEFAULT_EPS,
                  max_iter: int | None = None, time_limit: float | None = None, rho: float | None = None,
                  sigma: float = defaults.SIGMA, alpha: float = defaults.ALPHA, scaling: int = defaults.SCALING,
                  adaptive_rho: bool = True, check_every: int = defaults.CHECK_EVERY,
                  eps_prim_inf: float = defaults.EPS_INFEASIBLE, eps_dual_inf: float = defaults.EPS_INFEASIBLE,
                  polish: bool = False, refine: bool = True, mu: float = 1.0, nodes: int | None = None,
                  policy: str | None = None, residual_balancing: bool = False, engine: str = "local", warm_start=None,
                  cert_tol: float | None = None, obj_rtol: float | None = None, obj_atol: float | None = None,
                  device: str = "auto", progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.qp.problems.SCHEMA`); the certificate is attached."""
    return run(SOLVER, problem, method=method, device=device, time_limit=time_limit, progress=progress,
               eps_abs=eps_abs, eps_rel=eps_rel, max_iter=max_iter, rho=rho, sigma=sigma, alpha=alpha,
               scaling=scaling, adaptive_rho=adaptive_rho, check_every=check_every, eps_prim_inf=eps_prim_inf,
               eps_dual_inf=eps_dual_inf, polish=polish, refine=refine, mu=mu, nodes=nodes, policy=policy,
               residual_balancing=residual_balancing, engine=engine, warm_start=warm_start, cert_tol=cert_tol,
               obj_rtol=obj_rtol, obj_atol=obj_atol)


def solve(P, q, A=None, l=None, u=None, *, r: float | None = None, method: str | None = None,
          eps_abs: float = DEFAULT_EPS, eps_rel: float = DEFAULT_EPS, max_iter: int | None = None,
          time_limit: float | None = None, warm_start=None, progress: Progress = SILENT, **options) -> Result:
    """Solve ``min 1/2 x'Px + q'x + r`` s.t. ``l <= Ax <= u`` (P full symmetric, or its upper triangle).

    Parameters
    ----------
    P : array_like or scipy.sparse matrix of shape (n, n)
        The positive semidefinite cost matrix (non-convex P is refused).
    q : array_like of shape (n,)
    A : array_like or scipy.sparse matrix of shape (m, n), optional
    l, u : array_like of shape (m,), optional
        The rows' bounds (``-inf`` / ``inf`` where a side is free; ``l = u`` for an equality).
    r : float, optional
        A constant added to the objective.
    method : str, optional
        ``auto`` (the default rule), ``admm``, ``deepqp``, ``distributed``, ``deepdistributed``, ``osqp``,
        ``piqp`` or ``clarabel``.
    eps_abs, eps_rel : float, default=1e-3
        OSQP's termination tolerances (residuals and duality gap).
    max_iter, time_limit : optional
        The iteration and wall-clock limits.
    warm_start : dict or str, optional
        ``{"x": ..., "y": ...}`` or a solution document's path.
    **options
        Any option of :func:`solve_problem` (``rho``, ``sigma``, ``alpha``, ``polish``, ``nodes``, ...).

    Returns
    -------
    optsolve.core.result.Result
        Status, objective, certificate, stats and settings, as every command's; its ``solution`` holds
        ``x``, ``y``, ``z``, or the infeasibility certificate.

    Raises
    ------
    optsolve.core.errors.InputError, optsolve.core.errors.ParameterError
        Bad data (the message names the field) or an option the method does not accept.
    """
    raw = {k: v for k, v in dict(P=P, q=q, A=A, l=l, u=u, r=r).items() if v is not None}
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, eps_abs=eps_abs, eps_rel=eps_rel, max_iter=max_iter,
                         time_limit=time_limit, warm_start=warm_start, progress=progress, **options)


def from_cvxpy(problem):
    """``(data, unpack)`` for a cvxpy QP; see :func:`optsolve.qp.cvxpy_form.from_cvxpy`."""
    from optsolve.qp.cvxpy_form import from_cvxpy as convert

    return convert(problem)


__all__ = ["solve", "solve_problem", "from_cvxpy", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
