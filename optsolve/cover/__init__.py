"""``optsolve cover``: fair submodular cover (Chen, Xing, Zhou and Crawford, ICLR 2025).

Find a small set S of elements with f(S) >= tau whose groups are in proportion,
ceil(p_c |S|) <= |S n U_c| <= floor(q_c |S|), for a weighted coverage or facility-location f.

Methods (:mod:`optsolve.cover.methods`): ``greedy`` (convert-fair with greedy-fairness-bi, lazy
evaluations), ``threshold`` (threshold-fairness-bi), ``continuous`` (continuous greedy on the
multilinear extension, rounded), ``milp`` (the exact optimum by HiGHS, small instances) and the
baseline ``unfair-greedy`` (classic greedy cover, no fairness).
"""

from __future__ import annotations

from optsolve.core import clock
from optsolve.core.errors import ParameterError
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result, Status
from optsolve.core.options import Option, check, count, positive
from optsolve.core.solve import Job, MethodOutput, Solver, run, tagged
from optsolve.cover.certificate import VALUE_RTOL
from optsolve.cover.methods import METHODS
from optsolve.cover.problems import SCHEMA, infeasibility_reason, prepare

DEFAULT_METHOD = "greedy"


def _beta(beta):
    if beta in (None, "auto"):
        return "auto"
    try:
        b = int(beta)
    except (TypeError, ValueError):
        b = 0
    if b < 1 or str(b) != str(beta).strip():
        raise ParameterError(f"The '--beta' option must be 'auto' or a positive integer; got {beta!r}.")
    return b


OPTIONS = (Option("eps", low=0, high=1, low_open=True, high_open=True), positive("alpha"), count("max_iter"),
           Option("value_rtol", low=0, high=1, high_open=True),
           Option("seed", "int", low=0, high=2**128, high_open=True),
           Option("balance", low=0, high=1), positive("tau"), Option("tau_frac", low=0, high=1, low_open=True))


def resolve_settings(method, *, eps, alpha, beta, bicriteria, balance, tau, tau_frac, max_iter, time_limit, seed,
                     unfair=False, value_rtol=VALUE_RTOL, improve=True):
    o = check(OPTIONS, dict(eps=eps, alpha=alpha, max_iter=max_iter, value_rtol=value_rtol, seed=seed,
                            balance=balance, tau=tau, tau_frac=tau_frac))
    eps, alpha, max_iter, value_rtol, seed = o["eps"], o["alpha"], o["max_iter"], o["value_rtol"], o["seed"]
    balance, tau, tau_frac = o["balance"], o["tau"], o["tau_frac"]
    entry = METHODS[method]
    if unfair and "unfair" not in entry.tags:
        takers = " or ".join(f"'--method {m}'" for m in tagged(METHODS, "unfair"))
        raise ParameterError(f"The '--unfair' flag drops the proportions, which '--method {method}' enforces; "
                             f"use it with {takers} (which sets it).")
    if tau is not None and tau_frac is not None:
        raise ParameterError("Give at most one of '--tau' and '--tau-frac'.")
    if time_limit is None:
        time_limit = entry.default("time_limit")
    # balance, tau, tau_frac: the options given (None: the file's); unfair: what unfair-greedy solves
    return {"eps": float(eps), "alpha": float(alpha), "beta": _beta(beta), "bicriteria": bool(bicriteria),
            "balance": balance, "tau": tau, "tau_frac": tau_frac, "max_iter": max_iter, "time_limit": time_limit,
            "seed": 0 if seed is None else int(seed), "unfair": "unfair" in entry.tags,
            "value_rtol": float(value_rtol), "improve": bool(improve)}


class CoverSolver(Solver):
    blas_threads = 1  # its default thread count: see "BLAS threads" in docs/benchmarks.md
    command = "cover"
    methods = METHODS
    default_method = DEFAULT_METHOD

    def setup(self, problem, method, options, deadline, progress) -> Job:
        settings = resolve_settings(method, **{k: v for k, v in options.items() if k != "device"})
        if options["time_limit"] is None and settings["time_limit"] is not None:  # milp's default limit
            deadline = clock.Deadline.after(settings["time_limit"])
        cp = prepare(problem, balance=settings["balance"], tau=settings["tau"], tau_frac=settings["tau_frac"])
        info = problem.info(n=cp.n, items=cp.M.shape[1], groups=cp.G)
        stats = {"function": cp.kind, "f_all": cp.f_all, "tau": cp.tau}
        return Job(method, cp, settings, info, deadline=deadline, progress=progress, context={"stats": stats})

    def screen(self, job):
        reason = infeasibility_reason(job.data, fairness=not job.settings["unfair"], rtol=job.settings["value_rtol"])
        if reason is None:
            return None
        return MethodOutput(Status.INFEASIBLE, {"certificate_kind": "infeasible", "reason": reason},
                            f"Infeasible: {reason}", iterations=0, evaluations=0, stats=job.context["stats"])

    def certify(self, job, result, out):
        from optsolve.cover import certificate

        settings = job.settings
        limits = {lim.name: settings[lim.name] for lim in certificate.LIMITS}
        solve_s = result.stats.get("time_s", {}).get("solve")  # the certificate's bounds: a share of its time
        solve_s = None if solve_s is None else certificate.BOUND_SHARE * solve_s
        return certificate.check(job.problem, result.solution, method=job.method, objective=result.objective,
                                 settings=settings, limits=limits, status=result.status.value, deadline=job.deadline.at,
                                 bound_seconds=solve_s)

    def judge(self, job, result):
        if result.status is Status.INFEASIBLE and not result.certificate.holds:
            late = job.deadline.expired()
            result.status = Status.TIME_LIMIT if late else Status.NUMERICAL_ERROR
            result.add_message("The certificate could not re-derive the infeasibility"
                               + (" before the time limit." if late else "."))
        if result.certificate.holds and result.solution.get("selected"):
            lb = result.certificate["lower_bound_opt"].value
            result.stats["size_over_opt_at_most"] = len(result.solution["selected"]) / lb


SOLVER = CoverSolver()


def solve_problem(problem, *, method: str | None = None, eps: float = 0.1, alpha: float = 0.1, beta="auto",
                  bicriteria: bool = False, balance: float | None = None, tau: float | None = None,
                  tau_frac: float | None = None, max_iter: int | None = None, time_limit: float | None = None,
                  device: str = "auto", seed: int | None = None, unfair: bool = False,
                  value_rtol: float = VALUE_RTOL, improve: bool = True, progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.cover.problems.SCHEMA`); the certificate is attached.

    ``balance``, ``tau``, ``tau_frac`` override the file's; ``max_iter`` bounds convert-fair's
    guesses of the optimum's size; ``time_limit`` (seconds) bounds the whole solve, certificate
    included (milp: default 60 s, then the incumbent and HiGHS's dual bound are reported);
    ``value_rtol``: f(S) within this of tau, relative to max(tau, f(U)), reaches it (as the
    certificate judges); ``unfair``: set by ``method='unfair-greedy'``, refused with the others;
    ``improve``: greedy, threshold and continuous improve their cover (:mod:`optsolve.cover.improve`:
    redundant elements removed, one-for-one swaps (coverage), 2-for-1 exchanges, an exact MILP polish
    on small instances); off, the
    convert-fair cover is returned as repaired (continuous still drops redundant elements).
    """
    return run(SOLVER, problem, method=method, device=device, time_limit=time_limit, progress=progress, eps=eps,
               alpha=alpha, beta=beta, bicriteria=bicriteria, balance=balance, tau=tau, tau_frac=tau_frac,
               max_iter=max_iter, seed=seed, unfair=unfair, value_rtol=value_rtol, improve=improve)


def solve(*, groups, cover=None, weights=None, sim=None, p=None, q=None, balance=None, tau=None, tau_frac=None,
          method: str = DEFAULT_METHOD, progress: Progress = SILENT, **options) -> Result:
    """Fair submodular cover: the smallest set of elements whose coverage reaches ``tau`` with each group's
    share of the set within its bounds.

    Parameters
    ----------
    groups : array_like of shape (n,)
        The group label of every element.
    cover : array_like of shape (n, items), optional
        Weighted coverage: element i covers item j where ``cover[i, j]`` is nonzero (``weights``: the items'
        weights, default 1).
    sim : array_like of shape (n, clients), optional
        Facility location instead: f(S) = sum over clients of the best similarity in S.
    p, q : array_like, optional
        Each group's lower and upper share of the set; or ``balance``, the same bounds for every group.
    tau, tau_frac : float, optional
        The value to reach, or its fraction of f(all elements).
    method : str, default="greedy"
        ``greedy``, ``threshold``, ``continuous``, ``milp`` or ``unfair-greedy``.
    **options
        Any option of :func:`solve_problem` (``eps``, ``alpha``, ``beta``, ``time_limit``, ...).

    Returns
    -------
    optsolve.core.result.Result
        Status, objective, certificate, stats and settings, as every command's; its ``solution`` holds
        the ``selected`` elements and their groups' counts.

    Raises
    ------
    optsolve.core.errors.InputError, optsolve.core.errors.ParameterError
        Bad data (the message names the field) or an option the method does not accept.
    """
    raw = {k: v for k, v in dict(cover=cover, weights=weights, sim=sim, groups=groups, p=p, q=q, balance=balance,
                                 tau=tau, tau_frac=tau_frac).items() if v is not None}
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, progress=progress, **options)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "SCHEMA"]
