"""Mutated model files: bit flips, overwritten, deleted and inserted bytes in small models
(a conv chain, a model with an If subgraph, one with a model-local function), each loaded
and run in a worker process. Every outcome is an answer or onnxruntime's error class with a
message that names what is wrong; never a crash, a hang or an internal error.

Seeded; ``ONNXRT_FUZZ_EXAMPLES`` x 4 mutants (default 3 x 4, the fast slice)."""

from __future__ import annotations

import os

import numpy as np
import pytest

pytest.importorskip("hypothesis", reason="hypothesis comes with the test extra")

import onnx  # noqa: E402
from hypothesis import HealthCheck, given, seed, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

from fuzz.harness import STATS, clear_refusal, request, worker  # noqa: E402

EXAMPLES = int(os.environ.get("ONNXRT_FUZZ_EXAMPLES", "3")) * 4
SEED = int(os.environ.get("ONNXRT_FUZZ_SEED", "20261125"))


def _seeds() -> list[bytes]:
    x = helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 2, 5, 5])
    w = numpy_helper.from_array(np.ones((3, 2, 3, 3), np.float32), "w")
    conv = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"], name="conv", pads=[1, 1, 1, 1]),
         helper.make_node("Relu", ["c"], ["r"], name="relu"),
         helper.make_node("MaxPool", ["r"], ["y"], name="pool", kernel_shape=[2, 2])],
        "conv", [x], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)], [w])
    then = helper.make_graph([helper.make_node("Relu", ["x"], ["t"], name="then_relu")],
                             "then", [], [helper.make_tensor_value_info("t", 1, None)])
    other = helper.make_graph([helper.make_node("Neg", ["x"], ["e"], name="else_neg")],
                              "else", [], [helper.make_tensor_value_info("e", 1, None)])
    cond = numpy_helper.from_array(np.array(True), "cond")
    branch = helper.make_graph(
        [helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then,
                          else_branch=other)],
        "branch", [x], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        [cond])
    fn = helper.make_function("local", "Twice", ["a"], ["b"],
                              [helper.make_node("Add", ["a", "a"], ["b"])],
                              [helper.make_opsetid("", 17)])
    func = helper.make_graph(
        [helper.make_node("Twice", ["x"], ["y"], name="twice", domain="local")],
        "func", [x], [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)])
    out = []
    for g, extra in ((conv, []), (branch, []), (func, [fn])):
        ops = [helper.make_opsetid("", 17)] + ([helper.make_opsetid("local", 1)]
                                               if extra else [])
        m = helper.make_model(g, opset_imports=ops, functions=extra)
        out.append(m.SerializeToString())
    return out


SEEDS = _seeds()


@st.composite
def mutant(draw) -> bytes:
    b = bytearray(SEEDS[draw(st.integers(0, len(SEEDS) - 1))])
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(b) - 1))
        kind = draw(st.sampled_from(["flip", "flip", "set", "delete", "insert"]))
        if kind == "flip":
            b[i] ^= 1 << draw(st.integers(0, 7))
        elif kind == "set":
            b[i] = draw(st.integers(0, 255))
        elif kind == "delete":
            del b[i:i + draw(st.integers(1, 8))]
        else:
            b[i:i] = draw(st.binary(min_size=1, max_size=4))
        if not b:
            b = bytearray(b"\x08")
    return bytes(b)


@seed(SEED)
@settings(max_examples=EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(model=mutant())
def test_mutated_models(model: bytes) -> None:
    STATS["loader cases"] += 1
    feeds = {"x": np.ones((1, 2, 5, 5), np.float32)}
    r = worker("onnxrt").run(request(model, feeds, level=99, threads=1))
    if r["status"] in ("crash", "hang"):
        STATS["crashes" if r["status"] == "crash" else "hangs"] += 1
    assert r["status"] in ("ok", "error"), f"onnxrt {r['status']} on a mutated model: {r}"
    if r["status"] == "error":
        why = clear_refusal(r, "")
        assert why is None, why
        STATS["loader refusals"] += 1
    else:
        STATS["loader answers"] += 1
