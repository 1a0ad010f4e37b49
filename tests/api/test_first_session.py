"""The first session on a new machine (framework/warmup.py): with numba's cache empty the
session is made without compiling, its runs take the NumPy kernels and match onnxruntime,
the kernels compile in a child process, and later sessions (and processes) use them. Runs
in child processes with empty cache folders of their own: ~20-60 s, most of it the
compile that every new machine pays once."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from onnxrt.providers.cpu.nn import jit

_CHILD = r"""
import json, sys, time
import numpy as np
import onnxruntime
import onnxrt
from onnxrt.framework import warmup
from onnxrt.providers.cpu.nn import jit, warm

data = warm._model()
x = np.random.default_rng(0).standard_normal((1, 8, 64, 64)).astype(np.float32)
ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
out = {}
s = onnxrt.InferenceSession(data)
out["status_after_create"] = warmup.status()
out["numba_loaded"] = "numba" in sys.modules
y = s.run(None, {"x": x})[0]
out["err_first"] = float(np.abs(y - ref).max())
out["ready"] = jit.wait_compiled(600)
s2 = onnxrt.InferenceSession(data)
kernels = [getattr(st.fn, "__self__", st.fn) for st in s2._plan.steps]
out["compiled_convs"] = sum(1 for k in kernels
                            if getattr(getattr(k, "conv", k), "_gemm", None) is not None)
out["err_second"] = float(np.abs(s2.run(None, {"x": x})[0] - ref).max())
out["marker"] = warmup.marker_path()
print("RESULT " + json.dumps(out))
"""


def _child(env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD], env=env, capture_output=True,
                       text=True, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")][-1]
    return {**json.loads(line[7:]), "stderr": r.stderr}


@pytest.mark.skipif(not jit.available(), reason="numba is not installed: nothing compiles")
def test_first_session_compiles_in_the_background(tmp_path):
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"),
               ONNXRT_CACHE_DIR=str(tmp_path / "onnxrt"))
    env.pop("ONNXRT_JIT", None)         # the default: background
    cold = _child(env)
    assert cold["status_after_create"] == "compiling" and not cold["numba_loaded"]
    assert "compiling the CPU kernels in the background" in cold["stderr"]
    assert cold["err_first"] < 1e-4
    assert cold["ready"] and os.path.exists(cold["marker"])
    assert cold["compiled_convs"] >= 5 and cold["err_second"] < 1e-4
    warm = _child(env)                  # the next process: compiled from its first session
    assert warm["status_after_create"] == "ready" and warm["compiled_convs"] >= 5
    assert "compiling" not in warm["stderr"] and warm["err_first"] < 1e-4
