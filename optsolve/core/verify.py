"""``optsolve verify PROBLEM SOLUTION``: judge a solution document against the problem file.

The checks come from the solver package's ``certificate`` module, which recomputes
everything from the problem file and the solution document alone. The limits they are
judged against come from verify's own options (the solve command's names), the problem
file or the documented defaults, never from the document; the document's settings that are
limits are checked not to be looser, and its claimed status is judged. A certificate module with a
``qualifier_check(stated, solution, settings, certificate)`` also judges the document's ``qualifier``
against the recomputed checks.
"""

from __future__ import annotations

import sys

from optsolve.core.errors import InputError, OptsolveError, ParameterError
from optsolve.core.files import load_problem, parse_json, read_json_bytes
from optsolve.core.registry import available_kinds, solver_module, solver_package, user_function_owners
from optsolve.core.result import (SCHEMA_ID, VERIFICATION_SCHEMA_ID, Certificate, Check, Status, dumps,
                                  write_atomic)


def read_solution(path: str, stdin=None, *, answer: bool = True) -> dict:
    """A solution document, read within the memory budget and checked for its shape (not its claims):
    the one reader of solution documents (verify, ``--warm-start``, ``plot``, ``batch --resume``).
    ``answer``: it must hold a solution and settings (``plot`` reads histories, which need neither)."""
    label = "Solution on stdin" if path == "-" else f"Solution file {path!r}"
    try:
        if path == "-":
            data = read_json_bytes(stdin if stdin is not None else sys.stdin, label)
        else:
            with open(path, "rb") as fh:  # read as a stream: a device or a pipe has no size to check first
                data = read_json_bytes(fh, label)
    except FileNotFoundError:
        raise InputError(f"{label}: no such file.") from None
    except IsADirectoryError:
        raise InputError(f"{label}: is a directory, expected a file.") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot be read ({exc}).") from None
    doc = parse_json(data, label, what="an optsolve JSON document", strict=True)
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ID:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{label}: is not an optsolve solution document: expected 'schema' "
                         f"{SCHEMA_ID!r}, found {found!r}.")
    kinds = available_kinds()
    if doc.get("command") not in kinds:
        raise InputError(f"{label}: field 'command' is {doc.get('command')!r}, expected one of {', '.join(kinds)}.")
    if not answer:
        return doc
    if not isinstance(doc.get("solution"), dict):
        raise InputError(f"{label}: holds no solution to verify (status {doc.get('status')!r}: "
                         f"{doc.get('message') or 'no message'}).")
    if not isinstance(doc.get("settings"), dict):
        raise InputError(f"{label}: field 'settings' must be an object.")
    return doc


# Statuses that claim an answer: the certificate must establish them.
CLAIMING_STATUSES = ("optimal", "infeasible", "unbounded")


def resolve_limits(certificate_module, problem, options: dict | None = None) -> dict:
    """The limits verify judges against: ``{name: (value, source)}``, source ``option``, ``problem`` or ``default``.

    A limit comes from verify's own options, else from the problem file, else from the documented
    default; never from the document under test."""
    options = options or {}
    from_problem = {}
    if hasattr(certificate_module, "limits_from_problem"):
        from_problem = certificate_module.limits_from_problem(problem) or {}
    out = {}
    for lim in certificate_module.LIMITS:
        if options.get(lim.name) is not None:
            out[lim.name] = (options[lim.name], "option")
        elif from_problem.get(lim.name) is not None:
            out[lim.name] = (from_problem[lim.name], "problem")
        else:
            out[lim.name] = (lim.default, "default")
    return out


def settings_checks(certificate_module, settings: dict, limits: dict) -> list[Check]:
    """One check per limit the document records: it fails when the document's value is looser."""
    checks = []
    for lim in certificate_module.LIMITS:
        if lim.name not in settings or settings[lim.name] is None:
            continue
        claimed = settings[lim.name]
        used, source = limits[lim.name]
        looser = lim.is_looser(claimed, used)
        where = {"option": f"given as {lim.option}", "problem": "from the problem file",
                 "default": "the documented default"}[source]
        note = (f"the solution's settings.{lim.name} = {claimed!r} against the limit verify uses, "
                f"{used!r} ({where})")
        if looser:
            given = lim.option if isinstance(claimed, bool) else f"{lim.option} {claimed!r}"
            note += f"; it is looser: verify with {given} to judge it by its own setting"
        checks.append(Check(f"setting_{lim.name}", claimed if not isinstance(claimed, (dict, list)) else str(claimed),
                            used if used is not None else "not looser", not looser, note))
    return checks


def status_check(certificate_module, claimed, checks: list[Check]) -> Check:
    """Judge the claimed status: a claim of an answer needs the checks that establish it."""
    claimable = getattr(certificate_module, "CLAIMS", ("optimal",))
    if claimed not in {s.value for s in Status}:
        return Check.require("status_claim", claimed, False, "a status of optsolve's vocabulary",
                             f"{claimed!r} is not one of {', '.join(s.value for s in Status)}")
    if claimed not in CLAIMING_STATUSES:
        return Check.info("status_claim", claimed, "this status claims no answer; the checks are reported as they are")
    if claimed not in claimable:
        return Check.require("status_claim", claimed, False, "a status this command can certify",
                             f"a {claimed!r} claim has no certificate for this command (it certifies "
                             f"{', '.join(claimable)})")
    judged = [c for c in checks if c.holds is not None]
    ok = bool(judged) and all(c.holds for c in judged)
    return Check.require("status_claim", claimed, ok, f"every check of the {claimed} claim holds",
                         "" if ok else f"the checks that establish {claimed!r} do not all hold")


def verify_document(problem_path: str, doc: dict, stdin=None, oracle: str | None = None,
                    operator: str | None = None, options: dict | None = None) -> tuple[Certificate, dict]:
    """Check a solution document against a problem file: the certificate and a report.

    ``options``: verify's own limits (the solve command's option names, ``{"eps_abs": 1e-4}``);
    ``oracle``: the membership function (``module:function``) of a truncated solution computed with
    one; ``operator``: the user operator of an mvi solution."""
    kind = doc["command"]
    pkg = solver_package(kind)
    certificate_module = solver_module(kind, "certificate")
    extra = {name: value for name, value in (("oracle", oracle), ("operator", operator)) if value}
    for name in extra:  # a user function goes to a certificate that takes it (its module's USER_FUNCTIONS)
        if name not in getattr(certificate_module, "USER_FUNCTIONS", ()):
            owners = " and ".join(user_function_owners(name))
            raise ParameterError(f"The '--{name}' option applies to {owners} solutions; this one is {kind!r}.")
    problem = load_problem(problem_path, pkg.SCHEMA, stdin=stdin, log=False)
    sha = problem.sha256
    settings = doc["settings"]
    claimed = doc.get("status")
    limits = resolve_limits(certificate_module, problem, options)
    try:
        cert = certificate_module.check(problem, doc["solution"], method=doc.get("method"),
                                        objective=doc.get("objective"), settings=settings,
                                        limits={k: v for k, (v, _) in limits.items()}, status=claimed, **extra)
    except (KeyError, TypeError, ValueError, IndexError, AttributeError, OverflowError) as exc:
        raise InputError(f"Solution document: its 'solution' does not fit problem {problem_path!r} "
                         f"({type(exc).__name__}: {exc}).") from None
    if hasattr(certificate_module, "qualifier_check"):  # the document's qualifier against the checks' values
        stated = certificate_module.qualifier_check(doc.get("qualifier"), doc["solution"], settings, cert)
        cert.checks += [stated] if stated is not None else []
    cert.checks[:0] = settings_checks(certificate_module, settings, limits)
    claimed_sha = (doc.get("problem") or {}).get("sha256")
    cert.checks.insert(0, Check.require("problem_sha256_matches", claimed_sha, claimed_sha == sha,
                                        "the sha256 of the problem file",
                                        "" if claimed_sha == sha else
                                        f"solution was computed for {str(claimed_sha)[:12]}..., this file is "
                                        f"{sha[:12]}..."))
    cert.checks.append(status_check(certificate_module, claimed, cert.checks))
    report = {
        "schema": VERIFICATION_SCHEMA_ID,
        "command": kind,
        "method": doc.get("method"),
        "claimed_status": claimed,
        "problem": {"path": problem.path, "sha256": sha},
        "holds": cert.holds,
        "limits": {k: {"value": v, "source": src} for k, (v, src) in limits.items()},
        "reported_settings": {k: v for k, v in settings.items() if k not in limits},
        "problem_warnings": list(problem.warnings),
        "checks": [c.to_dict() for c in cert.checks],
    }
    return cert, report


def run_verify(problem: str, solution: str, output: str, quiet: bool, oracle: str | None = None,
               operator: str | None = None, parse_options=None) -> int:
    """The body of ``optsolve verify``. ``parse_options(kind)``: verify's limit options for a solution of
    that command (``{name: value}`` of those given), read once the document names its command."""
    if problem == "-" and solution == "-":
        sys.stderr.write("optsolve verify: error: PROBLEM and SOLUTION cannot both be read from stdin.\n")
        return 2
    try:
        doc = read_solution(solution)
        options = parse_options(doc["command"]) if parse_options else None
        cert, report = verify_document(problem, doc, oracle=oracle, operator=operator, options=options)
    except OptsolveError as exc:
        sys.stderr.write(f"optsolve verify: {exc.status}: {' '.join(str(exc).split())}\n")
        return exc.exit_code
    except MemoryError:
        sys.stderr.write("optsolve verify: invalid_input: checking this solution needs more memory than this "
                         "machine has.\n")
        return Status.INVALID_INPUT.exit_code
    except Exception as exc:  # a bug: one line, the traceback only with -v in the solve commands' log
        import traceback

        from optsolve.core.progress import get_logger

        get_logger().debug("".join(traceback.format_exc()))
        sys.stderr.write(f"optsolve verify: internal_error: {type(exc).__name__}: {exc}\n")
        return Status.INTERNAL_ERROR.exit_code
    from optsolve.core.result import to_jsonable

    text = dumps(to_jsonable(report)) + "\n"
    if output in (None, "-"):
        sys.stdout.write(text)
    else:
        write_atomic(output, text)
    if cert.holds:
        if not quiet:
            sys.stderr.write(f"optsolve verify: every check holds ({len(cert.checks)} checks).\n")
        return 0
    sys.stderr.write(f"optsolve verify: checks fail: {cert.describe_failures()}\n")
    return 6
