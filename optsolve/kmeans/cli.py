"""The ``optsolve kmeans`` command."""

import click

from optsolve.cli import CONTEXT_SETTINGS, AliasedOption, method_option, run_solve, seed_option, solve_options
from optsolve.kmeans import LLOYD_STEPS, SOLVER

OUTPUT_OPTIONS = ()


@click.command("kmeans", context_settings=CONTEXT_SETTINGS)
@solve_options
@seed_option
@method_option(SOLVER, "sample-centre")
@click.option("--alpha", default="auto", show_default=True,
              help="The learning-augmented k-means papers' alpha, the labels' error rate the estimators trim "
                   "for, in [0, 0.5), or 'auto': one value per predicted "
                   "cluster from a small grid (0, 0.05, ..., 0.45; crdest 0, 0.02, ..., 0.18) by the cost, "
                   "reported.")
@click.option("--refine/--no-refine", default=True, show_default=True,
              help="Lloyd steps from the estimated centres (at most --lloyd-steps; scikit-learn's KMeans, under "
                   "--time-limit steps of optsolve's own that stop at the limit). A Lloyd step never raises the "
                   "cost, so the estimator's guarantee holds for the refined centres; --no-refine: the estimator's "
                   "centres alone.")
@click.option("--lloyd-steps", type=click.IntRange(min=0), default=LLOYD_STEPS, show_default=True,
              help="The most Lloyd steps of the refinement.")
@click.option("--objective-rtol", "--cost-rtol", "cost_rtol", cls=AliasedOption, hidden_aliases=("--cost-rtol",),
              type=float, default=None,
              help="Certificate: relative tolerance between the reported objective and the recomputed cost "
                   "(default 1e-9).")
@click.option("--objective-atol", "--cost-atol", "cost_atol", cls=AliasedOption, hidden_aliases=("--cost-atol",),
              type=float, default=None,
              help="Certificate: absolute floor of the cost comparisons, times m times the largest squared norm "
                   "of a centred point or centre (default 1e-12).")
@click.option("--assign-tol", type=float, default=None,
              help="Certificate: squared distance to the assigned centre beyond the nearest, times the largest "
                   "squared norm (default 1e-9).")
@click.option("--label-cost-slack", type=float, default=None,
              help="Certificate: the cost may exceed the predicted labels' centroids' cost by this fraction "
                   "(default 1).")
def command(problem, **params):
    """k-means with predicted labels: robust centres of the predicted clusters, then every point to its nearest.

    Writes solution.centres (k x d), solution.assignment (the nearest centre of every point)
    and the cost as the objective; the certificate recomputes the cost and the assignment,
    the cost of the labels' own centroids, and the guarantee for the alpha used (information:
    it assumes the labels' error rate). `optsolve verify` judges it by --objective-rtol, --objective-atol,
    --assign-tol and --label-cost-slack (its own options, else the defaults).
    """
    run_solve("kmeans", problem, params)
