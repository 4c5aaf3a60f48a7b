"""Problem files of ``optsolve mvi`` and generators of its benchmark families.

A problem file names an operator of the library (:mod:`optsolve.mvi.operators`) as key
``operator`` with its parameters: ``a``, ``b`` (polar, lower-bound), ``L`` and ``rho``
(quadratic-game, where they define the game), ``c`` (bilinear), ``M`` and ``q`` (affine, M
dense or sparse), ``A``, ``B``, ``C`` and ``q`` (minimax-quadratic). The constraint set is
``constraint``: ``none``, ``box`` (``lo`` and ``hi``, or ``radius`` about ``center``) or
``ball`` (``radius`` about ``center``); left out, the operator's library default. Optional:
the start ``z0`` (the library's start by default; projected onto C with a warning when it
lies outside), ``L`` and ``rho`` (a Lipschitz constant and the weak-MVI constant; the library
knows them for its fixed games), and a known solution ``z_star``. A user operator is named
on the command line (``--operator module:function``) and then ``operator`` may be left out.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from optsolve.core import memory
from optsolve.core.generate import Family, Param
from optsolve.core.problem import Field, Problem, Schema
from optsolve.mvi import operators as ops

CONSTRAINTS = ("none", "box", "ball")

# operator -> (dimension or None, its parameter keys with defaults, default constraint, default z0)
LIBRARY = {
    "polar": (2, {"a": 1.0, "b": 1.0}, ("box", 1.1), (1.0, 0.5)),
    "forsaken": (2, {}, ("box", 1.5), (1.0, -0.8)),
    "global-forsaken": (2, {}, ("ball", 4.0 / 3.0), (1.2, 1.2)),
    "lower-bound": (2, {"a": 2 * math.sqrt(2), "b": -1.0}, ("none", None), (1.0, 0.5)),
    "quadratic-game": (2, {"L": None, "rho": None}, ("none", None), (1.0, 0.5)),
    "bilinear": (None, {"c": 0.9}, ("box", 1.0), 0.0),
    "affine": (None, {"M": None, "q": None}, ("none", None), 0.0),
    "minimax-quadratic": (None, {"A": None, "B": None, "C": None}, ("none", None), 0.0),
}
BLOCK_KEYS = ("M", "q", "A", "B", "C")
# Vectors of length d a solve may hold at once: iterates, ecppa's halfspaces (and its combined step),
# the Lanczos basis of ||M||; checked against the memory budget before the first is allocated.
WORK_VECTORS = 128


def _rules(problem: Problem) -> None:
    name = problem.get("operator")
    if problem.dims.get("d") == 0 or (name == "minimax-quadratic" and "A" in problem and "C" in problem
                                      and problem["A"].shape[0] + problem["C"].shape[0] == 0):
        key = problem.dim_origin.get("d")
        origin = f"array {key[0]!r} has shape {key[1]}" if isinstance(key, tuple) else "'A' and 'C' are empty"
        raise problem.error(f"the problem has dimension d = 0 ({origin}): a variational inequality needs "
                            "at least one variable.")
    if name is None:
        return  # a user operator (checked when it is loaded)
    dim, params, _, _ = LIBRARY[name]
    for key in ("a", "b", "c", *BLOCK_KEYS):
        if key in problem and key not in params and not (key == "q" and name == "minimax-quadratic"):
            problem.warnings.append(f"key {key!r} does not apply to operator {name!r}; ignored.")
    for key, default in params.items():
        if default is None and key not in problem:
            raise problem.error(f"operator {name!r} needs key {key!r} ({SCHEMA.field(key).describe()}).")
    if name == "quadratic-game":
        L, rho = problem["L"], problem["rho"]
        if not L > 0:
            raise problem.error(f"key 'L' of the quadratic game must be positive; found {L!r}.")
        if abs(rho) * L > 1:
            raise problem.error(f"the quadratic game needs |rho| <= 1/L = {1 / L:.6g}; found rho = {rho!r} "
                                f"(rho L = {rho * L:.4g}).")
    d = problem.dims.get("d")
    if name == "minimax-quadratic":
        nx, ny = problem["A"].shape[0], problem["C"].shape[0]
        if problem["B"].shape != (nx, ny):
            raise problem.error(f"array 'B' has shape {problem['B'].shape}, expected ({nx}, {ny}) to match 'A' "
                                f"({nx}, {nx}) and 'C' ({ny}, {ny}).")
        if d is not None and d != nx + ny:
            raise problem.error(f"the vectors have length {d}; the blocks give d = {nx} + {ny} = {nx + ny}.")
    if dim is not None and d is not None and d != dim:
        raise problem.error(f"operator {name!r} acts on R^{dim}; the vectors ({problem.dim_origin.get('d', 'z0')}) "
                            f"have length {d}.")
    if name == "bilinear" and d is not None and d % 2:
        raise problem.error(f"operator 'bilinear' needs an even dimension (x and y of equal length); found d = {d}.")


def _constraint_rules(problem: Problem) -> None:
    kind = problem.get("constraint")
    if kind == "box" and ("lo" in problem) != ("hi" in problem):
        raise problem.error("a box needs both 'lo' and 'hi' (or 'radius' and optionally 'center').")
    if kind == "box" and "lo" in problem and np.any(problem["lo"] > problem["hi"]):
        i = int(np.argmax(problem["lo"] > problem["hi"]))
        raise problem.error(f"the box is empty: lo[{i}] = {problem['lo'][i]:g} > hi[{i}] = {problem['hi'][i]:g}.")
    if kind == "ball" and ("lo" in problem or "hi" in problem):
        raise problem.error("a ball is given by 'radius' and 'center'; 'lo' and 'hi' describe a box.")
    if kind in ("box", "ball") and "radius" not in problem and "lo" not in problem \
            and LIBRARY.get(problem.get("operator"), (0, 0, ("none",)))[2][0] != kind:
        raise problem.error(f"constraint {kind!r} needs key 'radius'" + (" (or 'lo' and 'hi')." if kind == "box" else "."))


SCHEMA = Schema(
    name="mvi",
    fields=(
        Field("operator", kind="string", required=False, choices=ops.LIBRARY,
              doc="the library operator (left out with --operator module:function)"),
        Field("a", kind="scalar", required=False, doc="polar: cycle strength; lower-bound: coupling"),
        Field("b", kind="scalar", required=False, doc="polar: rotation; lower-bound: curvature"),
        Field("c", kind="scalar", required=False, doc="bilinear: the shift (solution z = c)"),
        Field("M", shape=("d", "d"), sparse=True, required=False, doc="affine: F = M z + q"),
        Field("q", shape=("d",), required=False, doc="affine and minimax-quadratic: the constant term"),
        Field("A", shape=("nx", "nx"), sparse=True, required=False, doc="minimax-quadratic: x block"),
        Field("B", shape=("nx", "ny"), sparse=True, required=False, doc="minimax-quadratic: coupling"),
        Field("C", shape=("ny", "ny"), sparse=True, required=False, doc="minimax-quadratic: y block"),
        Field("constraint", kind="string", required=False, choices=CONSTRAINTS,
              doc="none, box or ball (default: the operator's)"),
        Field("lo", shape=("d",), required=False, doc="box: lower bounds"),
        Field("hi", shape=("d",), required=False, doc="box: upper bounds"),
        Field("center", shape=("d",), required=False, doc="box or ball: the centre (default 0)"),
        Field("radius", kind="scalar", required=False, nonneg=True,
              doc="box (half-width) or ball radius (0: the single point 'center')"),
        Field("z0", shape=("d",), required=False, doc="the start"),
        Field("L", kind="scalar", required=False, positive=True, doc="a Lipschitz constant of F on C"),
        Field("rho", kind="scalar", required=False, doc="the weak-MVI constant"),
        Field("z_star", shape=("d",), required=False, doc="a known solution (benchmarks)"),
    ),
    rules=(_rules, _constraint_rules),
    marks=("operator",),  # no key is required (a user operator needs none); the library's name marks a file
)


@dataclass
class MVIProblem:
    op: ops.Operator
    C: ops.ConstraintSet
    z0: np.ndarray
    L: float | None
    rho: float | None
    z_star: np.ndarray | None
    notes: list = field(default_factory=list)

    @property
    def d(self) -> int:
        return self.op.d


@functools.lru_cache(maxsize=32)
def polar_constants(a: float, b: float, half_width: float) -> tuple[float | None, float | None]:
    """(L, rho) of the polar game on the box [-w, w]^2: the largest ||JF|| and the smallest
    <F(z), z> / ||F(z)||^2 over a 1201 x 1201 grid (z* = 0); None for one that is not finite (a box
    so large that F overflows) or not defined (F = 0 on the whole grid, as on the box w = 0)."""
    with np.errstate(all="ignore"):
        L, rho = _polar_grid(a, b, half_width)
    return (L if math.isfinite(L) else None), (rho if rho is not None and math.isfinite(rho) else None)


def _polar_grid(a: float, b: float, half_width: float) -> tuple[float, float | None]:
    x = np.linspace(-half_width, half_width, 1201)
    X, Y = np.meshgrid(x, x)
    r2 = X * X + Y * Y
    psi = a / 16 * (r2 - 1) * (16 * r2 - 9)
    g = a / 8 * (32 * r2 - 25)
    j11, j12, j21, j22 = psi + g * X * X, -b + g * X * Y, b + g * X * Y, psi + g * Y * Y
    fro = j11 ** 2 + j12 ** 2 + j21 ** 2 + j22 ** 2
    det = j11 * j22 - j12 * j21
    L = float(np.sqrt(0.5 * (fro + np.sqrt(np.maximum(fro * fro - 4 * det * det, 0)))).max())
    F1, F2 = -b * Y + psi * X, b * X + psi * Y
    den = F1 * F1 + F2 * F2
    ok = den > 0
    rho = float(((F1 * X + F2 * Y)[ok] / den[ok]).min()) if ok.any() else None
    return L, rho


def constraint_of(problem: Problem, name: str | None, d: int) -> ops.ConstraintSet:
    default_kind, default_radius = LIBRARY[name][2] if name else ("none", None)
    kind = problem.get("constraint", default_kind)
    if kind == "none":
        return ops.ConstraintSet("none")
    center = np.asarray(problem.get("center", np.zeros(d)), dtype=float)
    if kind == "box":
        if "lo" in problem:
            return ops.ConstraintSet("box", lo=np.asarray(problem["lo"], float), hi=np.asarray(problem["hi"], float))
        r = problem.get("radius", default_radius)
        return ops.ConstraintSet("box", lo=center - r, hi=center + r)
    return ops.ConstraintSet("ball", center=center, radius=float(problem.get("radius", default_radius)))


def _dimension(problem: Problem, name: str | None, user_d: int | None) -> int:
    if "d" in problem.dims:
        return int(problem.dims["d"])
    if name == "minimax-quadratic":
        return problem["A"].shape[0] + problem["C"].shape[0]
    if name is not None and LIBRARY[name][0]:
        return LIBRARY[name][0]
    if name == "bilinear":
        return 2
    if user_d:
        return user_d
    raise problem.error("the dimension is not known: give the start 'z0' (a vector of length d).")


def library_operator(problem: Problem, name: str, d: int, constants: bool = True,
                     deadline: float | None = None) -> ops.Operator:
    params = {k: problem.get(k, default) for k, default in LIBRARY[name][1].items()}
    if name == "polar":
        op = ops.polar(params["a"], params["b"])
        C = constraint_of(problem, name, 2)
        if C.kind == "box" and np.allclose(C.lo, C.lo[0]) and np.allclose(C.hi, -C.lo[0]):
            op.L, op.rho = polar_constants(float(params["a"]), float(params["b"]), float(C.hi[0]))
        return op
    if name == "forsaken":
        return ops.forsaken()
    if name == "global-forsaken":
        return ops.global_forsaken()
    if name == "lower-bound":
        return ops.linear_game(params["a"], params["b"], "lower-bound")
    if name == "quadratic-game":
        return ops.quadratic_game(params["L"], params["rho"])
    if name == "bilinear":
        return ops.bilinear(d, params["c"])
    if name == "affine":
        M = problem["M"]
        if getattr(M, "format", "csr") != "csr":  # a CSC (MATLAB's) or COO file: products by rows, gathering
            M = M.tocsr()
        op = ops.affine(M, np.asarray(problem["q"], dtype=float), norm=problem.get("L"))
    else:
        blocks = (problem["A"], problem["B"], problem["C"])
        if any(hasattr(X, "nnz") for X in blocks):
            nbytes = 32 * (blocks[0].size + 2 * blocks[1].size + blocks[2].size) + 8 * (d + 1)
        else:
            nbytes = 8.0 * d * d
        memory.require(problem.source, f"the matrix M = [[A, B], [-B', C]] of the operator (d = {d})", nbytes)
        M = ops.minimax_matrix(*blocks)
        op = ops.affine(M, np.asarray(problem.get("q", np.zeros(d)), dtype=float), norm=problem.get("L"))
        op.name = "minimax-quadratic"
    if constants:
        affine_constants(op, problem, deadline)
    return op


def affine_constants(op: ops.Operator, problem: Problem, deadline: float | None = None) -> None:
    """||M|| and lambda_min(sym(M^-1)) of an affine operator into op.L and op.rho, unless the file gives them
    (a note on op where ||M|| was not found before ``deadline``)."""
    M, d = op.matrix, op.d
    op.L = problem["L"] if "L" in problem else op.jacobian_norm(None, deadline)
    if op.L is None:
        op.notes.append("||M|| was not computed within its share of the time limit: the step comes from secants")
    if "rho" in problem:
        op.rho = problem["rho"]
    elif 24.0 * d * d <= memory.budget_bytes():  # M^-1 and its symmetric part, dense
        op.rho = ops.weak_mvi_of_affine(M, deadline)


def with_constants(mp: MVIProblem, problem: Problem, *, lipschitz: float | None = None, rho: float | None = None,
                   deadline: float | None = None) -> MVIProblem:
    """``mp``, prepared with ``constants=False``, as :func:`prepare` with them would give it: L and rho of its
    affine operator computed where the file and the options lack them (any other operator: ``mp`` itself)."""
    op = mp.op
    if op.matrix is None or op.user:
        return mp
    before = len(op.notes)
    affine_constants(op, problem, deadline)
    L, r = _constants(problem, op, lipschitz, rho)
    return dataclasses.replace(mp, L=L, rho=r, notes=mp.notes + op.notes[before:])


def _constants(problem: Problem, op: ops.Operator, lipschitz, rho) -> tuple[float | None, float | None]:
    """(L, rho): the options', else the file's, else the operator's; None where not finite (or L not positive)."""
    L = lipschitz if lipschitz is not None else problem.get("L", op.L)
    if L is not None and not (L > 0 and math.isfinite(L)):  # ||M|| = 0 (F constant) or an overflow
        L = None
    r = rho if rho is not None else problem.get("rho", op.rho)
    if r is not None and not math.isfinite(r):
        r = None
    return None if L is None else float(L), None if r is None else float(r)


def prepare(problem: Problem, operator: str | None = None, *, lipschitz: float | None = None,
            rho: float | None = None, constants: bool = True, deadline: float | None = None) -> MVIProblem:
    """The operator, set, start and constants of a validated problem (and ``--operator``,
    ``--lipschitz``, ``--rho`` from the command line, which take precedence); ``constants``:
    compute L and rho of an affine operator whose file lacks them (False: leave them unknown),
    within ``deadline`` (a time.perf_counter value; a constant not found by then stays unknown).
    Refuses (exit 7) a dimension whose working vectors exceed the memory budget."""
    name = problem.get("operator")
    if operator is None and name is None:
        raise problem.error("no operator: give key 'operator' (one of " + ", ".join(ops.LIBRARY)
                            + "), or name one with '--operator module:function'.")
    notes = []
    if operator is not None:
        if name is not None:
            notes.append(f"the operator {operator!r} from the command line replaces the file's {name!r}")
        name = None
    d = _dimension(problem, name, None)
    if d < 1:
        raise problem.error(f"the problem has dimension d = {d}: a variational inequality needs at least one "
                            "variable.")
    memory.require(problem.source, f"the solve's working memory ({WORK_VECTORS} vectors of length d = {d})",
                   WORK_VECTORS * 8.0 * d)
    op = ops.load_user(operator, d) if operator else library_operator(problem, name, d, constants, deadline)
    C = constraint_of(problem, name, d)
    z0_default = LIBRARY[name][3] if name else 0.0
    z0 = np.array(problem.get("z0", np.broadcast_to(np.asarray(z0_default, dtype=float), (d,))), dtype=float)
    if C.violation(z0) > 0:
        moved = C.project(z0)
        if "z0" in problem:
            problem.warnings.append(f"the start z0 lies {C.violation(z0):.3g} outside {C.describe()}; it was "
                                    "projected onto it.")
        z0 = moved
    if operator:
        try:
            Fz = op.F(z0)
        except Exception as exc:  # the user's function
            from optsolve.core.errors import InputError

            raise InputError(f"The '--operator {operator}' function failed at z0 ({type(exc).__name__}: {exc}).") from None
        if Fz.shape != (d,):
            from optsolve.core.errors import InputError

            raise InputError(f"The '--operator {operator}' function returned shape {Fz.shape} at z0; expected ({d},).")
        if op.batch is not None:
            _check_batch(op, operator, z0)
    L, r = _constants(problem, op, lipschitz, rho)
    z_star = problem.get("z_star", op.z_star)
    notes.extend(op.notes)
    return MVIProblem(op, C, z0, L, r, None if z_star is None else np.asarray(z_star, dtype=float), notes)


def _check_batch(op: ops.Operator, operator: str, z0: np.ndarray) -> None:
    """A user operator's sampled terms answer at z0 with a vector of length d (its first and last term)."""
    from optsolve.core.errors import InputError

    idx = np.array(sorted({0, op.terms - 1}), dtype=np.int64)
    try:
        Fb = op.batch(z0, idx)
    except Exception as exc:  # the user's function
        raise InputError(f"The '--operator {operator}' batch function failed at z0 with terms {idx.tolist()} "
                         f"({type(exc).__name__}: {exc}).") from None
    if Fb.shape != (op.d,):
        raise InputError(f"The '--operator {operator}' batch function returned shape {Fb.shape} at z0; "
                         f"expected ({op.d},).")


REORDER_FROM = 50_000  # a sparse affine operator from this dimension on is renumbered (reverse Cuthill-McKee) ...
REORDER_SPREAD = 4096  # ... when its nonzeros lie a median distance |i - j| above this from the diagonal
REORDER_SAMPLE = 4096  # rows whose nonzeros measure that distance


def reordered(mp: MVIProblem) -> tuple[MVIProblem, np.ndarray | None]:
    """The problem renumbered for locality where its operator is a sparse M whose products gather
    entries of z from far apart (a product then waits on memory for most entries), and the order:
    the renumbered problem's z is the original's z[order]. (mp, None) where it is kept.

    Reverse Cuthill-McKee (scipy.sparse.csgraph) on the pattern of M + M' puts the nonzeros near the
    diagonal; the variational inequality is the same in any numbering (a box or ball renumbers with z)."""
    import scipy.sparse as sp
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    M = mp.op.matrix
    if M is None or not sp.issparse(M) or mp.d < REORDER_FROM or 2 * (12.0 * M.nnz + 8.0 * mp.d) > memory.budget_bytes():
        return mp, None  # (the renumbered copy, and its intermediate, would not fit the memory budget)
    M = M.tocsr()
    rows = min(REORDER_SAMPLE, mp.d)
    start = (mp.d - rows) // 2  # rows from the middle: the distance there is no edge effect
    lo, hi = M.indptr[start], M.indptr[start + rows]
    if hi == lo:
        return mp, None
    owner = np.repeat(np.arange(start, start + rows), np.diff(M.indptr[start:start + rows + 1]))
    if float(np.median(np.abs(M.indices[lo:hi] - owner))) <= REORDER_SPREAD:
        return mp, None
    order = reverse_cuthill_mckee(M, symmetric_mode=False)
    Mp = M[order][:, order].tocsr()
    op = mp.op
    q = op.F(np.zeros(mp.d))  # F(0) = q
    new = ops.affine(Mp, q[order], norm=op.norm)
    new.name, new.L, new.rho, new.notes = op.name, op.L, op.rho, op.notes
    C = mp.C
    if C.kind == "box":
        C = ops.ConstraintSet("box", lo=C.lo[order], hi=C.hi[order])
    elif C.kind == "ball":
        C = ops.ConstraintSet("ball", center=C.center[order], radius=C.radius)
    z_star = None if mp.z_star is None else mp.z_star[order]
    return MVIProblem(new, C, mp.z0[order], mp.L, mp.rho, z_star, mp.notes), order


# --------------------------------------------------------------------------- generators


def _library_file(name: str, **extra) -> dict:
    dim, params, (kind, radius), z0 = LIBRARY[name]
    data = {"operator": name}
    data.update({k: v for k, v in extra.items() if v is not None})
    data["constraint"] = kind
    if radius is not None:
        data["radius"] = radius
    return data


def gen_polar(rng, a=1.0):
    data = _library_file("polar", a=a, b=1.0)
    data.update(z0=np.array([1.0, 0.5]), z_star=np.zeros(2))
    return data


def gen_forsaken(rng):
    return dict(_library_file("forsaken"), z0=np.array([1.0, -0.8]))


def gen_global_forsaken(rng):
    z0 = np.array([1.2, 1.2])
    z0 *= (4 / 3) / np.linalg.norm(z0)  # the library start, projected onto the ball
    return dict(_library_file("global-forsaken"), z0=z0, z_star=np.zeros(2))


def gen_lower_bound(rng, box=0.0):
    data = {"operator": "lower-bound", "a": 2 * math.sqrt(2), "b": -1.0, "z0": np.array([1.0, 0.5]),
            "z_star": np.zeros(2), "constraint": "none"}
    if box:
        data.update(constraint="box", radius=float(box))
    return data


def gen_quadratic_game(rng, L=1.0, rho=-0.5, box=0.0):
    if abs(rho) * L > 1:
        raise ValueError(f"the quadratic game needs |rho| <= 1/L = {1 / L:g}; got rho = {rho:g}.")
    data = {"operator": "quadratic-game", "L": float(L), "rho": float(rho), "z0": np.array([1.0, 0.5]),
            "z_star": np.zeros(2), "constraint": "none"}
    if box:
        data.update(constraint="box", radius=float(box))
    return data


def gen_bilinear(rng, d=2):
    if d % 2:
        raise ValueError(f"the bilinear game needs an even dimension; got d = {d}.")
    return {"operator": "bilinear", "c": 0.9, "constraint": "box", "radius": 1.0, "z0": np.zeros(d),
            "z_star": np.full(d, 0.9)}


def random_weak_mvi_matrix(d: int, L: float, rho: float, rng, layers: int = 2):
    """A sparse d x d matrix with ||M|| = L and lambda_min(sym(M^-1)) = rho exactly.

    2 x 2 blocks s_i R(theta_i) (scale s_i in [L/10, L], one equal to L) have sym(block^-1) =
    cos(theta_i)/s_i I; cos(theta_i) = rho s_i kappa_i with kappa_i in [-1, 1] and one kappa = 1
    at s = L sets the minimum to rho. ``layers`` rounds of random disjoint Givens rotations
    Q mix the coordinates, M = Q B Q' (an orthogonal similarity keeps both constants)."""
    import scipy.sparse as sp

    if d % 2:
        raise ValueError(f"the affine family needs an even dimension; got d = {d}.")
    if abs(rho) * L > 1:
        raise ValueError(f"a weak-MVI constant needs |rho| <= 1/L = {1 / L:g}; got rho = {rho:g}.")
    k = d // 2
    s = rng.uniform(L / 10, L, size=k)
    kappa = rng.uniform(-1, 1, size=k)
    s[0], kappa[0] = L, 1.0
    if rho == 0:
        cos = np.abs(rng.uniform(0, 1, size=k))
        cos[0] = 0.0
    else:
        cos = np.clip(rho * s * kappa, -1, 1)
        if rho > 0:
            cos = rho * s * (1 + np.abs(kappa) * (1 / (rho * L) - 1))  # cos/s in [rho, 1/L]: minimum rho
            cos[0] = rho * L
    sin = np.sqrt(1 - np.minimum(cos * cos, 1))
    rows = np.repeat(np.arange(k) * 2, 4) + np.tile([0, 0, 1, 1], k)
    cols = np.repeat(np.arange(k) * 2, 4) + np.tile([0, 1, 0, 1], k)
    vals = np.column_stack([s * cos, -s * sin, s * sin, s * cos]).ravel()
    M = sp.csr_matrix((vals, (rows, cols)), shape=(d, d))
    for _ in range(layers):
        perm = rng.permutation(d)
        i, j = perm[0::2], perm[1::2]
        th = rng.uniform(0, 2 * np.pi, size=i.size)
        c, sn = np.cos(th), np.sin(th)
        Q = sp.csr_matrix((np.concatenate([c, -sn, sn, c]), (np.concatenate([i, i, j, j]), np.concatenate([i, j, i, j]))),
                          shape=(d, d))
        M = (Q @ M @ Q.T).tocsr()
    M.sum_duplicates()
    return M


def gen_affine(rng, d=100, L=1.0, rho=-0.5, sparse="auto"):
    M = random_weak_mvi_matrix(d, L, rho, rng, layers=2 if d <= 10_000 else 1)
    if sparse == "no" or (sparse == "auto" and d <= 500):
        M = M.toarray()
    z_star = rng.standard_normal(d)
    return {"operator": "affine", "M": M, "q": -(M @ z_star), "constraint": "none", "z0": np.zeros(d),
            "L": float(L), "rho": float(rho), "z_star": z_star}


def gen_minimax_quadratic(rng, d=20, eig_min=-0.2):
    """Random nonconvex-nonconcave quadratic minimax in x, y of length d/2: blocks A and C with
    eigenvalues in [eig_min, 1], B Gaussian; L and rho of the result are computed exactly."""
    n = d // 2
    if d % 2 or n < 1:
        raise ValueError(f"the minimax-quadratic family needs an even dimension >= 2; got d = {d}.")

    def sym(lo):
        Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
        return (Q * rng.uniform(lo, 1.0, size=n)) @ Q.T

    A, C = sym(eig_min), sym(eig_min)
    B = rng.standard_normal((n, n)) / math.sqrt(n)
    M = ops.minimax_matrix(A, B, C)
    z_star = rng.standard_normal(d)
    return {"operator": "minimax-quadratic", "A": A, "B": B, "C": C, "q": -(M @ z_star), "constraint": "none",
            "z0": np.zeros(d), "z_star": z_star}


# Peak bytes of the generators with a dimension (measured with tracemalloc, with a margin): the sparse
# rotations and their products for affine (dense d x d copies where M is stored dense), the blocks and the
# d x d operator of minimax-quadratic, a few vectors for bilinear
def _affine_bytes(d, sparse, **_):
    return 800.0 * d + (24.0 * d * d if sparse == "no" or (sparse == "auto" and d <= 500) else 0.0)


def _minimax_bytes(d, **_):
    return 48.0 * d * d + 64.0 * d


FAMILIES = {
    "polar": Family("polar", "the polar game on the box 1.1 (a = 1 hard, 3/4 medium, 1/3 easy)", gen_polar,
                    (Param("a", float, 1.0, "polar: cycle strength"),)),
    "forsaken": Family("forsaken", "Hsieh et al.'s Forsaken game on the box 1.5 (outside every guarantee)",
                       gen_forsaken),
    "global-forsaken": Family("global-forsaken", "GlobalForsaken on the ball 4/3", gen_global_forsaken),
    "lower-bound": Family("lower-bound", "the lower-bound game a = 2 sqrt 2, b = -1 (L = 3, rho = -1/(3L))",
                          gen_lower_bound, (Param("box", float, 0.0, "half-width of a box about 0 (0: none)"),)),
    "quadratic-game": Family("quadratic-game", "f = a x y + b (x^2 - y^2)/2 with exact L and rho", gen_quadratic_game,
                             (Param("L", float, 1.0, "Lipschitz constant"), Param("rho", float, -0.5, "weak-MVI constant"),
                              Param("box", float, 0.0, "half-width of a box about 0 (0: none)"))),
    "bilinear": Family("bilinear", "(x - 0.9)'(y - 0.9) on the box 1", gen_bilinear,
                       (Param("d", int, 2, "dimension (even)"),), lambda d, **_: 32.0 * d),
    "affine": Family("affine", "F = M z + q, M with exact ||M|| = L and weak-MVI constant rho (sparse above d = 500)",
                     gen_affine, (Param("d", int, 100, "dimension (even)"), Param("L", float, 1.0, "Lipschitz constant"),
                                  Param("rho", float, -0.5, "weak-MVI constant"),
                                  Param("sparse", ("auto", "yes", "no"), "auto", "store M sparse")), _affine_bytes),
    "minimax-quadratic": Family("minimax-quadratic", "random nonconvex-nonconcave quadratic minimax",
                                gen_minimax_quadratic, (Param("d", int, 20, "dimension (even)"),
                                                        Param("eig_min", float, -0.2, "smallest eigenvalue of A and C")),
                                _minimax_bytes),
}
