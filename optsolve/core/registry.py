"""The solver commands and the interface every solver package provides.

A solver package ``optsolve.<kind>`` exposes:

* ``SCHEMA``: the :class:`optsolve.core.problem.Schema` of its problem files;
* ``METHODS`` (defined in its ``methods.py``: name -> the method's :class:`optsolve.core.solve.Entry`,
  whose ``run`` takes one :class:`optsolve.core.solve.Job` and returns a
  :class:`optsolve.core.solve.MethodOutput`), ``OPTIONS`` (:class:`optsolve.core.options.Option`) and
  ``DEFAULT_METHOD``;
* ``SOLVER``: its :class:`optsolve.core.solve.Solver` (setup, certificate), and
  ``solve_problem(problem, *, method, ..., progress)``, which runs it through
  :func:`optsolve.core.solve.run`: a :class:`Result` with its certificate attached;
* ``certificate.check(problem, solution, *, method, objective, settings, limits, status)``: the
  independent checks, run by the solver and by ``optsolve verify``, judged against ``limits``
  (the module's ``LIMITS``, :class:`optsolve.core.result.Limit`) for the claimed ``status``
  (the module's ``CLAIMS`` are those it can establish); ``settings``, the document's, are never trusted;
* ``problems.FAMILIES``: generators for ``optsolve gen``;
* ``cli.command``: its Click command (and optionally ``cli.OUTPUT_OPTIONS``, names of
  options that write per-solve files, which ``optsolve batch`` does not offer).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys

from optsolve.catalogue import KINDS  # the commands are the application's table; core names none
from optsolve.core.errors import ParameterError


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


def kinds_where(module: str, test, but: str | None = None):
    """The installed commands, other than ``but``, whose ``optsolve.<kind>.<module>`` passes ``test`` (in table
    order, each module imported as the search reaches it); a package whose optional dependencies are missing
    passes none."""
    for kind in available_kinds():
        if kind == but:
            continue
        try:
            found = importlib.import_module(f"optsolve.{kind}.{module}")
        except ImportError:
            continue
        if test(found):
            yield kind


def recognise(keys, but: str) -> str | None:
    """The command, other than ``but``, whose problem files recognisably have ``keys``
    (:meth:`optsolve.core.problem.Schema.fits`, each package's ``problems.SCHEMA``), or None."""
    return next(kinds_where("problems", lambda problems: problems.SCHEMA.fits(keys), but), None)


def kinds_reading_mps() -> list[str]:
    """The commands whose problem files may be QPS / MPS files (their schema's ``reads_mps``)."""
    return list(kinds_where("problems", lambda problems: problems.SCHEMA.reads_mps))


def user_function_owners(name: str) -> list[str]:
    """The commands whose certificates take the user function ``name`` (``oracle``, ``operator``: their
    certificate module's ``USER_FUNCTIONS``), for verify's ``--<name>``."""
    return list(kinds_where("certificate", lambda cert: name in getattr(cert, "USER_FUNCTIONS", ())))


def load_user_function(spec: str, option: str):
    """The user's function named on the command line (``--<option>``) as ``module:function`` or
    ``path/to/file.py:function``. A module is imported with the current directory first on the import
    path (as ``python -m`` has it); a file (a name ending in ``.py`` or holding a path separator) is
    loaded as a module from that path. A malformed name, a missing file, an import failure or a missing
    function is a ParameterError. Returns (function, module)."""
    if not isinstance(spec, str) or ":" not in spec or not all(spec.rsplit(":", 1)):
        raise ParameterError(f"The '--{option}' option must be 'module:function' or 'file.py:function'; "
                             f"got {spec!r}.")
    target, name = spec.rsplit(":", 1)
    if target.endswith(".py") or "/" in target or os.sep in target:
        mod, what = _load_file(target, option), f"file {target!r}"
    else:
        mod, what = _import_from_cwd(target, option), f"module {target!r}"
    fn = getattr(mod, name, None)
    if not callable(fn):
        raise ParameterError(f"The '--{option}' option names {name!r}, which {what} does not define as a function.")
    return fn, mod


def _import_from_cwd(module: str, option: str):
    cwd = os.getcwd()
    added = cwd not in sys.path
    if added:
        sys.path.insert(0, cwd)
    try:
        return importlib.import_module(module)
    except Exception as exc:  # the user's module: any import failure is theirs
        raise ParameterError(f"The '--{option}' option names module {module!r}, which does not import from "
                             f"{cwd} ({type(exc).__name__}: {exc}).") from None
    finally:
        if added and cwd in sys.path:
            sys.path.remove(cwd)


def _load_file(path: str, option: str):
    if not os.path.isfile(path):
        found = "a directory" if os.path.isdir(path) else "no such file"
        raise ParameterError(f"The '--{option}' option names file {path!r}: {found}.")
    full = os.path.abspath(path)
    # A private module name: loading by path never replaces a module imported by name.
    name = "_optsolve_user_" + hashlib.sha256(full.encode()).hexdigest()[:12]
    spec = importlib.util.spec_from_file_location(name, full)
    if spec is None or spec.loader is None:
        raise ParameterError(f"The '--{option}' option names file {path!r}, which cannot be loaded as a module.")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod  # as an import does, so that the module can refer to itself while it runs
    try:
        spec.loader.exec_module(mod)
    except Exception as exc:  # the user's file: any failure while it runs is theirs
        sys.modules.pop(name, None)
        raise ParameterError(f"The '--{option}' option names file {path!r}, which does not load "
                             f"({type(exc).__name__}: {exc}).") from None
    return mod
