"""The ``optsolve ot`` command."""

import click

from optsolve.cli import CONTEXT_SETTINGS, method_option, run_solve, solve_options
from optsolve.ot import DEFAULT_METHOD, DEFAULT_PCG, DTYPES, PCG_MODES, SOLVER

# Range checks happen in the solver, so that a bad value is invalid input (exit 7, a JSON document).
POSITIVE = float
OUTPUT_OPTIONS = ("plan_file",)  # per-solve outputs, not offered by `optsolve batch`


@click.command("ot", context_settings=CONTEXT_SETTINGS)
@solve_options
@method_option(SOLVER, DEFAULT_METHOD)
@click.option("--gamma", type=POSITIVE, default=None,
              help="Final temperature gamma_f = max(C)/reg of the entropic methods [default: tnt runs to "
                   "--target-gap 1e-3; sinkhorn: 1024].")
@click.option("--reg", type=POSITIVE, default=None,
              help="Entropic regularisation in cost units (instead of --gamma).")
@click.option("--target-gap", type=POSITIVE, default=None, metavar="REL",
              help="Stop once the certified gap U - D <= REL |U|, or <= --objective-atol max C where that is "
                   "larger (a zero optimum: float64 rounding). tnt raises gamma stage by stage, then finishes "
                   "exactly if the stages stop short; exact stops pricing [default: 1e-3 for tnt without "
                   "--gamma/--reg and for auto; exact alone: the LP optimum].")
@click.option("--tol", type=POSITIVE, default=None,
              help="The L1 error of the plan's marginals before rounding [tnt: MDOT's H/gamma^1.5/2; sinkhorn: 1e-9].")
@click.option("--pcg", type=click.Choice(PCG_MODES), default=DEFAULT_PCG, show_default=True,
              help="tnt: the conjugate-gradient variant for the Newton systems.")
@click.option("--dtype", type=click.Choice(DTYPES), default="auto", show_default=True,
              help="tnt: float32 (auto on a GPU up to gamma 2^10) or float64.")
@click.option("--normalize", is_flag=True, help="Scale a and b to unit mass each, even when their sums differ.")
@click.option("--low-memory/--dense", "low_memory", default=None,
              help="tnt with point clouds: never build the n x m cost, stream column blocks [default: only "
                   "when the dense path would not fit in memory].")
@click.option("--block-size", type=int, default=None,
              help="Columns per block in low-memory mode [default: from the free memory].")
@click.option("--plan", "plan_file", metavar="FILE.npz", default=None,
              help="Write the plan to this .npz file (key 'plan'); the same as --arrays.")
@click.option("--plan-threshold", type=float, default=None,
              help="Store the plan sparse: only entries above this value (CSR keys 'plan.*').")
@click.option("--feas-tol", type=POSITIVE, default=None,
              help="Certificate: L1 marginal error plus negative mass the plan may have, per unit mass "
                   "[default: 1e-8].")
@click.option("--objective-rtol", type=POSITIVE, default=None,
              help="Certificate: relative tolerance between reported and recomputed costs [default: 1e-9].")
@click.option("--objective-atol", type=POSITIVE, default=None,
              help="Certificate: absolute floor of cost comparisons, as a fraction of max C [default: 1e-12].")
@click.option("--lp-tol", type=POSITIVE, default=None,
              help="Certificate of an exact (emd) plan: LP optimality conditions relative to max C, and the "
                   "gap relative to the cost [default: 1e-9].")
def command(problem, plan_file, **params):
    """Optimal transport between masses a and b with cost C (or points x, y and a cost name, or
    two images a, b on one grid with an l1 or sqeuclidean cost).

    Writes the plan's cost, dual potentials f and g, the plan (sparse entries for exact and emd,
    rounded potentials for tnt and sinkhorn; as a matrix with --plan or --arrays) and a
    certificate: marginal error, nonnegativity, and the certified gap to the LP optimum,
    judged by --feas-tol, --objective-rtol, --objective-atol, --lp-tol and --target-gap
    (`optsolve verify` takes the same options, and --normalize).
    --time-limit applies to every method, rounding and certificate included (emd runs in a child
    process stopped at the deadline, and then answers the north-west corner plan).
    --max-iter counts Newton steps for tnt, pricing rounds for exact (default 60), iterations for
    sinkhorn and emd.
    """
    if plan_file is not None:
        if params.get("arrays") not in (None, plan_file):
            raise click.UsageError("Give at most one of --plan and --arrays (they write the same file).")
        params["arrays"] = plan_file
    params["plan_needed"] = params.get("arrays") is not None  # its size is checked before the solve
    run_solve("ot", problem, params)
