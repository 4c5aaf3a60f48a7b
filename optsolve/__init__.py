"""optsolve: a command-line solver toolbox for classical optimisation problems.

Each solver lives in its own subpackage (``optsolve.ot``, ...) with a ``solve``
function that returns a :class:`optsolve.core.result.Result`. Importing this
package is cheap: solver packages and their dependencies load on first use.
"""

from optsolve._version import __version__

__all__ = ["__version__", "Result", "Status"]


def __getattr__(name):
    if name in ("Result", "Status"):
        from optsolve.core import result

        return getattr(result, name)
    raise AttributeError(f"module 'optsolve' has no attribute {name!r}")
