"""The exceptions optsolve raises on purpose.

Each carries the exit code and result status the command line reports for it.
Anything else that escapes a solver is an internal error (exit code 1).
"""


class OptsolveError(Exception):
    """Base class of optsolve's own errors."""

    exit_code = 1
    status = "internal_error"


class InputError(OptsolveError):
    """A problem file (or other input data) is unreadable or does not match its schema."""

    exit_code = 7
    status = "invalid_input"


class ParameterError(OptsolveError):
    """An argument or option has a value the solver cannot accept (including an unavailable device)."""

    exit_code = 7
    status = "invalid_input"


class UsageError(OptsolveError):
    """The command cannot run as asked (an optional package missing, a service out of reach): exit 2, as
    the command line's usage errors."""

    exit_code = 2
    status = "invalid_input"


class SolverError(OptsolveError):
    """A solver failed numerically and has no usable iterate to return."""

    exit_code = 6
    status = "numerical_error"


def positive_option(name: str, value) -> float | None:
    """``value`` as a float in (0, inf), None kept; otherwise a ParameterError naming ``--name``."""
    import math

    if value is None:
        return None
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise ParameterError(f"The '--{name}' option must be a float in (0, inf); got {value!r}.") from None
    if not (x > 0 and math.isfinite(x)):
        raise ParameterError(f"The '--{name}' option must be a float in (0, inf); got {x!r}.")
    return x


class Terminated(KeyboardInterrupt):
    """SIGINT, SIGTERM or SIGHUP during a command (:mod:`optsolve.core.signals`).

    A KeyboardInterrupt, so the solvers' ``except KeyboardInterrupt`` return their best iterate
    (status ``interrupted``) as they do for Ctrl-C; the exit code is 128 + the signal number.
    """

    status = "interrupted"

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = int(signum)

    @property
    def exit_code(self) -> int:
        return 128 + self.signum

    @property
    def signal_name(self) -> str:
        import signal

        try:
            return signal.Signals(self.signum).name
        except ValueError:
            return f"signal {self.signum}"
