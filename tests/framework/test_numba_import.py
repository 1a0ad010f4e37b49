"""What a fresh process pays for onnxrt's imports: ``import onnxrt`` loads neither numba nor
scipy, and a session whose kernels are compiled loads them from numba's cache without
numba's lowering registries or ``scipy.linalg`` (framework/numba_import.py), while
numba code of the program's own that needs both still compiles. Each check runs in a
child process: what the parent imported must not count."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from onnxrt.providers.cpu.nn import jit


def _child(code: str, **env: str) -> dict:
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=600, env=dict(os.environ, **env))
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


def test_import_loads_no_numba_or_scipy() -> None:
    out = _child("import json, sys, onnxrt\n"
                 "print(json.dumps(sorted(m for m in ('numba', 'llvmlite', 'scipy', 'torch') "
                 "if m in sys.modules)))")
    assert out == []


_SESSION = r"""
import json, sys
import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator
import onnxrt
from onnxrt.providers.cpu.nn import jit

rng = np.random.default_rng(0)
w = (rng.standard_normal((4, 1, 3, 3)) * 0.3).astype(np.float32)
g = helper.make_graph(
    [helper.make_node("Conv", ["x", "w"], ["y"], group=4, pads=[1, 1, 1, 1])], "dw",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4, 9, 9])],
    [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    [numpy_helper.from_array(w, "w")])
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
x = rng.standard_normal((1, 4, 9, 9)).astype(np.float32)
so = onnxrt.SessionOptions()
so.intra_op_num_threads = 1
s = onnxrt.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
y = s.run(None, {"x": x})[0]
out = {"compiled": jit.enabled() and "numba" in sys.modules,
       "scipy_linalg": "scipy.linalg" in sys.modules,
       "registries": "numba.np.arraymath" in sys.modules,
       "conv_err": float(np.abs(y - ReferenceEvaluator(m).run(None, {"x": x})[0]).max())}
# the program's own numba code that needs a BLAS (scipy's) still compiles and runs
import numba
a = rng.standard_normal((5, 7))
b = rng.standard_normal((7, 3))
dot = numba.njit(lambda p, q: np.dot(p, q))
out["user_dot_err"] = float(np.abs(dot(a, b) - a @ b).max())
print(json.dumps(out))
"""


@pytest.mark.skipif(not jit.available(), reason="numba is not installed: nothing compiles")
def test_compiled_session_skips_scipy_linalg() -> None:
    out = _child(_SESSION, ONNXRT_JIT="sync")
    assert out["compiled"]
    assert out["conv_err"] < 1e-5
    assert not out["scipy_linalg"]
    assert not out["registries"]        # cached kernels load without numba's registries
    assert out["user_dot_err"] < 1e-12
