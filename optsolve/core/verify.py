"""``optsolve verify PROBLEM SOLUTION``: re-run a solution's certificate checks.

The checks come from the solver package's ``certificate`` module, which recomputes
everything from the problem file and the solution document alone.
"""

from __future__ import annotations

import json
import sys

from optsolve.core.errors import InputError, OptsolveError, ParameterError
from optsolve.core.problem import file_label, read_raw
from optsolve.core.registry import available_kinds, solver_module, solver_package
from optsolve.core.result import SCHEMA_ID, VERIFICATION_SCHEMA_ID, Certificate, Check, dumps, write_atomic


def read_solution(path: str, stdin=None) -> dict:
    label = "Solution on stdin" if path == "-" else f"Solution file {path!r}"
    try:
        if path == "-":
            stream = stdin if stdin is not None else sys.stdin
            text = stream.read()
        else:
            with open(path, encoding="utf-8") as fh:
                text = fh.read()
    except FileNotFoundError:
        raise InputError(f"{label}: no such file.") from None
    except IsADirectoryError:
        raise InputError(f"{label}: is a directory, expected a file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"{label}: cannot be read ({exc}).") from None
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    if not text.strip():
        raise InputError(f"{label}: is empty; expected an optsolve JSON document.")
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"{label}: invalid JSON at line {exc.lineno} column {exc.colno}: {exc.msg}.") from None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA_ID:
        found = doc.get("schema") if isinstance(doc, dict) else type(doc).__name__
        raise InputError(f"{label}: is not an optsolve solution document: expected 'schema' "
                         f"{SCHEMA_ID!r}, found {found!r}.")
    kinds = available_kinds()
    if doc.get("command") not in kinds:
        raise InputError(f"{label}: field 'command' is {doc.get('command')!r}, expected one of {', '.join(kinds)}.")
    if not isinstance(doc.get("solution"), dict):
        raise InputError(f"{label}: holds no solution to verify (status {doc.get('status')!r}: "
                         f"{doc.get('message') or 'no message'}).")
    if not isinstance(doc.get("settings"), dict):
        raise InputError(f"{label}: field 'settings' must be an object.")
    return doc


def verify_document(problem_path: str, doc: dict, stdin=None, oracle: str | None = None,
                    operator: str | None = None) -> tuple[Certificate, dict]:
    """Check a solution document against a problem file: the certificate and a report. ``oracle``:
    the membership function (``module:function``) of a truncated solution computed with one;
    ``operator``: the user operator of an mvi solution."""
    kind = doc["command"]
    extra = {}
    for name, value, owner in (("oracle", oracle, "truncated"), ("operator", operator, "mvi")):
        if value:
            if kind != owner:
                raise ParameterError(f"The '--{name}' option applies to {owner} solutions; this one is {kind!r}.")
            extra[name] = value
    pkg = solver_package(kind)
    raw, sha = read_raw(problem_path, stdin=stdin)
    problem = pkg.SCHEMA.validate(raw, source=file_label(problem_path),
                                  path=None if problem_path == "-" else problem_path, sha256=sha)
    certificate_module = solver_module(kind, "certificate")
    try:
        cert = certificate_module.check(problem, doc["solution"], method=doc.get("method"),
                                        objective=doc.get("objective"), settings=doc["settings"], **extra)
    except (KeyError, TypeError, ValueError, IndexError) as exc:
        raise InputError(f"Solution document: its 'solution' does not fit problem {problem_path!r} "
                         f"({type(exc).__name__}: {exc}).") from None
    claimed = (doc.get("problem") or {}).get("sha256")
    if claimed:
        cert.checks.insert(0, Check("problem_sha256_matches", claimed == sha, None, claimed == sha,
                                    "" if claimed == sha else f"solution was computed for {claimed[:12]}..., "
                                    f"this file is {sha[:12]}..."))
    report = {
        "schema": VERIFICATION_SCHEMA_ID,
        "command": kind,
        "method": doc.get("method"),
        "claimed_status": doc.get("status"),
        "problem": {"path": problem.path, "sha256": sha},
        "holds": cert.holds,
        "checks": [c.to_dict() for c in cert.checks],
    }
    return cert, report


def run_verify(problem: str, solution: str, output: str, quiet: bool, oracle: str | None = None,
               operator: str | None = None) -> int:
    if problem == "-" and solution == "-":
        sys.stderr.write("optsolve verify: error: PROBLEM and SOLUTION cannot both be read from stdin.\n")
        return 2
    try:
        doc = read_solution(solution)
        cert, report = verify_document(problem, doc, oracle=oracle, operator=operator)
    except OptsolveError as exc:
        sys.stderr.write(f"optsolve verify: {exc.status}: {' '.join(str(exc).split())}\n")
        return exc.exit_code
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
