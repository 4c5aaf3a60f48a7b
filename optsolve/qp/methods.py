"""The methods of ``optsolve qp``: ``METHODS[name]`` is the method's entry
(:class:`optsolve.core.solve.Entry`): its function of the job, which returns the method's
:class:`~optsolve.core.solve.MethodOutput`, built by :func:`answer` (x, y and z, or the certificate
vector of an infeasible or unbounded problem), its help line, its defaults (``rho``, ``max_iter``) and
its tags, which the option checks read: ``distributed`` (``--nodes``, ``--residual-balancing``,
``--engine mpi``), ``learned`` (``--policy``), ``no_refine`` (no iterative refinement of its answer).

``auto`` and the learned methods call the others' functions here with the same job (``auto``
tries a KKT solve or PIQP, then ADMM; ``deepqp`` is ADMM under a policy). Infeasibility claims,
ADMM's and the peers', are re-checked by :func:`claim_verifier` before they are reported.
"""

from __future__ import annotations

import functools
import time

import numpy as np

from optsolve.core.errors import ParameterError, SolverError
from optsolve.core.result import Status
from optsolve.core.solve import Job, MethodOutput, entry
from optsolve.qp.problems import QPProblem

TIME_FOR_CERTIFICATE = "the time limit ran out before the exact certificate was computed"


def answer(qp: QPProblem, status, *, x=None, y=None, z=None, message: str = "", iterations=None, evaluations=None,
           stats: dict | None = None, prim_inf_cert=None, dual_inf_cert=None) -> MethodOutput:
    """A method's output for ``status``: an infeasible problem's Farkas vector ``prim_inf_cert`` or an unbounded
    one's recession direction ``dual_inf_cert`` as the solution, else x, y and z (no solution where x is None)."""
    out = MethodOutput(status, None, message, iterations=iterations, evaluations=evaluations, stats=stats or {})
    if out.status is Status.INFEASIBLE:
        out.solution = {"certificate_kind": "infeasible", "prim_inf_cert": prim_inf_cert}
    elif out.status is Status.UNBOUNDED:
        out.solution = {"certificate_kind": "unbounded", "dual_inf_cert": dual_inf_cert}
    elif x is not None:
        out.solution = {"x": x, "y": y, "z": z}
        out.objective = qp.objective(x)
    return out


def _primal_dual(out: MethodOutput) -> tuple:
    """The answer's (x, y) (:func:`answer`), or (None, None) where it has none (a claim, no point)."""
    solution = out.solution or {}
    return solution.get("x"), solution.get("y")


def claim_verifier(qp: QPProblem, cert_tol: float | None = None, deadline: float | None = None):
    """``verify(kind, vector) -> (certificate or None, reason)``: ADMM's direction if it passes the
    certificate's checks, else the exact one from an LP (:mod:`optsolve.qp.infeasibility`), else None.
    The LP gets the time left before ``deadline`` (a ``time.perf_counter()`` value), and none after it."""
    from optsolve.qp.certificate import CERT_TOL, infeasibility_checks, unboundedness_checks
    from optsolve.qp.infeasibility import LP_TIME_LIMIT, farkas_vector, recession_direction

    tol = CERT_TOL if cert_tol is None else cert_tol

    def failures(kind, vec):
        checks = infeasibility_checks(qp, vec, tol) if kind == "infeasible" else unboundedness_checks(qp, vec, tol)
        return [c.name for c in checks if c.holds is False]

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


def _admm(job: Job, controller=None, switch_after=None, row_spread=None) -> MethodOutput:
    from optsolve.qp.admm import ADMMSettings, solve_admm

    qp, settings = job.data, job.settings
    x0, y0 = job.context["warm_start"]
    st = ADMMSettings(eps_abs=settings["eps_abs"], eps_rel=settings["eps_rel"], max_iter=settings["max_iter"],
                      rho=settings["rho"], sigma=settings["sigma"], alpha=settings["alpha"],
                      scaling=settings["scaling"], adaptive_rho=settings["adaptive_rho"],
                      check_every=settings["check_every"], eps_prim_inf=settings["eps_prim_inf"],
                      eps_dual_inf=settings["eps_dual_inf"], polish=settings["polish"],
                      refine_stalled=settings["refine"], switch_after=switch_after, row_spread=row_spread,
                      early_checks=row_spread is not None)
    if controller is not None:
        st.check_every = controller.interval
    r = solve_admm(qp, st, x0=x0, y0=y0, verify_claim=claim_verifier(qp, settings["cert_tol"], job.deadline.at),
                   progress=job.progress, deadline=job.deadline.at, controller=controller)
    message = r.message
    if r.rejected_claims:
        it, kind, why = r.rejected_claims[-1]
        message += (f" An {kind} claim at iteration {it} failed the independent certificate check ({why}) and was "
                    "not reported; iterations went on.")
    stats = {"rho_updates": r.rho_updates, "rho": r.rho, "prim_res": r.prim_res, "dual_res": r.dual_res,
             "duality_gap": r.duality_gap, "polished": r.polished,
             "time_s": {"setup": r.time_s.get("setup"), "iterations": r.time_s.get("iterations")}}
    return answer(qp, r.status, x=r.x, y=r.y, z=r.z, message=message, iterations=r.iterations,
                  evaluations=r.factorisations, stats=stats, prim_inf_cert=r.prim_inf_cert,
                  dual_inf_cert=r.dual_inf_cert)


def _distributed(job: Job, controller=None) -> MethodOutput:
    from optsolve.qp.admm import refined_message
    from optsolve.qp.distributed import solve_distributed

    qp, settings = job.data, job.settings
    if job.context["warm_start"][0] is not None:
        raise ParameterError("The distributed methods do not take a warm start (yet); use 'admm'.")
    comm = engine_comm(settings["engine"])
    partition = qp.partition if settings["nodes"] is None else None
    n_nodes = settings["nodes"] or qp.nodes or (None if partition is not None else 1)
    r = solve_distributed(qp, n_nodes, partition, rho=settings["rho"], mu=settings["mu"], alpha=settings["alpha"],
                          scaling=settings["scaling"], eps_abs=settings["eps_abs"], eps_rel=settings["eps_rel"],
                          max_iter=settings["max_iter"],
                          check_every=controller.interval if controller else settings["check_every"],
                          refine_stalled=settings["refine"], deadline=job.deadline.at, progress=job.progress,
                          controller=controller, balance=settings["residual_balancing"], comm=comm)
    message = refined_message(r.iterations) if r.polished else r.message
    stats = {"nodes": r.nodes, "copies": r.copies, "balance_updates": r.balance_updates, "prim_res": r.prim_res,
             "dual_res": r.dual_res, "consensus_res": r.consensus_res, "polished": r.polished,
             "time_s": dict(r.time_s)}
    if settings["engine"] == "mpi":
        stats["ranks"] = comm.size
    return answer(qp, r.status, x=r.x, y=r.y, z=r.z, message=message, iterations=r.iterations,
                  evaluations=r.factorisations, stats=stats)


def engine_comm(engine: str):
    """The reductions of DistributedQP's consensus step: this process, or MPI's COMM_WORLD."""
    from optsolve.qp.ranks import MPIRanks, OneProcess

    if engine != "mpi":
        return OneProcess
    from optsolve.core.errors import Terminated
    from optsolve.core.signals import received

    if received() is not None:  # before MPI starts no rank waits on another: each stops here, alike
        raise Terminated(received())
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


def _deepdistributed(job: Job) -> MethodOutput:
    from optsolve.qp.policy import default_policy_path

    settings = job.settings
    path = settings["policy"] or default_policy_path(job.data, "distributed")
    if path is None:
        raise ParameterError("No DeepDistributedQP policy is shipped yet: train one with 'optsolve qp-train FAMILY "
                             "--nodes N -o POLICY.npz' and pass '--policy POLICY.npz'.")
    settings["policy"] = path  # the settings record the policy used (the certificate reads its bound there)
    policy = _load_policy(path, ("distributed",))
    out = _distributed(job, controller=policy)
    out.stats["policy"] = _policy_stats(path, policy)
    return out


def _deepqp(job: Job) -> MethodOutput:
    from optsolve.qp.policy import default_policy_path

    settings = job.settings
    path = settings["policy"] = settings["policy"] or default_policy_path(job.data)
    policy = _load_policy(path, ("centralised", "rows"))
    out = _admm(job, controller=policy)
    out.stats["policy"] = _policy_stats(path, policy)
    return out


def _osqp(job: Job) -> MethodOutput:
    from optsolve.qp.peers import solve_osqp

    r = solve_osqp(job.data, job.settings, job.deadline.at, *job.context["warm_start"])
    return _peer_output(job, r, f"osqp reported {r['stats']['osqp_status']}")


def _peer_output(job: Job, r: dict, said: str) -> MethodOutput:
    """A peer's answer (:mod:`optsolve.qp.peers`: status, x, y, stats, the vector of a claim) as a method's
    output: an infeasibility claim re-checked and made exact as admm's are (one that fails is reported as
    ``numerical_error`` with the reason, or ``time_limit`` where the deadline cut the check short), an answer
    whose x is not finite dropped."""
    qp, status, message = job.data, r["status"], ""
    claim = {}
    if status in ("infeasible", "unbounded"):
        raw = r["claim"]
        verify = claim_verifier(qp, job.settings["cert_tol"], job.deadline.at)
        cert, why = verify(status, raw / max(float(np.abs(raw).max()), 1e-300))
        if cert is None:
            # the peer stopped on its claim, not on a limit: a claim that does not hold leaves no answer
            failed = "time_limit" if why == TIME_FOR_CERTIFICATE else "numerical_error"
            message = (f"{said}, but the claim failed the independent certificate check ({why}); reported as "
                       f"{failed}.")
            status = failed
        else:
            claim = {"prim_inf_cert" if status == "infeasible" else "dual_inf_cert": cert}
    x, y = r["x"], r["y"]
    stats = dict(r["stats"])
    iterations, evaluations = stats.pop("iterations", None), stats.pop("evaluations", None)
    if x.shape == (qp.n,) and np.all(np.isfinite(x)):
        return answer(qp, status, x=x, y=np.asarray(y, dtype=float), z=qp.A @ x, message=message,
                      iterations=iterations, evaluations=evaluations, stats=stats, **claim)
    return answer(qp, status, message=message, iterations=iterations, evaluations=evaluations, stats=stats, **claim)


def _interior_point_peer(name: str, finish: bool = False):
    """``--method piqp`` / ``clarabel``: the package called on the problem (:mod:`optsolve.qp.peers`); with
    ``finish`` (the default method's steps), an answer that fails the test is finished by polishing."""

    def solve_with(job: Job) -> MethodOutput:
        from optsolve.core.progress import stdout_to_stderr
        from optsolve.qp import peers

        try:
            solve = {"piqp": peers.solve_piqp, "clarabel": peers.solve_clarabel}[name]
            __import__(name)
        except ImportError:
            raise ParameterError(f"Method {name!r} needs the {name} package: pip install {name} "
                                 "(or 'optsolve[peers]').") from None
        deadline = job.deadline.at
        with stdout_to_stderr():
            r = solve(job.data, job.settings, None if deadline is None else max(deadline - time.perf_counter(), 1e-3),
                      finish=finish)
        stats = dict(r["stats"], evaluations=r["stats"]["iterations"])  # one factorisation a step
        out = _peer_output(job, dict(r, stats=stats), f"{name} reported {r['status']}")
        peers.trace_answer(job.data, r["stats"]["iterations"], *_primal_dual(out))
        return out

    return solve_with


def _auto(job: Job) -> MethodOutput:
    """The default: the rule of :mod:`optsolve.qp.auto` (a KKT solve, PIQP or Clarabel, or ADMM handed over to one)."""
    from optsolve.qp import auto, peers
    from optsolve.qp.handover import HANDED

    qp, settings = job.data, job.settings
    x0, y0 = job.context["warm_start"]
    eps = max(settings["eps_abs"], settings["eps_rel"])
    first = auto.choose(qp, warm=x0 is not None or y0 is not None, eps=eps)
    before = ""
    if first == "clarabel" and auto.equality_only(qp):  # P's factor dear: Clarabel's steps, then the KKT solve
        out, before = _interior_points(job, ["clarabel"])
        if out is not None:
            return out
        first = "kkt"
    if first == "kkt":
        t = time.perf_counter()
        r = auto.solve_kkt(qp, settings["eps_abs"], settings["eps_rel"], job.deadline.at)
        if r is not None:
            peers.trace_answer(qp, r[3], r[0], r[1])
            return answer(qp, "optimal", x=r[0], y=r[1], z=r[2], iterations=r[3], evaluations=1,
                          stats={"method_used": "kkt", "time_s": {"kkt": time.perf_counter() - t}})
        before += "The KKT system of the equality rows has no solution that passes the termination test; "
    elif first in ("piqp", "clarabel"):
        paces = None
        if first == "piqp" and eps <= auto.PIQP_FIRST_EPS and auto.kkt_entries(qp.P, qp.A) > auto.PIQP_FIRST_ENTRIES:
            first, paces = auto.by_pace(qp, settings)
        out, before = _interior_points(job, auto.next_tries(first), paces)
        if out is not None:
            return out
    out = _admm(job, switch_after=auto.SWITCH_AFTER if auto.has_piqp() else None, row_spread=auto.ROW_SPREAD)
    handed = {text: name for name, text in HANDED.items()}.get(out.stats["polished"])
    out.stats["method_used"] = f"admm, then {handed}" if handed else "admm"
    if before:
        out.message = (before + "ADMM ran next. " + out.message).strip()
    return out


def _interior_points(job: Job, tries: list[str], paces: dict | None = None) -> tuple[MethodOutput | None, str]:
    """PIQP and Clarabel in the order ``tries``, each finished (``FINISHED``), the next only where the time left
    fits it (:func:`optsolve.qp.auto.fits`): the first answer that passes the termination test or makes a claim,
    else None, and what each said (for the message of what runs next)."""
    from optsolve.qp import auto, peers

    qp, settings = job.data, job.settings
    spent, before = {}, ""
    for k, name in enumerate(tries):
        if k and not auto.fits(name, job.deadline.remaining(), paces, spent):
            break
        t = time.perf_counter()
        out = FINISHED[name](job)
        spent[name] = time.perf_counter() - t
        if paces is not None:
            out.stats["probe_s"] = paces
        x, y = _primal_dual(out)
        if out.status in (Status.INFEASIBLE, Status.UNBOUNDED) or (
                out.status is Status.OPTIMAL and x is not None and peers.passes(qp, settings, x, y)):
            out.stats["method_used"] = name
            return out, before
        said = out.stats.get(f"{name}_status")
        before += f"{'PIQP' if name == 'piqp' else 'Clarabel'} ended {said} without an answer that passes " \
                  "the termination test; "
    return None, before


def no_variables(qp: QPProblem) -> MethodOutput:
    """The answer when n = 0, without iterations: Ax = 0 for the only x, so the problem is feasible
    exactly when every row has l <= 0 <= u; otherwise a row that excludes 0 is its own Farkas
    certificate (dy = -1 where l > 0, +1 where u < 0: A'dy = 0 and SC(dy) < 0)."""
    dy = np.where(qp.l > 0, -1.0, 0.0) + np.where(qp.u < 0, 1.0, 0.0)
    if np.any(dy):
        return answer(qp, "infeasible", message=f"No variables (n = 0): row {int(np.flatnonzero(dy)[0])} excludes "
                      "Ax = 0.", iterations=0, evaluations=0, prim_inf_cert=dy)
    return answer(qp, "optimal", x=np.zeros(0), y=np.zeros(qp.m), z=np.zeros(qp.m), iterations=0, evaluations=0,
                  message="No variables (n = 0): every row admits Ax = 0; the objective is r.")


def _factorable(method):
    """``method``, with a KKT matrix that float64 cannot factor (entries near 1e300) reported as a solver error
    naming the file."""

    @functools.wraps(method)
    def solve_with(job: Job) -> MethodOutput:
        try:
            return method(job)
        except RuntimeError as exc:
            if "singular" not in str(exc).lower():
                raise
            raise SolverError(f"{job.problem.source}: the KKT matrix cannot be factored in float64 ({exc}); rescale "
                              "the data (entries of magnitude near 1e300 or 1e-300 are beyond it).") from None

    return solve_with


FINISHED = {name: _factorable(_interior_point_peer(name, finish=True)) for name in ("piqp", "clarabel")}
# the interior-point steps of auto: an answer that fails the test is finished by polishing

METHODS = {
    "auto": entry(_factorable(_auto), "one KKT solve where every row is an equality; PIQP where the KKT matrix has at "
                  "most 40,000 entries, or at most a million and a few rows of A holding 0.18 of the variables "
                  "each, unless P's own factor is dear; Clarabel "
                  "where ADMM's KKT factor would fill in (by its symbolic step); else "
                  "ADMM (one rho per row from its active set at early adaptive steps), handed over to PIQP once its "
                  "iterations cost its setup and 10 factorisations, or sooner where its residuals' pace predicts "
                  "that (stats.method_used says which answered)"),
    "admm": entry(_factorable(_admm), "OSQP's ADMM (numpy/scipy), infeasibility claims re-checked before they are "
                  "made"),
    "osqp": entry(_factorable(_osqp), "the osqp package called on the problem", tags=("no_refine",)),
    "distributed": entry(_factorable(_distributed), "DistributedQP over --nodes nodes (or the file's partition)",
                         defaults={"rho": 1.0}, tags=("distributed",)),
    "deepqp": entry(_factorable(_deepqp), "admm with rho and alpha (or one rho per row) from a learned policy for its "
                    "first K steps", tags=("learned",)),
    "deepdistributed": entry(_factorable(_deepdistributed), "distributed with each node's rho and mu from a learned "
                             "policy", defaults={"rho": 1.0}, tags=("distributed", "learned")),
    "piqp": entry(_factorable(_interior_point_peer("piqp")), "the PIQP package called on the problem"),
    "clarabel": entry(_factorable(_interior_point_peer("clarabel")), "the Clarabel package called on the problem "
                      "(optional: pip install 'optsolve[peers]')"),
}
