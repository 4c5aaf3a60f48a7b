"""How many BLAS and OpenMP threads a solve uses.

Each solver declares its default (:attr:`optsolve.core.solve.Solver.blas_threads`): methods made of
vector operations and small products run faster on one thread, most of all on a busy machine, where
threads of one product wait on cores other work holds. The user's ``--threads N`` (``OPTSOLVE_THREADS``)
is :func:`requested` around the solve and wins over the default; ``all`` (0 here) leaves the libraries
their own number (every core, or ``OMP_NUM_THREADS``). :func:`limited` applies the choice with
``threadpoolctl`` to every thread pool it sees, so that code sized by :func:`optsolve.core.blocks.blas_threads`
follows it too. threadpoolctl finds the pools by listing every loaded shared library (0.35 ms a time beside
numpy, scipy and the QP packages: a tenth of a small QP's solve); the list is kept for as long as no module is
imported (:func:`_pools`), since a library with a pool arrives with the module that loads it.
"""

from __future__ import annotations

import contextlib
import sys
from contextvars import ContextVar

from optsolve.core.errors import ParameterError

ALL = 0  # the libraries' own number of threads
_REQUESTED: ContextVar[int | None] = ContextVar("optsolve_threads", default=None)


def check(count) -> int | None:
    """``count`` as an int >= 0 (0 or 'all': the libraries' own), None kept; otherwise a ParameterError."""
    if count is None:
        return None
    if isinstance(count, str) and count.strip().lower() == "all":
        return ALL
    try:
        value = int(count)
    except (TypeError, ValueError):
        value = -1
    if value < 0 or isinstance(count, bool) or (isinstance(count, float) and count != value):
        raise ParameterError(f"The '--threads' option must be an integer >= 0 (0: all) or 'all'; got {count!r}.")
    return value


@contextlib.contextmanager
def requested(count):
    """Within: solves use ``count`` threads (see :func:`check`) instead of their solver's default; None: the default."""
    token = _REQUESTED.set(check(count))
    try:
        yield
    finally:
        _REQUESTED.reset(token)


def choose(default: int | None) -> int:
    """The thread limit of a solve whose solver's default is ``default`` (None: all): the user's, else that."""
    asked = _REQUESTED.get()
    if asked is not None:
        return asked
    return ALL if default is None else default


# Modules whose thread pools every solve may use: loaded before a limit, which reaches loaded libraries only (a
# solver's own, scipy.linalg's by default, are its :attr:`optsolve.core.solve.Solver.thread_libraries`).
LIBRARIES = ("numpy",)


_FOUND: list = []  # [(modules imported when the pools were listed, threadpoolctl's ThreadpoolController)]


def _pools():
    """threadpoolctl's controller of the thread pools loaded now: listed again only where a module was imported
    since the last listing."""
    from threadpoolctl import ThreadpoolController

    imported = len(sys.modules)
    if not _FOUND or _FOUND[0][0] != imported:
        _FOUND[:] = [(imported, ThreadpoolController())]
    return _FOUND[0][1]


@contextlib.contextmanager
def limited(count: int, libraries: tuple = ()):
    """Within: at most ``count`` threads in every BLAS and OpenMP library threadpoolctl sees (ALL: no limit),
    :data:`LIBRARIES` and ``libraries`` (modules) imported first so that their thread pools are among them."""
    if count == ALL:
        yield
        return
    import importlib

    for name in (*LIBRARIES, *libraries):
        importlib.import_module(name)

    with _pools().limit(limits=count):
        yield


def blas_counts() -> list[int]:
    """The threads each loaded BLAS library may use now (empty where threadpoolctl sees none)."""
    return [int(lib.num_threads) for lib in _pools().lib_controllers if lib.user_api == "blas"]


def in_effect() -> int | None:
    """The most threads a loaded BLAS library may use now (None where threadpoolctl sees none)."""
    counts = blas_counts()
    return max(counts) if counts else None
