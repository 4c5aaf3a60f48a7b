"""What this installation runs on: versions, BLAS libraries and threads, CPU, GPUs.

Shown by ``optsolve info`` and printed in the header of every benchmark table.
"""

from __future__ import annotations

import importlib.metadata
import os
import platform
import sys

from optsolve._version import __version__

PACKAGES = ("numpy", "scipy", "click", "pot", "osqp", "threadpoolctl", "cupy-cuda12x", "cvxpy", "scikit-learn")


def _version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def cpu_name() -> str:
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def blas_info() -> list[dict]:
    """The BLAS/OpenMP libraries numpy and scipy loaded, with their thread counts (threadpoolctl)."""
    import numpy  # noqa: F401  (load numpy's BLAS so threadpoolctl sees it)
    import scipy.linalg  # noqa: F401

    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    return [{"api": i.get("internal_api"), "version": i.get("version"), "threads": i.get("num_threads"),
             "architecture": i.get("architecture"), "library": os.path.basename(i.get("filepath", ""))}
            for i in threadpool_info()]


def environment() -> dict:
    from optsolve.core.backend import cupy_status

    usable, reason, gpus = cupy_status()
    return {
        "optsolve": __version__,
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "packages": {p: _version(p) for p in PACKAGES},
        "blas": blas_info(),
        "openblas_env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                    "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS")
                         if k in os.environ},
        "gpu": {"usable": usable, "status": reason, "devices": gpus},
    }


def format_environment(env: dict) -> str:
    lines = [f"optsolve {env['optsolve']} (Python {env['python']}, {env['platform']})",
             f"CPU: {env['cpu']} ({env['cpu_count']} logical cores)", "Packages:"]
    for name, version in env["packages"].items():
        lines.append(f"  {name:<14} {version or 'not installed'}")
    lines.append("BLAS:")
    for b in env["blas"] or [{"api": "unknown"}]:
        lines.append(f"  {b.get('api')} {b.get('version') or ''} {b.get('architecture') or ''} "
                     f"threads={b.get('threads')} ({b.get('library') or '?'})".rstrip())
    if env["openblas_env"]:
        lines.append("Environment: " + " ".join(f"{k}={v}" for k, v in env["openblas_env"].items()))
    gpu = env["gpu"]
    lines.append(f"GPU: {'yes' if gpu['usable'] else 'no'} ({gpu['status']})"
                 + (": " + ", ".join(gpu["devices"]) if gpu["devices"] else ""))
    return "\n".join(lines)


def header_line(env: dict | None = None) -> str:
    """One line for benchmark tables: BLAS library, threads and CPU."""
    env = env or environment()
    blas = ", ".join(f"{b.get('api')} {b.get('version') or ''} ({b.get('architecture') or '?'}) "
                     f"{b.get('threads')} threads" for b in env["blas"] if b.get("api") != "openmp") or "unknown BLAS"
    return f"optsolve {env['optsolve']} | {blas} | {env['cpu']} x{env['cpu_count']}"
