"""Running one solve from a problem file: load, solve, certify, write, exit code.

Shared by the solver commands and by ``optsolve batch``. Every outcome but a usage
error produces a :class:`Result`, so a JSON document is always written.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import time
import traceback

from optsolve.core import guard, threads
from optsolve.core.clock import started_at
from optsolve.core.errors import OptsolveError
from optsolve.core.history import recording
from optsolve.core.memory import budget, budget_bytes, human_bytes
from optsolve.core.files import file_label, load_problem, write_arrays
from optsolve.core.progress import (NORMAL, QUIET, SILENT, VERBOSE, Progress, configure_logging, get_logger,
                                    stages_to)
from optsolve.core.registry import solver_package
from optsolve.core.result import ProblemInfo, Result, Status, write_all, write_atomic
from optsolve.core.signals import handling, signal_name

# Options every solve command has that are about output, not about the solve.
OUTPUT_OPTIONS = ("output", "arrays", "quiet", "verbose")


def solve_file(kind: str, path: str, params: dict, *, progress: Progress = SILENT, stdin=None,
               started: float | None = None, channel=None) -> Result:
    """Solve the problem in ``path`` with solver options ``params``; never raises for bad input.

    ``started`` (``time.perf_counter()``) is when the command started, from which its time limit
    counts (default: now); ``channel`` (:class:`optsolve.core.guard.Channel`) is told the method,
    the problem's SHA-256 and the stage as they become known."""
    t0 = time.perf_counter() if started is None else started
    tell = channel.send if channel is not None else (lambda word, value="": None)
    info = ProblemInfo(path=None if path == "-" else path)
    method = params.get("method")
    load_s = None
    want_history = bool(params.pop("history", False))
    memory_limit = params.pop("memory_limit", None)
    thread_count = params.pop("threads", None)
    history = None
    scope = contextlib.ExitStack()
    try:
        scope.enter_context(budget(memory_limit))
        scope.enter_context(threads.requested(thread_count))
        scope.enter_context(started_at(t0))
        pkg = solver_package(kind)
        method = method or pkg.DEFAULT_METHOD
        tell("method", method)
        def read(sha256):
            info.sha256 = sha256
            tell("sha256", sha256)
            tell("stage", "checking the problem")

        problem = load_problem(path, pkg.SCHEMA, stdin=stdin, on_read=read)
        tell("stage", "importing the method's libraries")
        entry = pkg.SOLVER.methods.get(method)
        for name in entry.imports if entry is not None else ():  # setup, like reading the file
            importlib.import_module(name)
        load_s = time.perf_counter() - t0
        tell("stage", "solving")
        scope.enter_context(stages_to(lambda text: tell("stage", text)))
        with recording(want_history) as history:
            result = pkg.solve_problem(problem, progress=progress, **params)
        for warning in problem.warnings:
            result.add_message(f"{problem.source}: {warning}")
    except OptsolveError as exc:
        info.sha256 = info.sha256 or getattr(exc, "sha256", None)
        result = Result(kind, method, exc.status, str(exc), problem=info)
    except KeyboardInterrupt:
        result = Result(kind, method, Status.INTERRUPTED, "Interrupted before a first iterate was available.",
                        problem=info)
    except MemoryError:
        result = Result(kind, method, Status.INVALID_INPUT,
                        f"{file_label(path)}: solving it needs more memory than this machine could give, although "
                        f"its declared sizes fit the memory budget of {human_bytes(budget_bytes())}; lower the "
                        "budget (--memory-limit) to have such files refused before the solve.", problem=info)
    except RecursionError:
        result = Result(kind, method, Status.INVALID_INPUT,
                        f"{file_label(path)}: nested too deeply to be processed.", problem=info)
    except Exception as exc:  # a bug: report it as a result, traceback only in the debug log
        get_logger().debug("".join(traceback.format_exc()))
        result = Result(kind, method, Status.INTERNAL_ERROR,
                        f"Internal error: {type(exc).__name__}: {exc} (run with -v for the traceback).",
                        problem=info)
    finally:
        progress.close()
        scope.close()
    if history is not None and result.solution is not None:
        result.stats["history"] = history.to_dict()
    times = result.stats.setdefault("time_s", {})
    if load_s is not None:
        times["load"] = load_s
    times["total"] = time.perf_counter() - t0
    return result


def write_result(result: Result, output: str | None, arrays: str | None, indent: int | None = 2) -> bool:
    """Write the arrays file (if asked) and then the JSON document, each atomically; ``-`` is stdout.
    Without ``output``, a terminal on stdout gets :func:`optsolve.core.view.terminal_view` instead:
    returns whether it did."""
    arrays_path = None
    if arrays and result.arrays:
        write_arrays(arrays, result.arrays)
        arrays_path = arrays
    view = output is None and sys.stdout.isatty()
    if view:
        from optsolve.core.view import terminal_view

        text = terminal_view(result.to_dict(arrays_path=arrays_path)) + "\n"
    else:
        text = result.to_json(arrays_path=arrays_path, indent=indent) + "\n"
    if output in (None, "-"):
        write_stdout(text)
    else:
        write_atomic(output, text)
    return view


def write_stdout(text: str) -> None:
    """All of ``text`` on stdout: on a file descriptor by :func:`~optsolve.core.result.write_all`, which a
    signal during a blocked write to a full pipe cannot cut short."""
    stream = sys.stdout
    try:
        fd = stream.fileno()
    except (AttributeError, OSError, ValueError):  # not a descriptor (Click's test runner, a StringIO)
        stream.write(text)
        stream.flush()
        return
    stream.flush()
    write_all(fd, text.encode(getattr(stream, "encoding", None) or "utf-8", errors="replace"))


def summary_line(kind: str, result: Result) -> str:
    parts = [f"optsolve {kind}: {result.status.value}" + (f" ({result.qualifier})" if result.qualifier else "")]
    if result.objective is not None:
        parts.append(f"objective {result.objective:.10g}")
    if result.certificate is not None:
        cert = result.certificate
        parts.append("certificate holds" if cert.holds else f"certificate fails ({cert.describe_failures()})")
    total = result.stats.get("time_s", {}).get("total")
    if total is not None and result.solution is not None:
        parts.append(f"{total:.3g} s")
    line = ", ".join(parts)
    if result.message and result.exit_code != 0:
        line += f": {result.message}"
    return " ".join(line.split())


def verbosity_of(quiet: bool, verbose: int) -> int:
    if quiet:
        return QUIET
    return VERBOSE if verbose else NORMAL


def run_command(kind: str, problem: str, params: dict, *, started: float | None = None,
                watched: bool = False) -> int:
    """The body of ``optsolve KIND PROBLEM [options]``: returns the exit code. ``started`` is when the
    command started (``time.perf_counter()``; default now): a ``--time-limit`` counts from there.
    ``watched``: the process is this command alone, so that signals and a limit can have the
    backstop of :mod:`optsolve.core.guard` (a forked child watched by this process)."""
    started = time.perf_counter() if started is None else started
    output = params.pop("output", None)
    arrays = params.pop("arrays", None)
    verbosity = verbosity_of(params.pop("quiet", False), params.pop("verbose", 0))
    limit = params.get("time_limit")
    if watched and not guard.mpi_started() and guard.usable(problem):
        def on_timeout(sha256, method, stage, signum):
            return _write_timeout(kind, problem, params, output, verbosity, started, sha256, method, stage, signum)

        return guard.run_watched(limit, started, lambda channel: _run_command(
            kind, problem, params, output, arrays, verbosity, started, channel), on_timeout, f"optsolve {kind}")
    return _run_command(kind, problem, params, output, arrays, verbosity, started, None)


def timeout_result(kind, problem, params, started, sha256, method, stage, signum=None) -> Result:
    """The result the watcher (:mod:`optsolve.core.guard`) reports for a solve it stopped past the limit,
    or that did not answer a signal in time."""
    limit = params.get("time_limit")
    info = ProblemInfo(path=None if problem == "-" else problem, sha256=sha256)
    method = method or params.get("method")
    if signum is not None and (limit is None or time.perf_counter() < started + float(limit) + guard.GRACE_S):
        result = Result(kind, method, Status.INTERRUPTED,
                        f"Stopped by {signal_name(signum)} while {stage}, which did not end within "
                        f"{guard.SIGNAL_GRACE_S:g} s of the signal; the solve was stopped with no iterate to "
                        "report.", problem=info)
    elif signum is not None:
        result = Result(kind, method, Status.INTERRUPTED,
                        f"Stopped by {signal_name(signum)}; the solve was then still {stage}, in a step that "
                        f"cannot be interrupted, when the time limit of {limit:g} s ran out, so no iterate is "
                        "reported.", problem=info)
    else:
        result = Result(kind, method, Status.TIME_LIMIT,
                        f"The time limit of {limit:g} s ran out while {stage}, inside a step that cannot be "
                        f"interrupted; the solve was stopped {guard.GRACE_S:g} s later with no iterate to "
                        "report. Give a longer --time-limit.", problem=info)
    result.stats["time_s"] = {"total": time.perf_counter() - started}
    return result


def watched_solve(kind: str, path: str, params: dict) -> dict | None:
    """:func:`solve_file` of one batch file under its ``--time-limit``, backed by the watcher: the
    document (a dict), or None where the watcher cannot run here (no time limit, no fork, not
    the process's main thread)."""
    import json
    import tempfile
    import threading

    limit = params.get("time_limit")
    if limit is None or not guard.usable(path) or threading.current_thread() is not threading.main_thread():
        return None
    started = time.perf_counter()
    with tempfile.TemporaryFile() as tmp:
        def child(channel):
            result = solve_file(kind, path, dict(params), started=started, channel=channel)
            channel.finish()
            tmp.write(result.to_json(indent=None).encode())
            tmp.flush()
            return 0

        def on_timeout(sha256, method, stage, signum):
            tmp.write(timeout_result(kind, path, params, started, sha256, method, stage).to_json(indent=None).encode())
            return 0

        guard.run_watched(float(limit), started, child, on_timeout, f"optsolve batch {kind}")
        tmp.seek(0)
        text = tmp.read()
    return json.loads(text) if text else None


def _write_timeout(kind, problem, params, output, verbosity, started, sha256, method, stage, signum) -> int:
    """The document the watcher writes when the solve is still running past the time limit."""
    result = timeout_result(kind, problem, params, started, sha256, method, stage, signum)
    try:
        write_result(result, output, None)
    except OSError as exc:
        sys.stderr.write(f"optsolve {kind}: error: cannot write the result ({exc}).\n")
        return Status.INTERNAL_ERROR.exit_code
    sys.stderr.write(summary_line(kind, result) + "\n")
    return 128 + signum if signum is not None else result.exit_code


def _run_command(kind, problem, params, output, arrays, verbosity, started, channel) -> int:
    configure_logging(verbosity)
    progress = Progress(label=kind, verbosity=verbosity)
    with handling(f"optsolve {kind}") as signals:
        result = solve_interruptible(signals, kind, problem, params, progress, started=started, channel=channel)
        with signals.deferred():  # a signal now waits until the document and the line are out whole
            if channel is not None:
                channel.finish()  # the watcher's go-ahead: it has not written, and will not write, one itself
            if signals.received is not None and result.status is Status.INTERRUPTED:
                result.add_message(signals.describe())
            try:
                viewed = write_result(result, output, arrays)
            except OSError as exc:
                sys.stderr.write(f"optsolve {kind}: error: cannot write the result ({exc}).\n")
                return Status.INTERNAL_ERROR.exit_code
            code = signals.exit_code or result.exit_code
            line = summary_line(kind, result)
            if (code != 0 or verbosity > QUIET) and not (viewed and sys.stderr.isatty()):  # the view said it
                if signals.received is not None and result.status is not Status.INTERRUPTED:
                    line += f" ({signal_name(signals.received)} received after the solve)"
                sys.stderr.write(line + "\n")
    return signals.exit_code or result.exit_code


def solve_interruptible(signals, kind: str, problem: str, params: dict, progress: Progress, **options) -> Result:
    """:func:`solve_file` (given ``options``), where the first SIGINT, SIGTERM or SIGHUP interrupts the
    solve as Ctrl-C does (the solver returns its best iterate, status interrupted)."""
    result = None
    # MPI ranks stop together, at an iteration they agree on: the solver polls signals.received() there
    polled = params.get("engine") == "mpi"
    try:
        with signals.raising() if not polled else contextlib.nullcontext():
            result = solve_file(kind, problem, params, progress=progress, **options)
    except KeyboardInterrupt:  # the signal came as the solve returned, outside the solver's own handling
        pass
    if result is None:
        result = Result(kind, params.get("method"), Status.INTERRUPTED,
                        "Interrupted before a first iterate was available.",
                        problem=ProblemInfo(path=None if problem == "-" else problem))
    return result
