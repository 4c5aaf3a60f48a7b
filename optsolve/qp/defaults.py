"""OSQP's settings as optsolve qp uses them by default (osqp 1.x's values): the one copy that the command's
options, the Python API and the ADMM methods take their defaults from."""

EPS = 1e-3  # eps_abs = eps_rel: residuals and duality gap
EPS_INFEASIBLE = 1e-4  # eps_prim_inf = eps_dual_inf
SIGMA = 1e-6  # the x-update's regularisation
ALPHA = 1.6  # relaxation
SCALING = 10  # Ruiz equilibration passes
CHECK_EVERY = 25  # iterations between termination checks
