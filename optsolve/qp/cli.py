"""The ``optsolve qp`` command."""

import click

from optsolve.cli import CONTEXT_SETTINGS, run_solve, solve_options
from optsolve.qp import DEFAULT_METHOD, METHODS

OUTPUT_OPTIONS = ()


@click.command("qp", context_settings=CONTEXT_SETTINGS)
@solve_options
@click.option("--method", type=click.Choice(sorted(METHODS)), default=DEFAULT_METHOD, show_default=True,
              help="admm: OSQP's ADMM (numpy/scipy), infeasibility claims re-checked before they are made. "
                   "distributed: DistributedQP over --nodes nodes (or the file's partition). "
                   "osqp: the osqp package itself, same settings.")
@click.option("--nodes", type=int, default=None,
              help="distributed: number of nodes of the automatic partition [default: the file's 'partition' "
                   "or 'nodes', else 1].")
@click.option("--mu", type=float, default=1.0, show_default=True, help="distributed: consensus penalty.")
@click.option("--eps-abs", type=float, default=1e-3, show_default=True, help="Absolute tolerance (as OSQP).")
@click.option("--eps-rel", type=float, default=1e-3, show_default=True, help="Relative tolerance (as OSQP).")
@click.option("--eps-prim-inf", type=float, default=1e-4, show_default=True,
              help="Tolerance of the primal infeasibility test.")
@click.option("--eps-dual-inf", type=float, default=1e-4, show_default=True,
              help="Tolerance of the dual infeasibility (unboundedness) test.")
@click.option("--rho", type=float, default=None,
              help="Initial ADMM step size [default: 0.1; distributed: 1].")
@click.option("--sigma", type=float, default=1e-6, show_default=True, help="Regularisation of the x-update.")
@click.option("--alpha", type=float, default=1.6, show_default=True, help="Relaxation, in (0, 2).")
@click.option("--scaling", type=int, default=10, show_default=True, help="Ruiz equilibration passes (0: none).")
@click.option("--adaptive-rho/--fixed-rho", default=True, show_default=True,
              help="Adapt rho every 50 iterations from the residual ratio.")
@click.option("--check-every", type=int, default=25, show_default=True,
              help="Iterations between termination checks.")
@click.option("--polish", is_flag=True, help="Polish an optimal solution: solve the guessed active set exactly.")
@click.option("--refine/--no-refine", default=True, show_default=True,
              help="admm: when the iterations run out (max_iter, time_limit), try polishing before giving up.")
@click.option("--warm-start", metavar="SOLUTION.json", default=None,
              help="Start from x and y of a previous solution document.")
def command(problem, **params):
    """Convex QP: minimise 1/2 x'Px + q'x + r subject to l <= Ax <= u.

    Writes x, the duals y (Px + q + A'y = 0 at the optimum) and z = Ax, or for an
    infeasible (exit 3) or unbounded (exit 4) problem the certificate vector; the
    certificate recomputes OSQP's residuals, the duality gap and the bound violations.
    --max-iter (default 4000) counts ADMM iterations.
    """
    run_solve("qp", problem, params)
