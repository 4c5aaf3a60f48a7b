"""Command-line commands that are not a solver's own: ``gen``, ``batch`` and ``plot`` (Click lives here and
in :mod:`optsolve.cli`, never in :mod:`optsolve.core`)."""
