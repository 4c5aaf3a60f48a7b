"""Problem files of ``optsolve ot`` and generators of its benchmark families.

Keys: ``a`` (n) and ``b`` (m), nonnegative masses with equal sums (within a relative
1e-6, or any positive sums with ``--normalize``), and either the
cost matrix ``C`` (n x m) or point clouds ``x`` (n x d), ``y`` (m x d) with a
``cost`` name (``sqeuclidean``, ``euclidean``, ``l1``), from which C is computed.
Masses are normalised to probability vectors, so objectives are costs per unit mass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from optsolve.core.generate import Family, Param
from optsolve.core import memory
from optsolve.core.problem import Field, Problem, Schema, memory_limit_bytes, one_of

COSTS = ("sqeuclidean", "euclidean", "l1")
MASS_RTOL = 1e-6


def _masses_rule(problem: Problem) -> None:
    with np.errstate(over="ignore"):
        sa, sb = float(problem["a"].sum()), float(problem["b"].sum())
    for key, s in (("a", sa), ("b", sb)):
        if not np.isfinite(s):
            raise problem.error(f"array {key!r} has a total mass that overflows ({s:g}); rescale it.")
        if s <= 0:
            raise problem.error(f"array {key!r} has total mass {s:g}; expected a positive sum.")


MAX_COST = 1e150  # costs beyond this overflow when multiplied and summed
GRID_COSTS = ("l1", "sqeuclidean")
_POINTS_OR_MATRIX = one_of(("C",), ("x", "y", "cost"))


def is_grid(problem: Problem) -> bool:
    return problem["a"].ndim == 2


def _layout_rule(problem: Problem) -> None:
    """Either a, b vectors with C or with x, y, cost; or a, b images on one grid with a grid cost only."""
    a_grid, b_grid = problem["a"].ndim == 2, problem["b"].ndim == 2
    if not (a_grid or b_grid):
        if "cost" in problem and not any(k in problem for k in ("C", "x", "y")):
            raise problem.error("key 'cost' goes with point clouds 'x' and 'y', or with 'a' and 'b' as images of at "
                                "least 2 x 2 pixels on one grid; found vectors 'a' and 'b' and no 'x' or 'y'.")
        return _POINTS_OR_MATRIX(problem)
    if a_grid != b_grid:
        key = "b" if a_grid else "a"
        raise problem.error(f"array {key!r} has shape {problem[key].shape}; with "
                            f"{'a' if a_grid else 'b'!r} an image, both must be images on the same grid.")
    extra = [k for k in ("C", "x", "y") if k in problem]
    if extra:
        raise problem.error(f"arrays 'a' and 'b' are images (grid problem), which take a 'cost' and no "
                            f"{extra[0]!r}; give 'a' and 'b' as vectors to use {extra[0]!r}.")
    if problem.get("cost") not in GRID_COSTS:
        raise problem.error(f"arrays 'a' and 'b' are images (grid problem): key 'cost' must be one of "
                            f"{', '.join(map(repr, GRID_COSTS))}; found {problem.get('cost')!r}.")


def grid_points(k1: int, k2: int) -> np.ndarray:
    """Pixel centres of a k1 x k2 image with square pixels of side 1/max(k1, k2), in row-major order."""
    h = 1.0 / max(k1, k2)
    g1, g2 = (np.arange(k1) + 0.5) * h, (np.arange(k2) + 0.5) * h
    return np.stack(np.meshgrid(g1, g2, indexing="ij"), axis=-1).reshape(-1, 2)


def _cost_range_rule(problem: Problem) -> None:
    if is_grid(problem):
        return  # unit-square grid coordinates
    if "C" in problem:
        big = float(np.abs(problem["C"]).max()) if problem["C"].size else 0.0
        if big > MAX_COST:
            raise problem.error(f"array 'C' has entries up to {big:.3g} in magnitude; expected at most "
                                f"{MAX_COST:g}. Rescale the costs.")
        return
    with np.errstate(over="ignore"):
        radius = {k: float(np.sqrt((problem[k] ** 2).sum(1)).max()) if problem[k].size else 0.0
                  for k in ("x", "y")}
        bound = (radius["x"] + radius["y"]) ** 2
    if not bound <= MAX_COST:
        key = max(radius, key=radius.get)
        raise problem.error(f"array {key!r} has points of norm up to {radius[key]:.3g}: the {problem['cost']} "
                            f"costs would exceed {MAX_COST:g}. Rescale the coordinates.")


# Peak numbers of n x m float64 arrays (the cost included) while solving with a dense cost, measured
# with tracemalloc and rounded up; emd adds POT's graph of n m arcs, which tracemalloc does not see.
DENSE_COPIES = {"tnt": 8, "emd": 13, "sinkhorn": 16, "exact": 6, "certificate": 6}
UNMEASURED_COPIES = max(DENSE_COPIES.values())  # a method not measured here is held to the most


def require_dense(label: str, n: int, m: int, use: str, why: str = "") -> None:
    """Refuse (exit 7, :func:`optsolve.core.memory.require`) a dense n x m cost that ``use`` could not work with."""
    copies = DENSE_COPIES.get(use, UNMEASURED_COPIES)
    what = "the certificate" if use == "certificate" else f"method {use!r}"
    memory.require(label, f"the {n} x {m} cost matrix{why}, with the {copies} arrays of its size that {what} "
                          f"works with ({copies} x {memory.human_bytes(8 * n * m)})", copies * 8 * n * m)


def _size_rule(problem: Problem) -> None:
    if "C" not in problem:
        return  # point clouds: checked when the matrix would be built (the low-memory mode never builds it)
    require_dense(problem.source, problem.dims["n"], problem.dims["m"], "certificate")


SCHEMA = Schema(
    name="ot",
    fields=(
        Field("C", shape=("n", "m"), required=False, nonneg=True, doc="the cost matrix"),
        Field("x", shape=("n", "d"), required=False, doc="source points, with 'y' and 'cost' instead of 'C'"),
        Field("y", shape=("m", "d"), required=False, doc="target points"),
        Field("cost", kind="string", required=False, choices=COSTS, doc="ground cost between 'x' and 'y'"),
        Field("a", shape=("n",), alt_shape=("k1", "k2"), nonneg=True,
              doc="source masses (or a k1 x k2 image on the unit grid)"),
        Field("b", shape=("m",), alt_shape=("k1", "k2"), nonneg=True,
              doc="target masses (or an image on the same grid)"),
    ),
    rules=(_layout_rule, _masses_rule, _cost_range_rule, _size_rule),
)


@dataclass
class OTProblem:
    """An OT problem in the form solvers and certificates use: unit-mass marginals and the cost.

    The cost is the dense matrix ``C``; or, for images (``grid`` set), the grid's separable
    cost (see :mod:`optsolve.ot.grid`), with C not built; or, in low-memory mode, point
    clouds ``x``, ``y`` and a cost name, read in column blocks by :meth:`blocks`.
    """

    a: np.ndarray
    b: np.ndarray
    C: np.ndarray | None
    mass: float
    x: np.ndarray | None = None
    y: np.ndarray | None = None
    cost: str | None = None
    block: int = 0
    grid: tuple | None = None  # (k1, k2) for images on the unit grid: x = y = grid_points(k1, k2)
    label: str = "Problem data"
    _max_cost: float | None = None

    @property
    def n(self) -> int:
        return self.a.shape[0]

    @property
    def m(self) -> int:
        return self.b.shape[0]

    @property
    def low_memory(self) -> bool:
        """Streamed point clouds: neither the matrix nor a grid."""
        return self.C is None and self.grid is None

    def axis_costs(self, xp=np, dtype=np.float64):
        """``(C1, C2)`` of a grid problem: C = C1 (+) C2."""
        from optsolve.ot.grid import axis_costs

        return axis_costs(self.grid, self.cost, xp, dtype)

    def blocks(self, rows=None, cols=None, xp=np, dtype=np.float64):
        """Yield ``(j0, j1, C[rows][:, cols][:, j0:j1])`` column block by column block, in ``xp``.

        ``rows``/``cols`` are index arrays (None: all). A dense C is sliced; points are costed.
        """
        if self.C is not None and cols is None:  # slices of the matrix: views, no copies
            C = self.C if rows is None else self.C[rows]
            step = self.m if self.block <= 0 else self.block
            for j0 in range(0, self.m, max(step, 1)):
                j1 = min(j0 + step, self.m)
                yield j0, j1, xp.asarray(C[:, j0:j1], dtype=dtype)
            return
        cols = np.arange(self.m) if cols is None else np.asarray(cols)
        if self.C is not None:
            C = self.C if rows is None else self.C[rows]
            step = cols.size if self.block <= 0 else self.block
            for j0 in range(0, cols.size, max(step, 1)):
                j1 = min(j0 + step, cols.size)
                yield j0, j1, xp.asarray(C[:, cols[j0:j1]], dtype=dtype)
            return
        x = xp.asarray(self.x if rows is None else self.x[rows], dtype=dtype)
        step = self.block if self.block > 0 else cols.size
        for j0 in range(0, cols.size, max(step, 1)):
            j1 = min(j0 + step, cols.size)
            yield j0, j1, cost_matrix(x, xp.asarray(self.y[cols[j0:j1]], dtype=dtype), self.cost, xp)

    def max_cost(self) -> float:
        """max C (computed once: streamed point clouds take a pass over the costs)."""
        if self._max_cost is None:
            if self.C is None and self.grid is not None:
                self._max_cost = float(sum(c.max() for c in self.axis_costs()))
            elif self.C is not None:
                self._max_cost = float(self.C.max()) if self.C.size else 0.0
            else:
                self._max_cost = cloud_max_cost(self.x, self.y, self.cost)
                if self._max_cost is None:
                    self._max_cost = max((float(blk.max()) for _, _, blk in self.blocks()), default=0.0)
        return self._max_cost

    def dense_cost(self, use: str = "certificate") -> np.ndarray:
        """The n x m cost, built (after :func:`require_dense` for ``use``) when only points or a grid are held."""
        if self.C is not None:
            return self.C
        require_dense(self.label, self.n, self.m, use, " of the grid" if self.grid is not None else
                      " of the point clouds")
        return cost_matrix(self.x, self.y, self.cost)


def pair_costs(ot: "OTProblem", rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """C[rows, cols] for index arrays of equal length, from the matrix, the grid or the points."""
    rows, cols = np.asarray(rows, dtype=np.int64), np.asarray(cols, dtype=np.int64)
    if ot.C is not None:
        return ot.C[rows, cols]
    d = np.asarray(ot.x, dtype=np.float64)[rows] - np.asarray(ot.y, dtype=np.float64)[cols]
    if ot.cost == "l1":
        return np.abs(d).sum(1)
    sq = (d * d).sum(1)
    return sq if ot.cost == "sqeuclidean" else np.sqrt(sq)


def cloud_max_cost(x: np.ndarray, y: np.ndarray, cost: str) -> float | None:
    """max over pairs of the cost between two point clouds, without a pass over all pairs; None
    where no shortcut applies. The largest distance is between extreme points: for l1 it is
    max over sign vectors s of max_i s.x_i - min_j s.y_j (2^d of them); for (squared) Euclidean
    costs it is between vertices of the two convex hulls (dimension 1 to 3)."""
    n, d = x.shape
    if n == 0 or y.shape[0] == 0 or d == 0:  # points of dimension 0 are all one point
        return 0.0
    if cost == "l1":
        if d > 12:
            return None
        signs = np.array(np.meshgrid(*[[-1.0, 1.0]] * d, indexing="ij")).reshape(d, -1)
        return float(max(((x @ signs).max(0) - (y @ signs).min(0)).max(), 0.0))
    if cost not in ("sqeuclidean", "euclidean") or d > 3:
        return None
    ends = []
    for pts in (x, y):
        if d == 1 or pts.shape[0] <= d + 1:
            ends.append(pts if d > 1 else pts[[pts[:, 0].argmin(), pts[:, 0].argmax()]])
            continue
        try:
            from scipy.spatial import ConvexHull

            ends.append(pts[ConvexHull(pts).vertices])
        except Exception:  # flat or degenerate clouds: no hull, so no shortcut
            return None
    if ends[0].shape[0] * ends[1].shape[0] > 4_000_000:
        return None
    top = float(cost_matrix(ends[0], ends[1], "sqeuclidean").max())
    return top if cost == "sqeuclidean" else float(np.sqrt(top))


def cost_matrix(x, y, cost: str, xp=np):
    """Pairwise ground costs between the rows of x and y; squared distances are clipped at 0."""
    if cost == "l1":
        out = xp.zeros((x.shape[0], y.shape[0]), dtype=x.dtype)
        for k in range(x.shape[1]):
            out += xp.abs(x[:, k, None] - y[None, :, k])
        return out
    sq = (x * x).sum(1)[:, None] + (y * y).sum(1)[None, :] - 2.0 * (x @ y.T)
    xp.maximum(sq, 0.0, out=sq)
    if cost == "sqeuclidean":
        return sq
    if cost == "euclidean":
        return xp.sqrt(sq, out=sq)
    raise ValueError(f"unknown cost {cost!r}")


def check_equal_mass(problem: Problem) -> None:
    sa, sb = float(problem["a"].sum()), float(problem["b"].sum())
    if abs(sa - sb) > MASS_RTOL * max(sa, sb):
        raise problem.error(f"arrays 'a' and 'b' must have equal sums (total mass); found {sa:.10g} and "
                            f"{sb:.10g} (relative difference {abs(sa - sb) / max(sa, sb):.2g} > {MASS_RTOL:g}). "
                            "Rescale one of them, or pass --normalize to scale each to unit mass.")


def available_memory_bytes() -> int:
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return memory_limit_bytes()


BLOCK_BYTES = 8 << 20  # an n x block buffer of about this size stays in cache between the in-place passes


GPU_BLOCK_SHARE = 16  # on a GPU, the block buffers (about three) take at most 1/16 of its free memory


def auto_block(n: int, m: int, itemsize: int = 8, xp=np) -> int:
    """Columns per block: a buffer of about 8 MB (cache-friendly), and at most 1/8 of the free memory
    (or of the memory budget, the smaller).

    With cupy (``xp``), blocks as large as 1/16 of the GPU's free memory allows: each block is a
    few kernel launches, so small blocks would leave the GPU idle.
    """
    if xp is not np:
        free = int(xp.cuda.runtime.memGetInfo()[0])
        return int(max(1, min(m, free // GPU_BLOCK_SHARE // max(1, 3 * n * itemsize))))
    by_cache = BLOCK_BYTES // max(1, n * itemsize)
    by_memory = min(available_memory_bytes(), memory.budget_bytes()) // 8 // max(1, 2 * n * itemsize)
    return int(max(1, min(m, max(8, by_cache), by_memory)))


BLOCK_COPIES = 4  # n x block arrays a streamed pass holds at once (cost block, plan block, temporaries)


def prepare(problem: Problem, normalize: bool = False, low_memory: bool | None = None,
            block_size: int | None = None, use: str = "certificate") -> OTProblem:
    """Unit-mass marginals and the cost; sums must agree to 1e-6 unless ``normalize``.

    ``low_memory``: never build the n x m cost (point clouds only); None picks it when the
    dense path of ``use`` (a method, or ``"certificate"``) would not fit in the free memory or
    the memory budget. A dense cost built from points must fit the budget (else exit 7, before
    it is allocated). ``block_size``: columns per block (default from the free memory). Images
    on a grid never build C (:meth:`OTProblem.dense_cost` does where a method needs it); their
    blocks are read like those of point clouds.
    """
    if not normalize:
        check_equal_mass(problem)
    a, b = problem["a"], problem["b"]
    mass = float(a.sum())
    grid = None
    x, y = problem.get("x"), problem.get("y")
    if is_grid(problem):
        grid = a.shape
        x = y = grid_points(*grid)
        a, b = a.ravel(), b.ravel()
    n, m = a.shape[0], b.shape[0]
    points = x is not None
    if block_size:
        memory.require(problem.source, f"blocks of {int(block_size)} columns of the {n} x {m} cost "
                                       f"({BLOCK_COPIES} arrays of {n} x {int(block_size)})",
                       BLOCK_COPIES * 8 * n * min(int(block_size), m))
    if grid is not None:
        block = int(block_size) if block_size else auto_block(n, m)
        return OTProblem(a=a / a.sum(), b=b / b.sum(), C=None, mass=mass, x=x, y=y, cost=problem["cost"],
                         block=block, grid=grid, label=problem.source)
    if low_memory is None:
        need = DENSE_COPIES.get(use, UNMEASURED_COPIES) * 8 * n * m
        low_memory = points and need > min(available_memory_bytes(), memory.budget_bytes())
    if low_memory and not points:
        raise problem.error("low-memory mode needs point clouds 'x', 'y' and a 'cost' instead of 'C'.")
    block = int(block_size) if block_size else (auto_block(n, m) if low_memory else 0)
    if low_memory:
        C = None
    elif "C" in problem:
        if use != "certificate":
            require_dense(problem.source, n, m, use)
        C = np.ascontiguousarray(problem["C"], dtype=np.float64)
    else:
        require_dense(problem.source, n, m, use, " of the point clouds")
        C = cost_matrix(x, y, problem["cost"])
    return OTProblem(a=a / a.sum(), b=b / b.sum(), C=C, mass=mass, x=x, y=y, cost=problem.get("cost"),
                     block=block, grid=grid, label=problem.source)


# --------------------------------------------------------------------------- generators

IMAGE_KINDS = ("whitenoise", "grf", "cauchy", "shapes")


def _image(rng: np.random.Generator, k: int, kind: str, smoothness: float) -> np.ndarray:
    """A positive k x k density in the style of the DOTmark classes."""
    if kind == "whitenoise":
        img = rng.random((k, k))
    elif kind == "grf":
        # Gaussian random field with power spectrum |w|^-smoothness, exponentiated to a density
        w = np.fft.fftfreq(k)[:, None] ** 2 + np.fft.fftfreq(k)[None, :] ** 2
        w[0, 0] = np.inf
        spectrum = w ** (-smoothness / 2)
        field = np.fft.ifft2(spectrum * np.fft.fft2(rng.standard_normal((k, k)))).real
        img = np.exp(field / (field.std() + 1e-300))
    elif kind == "cauchy":
        g = (np.arange(k) + 0.5) / k
        X, Y = np.meshgrid(g, g, indexing="ij")
        img = np.zeros((k, k))
        for _ in range(rng.integers(2, 6)):
            cx, cy = rng.random(2)
            s = 0.02 + 0.1 * rng.random()
            img += rng.random() / (1 + ((X - cx) ** 2 + (Y - cy) ** 2) / s**2)
    elif kind == "shapes":  # discs and squares on an empty background: many zero masses
        g = (np.arange(k) + 0.5) / k
        X, Y = np.meshgrid(g, g, indexing="ij")
        img = np.zeros((k, k))
        while img.sum() == 0:
            for _ in range(rng.integers(1, 4)):
                cx, cy = 0.15 + 0.7 * rng.random(2)
                rad = 0.08 + 0.15 * rng.random()
                inside = ((X - cx) ** 2 + (Y - cy) ** 2 <= rad**2) if rng.random() < 0.5 else \
                    ((np.abs(X - cx) <= rad) & (np.abs(Y - cy) <= rad))
                img[inside] = 1.0
    else:
        raise ValueError(f"unknown image kind {kind!r}")
    return img / img.sum()


def _finish(data: dict, x: np.ndarray, y: np.ndarray, cost: str, store: str) -> dict:
    if store == "grid":
        raise ValueError("--store grid applies to image families (images, digits) only")
    if store == "matrix":
        data["C"] = cost_matrix(x, y, cost)
    else:
        data.update(x=x, y=y, cost=cost)
    return data


def _image_pair(a: np.ndarray, b: np.ndarray, cost: str, store: str) -> dict:
    """Two images as a grid problem (``store="grid"``), or as pixel-centre point clouds or their matrix C."""
    if store == "grid":
        if cost not in GRID_COSTS:
            raise ValueError(f"--store grid takes a cost in {GRID_COSTS}; got {cost!r}")
        return {"a": a, "b": b, "cost": cost}
    grid = grid_points(*a.shape)
    return _finish({"a": a.ravel(), "b": b.ravel()}, grid, grid.copy(), cost, store)


def gen_images(rng, *, size: int, kind: str, smoothness: float, cost: str, store: str) -> dict:
    a = _image(rng, size, kind, smoothness)
    b = _image(rng, size, kind, smoothness)
    return _image_pair(a, b, cost, store)


def gen_clouds(rng, *, n: int, m: int, d: int, cost: str, store: str) -> dict:
    x = rng.random((n, d))
    y = rng.random((m, d))
    a = rng.dirichlet(np.ones(n))
    b = rng.dirichlet(np.ones(m))
    return _finish({"a": a, "b": b}, x, y, cost, store)


def read_rgb(path: str) -> np.ndarray:
    """An RGB image as an (h*w, 3) array of colours in [0, 1]: .npy/.npz arrays, or PNG/JPEG with Pillow."""
    import os

    if not path:
        raise ValueError("colour transfer needs --source and --target image files")
    ext = os.path.splitext(path)[1].lower()
    try:
        if ext == ".npy":
            img = np.load(path, allow_pickle=False)
        elif ext == ".npz":
            with np.load(path, allow_pickle=False) as z:
                img = z[z.files[0]]
        else:
            try:
                from PIL import Image
            except ImportError:
                raise ValueError(f"image {path!r}: reading {ext or 'this'} files needs Pillow (pip install pillow); "
                                 "or save the image as an (h, w, 3) array in a .npy file") from None
            with Image.open(path) as im:
                img = np.asarray(im.convert("RGB"))
    except OSError as exc:
        raise ValueError(f"image {path!r} cannot be read: {exc}") from None
    if img.ndim != 3 or img.shape[2] < 3:
        raise ValueError(f"image {path!r} has shape {img.shape}; expected (height, width, 3)")
    img = img[..., :3].reshape(-1, 3).astype(np.float64)
    return img / 255.0 if img.max() > 1.0 else img


def gen_digits(rng, *, size: int, cost: str, store: str) -> dict:
    """Two of scikit-learn's 8 x 8 handwritten digits, upsampled to size x size (bilinear), as masses."""
    from scipy.ndimage import zoom
    from sklearn.datasets import load_digits

    images = load_digits().images
    i, j = rng.choice(images.shape[0], size=2, replace=False)

    def upsample(img):
        big = np.clip(zoom(img.astype(np.float64), size / img.shape[0], order=1), 0.0, None)
        return big / big.sum()

    a, b = upsample(images[i]), upsample(images[j])
    return _image_pair(a, b, cost, store)


def gen_colour(rng, *, source: str, target: str, n: int, cost: str, store: str) -> dict:
    """Colour transfer: the pixel colours of two RGB images, each subsampled to n pixels, uniform weights."""
    xs, ys = read_rgb(source), read_rgb(target)
    x = xs[rng.choice(xs.shape[0], size=min(n, xs.shape[0]), replace=False)]
    y = ys[rng.choice(ys.shape[0], size=min(n, ys.shape[0]), replace=False)]
    a, b = np.full(x.shape[0], 1.0 / x.shape[0]), np.full(y.shape[0], 1.0 / y.shape[0])
    return _finish({"a": a, "b": b}, x, y, cost, store)


_STORE = Param("store", ("points", "matrix"), "points", "write point clouds and a cost name, or the matrix C")
_COST = Param("cost", COSTS, "sqeuclidean", "ground cost")


def _image_store(default: str) -> Param:
    return Param("store", ("grid", "points", "matrix"), default,
                 "write the images on their grid (l1, sqeuclidean), point clouds and a cost name, or the matrix C")

# Peak bytes of the generators (measured with tracemalloc, with a margin): the points, weights and images
# (a Gaussian random field is drawn through complex FFTs), and the n x m cost where it is stored
def _cost_bytes(n, m, store):
    return 24.0 * float(n) * float(m) if store == "matrix" else 0.0


def _images_bytes(size, store, **_):
    return 160.0 * size * size + _cost_bytes(size * size, size * size, store)


def _clouds_bytes(n, m, d, store, **_):
    return 24.0 * (n + m) * (d + 1) + _cost_bytes(n, m, store)


def _colour_bytes(n, store, **_):
    return 128.0 * n + _cost_bytes(n, n, store)  # and the two images, which their files size


FAMILIES = {
    "images": Family("images", "two k x k images (DOTmark-like) on the unit square",
                     gen_images, (Param("size", int, 32, "image side k (n = m = k^2)"),
                                  Param("kind", IMAGE_KINDS, "grf", "image class"),
                                  Param("smoothness", float, 2.0, "GRF spectral decay exponent"),
                                  _COST, _image_store("points")), _images_bytes),
    "digits": Family("digits", "two scikit-learn handwritten digits upsampled to size x size",
                     gen_digits, (Param("size", int, 64, "image side (n = m = size^2)"), _COST,
                                  _image_store("grid")), _images_bytes),
    "clouds": Family("clouds", "uniform random points in [0,1]^d with Dirichlet weights",
                     gen_clouds, (Param("n", int, 200, "number of source points"),
                                  Param("m", int, 200, "number of target points"),
                                  Param("d", int, 2, "dimension"), _COST, _STORE), _clouds_bytes),
    "colour": Family("colour", "colour transfer between two RGB images (.npy arrays, or PNG/JPEG with Pillow)",
                     gen_colour, (Param("source", str, None, "source image file"),
                                  Param("target", str, None, "target image file"),
                                  Param("n", int, 4096, "pixels sampled from each image"), _COST, _STORE),
                     _colour_bytes),
}
