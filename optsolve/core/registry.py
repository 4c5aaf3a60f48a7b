"""The solver commands and the interface every solver package provides.

A solver package ``optsolve.<kind>`` exposes:

* ``SCHEMA``: the :class:`optsolve.core.problem.Schema` of its problem files;
* ``METHODS`` and ``DEFAULT_METHOD``;
* ``solve_problem(problem, *, method, ..., progress)``: a :class:`Result` with its
  certificate attached;
* ``certificate.check(problem, solution, *, method, objective, settings)``: the
  independent checks, run by the solver and by ``optsolve verify``;
* ``problems.FAMILIES``: generators for ``optsolve gen``;
* ``cli.command``: its Click command (and optionally ``cli.OUTPUT_OPTIONS``, names of
  options that write per-solve files, which ``optsolve batch`` does not offer).
"""

from __future__ import annotations

import importlib
import importlib.util

from optsolve.core.errors import ParameterError

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


def available_kinds() -> list[str]:
    """The solver commands installed in this version, in table order."""
    return [k for k in KINDS if importlib.util.find_spec(f"optsolve.{k}") is not None]


def solver_package(kind: str):
    """Import and return ``optsolve.<kind>``; an unknown kind is a ParameterError."""
    kinds = available_kinds()
    if kind not in kinds:
        raise ParameterError(f"Unknown command {kind!r}; expected one of {', '.join(kinds)}.")
    return importlib.import_module(f"optsolve.{kind}")


def solver_module(kind: str, module: str):
    """Import ``optsolve.<kind>.<module>`` (``cli``, ``problems``, ``certificate``)."""
    solver_package(kind)
    return importlib.import_module(f"optsolve.{kind}.{module}")


def load_user_function(spec: str, option: str):
    """The user's function named ``module:function`` on the command line (``--<option>``): the module
    is imported; a malformed name, an import failure or a missing function is a ParameterError.
    Returns (function, module)."""
    if not isinstance(spec, str) or spec.count(":") != 1 or not all(spec.split(":")):
        raise ParameterError(f"The '--{option}' option must be 'module:function'; got {spec!r}.")
    module, name = spec.split(":")
    try:
        mod = importlib.import_module(module)
    except Exception as exc:  # the user's module: any import failure is theirs
        raise ParameterError(f"The '--{option}' option names module {module!r}, which does not import "
                             f"({type(exc).__name__}: {exc}).") from None
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ParameterError(f"The '--{option}' option names {name!r}, which module {module!r} does not define "
                             "as a function.")
    return fn, mod
