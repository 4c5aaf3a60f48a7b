"""One array namespace for numpy and cupy, and the choice of device.

Solver code is written once against ``xp`` (``xp.exp``, ``xp.zeros(n, dtype=...)``)
and runs on the CPU with numpy or on a GPU with cupy, the idea of POT's
``ot/backend.py``. ``device="auto"`` uses cupy when it imports and sees a GPU;
the ``OPTSOLVE_DEVICE`` environment variable supplies the default.
"""

from __future__ import annotations

import functools
import os
from dataclasses import dataclass

import numpy as np

from optsolve.core.errors import ParameterError


def require_cpu(command: str, device: str) -> None:
    """Refuse ``--device gpu`` for a command that runs on the CPU only."""
    if device == "gpu":
        raise ParameterError(f"optsolve {command} runs on the CPU; use '--device cpu' (or auto).")

DEVICES = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class Backend:
    """An array namespace and the device it computes on."""

    name: str  # "numpy" or "cupy"
    device: str  # "cpu" or "gpu"
    xp: object

    def to_numpy(self, x):
        return to_numpy(x)


@functools.lru_cache(maxsize=1)
def cupy_status() -> tuple[bool, str, list[str]]:
    """Whether cupy imports and sees a GPU: (usable, reason, GPU names)."""
    try:
        import cupy  # noqa: F401
    except Exception as exc:  # ImportError, or a broken CUDA install
        return False, f"cupy does not import ({type(exc).__name__}: {exc})", []
    try:
        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:
        return False, f"cupy imports but sees no GPU ({type(exc).__name__}: {exc})", []
    if count == 0:
        return False, "cupy imports but sees no GPU", []
    names = []
    for i in range(count):
        try:
            props = cupy.cuda.runtime.getDeviceProperties(i)
            name = props["name"]
            names.append(name.decode() if isinstance(name, bytes) else str(name))
        except Exception:
            names.append(f"GPU {i}")
    return True, f"{count} GPU(s) visible", names


def resolve_device(device: str | None = "auto") -> str:
    """Map ``auto|cpu|gpu`` (or ``None``, or the ``OPTSOLVE_DEVICE`` default) to ``cpu`` or ``gpu``."""
    if device in (None, "auto"):
        device = os.environ.get("OPTSOLVE_DEVICE", "auto").strip().lower() or "auto"
    if device not in DEVICES:
        raise ParameterError(f"The '--device' option must be one of {', '.join(DEVICES)}; got {device!r}.")
    if device == "cpu":
        return "cpu"
    usable, reason, _ = cupy_status()
    if device == "gpu":
        if not usable:
            raise ParameterError(
                f"The '--device gpu' option needs cupy and a GPU, but {reason}. "
                "Install the 'gpu' extra on a machine with a CUDA GPU, or use '--device cpu'."
            )
        return "gpu"
    return "gpu" if usable else "cpu"


def get_backend(device: str | None = "auto") -> Backend:
    """The backend for a device choice (see :func:`resolve_device`)."""
    if resolve_device(device) == "gpu":
        import cupy

        return Backend("cupy", "gpu", cupy)
    return Backend("numpy", "cpu", np)


def get_namespace(device: str | None = "auto"):
    """The array module (numpy or cupy) for a device choice."""
    return get_backend(device).xp


def to_numpy(x):
    """A numpy array (or Python scalar) from a numpy or cupy value."""
    if type(x).__module__.split(".")[0] == "cupy":
        return x.get()
    return x


EXP_FLOOR = {np.dtype(np.float64): -700.0, np.dtype(np.float32): -85.0}  # exp() of these is still normal


def exp_flush(xp, x, out=None):
    """``exp(x)`` with results below ``exp(EXP_FLOOR)`` (about 1e-304 in float64, 1e-37 in float32) set to 0.

    Vectorised exp leaves its fast path, and runs 4-60x slower, on arguments whose results are
    subnormal or underflow; at high gamma most entries of a Gibbs kernel are such. Raising them to
    the floor before exp and zeroing them after keeps the fast path and changes no sum by more
    than n * 1e-304 (float64). ``out`` may be ``x``.
    """
    floor = EXP_FLOOR.get(np.dtype(x.dtype), -700.0)
    small = x < floor
    y = xp.maximum(x, floor, out=out)
    xp.exp(y, out=y)
    y[small] = 0.0
    return y
