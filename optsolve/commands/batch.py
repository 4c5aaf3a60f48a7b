"""The ``optsolve batch KIND`` command (the work is :mod:`optsolve.core.batch`'s)."""

from __future__ import annotations

import os
import signal
import sys
import time

import click

from optsolve.core.batch import run_batch
from optsolve.core.errors import UsageError
from optsolve.core.result import worst_exit_code
from optsolve.core.signals import handling, kill_children, signal_name


def make_batch_command(kind: str) -> click.Command:
    """``optsolve batch KIND``: the solver command's options (less those that write per-solve files) and the
    batch's own."""

    def callback(files, jobs, out_dir, resume, order, scheduler, local_cluster, chunk, quiet, **solver_params):
        solver_params.pop("verbose", None)
        out_dir, jobs = _check_usage(files, jobs, out_dir, resume, scheduler, local_cluster, chunk)
        t0 = time.perf_counter()
        outcomes, engine, signal_code = _solve_all(kind, files, solver_params, jobs, out_dir, order, resume,
                                                   scheduler, local_cluster, chunk)
        sys.exit(_summary(kind, outcomes, engine, signal_code, quiet, t0))

    return click.Command(kind, params=_batch_params(kind), callback=callback,
                         help=f"Solve many problem files with 'optsolve {kind}' (same solver options), in a local "
                              "process pool or on a Dask cluster.")


def _batch_params(kind: str) -> list:
    """The solver command's parameters that a batch offers, then the batch's own."""
    from optsolve.core.registry import solver_module
    from optsolve.core.runner import OUTPUT_OPTIONS

    cli_module = solver_module(kind, "cli")
    skip = set(OUTPUT_OPTIONS) | set(getattr(cli_module, "OUTPUT_OPTIONS", ()))
    params = [click.Argument(["files"], nargs=-1, required=True, metavar="FILES...")]
    params += [p for p in cli_module.command.params if not (isinstance(p, click.Argument) or p.name in skip)]
    return params + [
        click.Option(["-j", "--jobs"], type=click.IntRange(min=1), default=None,
                     help="Worker processes of the local pool (default: the number of usable CPU cores)."),
        click.Option(["--out-dir"], type=click.Path(file_okay=False), default=None,
                     help="Write each solution to DIR/<name>.<KIND>.json; stdout then carries one summary line per file. A "
                          "file there that is not a solution of the same command and problem file is never "
                          "replaced: the batch refuses to start."),
        click.Option(["--resume"], "resume", metavar="DIR", type=click.Path(file_okay=False), default=None,
                     help="Solutions go to DIR (as --out-dir); a file whose solution there is finished (optimal, "
                          "infeasible or unbounded), was computed with the same options for the file as it is now "
                          "(by its sha256), and passes verify's checks again is not solved again: its line says "
                          "\"resumed\": true."),
        click.Option(["--order"], type=click.Choice(["input", "completed"]), default="input", show_default=True,
                     help="Order of the stdout lines."),
        click.Option(["--scheduler"], metavar="ADDRESS", default=None,
                     help="Solve on a Dask distributed cluster (dask.distributed.Client(ADDRESS), e.g. "
                          "tcp://host:8786); the files must be readable at their paths on the workers. "
                          "Needs pip install 'optsolve[dist]'."),
        click.Option(["--local-cluster"], "local_cluster", type=click.IntRange(min=1), default=None, metavar="N",
                     help="Start a Dask LocalCluster of N single-threaded worker processes here and solve on it."),
        click.Option(["--chunk"], type=click.IntRange(min=1), default=None, metavar="K",
                     help="Dask: files per task (default: about four tasks per worker, at most 64 files a task); "
                          "larger tasks spread the scheduler's per-task cost."),
        click.Option(["-q", "--quiet"], is_flag=True, help="No summary on stderr."),
    ]


def _check_usage(files, jobs, out_dir, resume, scheduler, local_cluster, chunk):
    """The batch options' usage errors; returns the output folder (``--resume``'s where given) and the jobs."""
    if "-" in files:
        raise click.UsageError("'-' (stdin) cannot be one of the FILES of a batch; save it to a file.")
    for option, value in (("--out-dir", out_dir), ("--resume", resume)):
        if value == "-":
            raise click.UsageError(f"'{option}' takes a directory; '-' is not one (without '--out-dir' the "
                                   "solutions go to stdout, one JSON line each).")
    if scheduler and local_cluster:
        raise click.UsageError("Give either '--scheduler ADDRESS' or '--local-cluster N', not both.")
    if chunk and not (scheduler or local_cluster):
        raise click.UsageError("'--chunk' applies to a Dask batch ('--scheduler' or '--local-cluster').")
    if resume:
        if out_dir and os.path.abspath(out_dir) != os.path.abspath(resume):
            raise click.UsageError(f"'--resume {resume}' writes the solutions to {resume}; '--out-dir {out_dir}' "
                                   "names another directory.")
        out_dir = resume
    if jobs is None:
        jobs = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if out_dir:
        _check_out_dir(out_dir, "--resume" if resume else "--out-dir")
    return out_dir, jobs


def _solve_all(kind, files, solver_params, jobs, out_dir, order, resume, scheduler, local_cluster, chunk):
    """(outcomes, the Dask engine or None, the exit code of a signal after the last file); a signal during the
    batch ends the process here, the files finished before it written."""
    engine = stopped = None
    with handling(f"optsolve batch {kind}") as signals:
        try:
            with signals.raising():  # the first signal stops the batch (a second one stops it at once)
                if scheduler or local_cluster:
                    from optsolve.core.cluster import DaskEngine

                    try:
                        engine = DaskEngine(scheduler=scheduler, local_workers=local_cluster, chunk=chunk, kind=kind)
                    except UsageError as exc:
                        raise click.UsageError(str(exc)) from None
                try:
                    outcomes = run_batch(kind, list(files), solver_params, jobs,
                                         out_dir, order, resume=bool(resume), engine=engine)
                except UsageError as exc:  # an output it must not write, found before any solve
                    raise click.UsageError(str(exc)) from None
        except KeyboardInterrupt as exc:
            stopped = getattr(exc, "signum", None) or signals.received or int(signal.SIGINT)
        except BrokenPipeError:  # the reader of stdout left (`| head -1`): end quietly, as `yes | head -1` does
            stopped = int(signal.SIGPIPE)
        finally:
            if engine is not None:
                engine.close()
        if stopped == signal.SIGPIPE:
            devnull = os.open(os.devnull, os.O_WRONLY)  # what is left in stdout's buffer goes nowhere
            os.dup2(devnull, sys.stdout.fileno())
        if stopped is not None:
            kill_children()  # whatever worker is left
            if stopped != signal.SIGPIPE:
                sys.stderr.write(f"optsolve batch {kind}: stopped by {signal_name(stopped)}; the files finished "
                                 "before it are written, the others are not.\n")
            try:
                sys.stdout.flush()
            except OSError:
                pass
            sys.stderr.flush()
            # no interpreter teardown: the process pool's exit hook would wake its manager thread through
            # a pipe to the workers killed above, and print that failure's traceback
            os._exit(128 + stopped)
        return outcomes, engine, signals.exit_code  # a signal after the last file


def _summary(kind, outcomes, engine, signal_code, quiet, t0) -> int:
    """The batch's exit code (the worst of its files', or a late signal's); its summary line on stderr."""
    counts: dict[str, int] = {}
    for o in outcomes:
        counts[o.status] = counts.get(o.status, 0) + 1
    code = signal_code or worst_exit_code(o.exit_code for o in outcomes)
    if not quiet or code != 0:
        detail = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: -kv[1]))
        where = "" if engine is None else f" on {engine.describe()}"
        resumed_n = sum(1 for o in outcomes if o.resumed)
        skipped = f" ({resumed_n} resumed)" if resumed_n else ""
        sys.stderr.write(f"optsolve batch {kind}: {len(outcomes)} files{skipped} in {time.perf_counter() - t0:.3g} s"
                         f"{where}: {detail}; exit code {code}\n")
    return code


def _check_out_dir(out_dir: str, option: str) -> None:
    """Make the output folder and a file in it, before any solve: a usage error where that fails."""
    import tempfile

    try:
        os.makedirs(out_dir, exist_ok=True)
        fd, probe = tempfile.mkstemp(prefix=".optsolve-", suffix=".probe", dir=out_dir)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise click.UsageError(f"'{option} {out_dir}': cannot write solutions there ({exc.strerror or exc}).") \
            from None
