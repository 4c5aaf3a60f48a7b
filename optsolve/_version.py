"""The version of optsolve (read by the build from here, and re-exported by the package)."""

__version__ = "0.1.0"
