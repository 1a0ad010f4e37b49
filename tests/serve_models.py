"""Small models for the server and Ray tests, and a repository folder in Triton's layout."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

from models import model

WEIGHTS = {v: np.random.default_rng(v).standard_normal((4, 3)).astype(np.float32)
           for v in (1, 2)}
GATHER_TABLE = np.arange(10, dtype=np.float32).reshape(5, 2)


def mlp_model(version: int = 1) -> onnx.ModelProto:
    """y = relu(x @ W_v + 0.5) and s = the row sums of x, batch free: joinable."""
    return model(
        [h.make_node("MatMul", ["x", "w"], ["xw"]),
         h.make_node("Add", ["xw", "b"], ["z"]),
         h.make_node("Relu", ["z"], ["y"]),
         h.make_node("ReduceSum", ["x", "axes"], ["s"], keepdims=1)],
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("y", T.FLOAT, ["N", 3]),
         h.make_tensor_value_info("s", T.FLOAT, ["N", 1])],
        [onnx.numpy_helper.from_array(WEIGHTS[version], "w"),
         onnx.numpy_helper.from_array(np.float32(0.5).reshape(1), "b"),
         onnx.numpy_helper.from_array(np.array([1], np.int64), "axes")])


def seq_model() -> onnx.ModelProto:
    """y = 2 x over [N, T]: requests with different T must not be joined."""
    return model([h.make_node("Add", ["x", "x"], ["y"])],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", "T"])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", "T"])])


def fixed_model() -> onnx.ModelProto:
    """y = x + 1 over a fixed [2, 3]: never joined."""
    return model([h.make_node("Add", ["x", "one"], ["y"])],
                 [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                 [h.make_tensor_value_info("y", T.FLOAT, [2, 3])],
                 [onnx.numpy_helper.from_array(np.ones(1, np.float32), "one")])


def colsum_model() -> onnx.ModelProto:
    """The column sums over the batch, declared with a free leading dimension that does not
    follow the batch: joining must be detected as wrong and undone."""
    return model([h.make_node("ReduceSum", ["x", "axes"], ["y"], keepdims=1)],
                 [h.make_tensor_value_info("x", T.FLOAT, ["N", 3])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["M", 3])],
                 [onnx.numpy_helper.from_array(np.array([0], np.int64), "axes")])


def gather_model() -> onnx.ModelProto:
    """Rows of a 5x2 table by index: an index out of range fails the run."""
    return model([h.make_node("Gather", ["table", "i"], ["y"], axis=0)],
                 [h.make_tensor_value_info("i", T.INT64, ["N"])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 2])],
                 [onnx.numpy_helper.from_array(GATHER_TABLE, "table")])


# every datatype of the protocol, through Identity (BF16 has no JSON form in tritonclient)
TYPED = {"BOOL": T.BOOL, "UINT8": T.UINT8, "UINT16": T.UINT16, "UINT32": T.UINT32,
         "UINT64": T.UINT64, "INT8": T.INT8, "INT16": T.INT16, "INT32": T.INT32,
         "INT64": T.INT64, "FP16": T.FLOAT16, "FP32": T.FLOAT, "FP64": T.DOUBLE,
         "BF16": T.BFLOAT16, "BYTES": T.STRING}


def typed_model() -> onnx.ModelProto:
    names = [k.lower() for k in TYPED]
    return model([h.make_node("Identity", [f"in_{n}"], [f"out_{n}"]) for n in names],
                 [h.make_tensor_value_info(f"in_{n}", t, ["N", 2])
                  for n, t in zip(names, TYPED.values())],
                 [h.make_tensor_value_info(f"out_{n}", t, ["N", 2])
                  for n, t in zip(names, TYPED.values())])


def write_repository(root: str) -> str:
    """REPO/NAME/VERSION/model.onnx for every model above; mlp has versions 1 and 2."""
    models = {("mlp", 1): mlp_model(1), ("mlp", 2): mlp_model(2), ("seq", 1): seq_model(),
              ("fixed", 1): fixed_model(), ("colsum", 1): colsum_model(),
              ("gather", 1): gather_model(), ("typed", 1): typed_model()}
    for (name, version), m in models.items():
        d = os.path.join(root, name, str(version))
        os.makedirs(d, exist_ok=True)
        onnx.save(m, os.path.join(d, "model.onnx"))
    return root
