"""``python -m optsolve`` runs the command line."""

from optsolve.cli import run

if __name__ == "__main__":
    run()
