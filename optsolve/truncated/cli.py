"""The ``optsolve truncated`` command."""

import click

from optsolve.cli import CONTEXT_SETTINGS, method_option, run_solve, seed_option, solve_options
from optsolve.truncated import SOLVER

OUTPUT_OPTIONS = ()


@click.command("truncated", context_settings=CONTEXT_SETTINGS)
@solve_options
@seed_option
@method_option(SOLVER, "newton")
@click.option("--oracle", metavar="MODULE:FUNCTION", default=None,
              help="A vectorised membership function (N x d array -> N booleans) used instead of the file's set.")
@click.option("--radius", type=float, default=None, help="R of the region (default log(1/alpha_0) + 2, doubled "
              "when active; dgtz: its ball's radius). verify: judge that the estimate lies in the region of this R.")
@click.option("--tol", type=float, default=None,
              help="newton: the Monte-Carlo error allowed, as a fraction of the data's statistical error (default "
                   "0.125); "
                   "the certificate allows it and draws n / tol points of the estimate.")
@click.option("--max-evals", type=click.IntRange(min=1), default=None,
              help="Budget of membership-oracle calls, stats.evaluations (status max_iter when spent; the estimate "
                   "so far is written).")
@click.option("--bootstrap", type=click.IntRange(min=0), default=None, metavar="B",
              help="B resamples of the data, each estimated again: 95% intervals of the parameters.")
@click.option("--holdout", type=float, default=None, metavar="FRACTION",
              help="Keep this fraction of the samples out of the fit; the certificate reports their truncated NLL "
                   "(verify: the largest share a solution may hold out, default 0).")
@click.option("--objective-rtol", type=float, default=None,
              help="Certificate: relative tolerance between the reported and the recomputed truncated NLL, beside "
                   "the Monte-Carlo error of its normaliser (default 1e-6).")
@click.option("--objective-atol", type=float, default=None,
              help="Certificate: absolute floor of that comparison, in nats per sample (default 1e-6).")
def command(problem, **params):
    """Estimation from truncated samples: the truncated MLE with few membership-oracle calls.

    Writes solution.mean and solution.covariance (or rates), alpha_hat (the estimate's mass on
    the set) with its interval; stats.evaluations counts every membership query. The
    certificate re-estimates the likelihood's gradient at the estimate with fresh draws.
    """
    run_solve("truncated", problem, params)
