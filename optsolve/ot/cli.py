"""The ``optsolve ot`` command."""

import click

from optsolve.cli import CONTEXT_SETTINGS, run_solve, solve_options


@click.command("ot", context_settings=CONTEXT_SETTINGS)
@solve_options
@click.option("--method", type=click.Choice(["emd", "sinkhorn"]), default="emd", show_default=True,
              help="emd: exact network simplex (POT). sinkhorn: entropic, log-domain (POT), rounded.")
@click.option("--reg", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Entropic regularisation in cost units (sinkhorn; default max(C)/1024).")
@click.option("--tol", type=click.FloatRange(min=0, min_open=True), default=None,
              help="L1 marginal tolerance before rounding (sinkhorn; default 1e-9).")
def command(problem, **params):
    """Optimal transport between masses a and b with cost C (or points x, y and a cost name).

    Writes the plan's cost, dual potentials f and g, the plan (sparse for emd, as
    rounded potentials for sinkhorn; dense with --arrays) and a certificate: marginal
    error, nonnegativity, and the certified gap to the LP optimum. --time-limit
    applies to sinkhorn; emd runs to completion or --max-iter.
    """
    run_solve("ot", problem, params)
