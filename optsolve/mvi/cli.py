"""The ``optsolve mvi`` command."""

import click

from optsolve.cli import CONTEXT_SETTINGS, method_option, run_solve, seed_option, solve_options
from optsolve.mvi import INNER_SOLVERS, SOLVER

OUTPUT_OPTIONS = ()


@click.command("mvi", context_settings=CONTEXT_SETTINGS)
@solve_options
@method_option(SOLVER, default_text="ecppa; bc-seg+ with --batch")
@click.option("--operator", metavar="MODULE:FUNCTION", default=None,
              help="A user operator F (array of length d -> array of length d) instead of the file's.")
@click.option("--gamma", type=float, default=None, help="A fixed step (default: from a local Lipschitz estimate).")
@click.option("--relax", type=float, default=None, help="Relaxation lam in (0, 2) (default 1).")
@click.option("--sigma", type=float, default=None, help="ecppa: the error-corrected proximal point paper's sigma: "
              "stop the inner loop at t >= sigma (gamma + rho) (default 0.5).")
@click.option("--rho", type=float, default=None, help="The weak-MVI constant (overrides the file's).")
@click.option("--lipschitz", type=float, default=None, help="A Lipschitz constant of F (overrides the file's; "
              "estimated from secants when absent).")
@click.option("--tol", type=float, default=None, help="The natural residual ||z - Proj_C(z - F(z))|| to reach "
              "(default 1e-6); verify judges solutions by the same option.")
@click.option("--feas-tol", type=float, default=None, help="Certificate: largest distance of z outside C, times "
              "max(1, ||z||_inf) (default 1e-12).")
@click.option("--residual-rtol", type=float, default=None, help="Certificate: relative tolerance between the "
              "reported and the recomputed residual (default 1e-6).")
@click.option("--residual-atol", type=float, default=None, help="Certificate: absolute floor of that comparison, "
              "times max(1, ||z||, ||F(z)||) (default 1e-12).")
@click.option("--max-evals", type=click.IntRange(min=1), default=None,
              help="Budget of F evaluations (default 1e6; status max_iter when spent).")
@click.option("--inner-steps", type=click.IntRange(min=1), default=None,
              help="ecppa: a forced number of inner steps; rppa: its fixed count (default 20).")
@click.option("--inner-solver", type=click.Choice(INNER_SOLVERS), default="auto",
              show_default=True,
              help="ecppa's resolvents: fixed-point (the inner iteration w = P_C(z - gamma F(w)), gamma < 1/L) or "
                   "gmres (an affine F on R^d: the linear system by GMRES, gamma = 10/L); auto: gmres where it "
                   "applies.")
@click.option("--batch", type=click.IntRange(min=1), default=None, metavar="B",
              help="Sample B terms per evaluation of an operator given as a mean of terms (a --operator module "
                   "defining F_terms and F_batch(z, idx)); the residual and the certificate use the full F.")
@seed_option
@click.option("--force", is_flag=True, help="Run even when rho <= -1/L (outside every method's guarantee).")
def command(problem, **params):
    """Variational inequalities with a weak Minty solution: find z in C with <F(z), z' - z> >= 0.

    Writes solution.z (the evaluated point with the smallest natural residual), its residual
    ||z - P_C(z - F(z))||, the smallest ||u|| seen, and stats.evaluations (F evaluations).
    `optsolve verify` judges it by --tol, --feas-tol, --residual-rtol and --residual-atol (its
    own options, else the defaults) against the file's operator or verify's --operator.
    """
    run_solve("mvi", problem, params)
