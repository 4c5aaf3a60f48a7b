"""What a solve command prints on a terminal: a few lines a person reads, instead of the document.

A solve whose stdout is a terminal and that has no ``-o`` prints this view; ``-o -`` prints the
JSON document there anyway, and a pipe or a file always gets the document.
"""

from __future__ import annotations

SHOWN = 4  # a list of at most this many plain values is shown whole, a longer one by its length
DEPTH = 2  # nested mappings deeper than this are shown as {...}


def _scalar(v, digits: int = 6) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:.{digits}g}"
    return str(v)


def brief(v, depth: int = 0, digits: int = 6) -> str:
    """One line for a document value: numbers to ``digits`` significant digits, long lists by their length."""
    if isinstance(v, dict):
        if depth >= DEPTH:
            return "{...}"
        return "{" + ", ".join(f"{k} {brief(x, depth + 1, digits)}" for k, x in v.items()) + "}"
    if isinstance(v, list):
        if len(v) <= SHOWN and not any(isinstance(x, (dict, list)) for x in v):
            return "[" + ", ".join(_scalar(x, digits) for x in v) + "]"
        return f"[{len(v)} {'entries' if any(isinstance(x, (dict, list)) for x in v) else 'values'}]"
    return _scalar(v, digits)


def _certificate(cert: dict | None) -> str:
    if cert is None:
        return "none"
    checks = cert.get("checks") or []
    if cert.get("holds"):
        return f"holds ({len(checks)} checks)"
    failed = [c for c in checks if c.get("holds") is False]
    if not failed:
        return "does not hold (no check could be judged)"
    return "fails: " + ", ".join(f"{c.get('name')} {_scalar(c.get('value'))} (limit {_scalar(c.get('limit'))})"
                                 for c in failed)


def terminal_view(doc: dict) -> str:
    """The view of a solution document (:meth:`optsolve.core.result.Result.to_dict`)."""
    head = f"optsolve {doc.get('command')}: {doc.get('status')}"
    said = [str(v) for v in (doc.get("method"), doc.get("qualifier")) if v]
    if said:
        head += f" ({': '.join(said)})"
    if doc.get("objective") is not None:
        head += f", objective {doc['objective']:.10g}"
    lines = [head]
    if doc.get("message"):
        lines.append(f"message: {doc['message']}")
    problem = doc.get("problem") or {}
    if problem.get("path"):
        size = problem.get("size") or {}
        lines.append(f"problem: {problem['path']}" + (f" ({brief(size)[1:-1]})" if size else ""))
    lines.append(f"certificate: {_certificate(doc.get('certificate'))}")
    solution = doc.get("solution")
    if solution:
        lines.append("solution:")
        lines += [f"  {k}: {brief(v)}" for k, v in solution.items()]
    stats = doc.get("stats") or {}
    plain = {k: v for k, v in stats.items() if not isinstance(v, (dict, list)) and k != "time_s"}
    if plain:
        lines.append("stats: " + brief(plain)[1:-1])
    times = stats.get("time_s") or {}
    if times:
        lines.append("time (s): " + brief(times, digits=3)[1:-1])
    arrays = doc.get("arrays") or {}
    if arrays.get("path"):
        lines.append(f"arrays: {arrays['path']}")
    lines.append("The whole document (solution, certificate checks, statistics, settings): -o FILE, "
                 "or -o - to print it here.")
    return "\n".join(lines)
