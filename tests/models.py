"""Small models built with onnx.helper, shared by the API tests."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

IR = 10  # an IR version both onnxrt and onnxruntime 1.31 accept


def model(nodes, inputs, outputs, initializers=(), opset=17, functions=(), extra_opsets=(),
          **kw) -> onnx.ModelProto:
    g = h.make_graph(nodes, kw.pop("name", "g"), inputs, outputs, list(initializers))
    ops = [h.make_opsetid("", opset)] + [h.make_opsetid(d, v) for d, v in extra_opsets]
    m = h.make_model(g, opset_imports=ops, ir_version=kw.pop("ir_version", IR),
                     functions=list(functions), **kw)
    return m


def add_model() -> onnx.ModelProto:
    """z = x + y; w = relu(z) with a symbolic batch dimension."""
    return model(
        [h.make_node("Add", ["x", "y"], ["z"], name="add"),
         h.make_node("Relu", ["z"], ["w"], name="relu")],
        [h.make_tensor_value_info("x", T.FLOAT, ["N", 3]),
         h.make_tensor_value_info("y", T.FLOAT, ["N", 3])],
        [h.make_tensor_value_info("z", T.FLOAT, ["N", 3]),
         h.make_tensor_value_info("w", T.FLOAT, ["N", 3])],
        producer_name="onnxrt-tests", doc_string="a tiny model", model_version=7)


def chain_model(n: int = 2000, op: str = "Sin", shape=(256, 256)) -> onnx.ModelProto:
    nodes = [h.make_node(op, [f"v{i}"], [f"v{i + 1}"], name=f"n{i}") for i in range(n)]
    return model(nodes, [h.make_tensor_value_info("v0", T.FLOAT, list(shape))],
                 [h.make_tensor_value_info(f"v{n}", T.FLOAT, list(shape))])


def initializer_model() -> onnx.ModelProto:
    """y = x * w + b with w overridable (it is also a graph input)."""
    w = h.make_tensor("w", T.FLOAT, [3], [1.0, 2.0, 3.0])
    b = h.make_tensor("b", T.FLOAT, [3], [0.5, 0.5, 0.5])
    return model(
        [h.make_node("Mul", ["x", "w"], ["t"]), h.make_node("Add", ["t", "b"], ["y"])],
        [h.make_tensor_value_info("x", T.FLOAT, [2, 3]),
         h.make_tensor_value_info("w", T.FLOAT, [3])],
        [h.make_tensor_value_info("y", T.FLOAT, [2, 3])], [w, b])


def rand(*shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _elem(a: np.ndarray) -> int:
    return T.STRING if a.dtype == object else onnx.helper.np_dtype_to_tensor_dtype(a.dtype)


def named_node_model(op, inputs, attrs=None, n_out=1, opset=21, consts=(), ir_version=10
                     ) -> onnx.ModelProto:
    """One ``op`` node over ``inputs``, a list of (name, array or None = absent optional
    input); the names in ``consts`` become initializers, the others graph inputs; outputs
    ``out0``.. are left untyped."""
    names, vis, inits = [], [], []
    for n, a in inputs:
        if a is None:
            names.append("")
            continue
        names.append(n)
        if n in consts:
            inits.append(onnx.numpy_helper.from_array(a, n))
        else:
            vis.append(h.make_tensor_value_info(n, _elem(a), list(a.shape)))
    outs = [f"out{i}" for i in range(n_out)]
    node = h.make_node(op, names, outs, **(attrs or {}))
    g = h.make_graph([node], "g", vis, [h.make_empty_tensor_value_info(o) for o in outs], inits)
    return h.make_model(g, opset_imports=[h.make_opsetid("", opset)], ir_version=ir_version)


def single_node_model(op, inputs, attrs, n_out, opset, const) -> onnx.ModelProto:
    """named_node_model with inputs named in0, in1, ... by position; the positions in
    ``const`` become initializers."""
    return named_node_model(op, [(f"in{i}", a) for i, a in enumerate(inputs)], attrs, n_out,
                            opset, {f"in{i}" for i in const})
