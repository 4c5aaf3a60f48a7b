"""``optsolve qp``: convex quadratic programs in OSQP's form.

    minimise 1/2 x'Px + q'x + r   subject to   l <= Ax <= u

Methods: ``auto`` (the default: a KKT solve for equality-only problems, PIQP for small ones,
else ADMM handed over to PIQP when it is slow, see :mod:`optsolve.qp.auto`), ``admm`` (OSQP's
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

import math
import time
from typing import Callable

import numpy as np

from optsolve.core import clock
from optsolve.qp import defaults
from optsolve.core.errors import InputError, ParameterError, SolverError, positive_option
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.core.solve import Job, MethodOutput, Solver, run
from optsolve.qp.problems import SCHEMA, QPProblem, prepare

DEFAULT_METHOD = "auto"  # the rule of optsolve.qp.auto: a KKT solve, PIQP, or ADMM handed over to PIQP
DEFAULT_EPS = defaults.EPS
MAX_SCALING = 1000
TIME_FOR_CERTIFICATE = "the time limit ran out before the exact certificate was computed"


def _nonneg(name, value):
    x = float(value)
    if not (x >= 0 and math.isfinite(x)):
        raise ParameterError(f"The '--{name}' option must be a float >= 0; got {x!r}.")
    return x


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


def _verifier(qp: QPProblem, cert_tol: float | None = None, deadline: float | None = None):
    """``verify(kind, vector) -> (certificate or None, reason)``: ADMM's direction if it passes the
    certificate's checks, else the exact one from an LP (:mod:`optsolve.qp.infeasibility`), else None.
    The LP gets the time left before ``deadline`` (a ``time.perf_counter()`` value), and none after it."""
    from optsolve.qp.certificate import infeasibility_checks, unboundedness_checks
    from optsolve.qp.infeasibility import LP_TIME_LIMIT, farkas_vector, recession_direction

    from optsolve.qp.certificate import CERT_TOL

    tol = CERT_TOL if cert_tol is None else cert_tol

    def failures(kind, vec):
        checks = infeasibility_checks(qp, vec, tol) if kind == "infeasible" else unboundedness_checks(qp, vec, tol)
        return [c.name for c in checks if not c.holds]

    def verify(kind, vec, exact=True):
        if not failures(kind, vec):
            return vec, ""
        if not exact:
            return None, "the direction fails its checks"
        budget = LP_TIME_LIMIT if deadline is None else min(LP_TIME_LIMIT, deadline - time.perf_counter())
        if budget <= 0:
            return None, TIME_FOR_CERTIFICATE
        exact = farkas_vector(qp, budget) if kind == "infeasible" else recession_direction(qp, budget)
        if exact is None:
            if deadline is not None and time.perf_counter() >= deadline:
                return None, TIME_FOR_CERTIFICATE
            return None, "no exact certificate exists (linear program infeasible)"
        failed = failures(kind, exact)
        return (exact, "") if not failed else (None, "the exact certificate fails " + ", ".join(failed))

    return verify


def _deadline(settings: dict) -> float | None:
    """The ``time.perf_counter()`` value at which the settings' time limit, counted from the command's start, ends."""
    return clock.deadline(settings["time_limit"])


def _admm(qp, settings, progress, x0, y0, controller=None, switch_after=None, row_spread=None):
    from optsolve.qp.admm import ADMMSettings, solve_admm

    st = ADMMSettings(eps_abs=settings["eps_abs"], eps_rel=settings["eps_rel"], max_iter=settings["max_iter"],
                      rho=settings["rho"], sigma=settings["sigma"], alpha=settings["alpha"],
                      scaling=settings["scaling"], adaptive_rho=settings["adaptive_rho"],
                      check_every=settings["check_every"], eps_prim_inf=settings["eps_prim_inf"],
                      eps_dual_inf=settings["eps_dual_inf"], polish=settings["polish"],
                      refine_stalled=settings["refine"], switch_after=switch_after, row_spread=row_spread)
    deadline = _deadline(settings)
    if controller is not None:
        st.check_every = controller.interval
    r = solve_admm(qp, st, x0=x0, y0=y0, verify_claim=_verifier(qp, settings["cert_tol"], deadline), progress=progress,
                   deadline=deadline, controller=controller)
    message = r.message
    if r.rejected_claims:
        it, kind, why = r.rejected_claims[-1]
        message += (f" An {kind} claim at iteration {it} failed the independent certificate check ({why}) and was "
                   "not reported; iterations went on.")
    stats = {"iterations": r.iterations, "evaluations": r.factorisations, "rho_updates": r.rho_updates, "rho": r.rho,
             "prim_res": r.prim_res, "dual_res": r.dual_res,
             "duality_gap": r.duality_gap, "polished": r.polished, "time_s": {"setup": r.time_s.get("setup"),
                                                      "iterations": r.time_s.get("iterations")}}
    return {"x": r.x, "y": r.y, "z": r.z, "status": r.status, "message": message, "stats": stats,
            "prim_inf_cert": r.prim_inf_cert, "dual_inf_cert": r.dual_inf_cert}


def _distributed(qp, settings, progress, x0, y0, controller=None):
    from optsolve.qp.distributed import solve_distributed

    if x0 is not None:
        raise ParameterError("The distributed methods do not take a warm start (yet); use 'admm'.")
    deadline = _deadline(settings)
    comm = engine_comm(settings["engine"])
    partition = qp.partition if settings["nodes"] is None else None
    n_nodes = settings["nodes"] or qp.nodes or (None if partition is not None else 1)
    r = solve_distributed(qp, n_nodes, partition, rho=settings["rho"], mu=settings["mu"], alpha=settings["alpha"],
                          scaling=settings["scaling"], eps_abs=settings["eps_abs"], eps_rel=settings["eps_rel"],
                          max_iter=settings["max_iter"],
                          check_every=controller.interval if controller else settings["check_every"],
                          refine_stalled=settings["refine"], deadline=deadline, progress=progress,
                          controller=controller, balance=settings["residual_balancing"], comm=comm)
    from optsolve.qp.admm import refined_message

    message = refined_message(r.iterations) if r.polished else r.message
    stats = {"iterations": r.iterations, "evaluations": r.factorisations, "nodes": r.nodes, "copies": r.copies,
             "balance_updates": r.balance_updates, "prim_res": r.prim_res,
             "dual_res": r.dual_res, "consensus_res": r.consensus_res, "polished": r.polished,
             "time_s": dict(r.time_s)}
    if settings["engine"] == "mpi":
        stats["ranks"] = comm.size
    return {"x": r.x, "y": r.y, "z": r.z, "status": r.status, "message": message, "stats": stats,
            "prim_inf_cert": None, "dual_inf_cert": None}


def engine_comm(engine: str):
    """The reductions of DistributedQP's consensus step: this process, or MPI's COMM_WORLD."""
    from optsolve.qp.distributed import MPIRanks, OneProcess

    if engine != "mpi":
        return OneProcess
    try:
        from mpi4py import MPI
    except ImportError as exc:
        raise ParameterError(f"'--engine mpi' needs mpi4py and an MPI library ({exc}); install them with "
                             "pip install 'optsolve[dist]'.") from None
    return MPIRanks(MPI.COMM_WORLD)


def _load_policy(path: str, kinds: tuple[str, ...]):
    from optsolve.qp.policy import Policy

    policy = Policy.load(path)
    if policy.kind not in kinds:
        method = "deepdistributed" if kinds == ("distributed",) else "deepqp"
        raise ParameterError(f"Policy file {path!r} holds a {policy.kind} policy; method {method} needs a "
                             f"{' or '.join(kinds)} one.")
    return policy


def _policy_stats(path, policy):
    return {"path": path, "family": policy.header.get("family"), "kind": policy.kind, "K": policy.steps,
            "interval": policy.interval, "pac_bayes_bound": (policy.header.get("pac_bayes") or {}).get("bound")}


def _deepdistributed(qp, settings, progress, x0, y0):
    from optsolve.qp.policy import default_policy_path

    path = settings["policy"] or default_policy_path(qp, "distributed")
    if path is None:
        raise ParameterError("No DeepDistributedQP policy is shipped yet: train one with 'optsolve qp-train FAMILY "
                             "--nodes N -o POLICY.npz' and pass '--policy POLICY.npz'.")
    settings["policy"] = path  # the settings record the policy used (the certificate reads its bound there)
    policy = _load_policy(path, ("distributed",))
    out = _distributed(qp, settings, progress, x0, y0, controller=policy)
    out["stats"]["policy"] = _policy_stats(path, policy)
    return out


def _deepqp(qp, settings, progress, x0, y0):
    from optsolve.qp.policy import default_policy_path

    path = settings["policy"] = settings["policy"] or default_policy_path(qp)
    policy = _load_policy(path, ("centralised", "rows"))
    out = _admm(qp, settings, progress, x0, y0, controller=policy)
    out["stats"]["policy"] = _policy_stats(path, policy)
    return out


def _osqp(qp, settings, progress, x0, y0):
    from optsolve.qp.peers import solve_osqp

    deadline = _deadline(settings)
    r = solve_osqp(qp, settings, deadline, x0, y0)
    return _peer_output(qp, settings, deadline, r, f"osqp reported {r['stats']['osqp_status']}")


def _peer_output(qp, settings, deadline, r: dict, said: str) -> dict:
    """A peer's answer (:mod:`optsolve.qp.peers`: status, x, y, stats, the vector of a claim) as a method's
    output: an infeasibility claim re-checked (:func:`_check_claim`), an answer whose x is not finite dropped."""
    out = {"status": r["status"], "message": "", "stats": r["stats"], "prim_inf_cert": None, "dual_inf_cert": None}
    if r["status"] in ("infeasible", "unbounded"):
        _check_claim(qp, settings, deadline, out, r["claim"], said)
    _answer(qp, out, r["x"], r["y"])
    return out


def _check_claim(qp, settings, deadline, out: dict, raw: np.ndarray, said: str) -> None:
    """Another solver's infeasibility claim (``out["status"]``, supported by ``raw``), re-checked and made
    exact as admm's are; a claim that fails is reported as the limit it was."""
    status = out["status"]
    cert, why = _verifier(qp, settings["cert_tol"], deadline)(status, raw / max(float(np.abs(raw).max()), 1e-300))
    if cert is None:
        out["status"] = "time_limit" if why == TIME_FOR_CERTIFICATE else "max_iter"
        out["message"] = (f"{said}, but the claim failed the independent certificate check ({why}); reported as "
                          f"{out['status']}.")
    else:
        out["prim_inf_cert" if status == "infeasible" else "dual_inf_cert"] = cert


def _answer(qp, out: dict, x: np.ndarray, y) -> None:
    if x.shape == (qp.n,) and np.all(np.isfinite(x)):
        out.update(x=x, y=np.asarray(y, dtype=float), z=qp.A @ x)
    else:
        out.update(x=None, y=None, z=None)


def _interior_point_peer(name: str):
    """``--method piqp`` / ``clarabel``: the package called on the problem (:mod:`optsolve.qp.peers`)."""

    def run(qp, settings, progress, x0, y0):
        from optsolve.core.progress import stdout_to_stderr
        from optsolve.qp import peers

        try:
            solve = {"piqp": peers.solve_piqp, "clarabel": peers.solve_clarabel}[name]
            __import__(name)
        except ImportError:
            raise ParameterError(f"Method {name!r} needs the {name} package: pip install {name} "
                                 "(or 'optsolve[peers]').") from None
        deadline = _deadline(settings)
        with stdout_to_stderr():
            r = solve(qp, settings, None if deadline is None else max(deadline - time.perf_counter(), 1e-3))
        stats = {"iterations": r["stats"]["iterations"], "evaluations": r["stats"]["iterations"], **r["stats"]}
        out = _peer_output(qp, settings, deadline, dict(r, stats=stats), f"{name} reported {r['status']}")
        peers.trace_answer(qp, r["stats"]["iterations"], out["x"], out["y"])
        return out

    return run


def _auto(qp, settings, progress, x0, y0):
    """The default: the rule of :mod:`optsolve.qp.auto` (a KKT solve, PIQP, or ADMM handed over to PIQP)."""
    from optsolve.qp import auto, peers
    from optsolve.qp.admm import SWITCHED

    first = auto.choose(qp, warm=x0 is not None or y0 is not None)
    before = ""
    if first == "kkt":
        t = time.perf_counter()
        r = auto.solve_kkt(qp, settings["eps_abs"], settings["eps_rel"], _deadline(settings))
        if r is not None:
            peers.trace_answer(qp, r[3], r[0], r[1])
            stats = {"iterations": r[3], "evaluations": 1, "method_used": "kkt",
                     "time_s": {"kkt": time.perf_counter() - t}}
            return {"x": r[0], "y": r[1], "z": r[2], "status": "optimal", "message": "", "stats": stats,
                    "prim_inf_cert": None, "dual_inf_cert": None}
        before = "The KKT system of the equality rows has no solution that passes the termination test; "
    elif first == "piqp":
        out = RUNS["piqp"](qp, settings, progress, None, None)
        if out["status"] in ("infeasible", "unbounded") or (
                out["status"] == "optimal" and out["x"] is not None and peers.passes(qp, settings, out["x"], out["y"])):
            out["stats"]["method_used"] = "piqp"
            return out
        before = f"PIQP ended {out['stats'].get('piqp_status')} without an answer that passes the termination test; "
    out = _admm(qp, settings, progress, x0, y0, switch_after=auto.SWITCH_AFTER if auto.has_piqp() else None,
                row_spread=auto.ROW_SPREAD)
    out["stats"]["method_used"] = "admm, then piqp" if out["stats"]["polished"] == SWITCHED else "admm"
    if before:
        out["message"] = (before + "ADMM ran next. " + out["message"]).strip()
    return out


def _no_variables(qp: QPProblem) -> dict:
    """The answer when n = 0, without iterations: Ax = 0 for the only x, so the problem is feasible
    exactly when every row has l <= 0 <= u; otherwise a row that excludes 0 is its own Farkas
    certificate (dy = -1 where l > 0, +1 where u < 0: A'dy = 0 and SC(dy) < 0)."""
    z = np.zeros(qp.m)
    dy = np.where(qp.l > 0, -1.0, 0.0) + np.where(qp.u < 0, 1.0, 0.0)
    stats = {"iterations": 0, "evaluations": 0}
    if np.any(dy):
        return {"x": None, "y": None, "z": None, "status": "infeasible", "stats": stats,
                "message": f"No variables (n = 0): row {int(np.flatnonzero(dy)[0])} excludes Ax = 0.",
                "prim_inf_cert": dy, "dual_inf_cert": None}
    return {"x": np.zeros(0), "y": np.zeros(qp.m), "z": z, "status": "optimal", "stats": stats,
            "message": "No variables (n = 0): every row admits Ax = 0; the objective is r.",
            "prim_inf_cert": None, "dual_inf_cert": None}


# each method in the form auto and the learned methods call: (qp, settings, progress, x0, y0) -> dict
RUNS = {"auto": _auto, "admm": _admm, "osqp": _osqp, "distributed": _distributed, "deepqp": _deepqp,
        "deepdistributed": _deepdistributed, "piqp": _interior_point_peer("piqp"),
        "clarabel": _interior_point_peer("clarabel")}
DEFAULT_RHO = {"auto": 0.1, "admm": 0.1, "osqp": 0.1, "distributed": 1.0, "deepqp": 0.1, "deepdistributed": 1.0,
               "piqp": 0.1, "clarabel": 0.1}


def resolve_settings(method, *, eps_abs, eps_rel, max_iter, time_limit, rho, sigma, alpha, scaling, adaptive_rho,
                     check_every, eps_prim_inf, eps_dual_inf, polish=False, refine=True, mu=1.0, nodes=None,
                     policy=None, residual_balancing=False, engine="local", cert_tol=None, obj_rtol=None,
                     obj_atol=None):
    from optsolve.qp.certificate import LIMITS

    if max_iter is not None and (int(max_iter) != max_iter or max_iter < 1):
        raise ParameterError(f"The '--max-iter' option must be a positive integer; got {max_iter!r}.")
    if not (0 < float(alpha) < 2):
        raise ParameterError(f"The '--alpha' option must be in (0, 2); got {alpha!r}.")
    if int(scaling) != scaling or not 0 <= scaling <= MAX_SCALING:
        raise ParameterError(f"The '--scaling' option must be an integer in [0, {MAX_SCALING}]; got {scaling!r} "
                             "(Ruiz equilibration reaches its fixed point within about a hundred passes).")
    if int(check_every) != check_every or check_every < 1:
        raise ParameterError(f"The '--check-every' option must be a positive integer; got {check_every!r}.")
    eps_abs, eps_rel = _nonneg("eps-abs", eps_abs), _nonneg("eps-rel", eps_rel)
    if eps_abs == 0 and eps_rel == 0:
        raise ParameterError("At least one of '--eps-abs' and '--eps-rel' must be positive.")
    if nodes is not None and (int(nodes) != nodes or nodes < 1):
        raise ParameterError(f"The '--nodes' option must be a positive integer; got {nodes!r}.")
    if nodes is not None and method not in ("distributed", "deepdistributed"):
        raise ParameterError("The '--nodes' option applies to the methods distributed and deepdistributed only.")
    if rho is None:
        rho = DEFAULT_RHO[method]
    if residual_balancing and method not in ("distributed", "deepdistributed"):
        raise ParameterError("The '--residual-balancing' option applies to the methods distributed and "
                             "deepdistributed only.")
    if policy is not None and method not in ("deepqp", "deepdistributed"):
        raise ParameterError("The '--policy' option applies to the methods deepqp and deepdistributed only.")
    if engine not in ("local", "mpi"):
        raise ParameterError(f"Unknown engine {engine!r}; expected 'local' or 'mpi'.")
    if engine == "mpi" and method not in ("distributed", "deepdistributed"):
        raise ParameterError(f"'--engine mpi' runs the methods distributed and deepdistributed; got method {method!r} "
                             "(add '--method distributed').")
    return {"method": method, "eps_abs": eps_abs, "eps_rel": eps_rel, "mu": positive_option("mu", mu),
            "nodes": None if nodes is None else int(nodes), "max_iter": int(max_iter) if max_iter is not None else 4000,
            "time_limit": positive_option("time-limit", time_limit), "rho": positive_option("rho", rho),
            "sigma": positive_option("sigma", sigma), "alpha": float(alpha), "scaling": int(scaling),
            "adaptive_rho": bool(adaptive_rho), "check_every": int(check_every),
            "eps_prim_inf": positive_option("eps-prim-inf", eps_prim_inf),
            "eps_dual_inf": positive_option("eps-dual-inf", eps_dual_inf), "polish": bool(polish),
            "refine": bool(refine) and method != "osqp", "policy": policy,
            "residual_balancing": bool(residual_balancing), "engine": engine,
            **{lim.name: _limit_option(lim, value) for lim, value in zip(LIMITS[2:], (cert_tol, obj_rtol, obj_atol))}}


def _limit_option(lim, value) -> float:
    """A certificate limit given as an option (:data:`optsolve.qp.certificate.LIMITS`): its default when absent."""
    if value is None:
        return float(lim.default)
    return positive_option(lim.name.replace("_", "-"), value)


def _method(found: Callable) -> Callable:
    """``METHODS[name]``: ``found(qp, settings, progress, x0, y0) -> dict`` (the form the methods above share, so that
    auto and the learned methods call admm and piqp) as a method's output: the answer, or the certificate of an
    infeasible or unbounded problem."""

    def solve_with(job: Job) -> MethodOutput:
        qp = job.data
        try:
            out = found(qp, job.settings, job.progress, *job.context["warm_start"])
        except RuntimeError as exc:  # a KKT matrix that float64 cannot factor (entries near 1e300)
            if "singular" not in str(exc).lower():
                raise
            raise SolverError(f"{job.problem.source}: the KKT matrix cannot be factored in float64 ({exc}); rescale "
                              "the data (entries of magnitude near 1e300 or 1e-300 are beyond it).") from None
        return _output(job, out)

    return solve_with


def _output(job: Job, out: dict) -> MethodOutput:
    qp, settings = job.data, job.settings
    status = Status(out["status"])
    stats = dict(out["stats"])
    result = MethodOutput(status, None, iterations=stats.pop("iterations", None),
                          evaluations=stats.pop("evaluations", None), stats=stats)
    if status is Status.INFEASIBLE:
        result.solution = {"certificate_kind": "infeasible", "prim_inf_cert": out["prim_inf_cert"]}
        result.message = "Primal infeasible: prim_inf_cert dy has A'dy ~ 0 and u'max(dy, 0) + l'min(dy, 0) < 0."
    elif status is Status.UNBOUNDED:
        result.solution = {"certificate_kind": "unbounded", "dual_inf_cert": out["dual_inf_cert"]}
        result.message = ("Unbounded (dual infeasible): dual_inf_cert dx has q'dx < 0, P dx ~ 0 and A dx in the "
                          "bounds' cone.")
    elif out.get("x") is not None:
        result.solution = {"x": out["x"], "y": out["y"], "z": out["z"]}
        result.objective = qp.objective(out["x"])
    if out.get("message"):
        result.add_message(out["message"])
    if status is Status.MAX_ITER:
        result.add_message(f"Iteration limit {settings['max_iter']} reached; the last iterate is written.")
    elif status is Status.TIME_LIMIT:
        result.add_message(f"Time limit {settings['time_limit']:g} s reached; the last iterate is written.")
    if qp.P_storage == "upper":
        result.stats["P_storage"] = "upper"
    return result


METHODS = {name: _method(found) for name, found in RUNS.items()}


class QPSolver(Solver):
    command = "qp"
    methods = METHODS
    default_method = DEFAULT_METHOD

    def setup(self, problem, method, options, deadline, progress) -> Job:
        qp = prepare(problem)
        o = {k: v for k, v in options.items() if k not in ("device", "warm_start")}
        settings = resolve_settings(method, **o)
        warm_start = options["warm_start"]
        x0_y0 = _warm_start(warm_start, qp)
        settings["warm_start"] = warm_start if isinstance(warm_start,
                 str) else (None if warm_start is None else "given")
        return Job(method, qp, settings, problem.info(n=qp.n, m=qp.m), deadline=deadline, progress=progress,
                   context={"warm_start": x0_y0})

    def screen(self, job):
        return _output(job, _no_variables(job.data)) if job.data.n == 0 else None

    def certify(self, job, result):
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
