"""``python -m optsolve`` runs the command line."""

from optsolve.cli import main

if __name__ == "__main__":
    main()
