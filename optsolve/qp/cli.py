"""The ``optsolve qp`` command."""

import os
import sys

import click

from optsolve.cli import CONTEXT_SETTINGS, AliasedOption, method_option, run_solve, solve_options
from optsolve.qp import SOLVER
from optsolve.qp.certificate import CERT_TOL
from optsolve.qp.defaults import ALPHA, CHECK_EVERY, EPS, EPS_INFEASIBLE, SCALING, SIGMA

OUTPUT_OPTIONS = ()


@click.command("qp", context_settings=CONTEXT_SETTINGS)
@solve_options
@method_option(SOLVER)
@click.option("--nodes", type=int, default=None,
              help="distributed: number of nodes of the automatic partition [default: the file's 'partition' "
                   "or 'nodes', else 1].")
@click.option("--mu", type=float, default=1.0, show_default=True, help="distributed: consensus penalty.")
@click.option("--residual-balancing", is_flag=True,
              help="distributed, deepdistributed: residual balancing node by node (OSQP's adaptive rule for each "
                   "node's rho and mu) every 50 iterations, at most 10 times; after a policy's K steps.")
@click.option("--policy", metavar="POLICY.npz", default=None,
              help="deepqp, deepdistributed: the learned policy [default: the shipped policy of the file's 'family' "
                   "where there is one, else the random-QP one (deepqp) or the chain one (deepdistributed)].")
@click.option("--eps-abs", type=float, default=EPS, show_default=True, help="Absolute tolerance (as OSQP).")
@click.option("--eps-rel", type=float, default=EPS, show_default=True, help="Relative tolerance (as OSQP).")
@click.option("--eps-prim-inf", type=float, default=EPS_INFEASIBLE, show_default=True,
              help="Tolerance of the primal infeasibility test.")
@click.option("--eps-dual-inf", type=float, default=EPS_INFEASIBLE, show_default=True,
              help="Tolerance of the dual infeasibility (unboundedness) test.")
@click.option("--cert-tol", type=float, default=CERT_TOL, show_default=True,
              help="Leftovers an infeasibility or unboundedness certificate may have, each relative to the magnitudes "
                   "of the terms it sums (the scale of its rounding).")
@click.option("--objective-rtol", "--obj-rtol", "obj_rtol", cls=AliasedOption, hidden_aliases=("--obj-rtol",),
              type=float, default=1e-9, show_default=True,
              help="Certificate: relative difference allowed between the reported and the recomputed objective.")
@click.option("--objective-atol", "--obj-atol", "obj_atol", cls=AliasedOption, hidden_aliases=("--obj-atol",),
              type=float, default=1e-9, show_default=True,
              help="Certificate: absolute floor of that difference.")
@click.option("--rho", type=float, default=None,
              help="Initial ADMM step size [default: 0.1; distributed: 1].")
@click.option("--sigma", type=float, default=SIGMA, show_default=True, help="OSQP's sigma: the regularisation of the x-update.")
@click.option("--alpha", type=float, default=ALPHA, show_default=True, help="OSQP's alpha: the relaxation, in (0, 2).")
@click.option("--scaling", type=int, default=SCALING, show_default=True, help="Ruiz equilibration passes (0: none).")
@click.option("--adaptive-rho/--fixed-rho", default=True, show_default=True,
              help="Adapt rho every 50 iterations from the residual ratio.")
@click.option("--check-every", type=int, default=CHECK_EVERY, show_default=True,
              help="Iterations between termination checks.")
@click.option("--polish", is_flag=True, help="Polish an optimal solution: solve the guessed active set exactly.")
@click.option("--refine/--no-refine", default=True, show_default=True,
              help="admm: when the iterations run out (max_iter, time_limit), try polishing before giving up.")
@click.option("--warm-start", metavar="SOLUTION.json", default=None,
              help="Start from x and y of a previous solution document.")
@click.option("--engine", type=click.Choice(["local", "mpi"]), default="local", show_default=True,
              help="distributed, deepdistributed: 'mpi' spreads the nodes over the ranks of "
                   "`mpiexec -n R optsolve qp --engine mpi ...` (one Allreduce per iteration; rank 0 writes "
                   "the output). Needs pip install 'optsolve[dist]'.")
def command(problem, **params):
    """Convex QP: minimise 1/2 x'Px + q'x + r subject to l <= Ax <= u.

    Writes x, the duals y (Px + q + A'y = 0 at the optimum) and z = Ax, or for an
    infeasible (exit 3) or unbounded (exit 4) problem the certificate vector; the
    certificate recomputes OSQP's residuals, the duality gap and the bound violations.
    --max-iter (default 4000) counts ADMM iterations.
    """
    if params["engine"] == "mpi" and _mpi_rank() > 0:
        _run_quiet_rank(problem, params)
    run_solve("qp", problem, params)


MPI_RANK_VARIABLES = ("PMI_RANK", "OMPI_COMM_WORLD_RANK", "PMIX_RANK")  # MPICH's Hydra, Open MPI, PMIx


def _mpi_rank() -> int:
    """This process's rank, from what mpiexec sets, without starting MPI: rank 0 is watched, and its
    solve starts MPI in the watched child (:mod:`optsolve.core.guard`)."""
    for name in MPI_RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    try:
        from mpi4py import MPI
    except ImportError:
        return 0  # rank 0 reports the missing package (solve_problem names the extra to install)
    return MPI.COMM_WORLD.Get_rank()


def _run_quiet_rank(problem, params):
    """A rank other than 0 of '--engine mpi': the same solve, nothing written; its exit code. It is not
    watched: when rank 0's watcher stops its solve and ends the command, the launcher ends the other ranks."""
    from optsolve.core.progress import QUIET, configure_logging
    from optsolve.core.runner import OUTPUT_OPTIONS, solve_file
    from optsolve.core.signals import handling

    configure_logging(QUIET)
    with handling("optsolve qp") as signals:  # recorded, and polled where the ranks agree to stop (no exception)
        try:
            result = solve_file("qp", problem, {k: v for k, v in params.items() if k not in OUTPUT_OPTIONS})
        except KeyboardInterrupt:  # a signal before MPI started (engine_comm): no other rank waits on this one
            result = None
    sys.exit(signals.exit_code or (1 if result is None else result.exit_code))


MIN_COUNT = 4  # two training problems, one held out, one to certify on
POSITIVE = click.FloatRange(min=0, min_open=True)


@click.command("qp-train", context_settings=CONTEXT_SETTINGS)
@click.argument("family")
@click.option("-o", "--output", required=True, metavar="POLICY.npz", help="Where to write the policy.")
@click.option("--n", "size", type=click.IntRange(min=1), default=20, show_default=True,
              help="Variables of each training problem.")
@click.option("--count", type=click.IntRange(min=MIN_COUNT), default=300, show_default=True,
              help="Problems generated (split 30% training, 20% held out, 50% certification).")
@click.option("--steps", type=click.IntRange(min=1), default=10, show_default=True, help="K: learned policy calls.")
@click.option("--interval", type=click.IntRange(min=1), default=5, show_default=True,
              help="Iterations between policy calls.")
@click.option("--hidden", type=click.IntRange(min=1), default=8, show_default=True, help="Hidden units of the MLP.")
@click.option("--generations", type=click.IntRange(min=0), default=30, show_default=True,
              help="Evolution-strategies generations.")
@click.option("--population", type=click.IntRange(min=1), default=8, show_default=True,
              help="Antithetic pairs per generation.")
@click.option("--sigma", type=POSITIVE, default=0.05, show_default=True,
              help="The evolution strategies' sigma: the width of the search distribution (and of the PAC-Bayes "
                   "posterior).")
@click.option("--lr", type=POSITIVE, default=0.05, show_default=True,
              help="Adam step size of the evolution strategies.")
@click.option("--eps", type=POSITIVE, default=1e-3, show_default=True, help="OSQP's eps_abs = eps_rel that the loss counts iterations to.")
@click.option("--cap", type=click.IntRange(min=1), default=500, show_default=True,
              help="Iterations at which the loss is 1.")
@click.option("--nodes", type=click.IntRange(min=1), default=None,
              help="Train a DeepDistributedQP policy for this many nodes (families with a partition use theirs).")
@click.option("--per-row", is_flag=True,
              help="A per-row DeepQP policy: one rho per inequality row, from the row's own distance to its bounds, "
                   "dual and residual (not with --nodes).")
@click.option("--seed", type=int, default=0, show_default=True)
@click.option("-q", "--quiet", is_flag=True, help="Silence stderr except error lines.")
def train_command(family, output, size, count, steps, interval, hidden, generations, population, sigma, lr, eps, cap,
                  nodes, per_row, seed, quiet):
    """Train a DeepQP policy on FAMILY (a generator family of `optsolve gen qp`) and certify it.

    Problems are generated and split before anything is fitted: the policy is trained by
    evolution strategies on 30%, compared on 20% held out with OSQP's defaults and a tuned
    constant rho, and certified on the rest by a PAC-Bayes bound on the loss
    min(iterations, cap) / cap. With --nodes the policy is a DeepDistributedQP one, for
    the nodes' rho and mu; with --per-row it sets one rho per inequality row. The header of
    POLICY.npz records all of it.
    """
    import json
    import sys

    import numpy as np

    from optsolve.cli import check_writable
    from optsolve.core.progress import configure_logging
    from optsolve.core.runner import verbosity_of
    from optsolve.qp.problems import FAMILIES, SCHEMA, prepare
    from optsolve.qp.train import train_policy

    check_writable(output, "'-o' / '--output'", stdout=False)
    if per_row and nodes is not None:
        raise click.BadParameter("a per-row policy is for the centralised ADMM (deepqp); drop --nodes or --per-row.",
                                 param_hint="'--per-row'")
    if family not in FAMILIES:
        raise click.BadParameter(f"unknown family {family!r}; expected one of {', '.join(sorted(FAMILIES))}.",
                                 param_hint="FAMILY")
    configure_logging(verbosity_of(quiet, 1))
    _check_training_memory(family, size, count, hidden, population, "rows" if per_row else "centralised")
    rng = np.random.default_rng(seed)
    problems = [prepare(SCHEMA.validate(FAMILIES[family].generate(rng, n=size), source=f"{family} #{i}"))
                for i in range(count)]
    policy = train_policy(problems, family=family, hidden=hidden, steps=steps, interval=interval, eps=eps,
                          generations=generations, population=population, sigma=sigma, lr=lr, seed=seed, cap=cap,
                          nodes=nodes, rows=per_row)
    policy.header["n"] = size
    policy.save(output)
    summary = {k: policy.header[k] for k in ("family", "training_loss", "held_out_loss", "held_out_iterations")}
    summary["pac_bayes_bound"] = policy.header["pac_bayes"]["bound"]
    click.echo(json.dumps(summary, indent=2))
    sys.stderr.write(f"optsolve qp-train: wrote {output}\n")


def _check_training_memory(family: str, size: int, count: int, hidden: int, population: int,
                           kind: str = "centralised") -> None:
    """A usage error, before anything is generated, when the problems (all kept) or the evolution
    strategies' noise (2 population + 4 vectors of the policy's parameters) exceed the memory budget."""
    from optsolve.core import memory
    from optsolve.qp.policy import n_params
    from optsolve.qp.problems import generation_bytes

    budget = memory.budget_bytes()
    problems = count * generation_bytes(family, size)
    if not problems <= budget:
        raise click.BadParameter(f"{count} problems of family {family!r} with n = {size} need about "
                                 f"{memory.human_bytes(problems)}, more than the memory budget of "
                                 f"{memory.human_bytes(budget)} (raise it with {memory.ENV_VAR}).",
                                 param_hint="'--count' / '--n'")
    weights = 8.0 * n_params(hidden, kind) * (2 * population + 4)
    if not weights <= budget:
        raise click.BadParameter(f"a policy of {hidden} hidden units trained with {population} antithetic pairs "
                                 f"needs about {memory.human_bytes(weights)}, more than the memory budget of "
                                 f"{memory.human_bytes(budget)} (raise it with {memory.ENV_VAR}).",
                                 param_hint="'--hidden' / '--population'")
