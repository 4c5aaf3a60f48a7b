"""The ``optsolve`` command line: a Click group with lazily loaded subcommands.

``optsolve --help`` imports only Click: solver commands, numpy, POT and cupy load
when a command runs. Options also come from the environment (``OPTSOLVE_<COMMAND>_<OPTION>``,
``OPTSOLVE_DEVICE`` for ``--device`` and ``OPTSOLVE_THREADS`` for ``--threads``).
"""

from __future__ import annotations

import importlib
import sys
import time

STARTED = time.perf_counter()  # a solve command run as a program: its --time-limit counts from here
_as_program = False  # set by run(): the process is this one command (not Click's test runner, say)

import click  # noqa: E402

from optsolve._version import __version__
from optsolve.catalogue import KINDS

# Subcommands inherit the environment prefix from the root: OPTSOLVE_<COMMAND>_<OPTION>.
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"], "max_content_width": 100}
ROOT_CONTEXT_SETTINGS = dict(CONTEXT_SETTINGS, auto_envvar_prefix="OPTSOLVE")

# name -> (import path of the command, one-line help)
BUILTIN_COMMANDS = {
    "info": ("optsolve.cli:info", "Versions, BLAS and GPUs this installation sees."),
    "verify": ("optsolve.cli:verify", "Re-check a solution's certificate from the problem file."),
    "gen": ("optsolve.cli:gen", "Generate problem files from a benchmark family."),
    "batch": ("optsolve.cli:batch",
              "Solve many problem files (worker processes or a Dask cluster), one JSON line each."),
    "plot": ("optsolve.commands.plot:plot", "Draw the convergence histories of solutions written with --history."),
}


class MethodChoice(click.Choice):
    """``--method`` of a solver command: the names its ``METHODS`` table holds when the command runs (an entry
    added to the table is offered, and listed in ``--help``)."""

    def __init__(self, solver):
        self.solver = solver
        super().__init__(sorted(solver.method_names))

    @property
    def choices(self):
        return tuple(sorted(self.solver.method_names))

    @choices.setter
    def choices(self, _value):  # click.Choice sets its list once; this one reads the table each time
        pass


def method_option(solver, default=None, default_text: str | None = None):
    """The ``--method`` option of ``solver``'s command, its help made of the methods' entries
    (:func:`optsolve.core.solve.methods_help`); ``default_text``: the default in words, where it depends on
    other options."""
    from optsolve.core.solve import methods_help

    shown = "" if default is not None else f" [default: {default_text or solver.default_method}]"
    return click.option("--method", type=MethodChoice(solver), default=default, show_default=default is not None,
                        help=methods_help(solver) + shown)


class LazyGroup(click.Group):
    """A group whose subcommands are imported only when invoked (Click's lazy-loading recipe)."""

    def __init__(self, *args, lazy: dict | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.lazy = dict(lazy or {})

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy:
            target, _ = self.lazy[name]
            module, attr = target.split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)

    def format_commands(self, ctx, formatter):
        rows = [(name, self.lazy[name][1]) for name in self.list_commands(ctx) if name in self.lazy]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)

    def shell_complete(self, ctx, incomplete):
        """Subcommand names with their one-line help, importing none of them; then the group's options."""
        from click.shell_completion import CompletionItem

        items = [CompletionItem(name, help=self.lazy[name][1]) for name in self.list_commands(ctx)
                 if name.startswith(incomplete) and name in self.lazy]
        for name in super().list_commands(ctx):
            command = super().get_command(ctx, name)
            if name.startswith(incomplete) and name not in self.lazy and command is not None and not command.hidden:
                items.append(CompletionItem(name, help=command.get_short_help_str()))
        return items + click.Command.shell_complete(self, ctx, incomplete)

    def _main_shell_completion(self, ctx_args, prog_name, complete_var=None):
        # Completion runs on every Tab: a failure in it offers nothing rather than printing a traceback.
        try:
            super()._main_shell_completion(ctx_args, prog_name, complete_var)
        except SystemExit:
            raise
        except Exception:
            sys.exit(1)


def _kind_entries() -> dict:
    """The solver commands (problem kinds) installed: name -> (import path, one-line help)."""
    from optsolve.core.registry import available_kinds

    return {k: (f"optsolve.{k}.cli:command", KINDS[k]) for k in available_kinds()}


def _solver_entries() -> dict:
    """The solver commands and the solver packages' extra commands (``qp-train``)."""
    from optsolve.catalogue import EXTRA_COMMANDS

    entries = _kind_entries()
    entries.update({name: (target, text) for name, (kind, target, text) in EXTRA_COMMANDS.items() if kind in entries})
    return entries


@click.group(cls=LazyGroup, lazy={**BUILTIN_COMMANDS, **_solver_entries()}, context_settings=ROOT_CONTEXT_SETTINGS)
@click.version_option(__version__, "-V", "--version", prog_name="optsolve")
def main():
    """optsolve: solvers for classical optimisation problems.

    Each solver command reads a problem file (.npz, .json, .mat, or - for JSON on
    stdin) and writes one JSON document: the solution, statistics and a certificate
    that `optsolve verify` re-checks. Exit codes: 0 optimal, 1 internal error,
    2 usage, 3 infeasible, 4 unbounded, 5 max_iter/time_limit, 6 inaccurate or
    numerical error, 7 invalid input; interrupted by a signal: 128 plus its number
    (130 Ctrl-C, 143 SIGTERM, 129 SIGHUP), best iterate written.
    """


# --------------------------------------------------------------------------- shared solve options

class TimeLimit(click.ParamType):
    """Seconds in (0, inf]: ``inf`` is no limit (None); nan, zero and negative numbers are usage errors."""

    name = "seconds"

    def convert(self, value, param, ctx):
        import math

        if value is None or (isinstance(value, float) and math.isfinite(value) and value > 0):
            return value
        try:
            seconds = float(value)
        except (TypeError, ValueError):
            self.fail(f"expected a number of seconds > 0 (or 'inf' for no limit); got {value!r}.", param, ctx)
        if math.isinf(seconds) and seconds > 0:
            return None
        if not seconds > 0:  # nan fails this too
            self.fail(f"expected a number of seconds > 0 (or 'inf' for no limit); got {value!r}.", param, ctx)
        return seconds


def solve_options(func):
    """The options every solve command shares, and its PROBLEM argument."""
    decorators = [
        click.argument("problem", metavar="PROBLEM", type=str),
        click.option("-o", "--output", metavar="FILE|-", default=None,
                     help="Where to write the JSON document: a file, or '-' for stdout. Default: stdout, where a "
                          "terminal gets a few readable lines instead (a pipe or a file gets the document)."),
        click.option("--arrays", metavar="FILE.npz", default=None,
                     help="Also write large arrays (matrices) in binary to this .npz file."),
        click.option("--max-iter", type=click.IntRange(min=1), default=None,
                     help="Iteration limit (status max_iter, exit 5, best iterate written)."),
        click.option("--time-limit", type=TimeLimit(), default=None,
                     metavar="SECONDS", help="Wall-clock limit from the command's start (status time_limit, exit 5); a "
                          "step that cannot be interrupted is stopped 0.7 s past it. 'inf': as without the option."),
        click.option("--device", type=click.Choice(["auto", "cpu", "gpu"]), default="auto",
                     show_default=True, envvar="OPTSOLVE_DEVICE",
                     help="Where to compute; auto uses a GPU when cupy sees one."),
        click.option("--memory-limit", metavar="SIZE", default=None, envvar="OPTSOLVE_MEMORY_LIMIT",
                     help="Memory budget that every size a problem file declares is checked against before "
                          "anything is allocated (512M, 8G, 50%) [default: a quarter of physical memory]."),
        click.option("--threads", metavar="N|all", default=None, envvar="OPTSOLVE_THREADS",
                     help="BLAS and OpenMP threads of the solve and its certificate; 'all': the libraries' own "
                          "number [default: the method's, recorded in settings.threads]."),
        click.option("--history", is_flag=True,
                     help="Record the convergence trace (iteration, evaluations, residual or gap, elapsed time) "
                          "in stats.history; `optsolve plot` draws it."),
        click.option("-q", "--quiet", is_flag=True, help="Silence stderr except error lines."),
        click.option("-v", "--verbose", count=True, help="Log every iteration on stderr (and tracebacks)."),
    ]
    for d in reversed(decorators):
        func = d(func)
    return func


class AliasedOption(click.Option):
    """An option whose older spellings (``hidden_aliases``) are still accepted but left out of ``--help``."""

    def __init__(self, *args, hidden_aliases: tuple = (), **kwargs):
        super().__init__(*args, **kwargs)
        self.hidden_aliases = tuple(hidden_aliases)

    @property
    def public_opts(self) -> list[str]:
        return [o for o in self.opts if o not in self.hidden_aliases]

    def get_help_record(self, ctx):
        spelled = self.opts
        self.opts = self.public_opts
        try:
            return super().get_help_record(ctx)
        finally:
            self.opts = spelled


def seed_option(func):
    """``--seed``, for the commands whose methods draw random numbers (cover, kmeans, truncated)."""
    return click.option("--seed", type=int, default=None,
                        help="Seed of the random generator, for reproducible runs.")(func)


def check_writable(path: str | None, option: str, *, stdout: bool = True) -> None:
    """A usage error, before any work, when an output path cannot be written; ``-`` (stdout) is one
    unless ``stdout``. A device or FIFO must be writable itself; a file, by creating one beside it."""
    import os
    import tempfile

    from optsolve.core.result import is_special

    if path == "-" and not stdout:
        raise click.BadParameter("'-' (stdout) is not accepted here: stdout carries the command's JSON; give a "
                                 "file name.", param_hint=option)
    if path in (None, "-"):
        return
    if path == "":
        raise click.BadParameter("the file name is empty; expected a file name.", param_hint=option)
    if path.endswith(("/", os.sep)) or os.path.isdir(path):
        raise click.BadParameter(f"{path!r} names a directory; expected a file name.", param_hint=option)
    if is_special(path):
        if not os.access(path, os.W_OK):
            raise click.BadParameter(f"{path!r} is not writable.", param_hint=option)
        return
    directory = os.path.dirname(os.path.realpath(path))
    if not os.path.isdir(directory):
        what = "is not a directory" if os.path.exists(directory) else "does not exist"
        raise click.BadParameter(f"the directory of {path!r} ({directory}) {what}.", param_hint=option)
    try:  # the test that holds for root, ACLs and read-only mounts alike: make a file there
        fd, probe = tempfile.mkstemp(prefix=".optsolve-", suffix=".probe", dir=directory)
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise click.BadParameter(f"cannot write in the directory of {path!r} ({exc.strerror or exc}).",
                                 param_hint=option) from None


def check_not_inputs(outputs: dict, inputs: dict) -> None:
    """A usage error when an output (``{option: path}``) names an input (``{what: path}``) or another output:
    the same regular file, or the same path where it does not exist yet. Devices and pipes may be shared."""
    import os

    from optsolve.core.result import is_special

    def same(a: str, b: str) -> bool:
        if is_special(a) or is_special(b):
            return False
        try:
            return os.path.samefile(a, b)
        except OSError:
            return os.path.realpath(a) == os.path.realpath(b)

    named = [(o, p) for o, p in outputs.items() if p not in (None, "", "-")]
    for i, (option, path) in enumerate(named):
        for what, source in inputs.items():
            if source not in (None, "", "-") and same(path, source):
                raise click.BadParameter(f"{path!r} is {what}; writing there would overwrite it. Give another "
                                         "file name.", param_hint=option)
        for other, other_path in named[:i]:
            if same(path, other_path):
                raise click.BadParameter(f"{path!r} is also the file of {other}; give each output its own file.",
                                         param_hint=option)


# Solve options that name files read by the solve (qp's warm start and policy): no output may be one of them.
INPUT_FILE_OPTIONS = {"warm_start": "the '--warm-start' file", "policy": "the '--policy' file"}


def run_solve(kind: str, problem: str, params: dict):
    """Run a solve command and exit with its code (called by each solver's Click command)."""
    from optsolve.core.runner import run_command

    given = click.get_current_context().params
    arrays_option = "'--plan'" if given.get("plan_file") else "'--arrays'"
    check_writable(params.get("output"), "'-o' / '--output'")
    check_writable(params.get("arrays"), arrays_option, stdout=False)
    inputs = {"the problem file": problem}
    inputs.update((what, params.get(name)) for name, what in INPUT_FILE_OPTIONS.items() if params.get(name))
    check_not_inputs({"'-o' / '--output'": params.get("output"), arrays_option: params.get("arrays")}, inputs)
    # run as a program, the limit counts from the process's start and has the watcher's backstop
    # (optsolve.core.guard); called in-process, from the call, and no process is forked
    code = run_command(kind, problem, params, started=STARTED if _as_program else None, watched=_as_program)
    sys.exit(code)


# --------------------------------------------------------------------------- info

@click.command(context_settings=CONTEXT_SETTINGS)
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
def info(as_json):
    """Versions of optsolve and its dependencies, the BLAS in use, and the GPUs cupy sees."""
    from optsolve.core.sysinfo import environment, format_environment
    from optsolve.core.result import dumps

    env = environment()
    click.echo(dumps(env) if as_json else format_environment(env))


# --------------------------------------------------------------------------- verify

class VerifyCommand(click.Command):
    """``optsolve verify``: its help also lists the limit options of each command's solutions (imported only
    when the help is shown, so that ``optsolve --help`` stays light)."""

    def format_options(self, ctx, formatter):
        from optsolve.core.registry import available_kinds

        super().format_options(ctx, formatter)
        for kind in available_kinds():
            rows = [p.get_help_record(ctx) for p in _limit_params(kind)]
            with formatter.section(f"Limit options of {kind} solutions"):
                formatter.write_dl([row for row in rows if row])


@click.command(cls=VerifyCommand, context_settings=dict(CONTEXT_SETTINGS, ignore_unknown_options=True,
                                                        allow_extra_args=True))
@click.argument("problem", type=str)
@click.argument("solution", type=str)
@click.option("-o", "--output", metavar="FILE|-", default="-", show_default=True,
              help="Where to write the verification report.")
@click.option("-q", "--quiet", is_flag=True, help="Silence stderr except error lines.")
@click.option("--oracle", metavar="MODULE:FUNCTION", default=None,
              help="truncated: the membership function the solution was computed with.")
@click.option("--operator", metavar="MODULE:FUNCTION", default=None,
              help="mvi: the user operator the solution was computed with.")
@click.pass_context
def verify(ctx, problem, solution, output, quiet, oracle, operator):
    """Judge SOLUTION (a JSON document, '-' for stdin) against PROBLEM with limits of verify's own.

    Tolerances and thresholds come from verify's options, which have the names of the solve
    command's (a solution computed with `optsolve qp --eps-abs 1e-5` is verified with
    `optsolve verify P S --eps-abs 1e-5`), else from the problem file, else from the documented
    defaults; never from the document. A document whose settings are looser than those limits
    fails a check naming the setting. The claimed status is judged.

    Exit code 0 when every check holds, 6 when one fails, 7 when a file is unreadable, 2 for an
    option the solution's command does not have.
    """
    from optsolve.core.signals import handling
    from optsolve.core.verify import run_verify

    extra = list(ctx.args)
    check_writable(output, "'-o' / '--output'")
    check_not_inputs({"'-o' / '--output'": output}, {"the problem file": problem, "the solution file": solution})
    with handling("optsolve verify") as signals:
        try:
            with signals.raising():
                code = run_verify(problem, solution, output, quiet, oracle=oracle, operator=operator,
                                  parse_options=lambda kind: _verify_limit_options(kind, extra))
        except KeyboardInterrupt:
            sys.stderr.write(f"optsolve verify: interrupted ({signals.describe() or 'Ctrl-C'}); no report "
                             "written.\n")
            code = signals.exit_code or 130
    sys.exit(code)


def _limit_params(kind: str) -> list:
    """The solve command's options that set a limit of its certificate (its module's ``LIMITS``)."""
    from optsolve.core.registry import solver_module

    limits = getattr(solver_module(kind, "certificate"), "LIMITS", ())
    names = {lim.name for lim in limits}
    return [p for p in solver_module(kind, "cli").command.params if isinstance(p, click.Option) and p.name in names]


def _verify_limit_options(kind: str, args: list) -> dict:
    """Parse verify's limit options for a ``kind`` solution with the solve command's own option definitions."""
    params = _limit_params(kind)
    if not args:
        return {}
    cmd = click.Command(f"verify ({kind})", params=params, context_settings=CONTEXT_SETTINGS)
    try:
        sub = cmd.make_context(f"optsolve verify ({kind} solution)", list(args), resilient_parsing=False)
    except click.UsageError as exc:
        accepted = ", ".join(sorted(o for p in params for o in getattr(p, "public_opts", p.opts)
                                    if o.startswith("--"))) or "none"
        click.echo(f"optsolve verify: error: {exc.format_message()} (limit options of {kind} solutions: "
                   f"{accepted})", err=True)
        sys.exit(2)
    return {name: value for name, value in sub.params.items()
            if sub.get_parameter_source(name) == click.core.ParameterSource.COMMANDLINE}


# --------------------------------------------------------------------------- gen and batch

class PerKindGroup(LazyGroup):
    """A group with one subcommand per solver, built on demand by ``factory(kind)`` ("module:function")."""

    def __init__(self, *args, factory: str, **kwargs):
        super().__init__(*args, lazy=_kind_entries(), **kwargs)
        self.factory = factory

    def get_command(self, ctx, name):
        if name not in self.lazy:
            return None
        module, attr = self.factory.split(":")
        return getattr(importlib.import_module(module), attr)(name)


@click.group(cls=PerKindGroup, factory="optsolve.commands.gen:make_gen_command", context_settings=CONTEXT_SETTINGS)
def gen():
    """Generate a problem file: optsolve gen KIND --family NAME [options] --seed S -o FILE."""


@click.group(cls=PerKindGroup, factory="optsolve.commands.batch:make_batch_command", context_settings=CONTEXT_SETTINGS)
def batch():
    """Solve many problem files: optsolve batch KIND [solver options] FILES... [--jobs N] [--out-dir DIR].

    The solver options are those of `optsolve KIND`; each file is solved in a worker process.
    """


def run():
    """The ``optsolve`` program (its console script and ``python -m optsolve``)."""
    global _as_program
    _as_program = True
    if len(sys.argv) > 1 and sys.argv[1] in KINDS:  # a solve: a signal while it loads gets its document
        from optsolve.core.signals import hold

        hold()
    main()
