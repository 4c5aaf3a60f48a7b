"""``optsolve batch KIND [solver options] FILES...``: many problem files in worker processes.

Each file is solved by :func:`optsolve.core.runner.solve_file` in a process pool;
one JSON line per file goes to stdout (the whole document, or with ``--out-dir`` a
summary naming the file written), in input order or as completed. A failing file,
or a worker process that dies, is reported in its own line and never stops the
others. A summary goes to stderr; the exit code is the worst of the files'.
"""

from __future__ import annotations

import concurrent.futures as cf
import multiprocessing
import os
import sys
import time
from dataclasses import dataclass

import click

from optsolve.core.result import Result, Status, dumps, worst_exit_code, write_atomic

BATCH_ONLY = ("files", "jobs", "out_dir", "order")


@dataclass
class Outcome:
    index: int
    path: str
    status: str
    exit_code: int
    line: str


def _init_worker():
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=1)
    except ImportError:
        pass
    from optsolve.core.progress import QUIET, configure_logging

    configure_logging(QUIET)


def solve_one(kind: str, index: int, path: str, params: dict, out_path: str | None) -> Outcome:
    """Solve one file (in a worker) and return its stdout line."""
    from optsolve.core.runner import solve_file

    result = solve_file(kind, path, dict(params))
    return _outcome(index, path, result, out_path)


def _outcome(index, path, result: Result, out_path):
    if out_path:
        write_atomic(out_path, result.to_json() + "\n")
        summary = {"file": path, "status": result.status.value, "exit_code": result.exit_code,
                   "objective": result.objective, "output": out_path, "message": result.message}
        if result.certificate is not None:
            summary["certificate_holds"] = result.certificate.holds
        line = dumps(summary, indent=None)
    else:
        line = result.to_json(indent=None)
    return Outcome(index, path, result.status.value, result.exit_code, line)


def _dead_worker(kind, index, path, params, out_path, reason) -> Outcome:
    from optsolve.core.result import ProblemInfo

    result = Result(kind, params.get("method"), Status.INTERNAL_ERROR,
                    f"The worker process solving this file died ({reason}).", problem=ProblemInfo(path=path))
    return _outcome(index, path, result, out_path)


def output_paths(files, out_dir) -> list:
    if not out_dir:
        return [None] * len(files)
    stems = [os.path.splitext(os.path.basename(f))[0] or "stdin" for f in files]
    seen: dict[str, int] = {}
    for s in stems:
        seen[s] = seen.get(s, 0) + 1
    return [os.path.join(out_dir, f"{s}.json" if seen[s] == 1 else f"{s}-{i}.json") for i, s in enumerate(stems)]


def run_batch(kind, files, params, jobs, out_dir, order, emit=None):
    """Solve ``files``; call ``emit(outcome)`` for each (in the requested order); return the outcomes."""
    emit = emit or (lambda o: (sys.stdout.write(o.line + "\n"), sys.stdout.flush()))
    outs = output_paths(files, out_dir)
    pending = dict(enumerate(files))
    done: dict[int, Outcome] = {}
    next_to_emit = 0

    def deliver(outcome):
        nonlocal next_to_emit
        done[outcome.index] = outcome
        pending.pop(outcome.index, None)
        if order == "completed":
            emit(outcome)
        else:
            while next_to_emit in done:
                emit(done[next_to_emit])
                next_to_emit += 1

    ctx = multiprocessing.get_context("forkserver" if "forkserver" in multiprocessing.get_all_start_methods()
                                      else "spawn")
    suspects = False  # after a worker died, run the rest one at a time to find the culprit
    while pending:
        workers = 1 if suspects else max(1, min(jobs, len(pending)))
        with cf.ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker) as pool:
            futures = {}
            for i, path in sorted(pending.items()):
                futures[pool.submit(solve_one, kind, i, path, params, outs[i])] = i
                if suspects:
                    break
            broken = False
            for fut in cf.as_completed(futures):
                i = futures[fut]
                try:
                    deliver(fut.result())
                except cf.process.BrokenProcessPool as exc:
                    broken = True
                    if suspects:
                        deliver(_dead_worker(kind, i, files[i], params, outs[i], str(exc) or "killed"))
                except Exception as exc:
                    deliver(_dead_worker(kind, i, files[i], params, outs[i], f"{type(exc).__name__}: {exc}"))
            if broken:
                suspects = True
    return [done[i] for i in sorted(done)]


def make_batch_command(kind: str) -> click.Command:
    from optsolve.core.registry import solver_module
    from optsolve.core.runner import OUTPUT_OPTIONS

    cli_module = solver_module(kind, "cli")
    skip = set(OUTPUT_OPTIONS) | set(getattr(cli_module, "OUTPUT_OPTIONS", ()))
    params = [click.Argument(["files"], nargs=-1, required=True, metavar="FILES...")]
    for p in cli_module.command.params:
        if isinstance(p, click.Argument) or p.name in skip:
            continue
        params.append(p)
    params += [
        click.Option(["-j", "--jobs"], type=click.IntRange(min=1), default=None,
                     help="Worker processes (default: the number of usable CPU cores)."),
        click.Option(["--out-dir"], type=click.Path(file_okay=False), default=None,
                     help="Write each solution to DIR/<name>.json; stdout then carries one summary line per file."),
        click.Option(["--order"], type=click.Choice(["input", "completed"]), default="input", show_default=True,
                     help="Order of the stdout lines."),
        click.Option(["-q", "--quiet"], is_flag=True, help="No summary on stderr."),
    ]

    def callback(files, jobs, out_dir, order, quiet, **solver_params):
        solver_params.pop("verbose", None)
        if "-" in files:
            raise click.UsageError("'-' (stdin) cannot be one of the FILES of a batch; save it to a file.")
        if jobs is None:
            jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
        if out_dir:
            os.makedirs(out_dir, exist_ok=True)
        t0 = time.perf_counter()
        try:
            outcomes = run_batch(kind, list(files), solver_params, jobs, out_dir, order)
        except KeyboardInterrupt:
            sys.stderr.write("optsolve batch: interrupted.\n")
            sys.exit(130)
        counts: dict[str, int] = {}
        for o in outcomes:
            counts[o.status] = counts.get(o.status, 0) + 1
        code = worst_exit_code(o.exit_code for o in outcomes)
        if not quiet or code != 0:
            detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
            sys.stderr.write(f"optsolve batch {kind}: {len(outcomes)} files in {time.perf_counter() - t0:.3g} s: "
                             f"{detail}; exit code {code}\n")
        sys.exit(code)

    return click.Command(kind, params=params, callback=callback,
                         help=f"Solve many problem files with 'optsolve {kind}' (same solver options).")
