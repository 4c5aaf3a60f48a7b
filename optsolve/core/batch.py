"""``optsolve batch KIND [solver options] FILES...``: many problem files in worker processes.

Each file is solved by :func:`optsolve.core.runner.solve_file` in a process pool of this
machine, or on a Dask cluster (:mod:`optsolve.core.cluster`); one JSON line per file goes
to stdout (the whole document, or with ``--out-dir`` a summary naming the file written), in
input order or as completed. A failing file, or a worker process that dies, is reported in
its own line and never stops the others. With ``--resume DIR`` the files whose finished
solution is in DIR are skipped. A summary goes to stderr; the exit code is the worst of the
files'.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import json
import multiprocessing
import os
import signal
import stat
import sys
from dataclasses import dataclass

from optsolve.core.registry import solver_module
from optsolve.core.result import Result, Status, dumps, write_atomic
from optsolve.core.signals import deferred

# Statuses that are final answers: `--resume` keeps such a solution; any other is solved again.
FINAL_STATUSES = ("optimal", "infeasible", "unbounded")

# Solver options that do not change a finished answer (how long, how much memory, where): left out of the
# resume key, so that a batch resumed with a longer --time-limit keeps what was finished.
NOT_IN_KEY = ("time_limit", "memory_limit", "device", "threads")


@dataclass
class Outcome:
    index: int
    path: str
    status: str
    exit_code: int
    line: str
    resumed: bool = False


@dataclass
class Solved:
    """A worker's answer for one file: the solution document as plain JSON values."""

    index: int
    path: str
    doc: dict


def _init_worker():
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)
    except ImportError:
        pass
    from optsolve.core.progress import QUIET, configure_logging

    configure_logging(QUIET)


def _init_pool_worker():
    """A worker of the local pool: SIGINT, SIGTERM and SIGHUP (sent to a whole process group by
    Ctrl-C or Slurm) are the parent's to act on: it stops the batch and kills the workers."""
    for name in ("SIGINT", "SIGTERM", "SIGHUP"):
        if hasattr(signal, name):
            signal.signal(getattr(signal, name), signal.SIG_IGN)
    _init_worker()


def solve_one(kind: str, index: int, path: str, params: dict) -> Solved:
    """Solve one file (in a worker) and return its document."""
    from optsolve.core.runner import solve_file, watched_solve

    doc = watched_solve(kind, path, params)  # a --time-limit with the watcher's backstop, where it can run
    if doc is not None:
        return Solved(index, path, doc)
    result = solve_file(kind, path, dict(params))
    return Solved(index, path, result.to_dict())


def solve_chunk(kind: str, items: list, params: dict) -> list:
    """Solve several (index, path) files one after the other: one task of a Dask batch."""
    _init_worker()
    return [solve_one(kind, i, p, params) for i, p in items]


def died(kind, index, path, params, reason) -> Solved:
    """The document of a file whose worker died (or whose task failed outside the solver)."""
    from optsolve.core.result import ProblemInfo

    result = Result(kind, params.get("method"), Status.INTERNAL_ERROR,
                    f"The worker process solving this file died ({reason}).", problem=ProblemInfo(path=path))
    return Solved(index, path, result.to_dict())


def resume_key(kind: str, sha256: str | None, params: dict) -> str:
    """The key of an answer: the command, the problem's sha256 and the options that change the answer.
    Written in each ``--out-dir`` document (``resume_key``); ``--resume`` keeps a document only under it."""
    options = {k: v for k, v in sorted(params.items()) if k not in NOT_IN_KEY}
    text = json.dumps({"command": kind, "problem_sha256": sha256, "options": options}, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def finish(solved: Solved, out_path: str | None, params: dict | None = None) -> Outcome:
    """Write the solution (with ``--out-dir``) and make its stdout line (here, not in the worker)."""
    doc = solved.doc
    if out_path:
        problem = doc.get("problem") or {}
        doc["resume_key"] = resume_key(doc.get("command"), problem.get("sha256"), params or {})
        write_atomic(out_path, dumps(doc) + "\n")
        return _summary(solved.index, solved.path, out_path, doc)
    return Outcome(solved.index, solved.path, doc["status"], Status(doc["status"]).exit_code, dumps(doc, indent=None))


def _summary(index: int, path: str, out_path: str, doc: dict, resumed: bool = False) -> Outcome:
    """The stdout line of a file whose solution is in ``out_path``."""
    code = Status(doc["status"]).exit_code
    summary = {"file": path, "status": doc["status"], "qualifier": doc.get("qualifier"), "exit_code": code,
               "objective": doc.get("objective"),
               "output": out_path, "message": doc.get("message", "")}
    if isinstance(doc.get("certificate"), dict):
        summary["certificate_holds"] = doc["certificate"].get("holds")
    if resumed:
        summary["resumed"] = True
    return Outcome(index, path, doc["status"], code, dumps(summary, indent=None), resumed)


def output_paths(files, out_dir, kind: str = "solution") -> list:
    """``DIR/<stem>.<kind>.json`` for each file; where two different files share a stem, the stem gets a
    digest of the file's real path (the same in every run, whatever the order of the files), and where
    a name is still taken, the file's position. No two different files get one name."""
    if not out_dir:
        return [None] * len(files)
    real = [os.path.realpath(f) for f in files]
    stems = [os.path.splitext(os.path.basename(f))[0] or "stdin" for f in files]
    sources: dict[str, set] = {}
    for stem, r in zip(stems, real):
        sources.setdefault(stem, set()).add(r)
    owner: dict[str, str] = {}
    names = []
    for i, (stem, r) in enumerate(zip(stems, real)):
        name = stem if len(sources[stem]) == 1 else f"{stem}-{hashlib.sha256(r.encode()).hexdigest()[:8]}"
        if owner.get(name, r) != r:
            name = f"{name}-{i}"
        owner[name] = r
        names.append(os.path.join(out_dir, f"{name}.{kind}.json"))
    return names


def check_outputs(kind: str, files, outs) -> None:
    """Refuse (UsageError) before any solve an output that is one of the input files, a directory, or a
    file this batch must not replace: anything but a ``kind`` solution document of that same problem
    file (by its path or its present sha256). A damaged solution document of this command is replaced."""
    from optsolve.core.errors import InputError, UsageError
    from optsolve.core.files import file_sha256
    from optsolve.core.verify import read_solution

    inputs = {}
    for f in files:
        try:
            st = os.stat(f)
            inputs[(st.st_dev, st.st_ino)] = f
        except OSError:
            pass
    for f, out in zip(files, outs):
        if out is None or not os.path.lexists(out):
            continue
        try:
            st = os.stat(out)
        except OSError:
            st = None
        if st is not None and (st.st_dev, st.st_ino) in inputs:
            raise UsageError(f"The output {out!r} of {f!r} is the input file {inputs[(st.st_dev, st.st_ino)]!r}; "
                             "give another --out-dir.")
        if os.path.isdir(out):
            raise UsageError(f"The output {out!r} of {f!r} is a directory; remove it or give another --out-dir.")
        if st is not None and not stat.S_ISREG(st.st_mode):  # a FIFO there would block the read below
            raise UsageError(f"The output {out!r} of {f!r} exists and is not a regular file; batch does not "
                             "replace it: move it away or give another --out-dir.")
        try:
            doc = read_solution(out, answer=False)
        except InputError:
            raise UsageError(f"The output {out!r} of {f!r} exists and is not an optsolve {kind} solution; batch "
                             "does not replace it: move it away or give another --out-dir.") from None
        if doc.get("command") != kind:
            raise UsageError(f"The output {out!r} of {f!r} holds a {doc.get('command')} solution; batch does not "
                             "replace it: move it away or give another --out-dir.")
        problem = doc.get("problem")
        if not isinstance(problem, dict) or not isinstance(problem.get("path"), str):
            continue  # a damaged document of this command: solved again and replaced
        if os.path.realpath(problem["path"]) == os.path.realpath(f):
            continue
        try:
            same = problem.get("sha256") == file_sha256(f)
        except OSError:
            same = False
        if not same:
            raise UsageError(f"The output {out!r} of {f!r} holds the solution of another problem, "
                             f"{problem['path']!r}; batch does not replace it: give another --out-dir.")


def finished_solution(kind: str, problem_path: str, solution_path: str, params: dict | None = None) -> dict | None:
    """The solution document at ``solution_path`` when it is an answer the same options would give now: it
    parses, it is a ``kind`` solution with a final status (FINAL_STATUSES), its ``resume_key`` is that of
    the problem file as it is now and of ``params`` (:func:`resume_key`), and ``optsolve verify`` with the
    limits of ``params`` holds on it. None otherwise (missing, unreadable, damaged, stale, of other
    options, edited, or not established): the file is solved again."""
    from optsolve.core.errors import OptsolveError
    from optsolve.core.files import file_sha256
    from optsolve.core.verify import read_solution, verify_document

    params = dict(params or {})
    try:
        doc = read_solution(solution_path)
        digest = file_sha256(problem_path)
        if doc.get("command") != kind or doc.get("status") not in FINAL_STATUSES:
            return None
        if not isinstance(doc.get("problem"), dict) or doc["problem"].get("sha256") != digest:
            return None
        if doc.get("resume_key") != resume_key(kind, digest, params):
            return None
        names = {lim.name for lim in getattr(solver_module(kind, "certificate"), "LIMITS", ())}
        limits = {k: v for k, v in params.items() if k in names and v is not None}
        cert, _ = verify_document(problem_path, doc, oracle=params.get("oracle"), operator=params.get("operator"),
                                  options=limits)
    except (OptsolveError, OSError, MemoryError, RecursionError, ValueError, TypeError, KeyError, AttributeError):
        return None
    if not cert.holds:
        return None
    doc["certificate"] = cert.to_dict()  # the line reports the check made now
    return doc


class Deliverer:
    """Hands outcomes to ``emit`` in input order or as completed."""

    def __init__(self, order, emit):
        self.order, self.emit = order, emit
        self.done: dict[int, Outcome] = {}
        self.next = 0

    def __call__(self, outcome: Outcome) -> None:
        self.done[outcome.index] = outcome
        if self.order == "completed":
            self.emit(outcome)
        else:
            while self.next in self.done:
                self.emit(self.done[self.next])
                self.next += 1


def run_batch(kind, files, params, jobs, out_dir, order, emit=None, resume=False, engine=None):
    """Solve ``files``; call ``emit(outcome)`` for each (in the requested order); return the outcomes.

    ``resume``: files whose finished solution is already in ``out_dir`` are not solved again
    (:func:`finished_solution`). ``engine``: a :class:`optsolve.core.cluster.DaskEngine`, or None
    for this machine's process pool of ``jobs`` workers."""
    emit = emit or (lambda o: (sys.stdout.write(o.line + "\n"), sys.stdout.flush()))
    outs = output_paths(files, out_dir, kind)
    check_outputs(kind, files, outs)
    deliver = Deliverer(order, emit)
    pending = {}
    for i, path in enumerate(files):
        doc = finished_solution(kind, path, outs[i], params) if resume and outs[i] else None
        if doc is not None:
            deliver(_summary(i, path, outs[i], doc, resumed=True))
        else:
            pending[i] = path

    def done(solved: Solved):
        with deferred():  # a signal waits until this file and its line are written whole
            pending.pop(solved.index, None)
            deliver(finish(solved, outs[solved.index], params))

    if engine is not None:
        engine.run(kind, sorted(pending.items()), params, done)
    else:
        _run_pool(kind, pending, params, jobs, done)
    return [deliver.done[i] for i in sorted(deliver.done)]


def _run_pool(kind, pending: dict, params, jobs, done):
    ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                      else "spawn")
    suspects = False  # after a worker died, run the rest one at a time to find the culprit
    while pending:
        workers = 1 if suspects else max(1, min(jobs, len(pending)))
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_pool_worker) as pool:
            try:
                futures = {}
                for i, path in sorted(pending.items()):
                    futures[pool.submit(solve_one, kind, i, path, params)] = i
                    if suspects:
                        break
                broken = False
                for fut in cf.as_completed(futures):
                    i = futures[fut]
                    try:
                        solved = fut.result()
                    except cf.process.BrokenProcessPool as exc:
                        broken = True
                        if not suspects:
                            continue
                        solved = died(kind, i, pending[i], params, str(exc) or "killed")
                    except Exception as exc:
                        solved = died(kind, i, pending[i], params, f"{type(exc).__name__}: {exc}")
                    done(solved)  # a failure here (stdout closed, a disk full) is the batch's, not the file's
                if broken:
                    suspects = True
            except BaseException:  # Ctrl-C, a signal, or stdout closed: no file starts, the running ones are dropped
                _stop_pool(pool)
                raise


def _stop_pool(pool: cf.ProcessPoolExecutor) -> None:
    """Cancel the files not started and kill the workers (a worker writes nothing: the parent does)."""
    workers = list((getattr(pool, "_processes", None) or {}).values())  # pid -> Process (CPython's executor)
    pool.shutdown(wait=False, cancel_futures=True)
    for process in workers:
        try:
            process.kill()
        except Exception:
            pass
    for process in workers:
        process.join(10)
