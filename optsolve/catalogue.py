"""The commands optsolve has: its solver packages with their one-line descriptions, and the extra commands
of solver packages. Read without importing any solver (``optsolve --help`` stays cheap);
:mod:`optsolve.core.registry` finds the packages this table names, so that core names none."""

# command -> one-line description (shown by `optsolve --help` without importing anything)
KINDS = {
    "ot": "Optimal transport between two histograms (exact network simplex, Sinkhorn).",
    "qp": "Convex quadratic programs (OSQP's ADMM, DistributedQP, learned DeepQP policies).",
    "cover": "Fair submodular cover (bicriteria greedy, threshold, continuous).",
    "kmeans": "k-means with predicted labels (learning-augmented sampling).",
    "truncated": "Estimation from truncated samples (oracle-efficient MLE).",
    "mvi": "Nonmonotone variational inequalities (error-corrected proximal point).",
}


# extra commands of solver packages: name -> (kind, import path, one-line help)
EXTRA_COMMANDS = {
    "qp-train": ("qp", "optsolve.qp.cli:train_command",
                 "Train a learned DeepQP policy on a problem family and certify it (PAC-Bayes)."),
}
