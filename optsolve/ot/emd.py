"""Exact optimal transport by POT's network simplex (``ot.emd``; Bonneel et al. 2011).

Returns the optimal plan and the LP dual potentials POT computes with it. The network simplex
is one native call that cannot be interrupted: under a time limit it runs in a forked child
process that is stopped at the deadline, and the answer is then the north-west corner plan
(feasible, not optimal), with status ``time_limit``.
"""

from __future__ import annotations

import time
import warnings

import numpy as np

from optsolve.core.progress import stdout_to_stderr


def _network_simplex(a, b, C, scale: float, max_iter: int):
    """POT's emd on C / scale: (plan, u, v, result code, warning)."""
    import ot as pot

    with stdout_to_stderr(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # POT warns on max_iter; we report it as a status instead
        G, log = pot.emd(a, b, C / scale, numItermax=int(max_iter), log=True, center_dual=True)
    return np.asarray(G), np.asarray(log["u"]), np.asarray(log["v"]), int(log.get("result_code", 1)), \
        log.get("warning")


def _child(conn, a, b, C, scale, max_iter):
    """The forked child: solve, send the plan's entries (at most n + m - 1) and the potentials."""
    try:
        G, u, v, code, warning = _network_simplex(a, b, C, scale, max_iter)
        row, col = np.nonzero(G)
        conn.send((row, col, G[row, col], u, v, code, warning))
    except BaseException as exc:  # noqa: BLE001  reported to the parent, which decides
        conn.send(exc)
    finally:
        conn.close()


def _within(a, b, C, scale: float, max_iter: int, seconds: float):
    """The network simplex in a forked child given ``seconds``; None when it did not finish in time."""
    import multiprocessing

    if seconds <= 0:
        return None
    ctx = multiprocessing.get_context("fork")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(child, a, b, C, scale, max_iter), daemon=True)
    proc.start()
    child.close()
    try:
        end = time.perf_counter() + seconds
        while not parent.poll(min(max(end - time.perf_counter(), 0.0), 3600.0)):  # poll's timeout overflows at 24 days
            if time.perf_counter() >= end:
                return None
        got = parent.recv()
    except EOFError:
        got = RuntimeError(f"the network simplex's process ended without an answer (exit {proc.exitcode})")
    finally:
        if proc.is_alive():
            proc.kill()
        proc.join()
        parent.close()
    if isinstance(got, BaseException):
        raise got
    row, col, value, u, v, code, warning = got
    G = np.zeros((a.size, b.size))
    G[row, col] = value
    return G, u, v, code, warning


def north_west_corner(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The north-west corner plan: feasible for the marginals (a, b), built in n + m steps."""
    G = np.zeros((a.size, b.size))
    i = j = 0
    ra, rb = float(a[0]) if a.size else 0.0, float(b[0]) if b.size else 0.0
    while i < a.size and j < b.size:
        t = min(ra, rb)
        G[i, j] = t
        ra, rb = ra - t, rb - t
        if ra <= rb:
            i += 1
            ra = float(a[i]) if i < a.size else 0.0
        else:
            j += 1
            rb = float(b[j]) if j < b.size else 0.0
    return G


def solve_emd(a: np.ndarray, b: np.ndarray, C: np.ndarray, *, max_iter: int, deadline=None) -> dict:
    """``deadline``: an :class:`optsolve.core.clock.Deadline`; with a limit, the simplex stops there."""
    # the network simplex compares reduced costs with absolute tolerances: solve at max C = 1
    started = time.perf_counter()
    scale = float(C.max()) if C.size else 0.0
    scale = scale if scale > 0 and np.isfinite(scale) else 1.0
    if deadline is None or deadline.end is None:
        G, u, v, code, warning = _network_simplex(a, b, C, scale, max_iter)
    else:
        deadline.measure(time.perf_counter() - started)  # one pass over C: the finish costs a few
        got = _within(a, b, C, scale, max_iter, deadline.remaining())
        if got is None:
            return {"plan": north_west_corner(a, b), "f": np.zeros(a.size), "g": np.zeros(b.size),
                    "status": "time_limit", "iterations": None,
                    "message": "The network simplex did not finish within the time limit: the plan is the "
                               "north-west corner rule's (feasible, not optimal)."}
        G, u, v, code, warning = got
    log = {"u": u, "v": v, "warning": warning}
    status = {1: "optimal", 3: "max_iter"}.get(code, "numerical_error")
    messages = {1: "", 3: "The network simplex stopped before optimality: the plan is its last iterate, not "
                          "optimal, and may violate the marginals."}
    # codes 0 and 2 would say infeasible or unbounded, which equal masses and finite costs never are
    message = messages.get(code, f"The network simplex failed (POT result code {code}: "
                                 f"{log.get('warning') or 'no message'}); the plan is its last iterate.")
    return {"plan": G, "f": np.asarray(log["u"]) * scale, "g": np.asarray(log["v"]) * scale,
            "status": status, "iterations": None, "message": message}
