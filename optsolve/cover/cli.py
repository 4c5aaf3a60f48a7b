"""The ``optsolve cover`` command."""

import click

from optsolve.cli import CONTEXT_SETTINGS, method_option, run_solve, seed_option, solve_options
from optsolve.cover import SOLVER

OUTPUT_OPTIONS = ()


@click.command("cover", context_settings=CONTEXT_SETTINGS)
@solve_options
@seed_option
@method_option(SOLVER, "greedy")
@click.option("--eps", type=float, default=0.1, show_default=True,
              help="The fair-cover paper's epsilon, the accuracy: the extension factor beta = ceil(1/eps), the "
                   "threshold steps, and with --bicriteria the accepted shortfall.")
@click.option("--alpha", type=float, default=0.1, show_default=True,
              help="The fair-cover paper's alpha: guesses of the optimum's size grow by the factor 1 + alpha.")
@click.option("--beta", default="auto", show_default=True,
              help="Extension factor of the FSM constraints: 'auto' tries 1 and then ceil(1/eps) only if "
                   "needed, or a positive integer.")
@click.option("--bicriteria", is_flag=True,
              help="Accept f(S) >= (1 - eps) tau as in the paper (default: f(S) >= tau).")
@click.option("--balance", type=float, default=None, metavar="DELTA",
              help="Proportions p_c = (1 - DELTA)/G and q_c = (1 + DELTA)/G (overrides the file's).")
@click.option("--tau", type=float, default=None, help="Threshold f(S) >= tau (overrides the file's).")
@click.option("--tau-frac", type=float, default=None,
              help="Threshold as a fraction of f(U) (overrides the file's).")
@click.option("--unfair", is_flag=True,
              help="The problem without proportions, which '--method unfair-greedy' solves (and sets); "
                   "'optsolve verify' needs it to accept such a solution.")
@click.option("--value-rtol", type=float, default=1e-9, show_default=True,
              help="f(S) within this of tau, relative to max(tau, f(U)), reaches it (and f(U) short of tau by "
                   "more proves infeasibility); 'optsolve verify' takes the same option.")
@click.option("--improve/--no-improve", default=True, show_default=True,
              help="greedy, threshold and continuous: improve the cover (redundant elements removed, one-for-one "
                   "swaps that raise f and make room for removals (coverage), 2-for-1 exchanges, both under a time "
                   "budget, an exact MILP polish of 2-3 s on small instances); off: the convert-fair cover as "
                   "repaired.")
def command(problem, **params):
    """Fair submodular cover: a small set S with f(S) >= tau whose groups are in proportion.

    Writes solution.selected (element indices in selection order, the proportions
    ceil(p_c |S|) <= |S n U_c| <= floor(q_c |S|) exactly), its group counts, and |S| as the
    objective; the certificate recomputes f(S), the proportions, and a lower bound on the
    optimum's size (LP relaxation, groups, submodularity). Proven infeasibility: exit 3.
    --max-iter bounds the guesses of the optimum's size.
    """
    run_solve("cover", problem, params)
