"""Backends: device resolution, the OPTSOLVE_DEVICE default, clear errors without a GPU."""

from __future__ import annotations

import numpy as np
import pytest

from optsolve.core.backend import cupy_status, get_backend, get_namespace, resolve_device, to_numpy
from optsolve.core.errors import ParameterError

NO_GPU = not cupy_status()[0]


def test_cpu_is_numpy():
    b = get_backend("cpu")
    assert b.name == "numpy" and b.device == "cpu" and b.xp is np
    assert get_namespace("cpu") is np


def test_auto_follows_availability(monkeypatch):
    monkeypatch.delenv("OPTSOLVE_DEVICE", raising=False)
    assert resolve_device("auto") == ("cpu" if NO_GPU else "gpu")


def test_environment_default(monkeypatch):
    monkeypatch.setenv("OPTSOLVE_DEVICE", "cpu")
    assert resolve_device("auto") == "cpu"
    assert resolve_device(None) == "cpu"
    monkeypatch.setenv("OPTSOLVE_DEVICE", "tpu")
    with pytest.raises(ParameterError, match="'--device' option must be one of auto, cpu, gpu; got 'tpu'"):
        resolve_device("auto")


@pytest.mark.skipif(not NO_GPU, reason="a GPU is available here")
def test_gpu_without_gpu_is_a_clear_error():
    with pytest.raises(ParameterError, match="needs cupy and a GPU"):
        resolve_device("gpu")


def test_backend_fixture_runs_array_code(backend):
    xp = backend.xp
    x = xp.arange(4.0)
    assert float(to_numpy(xp.exp(x).sum())) == pytest.approx(np.exp(np.arange(4.0)).sum())
