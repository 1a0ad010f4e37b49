"""Fusions at a symbolic batch: each zoo CNN with its batch dimension made symbolic ("N", as
benchmarks/run.py serves it at batch 8) fuses to as few nodes as at its fixed batch of 1,
and the fused model's outputs at batch 2 match the stored batch-1 outputs row by row."""

from __future__ import annotations

import collections
import os
import sys

import numpy as np
import onnx
import pytest

import onnxrt as ort
from onnxrt.framework.kernel_lookup import KernelLookup
from onnxrt.passes import optimize as _optimize
from onnxrt.providers.cpu import CPUExecutionProvider


def optimize(model, level, disabled=frozenset()):
    """The passes as a session runs them: constant folding on the CPU provider's kernels."""
    return _optimize(model, level, disabled, KernelLookup([CPUExecutionProvider()]))
from onnxrt.zoo import free_batch

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
from zoo_data import LIGHT, light_expected, light_input, light_path  # noqa: E402


def symbolic_batch(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with dim 0 of its inputs and outputs named "N" (as the benchmark runs it)."""
    return free_batch(model)


def op_counts(model: onnx.ModelProto) -> collections.Counter:
    return collections.Counter((n.domain, n.op_type) for n in model.graph.node)


@pytest.mark.parametrize("name", LIGHT)
def test_zoo_fuses_as_well_at_a_symbolic_batch(name):
    model = onnx.load(light_path(name))
    sym = symbolic_batch(model)
    fixed, _ = optimize(model, 99)
    fused, _ = optimize(sym, 99)
    assert op_counts(fused) == op_counts(fixed), (
        f"{name}: batch 1 {dict(op_counts(fixed) - op_counts(fused))} vs "
        f"symbolic {dict(op_counts(fused) - op_counts(fixed))}")
    sess = ort.InferenceSession(sym.SerializeToString())
    feeds = {}
    for vi in model.graph.input:
        if vi.name in {a.name for a in sess.get_inputs()}:
            x = light_input(vi)
            feeds[vi.name] = np.concatenate([x, x], axis=0)   # batch 2
    if name == "squeezenet":
        # its constant weights make the 1000 logits equal in exact arithmetic (~1e10): the
        # last bits of each (which the BLAS and its blocking decide) pick the softmax's
        # winners, so its logits are compared with onnxruntime's instead
        import onnxruntime

        m = onnx.ModelProto()
        m.CopyFrom(sym)
        last = m.graph.node[-1]
        assert last.op_type == "Softmax"
        del m.graph.node[-1]
        del m.graph.output[:]
        m.graph.output.append(onnx.ValueInfoProto(name=last.input[0]))
        ours = ort.InferenceSession(m.SerializeToString()).run(None, feeds)[0]
        ref = onnxruntime.InferenceSession(m.SerializeToString(),
                                           providers=["CPUExecutionProvider"]).run(None, feeds)[0]
        assert ours.shape[0] == 2
        np.testing.assert_allclose(ours, ref, rtol=1e-5)
        return
    outs = sess.run(None, feeds)
    for ref, out in zip(light_expected(name, model), outs):
        assert out.shape[0] == 2
        for row in out:
            np.testing.assert_allclose(row[None], ref, rtol=1e-3, atol=1e-6, err_msg=name)
