"""Shared fixtures: running the command line in-process and as a subprocess, data paths, backends."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "data"
SHARED_DATA = ROOT.parent / "shared" / "data"


def load_script(name: str, module: str):
    """``bin/NAME`` (a script without a .py suffix) imported as the module ``module``, for tests of its functions."""
    import importlib.machinery
    import importlib.util

    loader = importlib.machinery.SourceFileLoader(module, str(ROOT / "bin" / name))
    spec = importlib.util.spec_from_loader(module, loader)
    out = importlib.util.module_from_spec(spec)
    loader.exec_module(out)
    return out
EXAMPLE_OT = DATA / "ot" / "example.npz"


def pytest_sessionfinish(session, exitstatus):
    """The suite fails when /dev/null is no longer the null device: a writer renamed a file over it (run as
    root, as CI is, that breaks every later command of the machine that writes there)."""
    import stat

    try:
        mode = os.stat("/dev/null").st_mode
    except OSError:
        mode = 0
    if not stat.S_ISCHR(mode):
        sys.stderr.write("\n/dev/null is not a character device after the test run: a test or the code under "
                         "test replaced it (restore it as root: rm -f /dev/null; mknod -m 666 /dev/null c 1 3).\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@dataclass
class Run:
    exit_code: int
    stdout: str
    stderr: str

    def json(self) -> dict:
        return json.loads(self.stdout)


@pytest.fixture
def cli():
    """Run ``optsolve ARGS...`` in-process with Click's runner; stdout and stderr apart."""
    from click.testing import CliRunner

    from optsolve.cli import main

    def run(*args, input=None, env=None) -> Run:
        runner = CliRunner()
        res = runner.invoke(main, [str(a) for a in args], input=input, env=env, catch_exceptions=False)
        return Run(res.exit_code, res.stdout, res.stderr)

    return run


@pytest.fixture
def verify_forged(cli, tmp_path):
    """``verify_forged(problem, doc, *options)``: ``optsolve verify`` of the document ``doc`` (a dict, or
    text as it would be on disk) written to a file, against ``problem``."""

    def run(problem, doc, *options) -> Run:
        path = tmp_path / "forged.json"
        path.write_text(json.dumps(doc) if isinstance(doc, dict) else doc)
        return cli("verify", problem, path, *options)

    return run


@pytest.fixture
def bad_input(cli, tmp_path):
    """``bad_input(kind, doc, needle)``: a JSON problem file ``doc`` makes ``optsolve KIND`` exit 7 with
    one stderr line naming the file and containing ``needle``, and nothing but an invalid_input document."""

    def run(kind: str, doc: dict, needle: str) -> None:
        path = tmp_path / "p.json"
        path.write_text(json.dumps(doc))
        r = cli(kind, path)
        assert r.exit_code == 7, r.stderr
        assert needle in r.stderr and str(path) in r.stderr
        assert r.stdout.strip() == "" or json.loads(r.stdout)["status"] == "invalid_input"

    return run


@pytest.fixture
def sh():
    """Run ``python -m optsolve ARGS...`` as a real process (for stdin, pipes and signals)."""

    def run(*args, input=None, env=None, timeout=120) -> Run:
        full_env = dict(os.environ, **(env or {}))
        proc = subprocess.run([sys.executable, "-m", "optsolve", *map(str, args)], input=input,
                              capture_output=True, text=True, env=full_env, timeout=timeout)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    return run


def _backends():
    params = [pytest.param("numpy", id="numpy")]
    params.append(pytest.param("cupy", id="cupy", marks=pytest.mark.gpu))
    return params


@pytest.fixture(params=_backends())
def backend(request):
    """The array backends: numpy always, cupy when it imports and sees a GPU (else skipped)."""
    from optsolve.core.backend import cupy_status, get_backend

    if request.param == "cupy":
        usable, reason, _ = cupy_status()
        if not usable:
            pytest.skip(f"GPU backend unavailable: {reason}")
        return get_backend("gpu")
    return get_backend("cpu")


@pytest.fixture
def rng():
    return np.random.default_rng(12345)


@pytest.fixture
def small_ot(tmp_path, rng):
    """A small OT problem file (30 x 20 points in the plane) and its arrays."""
    from optsolve.core.files import save_problem

    x, y = rng.random((30, 2)), rng.random((20, 2))
    a, b = rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(20))
    path = tmp_path / "small.npz"
    save_problem(str(path), {"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"})
    return path, {"a": a, "b": b, "x": x, "y": y}


# --------------------------------------------------------------------------- hostile files

# Exit codes a solve command may end with on any file (1, internal error, is never one of them).
DOCUMENTED_EXITS = (0, 3, 4, 5, 6, 7)


def _mutations(data: dict):
    """Hypothesis strategy: (name, mutated dict, surely_invalid) from a valid problem dict ``data``."""
    from hypothesis import strategies as st

    keys = sorted(data)

    def arrays_only():
        return [k for k in keys if isinstance(data[k], np.ndarray) and data[k].size]

    @st.composite
    def one(draw):
        kind = draw(st.sampled_from(["nan", "inf", "negative", "zero", "huge", "huge_int", "string", "bool",
                                     "drop", "unknown", "truncate", "extend", "add_dim", "empty", "scalar",
                                     "nested", "ragged", "complex", "transpose"]))
        out = dict(data)
        numeric = arrays_only()
        key = draw(st.sampled_from(numeric or keys))
        value = out[key]
        arr = np.asarray(value) if isinstance(value, np.ndarray) else None
        surely_invalid = False
        if kind in ("nan", "inf", "negative", "zero", "huge", "huge_int") and arr is not None and arr.size:
            arr = arr.astype(np.float64).copy()
            i = draw(st.integers(0, arr.size - 1))
            arr.flat[i] = {"nan": np.nan, "inf": np.inf, "negative": -abs(arr.flat[i]) - 1.0, "zero": 0.0,
                           "huge": 1e300, "huge_int": 1e15}[kind]
            out[key] = arr
            surely_invalid = kind == "nan"
        elif kind == "string":
            out[key] = "not a number"
        elif kind == "bool":
            out[key] = True
        elif kind == "drop":
            out.pop(key)
        elif kind == "unknown":
            out["unexpected_key"] = np.arange(3.0)
        elif kind == "complex" and arr is not None:
            out[key] = arr.astype(np.complex128) + 1j
            surely_invalid = True
        elif arr is not None and kind == "truncate" and arr.ndim and arr.shape[0] > 1:
            out[key] = arr[: draw(st.integers(0, arr.shape[0] - 1))]
        elif arr is not None and kind == "extend":
            out[key] = np.concatenate([arr, arr[:1]]) if arr.ndim else arr * 2
        elif arr is not None and kind == "add_dim":
            out[key] = arr[None, ...]
        elif arr is not None and kind == "empty":
            out[key] = np.zeros((0,) + arr.shape[1:], dtype=arr.dtype)
        elif arr is not None and kind == "scalar":
            out[key] = np.float64(arr.flat[0]) if arr.size else np.float64(1.0)
        elif arr is not None and kind == "transpose" and arr.ndim == 2:
            out[key] = arr.T.copy()
        elif kind == "nested":
            depth = draw(st.sampled_from([40, 70, 500]))
            out[key] = "[" * depth + "1" + "]" * depth
        elif kind == "ragged":
            out[key] = [[1.0, 2.0], [3.0]]
            surely_invalid = True
        return kind, out, surely_invalid

    return one()


def _write_hostile(path: Path, data: dict, compress: bool) -> None:
    from optsolve.core.files import _json_value, flatten_arrays

    if path.suffix == ".json":
        def plain(v):
            if isinstance(v, str) and v.startswith("["):
                return json.loads(v) if v.count("[") < 100 else v
            return _json_value(v)
        text = json.dumps({k: plain(v) for k, v in data.items()},
                          default=lambda v: v.tolist() if isinstance(v, np.ndarray) else str(v))
        path.write_text(text)
    else:
        flat = flatten_arrays(data)
        with open(path, "wb") as fh:
            (np.savez_compressed if compress else np.savez)(fh, **flat)


@pytest.fixture
def hostile(cli, tmp_path):
    """``hostile(kind, data, args=(), examples=40)``: run ``optsolve KIND`` on files mutated from the valid
    problem ``data`` (values, shapes, dtypes, keys, nesting; .npz compressed or not, or .json) and check
    that each run ends with a documented exit code (never 1), one JSON document or none on stdout, no
    traceback, exit 7 for a surely invalid file, and that a claimed optimum passes ``optsolve verify``."""
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    counter = iter(range(10**9))

    def run(kind: str, data: dict, args=(), examples: int = 40, verify_args=()):
        @settings(max_examples=examples, deadline=None, derandomize=True,
                  suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
        @given(mutation=_mutations(data), fmt=st.sampled_from(["npz-compressed", "npz", "json"]))
        def check(mutation, fmt):
            name, mutated, surely_invalid = mutation
            path = tmp_path / f"h{next(counter)}.{'json' if fmt == 'json' else 'npz'}"
            _write_hostile(path, mutated, compress=fmt == "npz-compressed")
            r = cli(kind, path, *args)
            what = f"{kind} {name} ({fmt}): exit {r.exit_code}, stderr {r.stderr[-400:]!r}"
            assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, what
            assert r.exit_code in DOCUMENTED_EXITS, what
            doc = json.loads(r.stdout) if r.stdout.strip() else None
            if surely_invalid:
                assert r.exit_code == 7, what
            if doc is not None and doc.get("status") == "optimal":
                sol = tmp_path / f"{path.stem}.sol.json"
                sol.write_text(r.stdout)
                v = cli("verify", path, sol, *verify_args)
                assert v.exit_code == 0, f"{what}; verify: {v.stderr[-400:]}"

        check()

    return run
