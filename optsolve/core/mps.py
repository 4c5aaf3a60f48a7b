"""QPS and MPS files (fixed or free format, with a QUADOBJ / QMATRIX section), read by HiGHS.

The format Maros and Meszaros published their QP test set in, and the one HiGHS and most LP/QP
solvers exchange. ``highspy`` (HiGHS's own Python interface) parses the file; the model

    minimise  1/2 x'Qx + c'x + offset   subject to  L <= Ax <= U,  lb <= x <= ub

becomes the keys of a QP problem file in OSQP's form: P = Q (its lower triangle, as HiGHS keeps
it, mirrored), q = c, r = offset, and A stacked on the identity rows of the variables that have a
finite bound, with l and u the matching bounds (infinite ones as +-inf). A maximisation is negated
into a minimisation. Integer variables are refused: the solvers are continuous.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

import numpy as np

from optsolve.core.errors import InputError

EXTENSIONS = (".qps", ".mps")
BYTES_PER_FILE_BYTE = 16  # HiGHS's model and the arrays built from it, per byte of the file (at most, measured)


@contextlib.contextmanager
def _quiet():
    """Descriptors 1 and 2 to /dev/null: HiGHS prints its banner when constructed, before any option is set."""
    for stream in (sys.stdout, sys.stderr, sys.__stdout__, sys.__stderr__):
        with contextlib.suppress(AttributeError, OSError, ValueError):
            stream.flush()
    saved = []
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        for fd in (1, 2):
            saved.append((fd, os.dup(fd)))
            os.dup2(null, fd)
        os.close(null)
    except OSError:
        pass
    try:
        yield
    finally:
        for fd, copy in saved:
            os.dup2(copy, fd)
            os.close(copy)


def read_mps(path: str, label: str) -> dict:
    """The keys of a QP problem file (P, q, A, l, u, r) from a QPS / MPS file; InputError naming ``label``."""
    import scipy.sparse as sp

    try:
        import highspy
    except ImportError:
        raise InputError(f"{label}: reading QPS / MPS files needs the 'highspy' package (pip install highspy)."
                         ) from None
    with tempfile.TemporaryDirectory(prefix="optsolve-mps-") as tmp:
        # HiGHS chooses its reader by the name's extension and knows .mps only
        link = os.path.join(tmp, "model.mps")
        os.symlink(os.path.abspath(path), link)
        log_path = os.path.join(tmp, "highs.log")
        with _quiet():
            h = highspy.Highs()
            for option, value in (("log_to_console", False), ("output_flag", True), ("log_file", log_path)):
                h.setOptionValue(option, value)
            status = h.readModel(link)
            h.setOptionValue("output_flag", False)
        with open(log_path, errors="replace") as fh:
            log = [line.strip() for line in fh]
        model = h.getModel()
    # HiGHS reads on past what it does not understand, with a warning: data it drops is a bad file here
    dropped = [line for line in log if line.startswith("ERROR") or (line.startswith("WARNING") and any(
        word in line for word in ("ignored", "not defined", "duplicate", "Duplicate", "not recognised")))]
    if status == highspy.HighsStatus.kError or dropped:
        said = dropped[0] if dropped else "it could not parse the file"
        raise InputError(f"{label}: is not a readable QPS / MPS file (HiGHS: {said}).")
    lp, hessian = model.lp_, model.hessian_
    n, m = int(lp.num_col_), int(lp.num_row_)
    if n == 0:
        raise InputError(f"{label}: the QPS / MPS file has no variables (an empty COLUMNS section).")
    integrality = np.asarray(lp.integrality_)
    if integrality.size and np.any(integrality.astype(int) != 0):
        count = int(np.count_nonzero(integrality.astype(int)))
        raise InputError(f"{label}: {count} variable(s) are declared integer (MARKER INTORG or integer bounds); "
                         "optsolve qp solves continuous QPs only.")
    a = lp.a_matrix_
    start, index, value = (np.asarray(x) for x in (a.start_, a.index_, a.value_))
    if str(a.format_).endswith("kColwise"):
        A = sp.csc_matrix((value, index, start), shape=(m, n))
    else:
        A = sp.csr_matrix((value, index, start), shape=(m, n)).tocsc()
    if int(hessian.dim_) > 0:
        hs, hi, hv = (np.asarray(x) for x in (hessian.start_, hessian.index_, hessian.value_))
        H = sp.csc_matrix((hv, hi, hs), shape=(n, n))
        if str(hessian.format_).endswith("kTriangular"):  # the lower triangle, column by column
            H = sp.tril(H)
            H = (H + sp.tril(H, -1).T).tocsc()
    else:
        H = sp.csc_matrix((n, n))
    c = np.asarray(lp.col_cost_, dtype=np.float64)
    offset = float(lp.offset_)
    if str(lp.sense_).endswith("kMaximize"):
        H, c, offset = -H, -c, -offset
    lb, ub = np.asarray(lp.col_lower_, dtype=np.float64), np.asarray(lp.col_upper_, dtype=np.float64)
    bounded = np.flatnonzero(np.isfinite(lb) | np.isfinite(ub))
    rows = sp.csc_matrix((np.ones(bounded.size), (np.arange(bounded.size), bounded)), shape=(bounded.size, n))
    return {"P": H.tocsc(), "q": c, "A": sp.vstack([A, rows], format="csc"),
            "l": np.concatenate([np.asarray(lp.row_lower_, dtype=np.float64), lb[bounded]]),
            "u": np.concatenate([np.asarray(lp.row_upper_, dtype=np.float64), ub[bounded]]),
            "r": offset}
