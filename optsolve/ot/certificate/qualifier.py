"""What an entropic answer states beside its status: the qualifier of a rounded Gibbs plan (its reg and the
certified LP gap), and verify's check of a document's qualifier against the recomputed checks."""

from __future__ import annotations

import math
import re

from optsolve.core.result import Certificate, Check

QUALIFIER_RTOL = 1e-2  # the qualifier writes its numbers to 3 significant digits
_NUMBER = re.compile(r"[-+]?(?:\d+\.?\d*|\.\d+)(?:e[-+]?\d+)?")


def qualifier(solution: dict, settings: dict | None, cert: Certificate) -> str:
    """What a rounded entropic plan answers, from its plan's ``reg`` and the certificate: ``entropic at reg R;
    LP gap <= G, P% of the cost`` (G = U - D, P = 100 G / U). Empty for an answer to the LP: an explicit plan,
    or a rounded one that claims a target gap (which ``gap_within_target_gap`` judges)."""
    spec = solution.get("plan") if isinstance(solution, dict) else None
    entropic = isinstance(spec, dict) and spec.get("format") == "gibbs_rounded" and spec.get("reg") is not None
    if not entropic or (settings or {}).get("target_gap") is not None:
        return ""
    gap, rel = (next((c.value for c in cert.checks if c.name == k), None) for k in ("gap_upper_bound", "relative_gap"))
    lp = "LP gap not certified" if gap is None else f"LP gap <= {gap:.3g}"
    if gap is not None and rel is not None:
        lp += f", {100 * rel:.3g}% of the cost"
    return f"entropic at reg {float(spec['reg']):.3g}; {lp}"


def _agrees(stated: str, expected: str) -> bool:
    """The same words, and numbers equal to :data:`QUALIFIER_RTOL` (the stated ones are rounded)."""
    got, want = _NUMBER.findall(stated), _NUMBER.findall(expected)
    return (_NUMBER.split(stated) == _NUMBER.split(expected) and len(got) == len(want)
            and all(math.isclose(float(x), float(y), rel_tol=QUALIFIER_RTOL) for x, y in zip(got, want)))


def qualifier_check(stated, solution: dict, settings: dict | None, cert: Certificate) -> Check | None:
    """The document's ``qualifier`` against :func:`qualifier` of the recomputed checks: a stated gap other than
    the certified one, or a qualifier on an answer to the LP, fails; a document that states none (null, or
    without the field) is reported, not judged; None where neither has one."""
    expected = qualifier(solution, settings, cert)
    if not stated:
        return None if not expected else Check.info("qualifier_matches", None,
                                                    f"the document states no qualifier; its answer: {expected}")
    ok = isinstance(stated, str) and _agrees(stated, expected)
    return Check.require("qualifier_matches", stated, ok, expected or "none: an answer to the LP",
                         "the qualifier the plan's reg and the recomputed gap U - D give")
