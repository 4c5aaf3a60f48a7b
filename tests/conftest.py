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
EXAMPLE_OT = DATA / "ot" / "example.npz"


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
    from optsolve.core.problem import save_problem

    x, y = rng.random((30, 2)), rng.random((20, 2))
    a, b = rng.dirichlet(np.ones(30)), rng.dirichlet(np.ones(20))
    path = tmp_path / "small.npz"
    save_problem(str(path), {"a": a, "b": b, "x": x, "y": y, "cost": "sqeuclidean"})
    return path, {"a": a, "b": b, "x": x, "y": y}
