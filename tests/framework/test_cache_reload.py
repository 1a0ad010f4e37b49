"""Compiled kernels read back from numba's disk cache by a fresh process compute what the
process that compiled them did: one child process fills (or finds) the cache, a second one
loads the kernels from it, compiles nothing, and is compared with onnxruntime. The model is
MatMulNBits at accuracy_level 4 (an int4 decoder's product), whose compiled kernel quantizes
A to int8 per block as onnxruntime does: a kernel that loads wrong shows in its numbers."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxrt.providers.cpu.nn import jit

K, N, BLOCK = 128, 48, 32


def _model() -> bytes:
    rng = np.random.default_rng(7)
    kb = K // BLOCK
    codes = rng.integers(0, 256, (N, kb, BLOCK // 2), dtype=np.uint8)
    scales = (rng.random(N * kb) * 0.2 + 0.05).astype(np.float32)
    node = helper.make_node("MatMulNBits", ["a", "b", "s"], ["y"], domain="com.microsoft",
                            K=K, N=N, bits=4, block_size=BLOCK, accuracy_level=4)
    g = helper.make_graph(
        [node], "nbits", [helper.make_tensor_value_info("a", TensorProto.FLOAT, [1, K])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, N])],
        [numpy_helper.from_array(codes, "b"), numpy_helper.from_array(scales, "s")])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17),
                                            helper.make_opsetid("com.microsoft", 1)])
    return m.SerializeToString()


_CHILD = r"""
import json, sys
import numpy as np
import onnxrt
from onnxrt.providers.cpu.quant import nbits_q8
data = open(sys.argv[1], "rb").read()
a = np.load(sys.argv[2])
s = onnxrt.InferenceSession(data, providers=["CPUExecutionProvider"])
y = s.run(None, {"a": a})[0]
from onnxrt.providers.cpu.contrib import layer_norm
k = dict(nbits_q8.kernels() or {})
# the decoder's layer norm too: its NumPy path sums in another order, and accuracy_level 4's
# int8 rounding of the next product turns that into ~1e-2 on an int4 decoder's logits
norm = layer_norm._norm_kernel()
if norm is not None:
    k["norm"] = norm
stats = {n: (int(sum(f.stats.cache_hits.values())), int(sum(f.stats.cache_misses.values())))
         for n, f in k.items()}
print(json.dumps({"y": y.tolist(), "q8": "gemv" in k, "norm": norm is not None,
                  "stats": stats}))
"""


def _child(tmp: str, env: dict[str, str]) -> dict:
    r = subprocess.run([sys.executable, "-c", _CHILD, os.path.join(tmp, "m.onnx"),
                        os.path.join(tmp, "a.npy")], capture_output=True, text=True,
                       timeout=900, env=env)
    assert r.returncode == 0, r.stderr[-3000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not jit.available(), reason="numba is not installed: nothing compiles")
def test_kernels_loaded_from_another_process_cache_match_onnxruntime(tmp_path) -> None:
    from onnxrt.providers.cpu.quant import nbits_q8

    if not nbits_q8.supported():
        pytest.skip("the accuracy_level 4 kernel needs AVX2 (this CPU has none)")
    data = _model()
    (tmp_path / "m.onnx").write_bytes(data)
    a = (np.random.default_rng(1).standard_normal((1, K)) * 3).astype(np.float32)
    np.save(tmp_path / "a.npy", a)
    ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, {"a": a})[0]
    # the suite's own cache location: the first child compiles what is missing
    env = dict(os.environ, ONNXRT_JIT="sync")
    first = _child(str(tmp_path), env)
    second = _child(str(tmp_path), env)
    assert first["q8"] and second["q8"] and second["norm"]
    # the second process compiled nothing: every kernel it ran came from the disk cache
    assert all(hits > 0 and misses == 0 for hits, misses in second["stats"].values()), \
        second["stats"]
    for got in (first["y"], second["y"]):
        np.testing.assert_allclose(np.asarray(got, np.float32), ref, rtol=1e-5, atol=1e-4)


@pytest.mark.skipif(not jit.available(), reason="numba is not installed: nothing compiles")
def test_failed_build_is_said(caplog) -> None:
    from onnxrt.providers.cpu.nn import compiling

    def build(numba):
        raise RuntimeError("no such lowering")

    slot: list = []
    with caplog.at_level("WARNING", logger="onnxrt"):
        assert compiling.compile_once(slot, build) is None
    assert slot == [None]
    assert any("no such lowering" in r.getMessage() and "NumPy path" in r.getMessage()
               for r in caplog.records)
