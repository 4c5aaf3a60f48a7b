"""``optsolve mvi``: nonmonotone variational inequalities under the weak Minty condition.

Find z* in C with <F(z*), z - z*> >= 0 for every z in C (C closed and convex with a cheap
projection, F L-Lipschitz) when F is not monotone but satisfies the weak Minty condition:
some z* has <u, z - z*> >= rho ||u||^2 for every z and every u in (F + N_C)(z), rho > -1/L.

Method (``ecppa``, after Pethick, Mavrothalassitis and Cevher, "Efficient Interpolation between
Extragradient and Proximal Methods for Weak MVIs", ICLR 2025; built from the paper's
abstract, each property below is checked numerically in the tests):

1. Separation. For any w in C and u in (F + N_C)(w), the weak Minty condition at z = w says
   that z* lies in the halfspace H = {x : <u, w - x> >= rho ||u||^2}. If z_k is outside H, the
   relaxed projection z_{k+1} = z_k - lam t u, t = (<u, z_k - w> + rho ||u||^2) / ||u||^2 > 0,
   lam in (0, 2), gives ||z_{k+1} - z*||^2 <= ||z_k - z*||^2 - lam (2 - lam) t^2 ||u||^2
   (Fejer monotonicity), and so does a projection onto C afterwards.
2. Where to separate. At the resolvent w = J_{gamma(F + N_C)}(z_k), u = (z_k - w)/gamma and
   t = gamma + rho, positive exactly when gamma > -rho. The resolvent is the fixed point of
   w -> P_C(z_k - gamma F(w)), a contraction when gamma L < 1: hence the window
   gamma in (-rho, 1/L), non-empty iff rho > -1/L. Each inner point w_j of that iteration has
   u_j = F(w_j) + (z_k - gamma F(w_{j-1}) - w_j)/gamma in (F + N_C)(w_j) and its own t_j, with
   t_j -> gamma + rho.
3. Error correction. The inner loop stops at the first j with t_j >= sigma (gamma + rho),
   sigma in (0, 1): finitely many steps, and every outer step decreases ||z - z*||^2 by at
   least lam (2 - lam) sigma^2 (gamma + rho)^2 ||u_j||^2, so sum_k ||u_k||^2 is finite and
   min_k ||u_k||^2 <= eps after O(1/eps) outer steps, each of a number of inner steps bounded
   independently of eps (the inner accuracy needed is relative to ||u||, not absolute):
   O(1/eps) evaluations, without the log factor of a fixed inner accuracy.
4. Interpolation. With one inner step, t_1 u_1 is the step of AdaptiveEG+ (CEG+ with the
   adaptive step and sigma = rho): z_{k+1} = z_k + lam alpha (H w_1 - H z_k), H = I - gamma F,
   alpha gamma = t_1. With the exact resolvent, z_{k+1} = z_k + lam (1 + rho/gamma)(w - z_k):
   relaxed PPA. The stop rule picks one inner step when the weak MVI is mild and more as
   rho approaches -1/L.
5. Many halfspaces. Every inner point (and z_k itself, with u = F(z_k)) gives a halfspace
   holding z*; for any weights mu >= 0, d = sum mu_i u_i has ||z_k - d - z*||^2 <= ||z_k - z*||^2 -
   (2 v'mu - mu'G mu) (v_i = t_i ||u_i||^2, G the Gram matrix of the u_i), so a step onto the
   intersection, with mu from a few sweeps of coordinate ascent on that dual, keeps Fejer
   monotonicity and decreases ||z - z*||^2 at least as much as the deepest single halfspace: the
   bound of 3 holds. On rotational problems two halfspaces of one inner loop meet near z*.

Step sizes come from a local Lipschitz estimate that grows and shrinks (see
:mod:`optsolve.mvi.ecppa`). Where F = M z + q is affine and C = R^d, the resolvent is a linear
system, solved by restarted GMRES up to the error-correction test, at a step gamma = 10/L that the
fixed-point loop could not take (:mod:`optsolve.mvi.krylov`). Baselines: EG+, CEG+, AdaptiveEG+, CurvatureEG+, EG, GDA
(:mod:`optsolve.mvi.extragradient`) and relaxed PPA with a fixed number of inner steps. An operator
given as a mean of N terms (a user operator whose module defines ``<F>_terms`` and ``<F>_batch``) can be
sampled: ``--batch B`` runs the bias-corrected stochastic extragradient BC-SEG+
(:mod:`optsolve.mvi.stochastic`), whose answer is still judged on the full F.
"""

from __future__ import annotations


import numpy as np

from optsolve.core.errors import ParameterError
from optsolve.core.progress import SILENT, Progress
from optsolve.core.result import Result
from optsolve.core.options import Option, check, count, positive
from optsolve.core.solve import Job, Solver, run, tagged
from optsolve.mvi.methods import DEFAULT_MAX_EVALS, DEFAULT_TOL, METHODS
from optsolve.mvi.problems import SCHEMA, prepare, with_constants

DEFAULT_METHOD = "ecppa"
INNER_SOLVERS = ("auto", "fixed-point", "gmres")
CONSTANTS_SHARE = 0.5  # of a time limit, at most, for ||M|| and rho of an affine operator


def _is(method: str, tag: str) -> bool:
    return tag in METHODS[method].tags


OPTIONS = (positive("gamma"), positive("tol"), positive("feas_tol"), positive("residual_rtol"),
           positive("residual_atol"), Option("relax", low=0, high=2, low_open=True, high_open=True),
           Option("sigma", low=0, high=1, low_open=True, high_open=True), count("max_evals"),
           Option("inner_solver", "choice", choices=INNER_SOLVERS), count("inner_steps"), count("batch"),
           Option("rho"), positive("lipschitz"), count("seed", 0), count("max_iter"))


def _check_options(method, relax, sigma, inner_steps, inner_solver="auto", batch=None):
    """The rules that tie the options (checked against :data:`OPTIONS` already) to the method and each other."""
    if sigma is not None and not _is(method, "inner_loop"):
        raise ParameterError(f"The '--sigma' option (ecppa's inner stop) does not apply to method {method!r}.")
    if inner_solver != "auto" and not _is(method, "inner_loop"):
        raise ParameterError(f"The '--inner-solver' option (ecppa's resolvents) does not apply to method {method!r}.")
    if inner_solver == "gmres" and inner_steps is not None:
        raise ParameterError("The '--inner-solver gmres' option and '--inner-steps' exclude each other (forced inner "
                             "steps are fixed-point steps).")
    if inner_steps is not None and not _is(method, "proximal"):
        takers = " and ".join(tagged(METHODS, "proximal"))
        raise ParameterError(f"The '--inner-steps' option applies to {takers}; got method {method!r}.")
    _check_batch(method, batch, relax)


def _check_batch(method, batch, relax) -> None:
    if batch is not None and not _is(method, "stochastic"):
        raise ParameterError(f"The '--batch' option (sampled terms of the operator) applies to method "
                             f"{' and '.join(tagged(METHODS, 'stochastic'))}; got method {method!r}.")
    if _is(method, "stochastic") and batch is None:
        raise ParameterError(f"The method {method!r} samples the terms of an operator given as a mean: give "
                             "'--batch B', the terms per sample.")
    if _is(method, "stochastic") and relax is not None:
        raise ParameterError(f"The '--relax' option does not apply to method {method!r} (its diminishing alpha_k "
                             "takes the place of a relaxation).")


def _gmres_without_constants(mp, method, inner_solver, inner_steps) -> bool:
    """Whether ecppa's GMRES resolvents will run without the exact ||M|| and rho a file may lack: an affine F
    on R^d too large for the dense rho (WEAK_MVI_SIZE), where the exact ||M|| (Lanczos) can take longer than
    the solve and GMRES needs only its scale, estimated by a few products (optsolve.mvi.krylov.norm_estimate)."""
    from optsolve.mvi.operators import WEAK_MVI_SIZE

    return (_is(method, "inner_loop") and inner_solver != "fixed-point" and inner_steps is None
            and mp.op.matrix is not None and mp.C.kind == "none" and mp.d > WEAK_MVI_SIZE)


def _inner_misfit(mp) -> str:
    """Why GMRES cannot solve the resolvents of a prepared problem."""
    if mp.op.matrix is None:
        return f"the operator {mp.op.name!r}, which is no matrix"
    return f"the constraint {mp.C.describe()}"


def _range_check(mp, method, gamma, force, notes, where: str = "") -> float | None:
    """The rho the method uses; refuses rho <= -1/L (or gamma <= -rho) unless forced."""
    rho, L = mp.rho, mp.L
    if _is(method, "stochastic"):
        return _stochastic_range(mp, method, force, notes, where)
    if rho is None:
        if _is(method, "assumes_rho"):
            notes.append("no rho given: the method assumes rho = -0.99 gamma / 2 (CEG+'s adaptive choice; "
                         "-0.99 / (2L) with GMRES resolvents), which covers rho > -1/(2L); give '--rho' for a harder "
                         "problem")
        return None
    if L is not None and rho * L <= -1:
        if not force:
            raise ParameterError(
                f"{where}rho = {rho:.6g} <= -1/L = {-1 / L:.6g} (rho L = {rho * L:.4g}): the weak Minty condition holds only "
                "outside the range of every method here (ecppa and relaxed PPA need rho > -1/L, EG+ and CEG+ "
                "rho > -1/(4L)), so none is guaranteed to converge. Use '--force' to run anyway.")
        notes.append(f"rho L = {rho * L:.4g} <= -1: outside every guarantee, run with '--force'; the method "
                     "assumes rho = -0.99 gamma / 2 instead")
        return None
    if gamma is not None and _is(method, "proximal") and gamma <= -rho:
        raise ParameterError(f"The '--gamma' option must exceed -rho = {-rho:.6g} for {method} "
                             f"(the window is (-rho, 1/L)); got {gamma!r}.")
    return rho


def _stochastic_range(mp, method, force, notes, where) -> float | None:
    """BC-SEG+'s range: gamma in (-2 rho, 1/L), non-empty iff rho > -1/(2L)."""
    rho, L = mp.rho, mp.L
    if rho is None:
        notes.append(f"no rho given: {method}'s guarantee needs rho > -gamma/2 (about -0.45/L at its step); give "
                     "'--rho' to have it checked")
        return None
    if L is not None and rho * L <= -0.5:
        if not force:
            raise ParameterError(
                f"{where}rho = {rho:.6g} <= -1/(2L) = {-0.5 / L:.6g} (rho L = {rho * L:.4g}): outside the range of "
                f"{method} (its step gamma must lie in (-2 rho, 1/L)); ecppa without '--batch' covers rho > -1/L. "
                "Use '--force' to run anyway.")
        notes.append(f"rho L = {rho * L:.4g} <= -1/2: outside {method}'s guarantee, run with '--force'")
    return rho


def _sum_misfit(mp, problem, method, batch) -> None:
    """Refuses a stochastic method on an operator that is no mean of terms, or a batch above its N."""
    if mp.op.terms is None:
        raise ParameterError(f"The '--batch' option ({method}) needs an operator given as a mean of terms: a "
                             "'--operator module:F' whose module also defines F_terms (their number) and "
                             f"F_batch(z, idx) (the mean of the terms idx at z); {problem.source} has the operator "
                             f"{mp.op.name!r}, which is none.")
    if batch > mp.op.terms:
        raise ParameterError(f"The '--batch' option must be at most the operator's {mp.op.terms} terms; got {batch}.")


class MviSolver(Solver):
    blas_threads = 1  # its default thread count: see "BLAS threads" in docs/benchmarks.md
    command = "mvi"
    methods = METHODS
    default_method = DEFAULT_METHOD

    def setup(self, problem, method, options, deadline, progress) -> Job:
        o = check(OPTIONS, options)
        extra_limits = {"feas_tol": o["feas_tol"], "residual_rtol": o["residual_rtol"],
                        "residual_atol": o["residual_atol"]}
        inner_solver = o.get("inner_solver") or "auto"
        batch = o.get("batch")
        _check_options(method, o["relax"], o["sigma"], o["inner_steps"], inner_solver, batch)
        rho, lipschitz = o["rho"], o["lipschitz"]
        # the operator's constants may take at most half the time left: the rest is the solve's
        constants_by = deadline.share(CONSTANTS_SHARE).at
        mp = prepare(problem, o["operator"], lipschitz=lipschitz, rho=rho, constants=False)
        if not _gmres_without_constants(mp, method, inner_solver, o["inner_steps"]):
            mp = with_constants(mp, problem, lipschitz=lipschitz, rho=rho, deadline=constants_by)
        if _is(method, "stochastic"):
            _sum_misfit(mp, problem, method, batch)
        notes = list(mp.notes)
        given = [f"'--{name}'" for name, value in (("rho", rho), ("lipschitz", lipschitz)) if value is not None]
        options_given = f"the option{'s' * (len(given) > 1)} {' and '.join(given)}"
        where = (f"{problem.source}: its operator's constants and {options_given} give " if given
                 else f"{problem.source}: its operator's constants give ")
        rho_used = _range_check(mp, method, o["gamma"], o["force"], notes, where)
        if inner_solver == "gmres" and not (mp.op.matrix is not None and mp.C.kind == "none"):
            raise ParameterError(f"The '--inner-solver gmres' option needs an affine operator (a matrix in the "
                                 f"file) on R^d; {problem.source} has {_inner_misfit(mp)}.")
        tol = DEFAULT_TOL if o["tol"] is None else float(o["tol"])
        budget = DEFAULT_MAX_EVALS if o["max_evals"] is None else int(o["max_evals"])
        if _is(method, "secant") and mp.L is None and o["gamma"] is None:
            notes.append("L unknown: the step comes from the largest secant ||F(z) - F(z')|| / ||z - z'|| seen "
                         "(give '--lipschitz' for a guaranteed step)")
        from optsolve.mvi import certificate

        limits = certificate.resolve(dict(extra_limits, tol=tol))
        settings = {"operator": o["operator"], "gamma": o["gamma"], "relax": o["relax"], "sigma": o["sigma"],
                    "inner_solver": inner_solver, "batch": batch,
                    "seed": (0 if o.get("seed") is None else int(o["seed"])) if _is(method, "stochastic") else None,
                    "rho": mp.rho, "lipschitz": mp.L, "max_evals": budget, "inner_steps": o["inner_steps"],
                    "force": o["force"], "time_limit": o["time_limit"], **limits}
        return Job(method, mp, settings, problem.info(d=mp.d), deadline=deadline, progress=progress,
                   context={"rho": rho_used, "notes": notes, "max_iter": o["max_iter"], "limits": limits})

    def certify(self, job, result, out):
        from optsolve.mvi import certificate

        return certificate.check(job.problem, result.solution, method=job.method, objective=None,
                                 settings=job.settings, limits=job.context["limits"], status=result.status.value,
                                 operator=job.settings["operator"])


SOLVER = MviSolver()


def solve_problem(problem, *, method: str | None = None, operator: str | None = None, gamma: float | None = None,
                  relax: float | None = None, sigma: float | None = None, rho: float | None = None,
                  lipschitz: float | None = None, tol: float | None = None, max_evals: int | None = None,
                  inner_steps: int | None = None, inner_solver: str = "auto", batch: int | None = None,
                  seed: int | None = None, force: bool = False,
                  feas_tol: float | None = None,
                  residual_rtol: float | None = None, residual_atol: float | None = None,
                  max_iter: int | None = None, time_limit: float | None = None, device: str = "auto",
                  progress: Progress = SILENT) -> Result:
    """Solve a validated problem (see :data:`optsolve.mvi.problems.SCHEMA`); the certificate is attached.

    ``operator``: a user operator ``module:function`` (instead of the file's); ``gamma``: a
    fixed step (default: from a local Lipschitz estimate); ``relax``: lam in (0, 2);
    ``sigma``: ecppa's inner stop in (0, 1) (default 0.5); ``rho`` and ``lipschitz`` override
    the file's; ``tol``: the natural residual to reach (default 1e-6); ``max_evals``: the
    budget of F evaluations (default 1e6); ``inner_steps``: ecppa's forced inner steps, or
    rppa's fixed count (default 20); ``batch``: terms per sample of an operator given as a mean of
    terms (:mod:`optsolve.mvi.stochastic`; the method then defaults to ``bc-seg+``), drawn with ``seed``
    (default 0); ``inner_solver``: ecppa's resolvents by ``fixed-point`` steps or
    ``gmres`` (an affine F on R^d), ``auto`` gmres where it applies; ``force``: run when rho <= -1/L; ``feas_tol``,
    ``residual_rtol``, ``residual_atol``: the certificate's other limits (see
    :data:`optsolve.mvi.certificate.LIMITS`). ``time_limit`` bounds the whole call, the constants
    of the operator and the certificate included.
    """
    if method is None and batch is not None:
        method = "bc-seg+"
    return run(SOLVER, problem, method=method, device=device, time_limit=time_limit, progress=progress,
               operator=operator, gamma=gamma, relax=relax, sigma=sigma, rho=rho, lipschitz=lipschitz, tol=tol,
               max_evals=max_evals, inner_steps=inner_steps, inner_solver=inner_solver, batch=batch, seed=seed,
               force=force, feas_tol=feas_tol,
               residual_rtol=residual_rtol, residual_atol=residual_atol, max_iter=max_iter)


def solve(operator, z0=None, *, constraint: str | None = None, method: str | None = None, progress: Progress = SILENT,
          **options) -> Result:
    """Solve a variational inequality with a weak-MVI (possibly nonmonotone) operator.

    Parameters
    ----------
    operator : str or dict
        A library operator's name, or a problem dict with its keys (``{"operator": "polar", "a": 1.0}``,
        ``{"operator": "affine", "M": ..., "q": ...}``).
    z0 : array_like, optional
        The starting point (default: the operator's).
    constraint : str, optional
        ``none``, ``box`` or ``ball`` (default: the operator's).
    method : str, optional
        ``ecppa`` (the default) or a baseline (``eg+``, ``ceg+``, ``adaptive-eg+``, ``curvature-eg+``, ``rppa``,
        ``eg``, ``gda``); ``bc-seg+`` (the default with ``batch``) samples an operator given as a mean of terms.
    **options
        Any option of :func:`solve_problem` (``tol``, ``rho``, ``gamma``, ``max_evals``, ...).

    Returns
    -------
    optsolve.core.result.Result
        Status, objective, certificate, stats and settings, as every command's; its ``solution`` holds
        ``z``, its natural ``residual``.

    Raises
    ------
    optsolve.core.errors.InputError, optsolve.core.errors.ParameterError
        Bad data (the message names the field) or an option the method does not accept.
    """
    raw = dict(operator) if isinstance(operator, dict) else {"operator": operator}
    if z0 is not None:
        raw["z0"] = np.asarray(z0, dtype=float)
    if constraint is not None:
        raw["constraint"] = constraint
    problem = SCHEMA.validate(raw, source="Problem data")
    return solve_problem(problem, method=method, progress=progress, **options)


__all__ = ["solve", "solve_problem", "METHODS", "DEFAULT_METHOD", "INNER_SOLVERS", "SCHEMA"]
