"""The one solve pipeline every command goes through.

Each solver package describes itself by a :class:`Solver`: its command, its ``METHODS``
table and three steps of its own (``setup``: check the options and prepare the problem;
``certify``: its independent certificate; optionally ``finish`` and ``judge``). :func:`run`
does the rest the same way for all six:

1. the method's name is checked against ``METHODS`` and a CPU-only command refuses a GPU;
2. the clock starts, so that ``time_limit`` counts from the command's start (or from the
   call, in Python), and the job's :class:`~optsolve.core.clock.Deadline` is on ``time.perf_counter``;
3. ``setup`` makes a :class:`Job`: the prepared problem, the settings recorded in the
   document, the deadline and the progress reporter;
4. ``METHODS[name].run(job)`` (the method's :class:`Entry`) returns a :class:`MethodOutput` (unless ``screen`` answers first, as for
   a problem proven infeasible before any method runs), which ``finish`` may complete;
5. the BLAS/OpenMP thread limit (the solver's ``blas_threads``, or the user's ``--threads``:
   :mod:`optsolve.core.threads`) holds from setup to the certificate, and is recorded in the
   settings (``threads``) and stats (``threads``: the BLAS threads in effect);
6. the :class:`~optsolve.core.result.Result` is assembled with the same stats keys in every
   document (``iterations``, ``evaluations``, ``time_s``) and the certificate is attached and
   timed; ``judge`` may then act on its verdict.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from optsolve.core import clock, threads
from optsolve.core.backend import require_cpu
from optsolve.core.errors import ParameterError, positive_option
from optsolve.core.progress import SILENT, Progress, stage
from optsolve.core.result import Certificate, ProblemInfo, Result, Status, joined


@dataclass
class MethodOutput:
    """What every method returns.

    ``status``: a :class:`~optsolve.core.result.Status` or its value; ``solution``: the
    document's solution (None: no answer to certify); ``iterations`` and ``evaluations``: what
    the method counts as iterations and as work (None where it counts none); ``stats``: its own
    keys (a ``time_s`` dict in it is merged into the document's); ``arrays``: matrices for the
    ``--arrays`` file. A method's history goes through :func:`optsolve.core.history.trace`, which
    costs nothing when no history is asked for, so it is not part of the output.
    """

    status: Status | str
    solution: dict | None = None
    message: str = ""
    objective: float | None = None
    iterations: int | None = None
    evaluations: int | None = None
    stats: dict = field(default_factory=dict)
    arrays: dict = field(default_factory=dict)

    def __post_init__(self):
        self.status = Status(self.status)

    def add_message(self, text: str) -> None:
        self.message = joined(self.message, text)


@dataclass
class Job:
    """A problem ready for a method: what a solver's ``setup`` makes and every method receives.

    ``data``: the package's prepared problem; ``settings``: the resolved options, recorded in the
    document; ``info``: the document's ``problem`` entry; ``problem``: the validated problem file (set by
    :func:`run`, for the certificate and messages naming the file); ``deadline``: the time limit's
    :class:`~optsolve.core.clock.Deadline` (its ``at``: a ``time.perf_counter()`` value, None without a limit);
    ``context``: what setup computed for the methods beyond the problem (a warm start, an oracle, a random
    generator), which they read and never write.
    """

    method: str
    data: Any
    settings: dict
    info: ProblemInfo
    problem: Any = None
    deadline: clock.Deadline = field(default_factory=clock.Deadline)
    progress: Progress = SILENT
    context: dict = field(default_factory=dict)


Method = Callable[[Job], MethodOutput]


@dataclass(frozen=True)
class Entry:
    """One method of a package's ``METHODS`` table: all that the pipeline, ``--help`` and the package's
    option checks know of it, so that a method is added by adding its entry.

    ``run``: the method, a function of the :class:`Job` returning a :class:`MethodOutput`; ``help``: its
    sentence in ``--help`` (:func:`methods_help`); ``defaults``: its own defaults of the package's options
    (``tol``, ``max_iter``, ``rho``, ...), which the package reads where the user gave none (a method without
    one gets the package's default); ``tags``: what kind of method it is, where the package's option rules
    ask (``entropic``, ``distributed``, ``stochastic``, ...); ``imports``: modules it needs imported before
    the solve starts (third-party solvers, whose import counts as setup, and whose thread pools the thread
    limit must reach).
    """

    run: Method
    help: str
    defaults: dict = field(default_factory=dict)
    tags: frozenset = frozenset()
    imports: tuple[str, ...] = ()

    def default(self, option: str, fallback=None):
        """This method's default of ``option``, else ``fallback`` (the package's)."""
        return self.defaults.get(option, fallback)


def entry(run: Method, help: str, *, defaults: dict | None = None, tags=(), imports=()) -> Entry:
    """An :class:`Entry` of ``METHODS``."""
    return Entry(run, help, dict(defaults or {}), frozenset(tags), tuple(imports))


def methods_help(solver: "Solver") -> str:
    """The ``--method`` help of ``solver``: each alias's and method's sentence, in table order."""
    lines = [f"{name}: {solver.alias_help.get(name, '')}" for name in solver.aliases]
    lines += [f"{name}: {e.help}" for name, e in solver.methods.items()]
    return " ".join(line if line.endswith(".") else line + "." for line in lines)


def tagged(methods: dict, tag: str) -> tuple[str, ...]:
    """The names of the methods of ``methods`` that carry ``tag``."""
    return tuple(name for name, e in methods.items() if tag in e.tags)


class Solver:
    """A solver package's part of the pipeline; subclasses set the attributes and override the steps."""

    command: str = ""
    methods: dict[str, Entry] = {}
    aliases: tuple[str, ...] = ()  # names setup resolves to one of the methods (ot's auto)
    alias_help: dict[str, str] = {}  # an alias's sentence in --help (methods_help)
    default_method: str = ""
    cpu_only: bool = True
    blas_threads: int | None = None  # BLAS/OpenMP threads of a solve unless the user sets --threads; None: all
    thread_libraries: tuple[str, ...] = ("scipy.linalg",)  # modules with thread pools the methods use, loaded
    # before the limit (scipy.linalg loads scipy's own BLAS)

    @property
    def method_names(self) -> tuple[str, ...]:
        """What ``--method`` accepts: the aliases, then the methods."""
        return (*self.aliases, *self.methods)

    def libraries(self, method: str) -> tuple[str, ...]:
        """The modules with thread pools ``method`` uses, loaded before the thread limit: :attr:`thread_libraries`
        and its entry's ``imports``."""
        entry = self.methods.get(method)
        return (*self.thread_libraries, *(entry.imports if entry is not None else ()))

    def setup(self, problem, method: str, options: dict, deadline: clock.Deadline, progress: Progress) -> Job:
        """Check ``options`` (the keyword arguments of ``solve_problem`` less method, device, time limit and
        progress), prepare ``problem`` and return the job (its ``method`` may differ: ``auto`` resolved)."""
        raise NotImplementedError

    def screen(self, job: Job) -> MethodOutput | None:
        """An answer found before any method runs (a problem proven infeasible, one with no variables), or None."""
        return None

    def finish(self, job: Job, out: MethodOutput) -> MethodOutput:
        """What the method's output needs before it is a document (a rounding, a bootstrap); timed as solve."""
        return out

    def certify(self, job: Job, result: Result, out: MethodOutput) -> Certificate | None:
        """The package's independent certificate of ``result`` (which it may complete first, as a measured
        quantity the solution reports); ``out``: the method's output the result was made from (a package's
        typed output carries what its checks start from); called only when the result has a solution."""
        raise NotImplementedError

    def judge(self, job: Job, result: Result) -> None:
        """Act on the certificate's verdict beyond :meth:`Result.attach_certificate` (a claim it refutes)."""


def check_method(solver: Solver, method: str) -> None:
    if method not in solver.method_names:
        raise ParameterError(f"Unknown method {method!r}; expected one of {sorted(solver.method_names)}")


def run(solver: Solver, problem, *, method: str | None = None, device: str = "auto", time_limit=None,
        progress: Progress = SILENT, **options) -> Result:
    """Solve a validated ``problem`` with ``solver``; the certificate is attached (see the module's steps)."""
    method = method or solver.default_method
    check_method(solver, method)
    if solver.cpu_only:
        require_cpu(solver.command, device)
    time_limit = positive_option("time-limit", time_limit)
    limit = threads.choose(solver.blas_threads)
    t0 = time.perf_counter()
    # called from Python, where no command started the clock, the time limit counts from this call
    started = clock.started_at(t0) if clock.spent() == 0.0 else contextlib.nullcontext()
    with started, threads.limited(limit, solver.libraries(method)):
        options = dict(options, device=device, time_limit=time_limit)
        job = solver.setup(problem, method, options, clock.Deadline.after(time_limit), progress)
        job.problem = problem
        t_prep = time.perf_counter()
        out = solver.screen(job) or solver.methods[job.method].run(job)
        stage("finishing the answer")
        out = solver.finish(job, out)
        t_solve = time.perf_counter()
        stats = dict(out.stats)
        times = {k: v for k, v in (stats.pop("time_s", None) or {}).items() if v is not None}
        stats = {"iterations": out.iterations, "evaluations": out.evaluations, **stats, "threads": threads.in_effect(),
                 "time_s": {"prepare": t_prep - t0, "solve": t_solve - t_prep, **times}}
        settings = dict(job.settings, threads=limit or "all")
        result = Result(solver.command, job.method, out.status, out.message, problem=job.info,
                        objective=out.objective, solution=out.solution, stats=stats, settings=settings,
                        arrays=out.arrays)
        if result.solution is not None:
            stage("certifying the answer")
            with clock.timed(stats["time_s"], "certificate"):
                certificate = solver.certify(job, result, out)
            if certificate is not None:
                result.attach_certificate(certificate)
            solver.judge(job, result)
    return result
