"""Ctrl-C during a solve: the last iterate is written with status interrupted, exit code 130."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from optsolve.core.problem import save_problem


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
def test_sigint_writes_last_iterate(tmp_path):
    rng = np.random.default_rng(0)
    path = tmp_path / "p.npz"
    save_problem(str(path), {"a": rng.dirichlet(np.ones(150)), "b": rng.dirichlet(np.ones(150)),
                             "x": rng.random((150, 2)), "y": rng.random((150, 2)), "cost": "sqeuclidean"})
    # a shell starts background jobs with SIGINT ignored, and Python keeps an inherited SIG_IGN:
    # give the child the default disposition, as a terminal's foreground process has
    proc = subprocess.Popen([sys.executable, "-m", "optsolve", "ot", str(path), "--method", "sinkhorn",
                             "--reg", "1e-5", "--tol", "1e-300", "--max-iter", "100000000", "-v"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 60
    seen = ""
    while time.monotonic() < deadline:  # wait until the solver is iterating
        line = proc.stderr.readline()
        seen += line
        if "iter" in line:
            break
    assert "iter" in seen, seen
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    doc = json.loads(out)
    assert doc["status"] == "interrupted"
    assert doc["solution"]["f"] and doc["stats"]["iterations"] > 0
    assert doc["certificate"]["checks"][0]["name"] == "marginal_l1" and doc["certificate"]["checks"][0]["holds"]
    assert "Traceback" not in err
