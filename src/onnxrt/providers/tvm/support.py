"""Which nodes TVM takes: those whose op the Relax ONNX frontend has a converter for, whose
values are tensors of a type TVM compiles, and which the frontend really converts when the
node is put to it alone (with its constant inputs), so the placement report gives the
frontend's own reason for every node it refuses. Answers are cached per node signature."""

from __future__ import annotations

import hashlib
import threading
import warnings
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxrt.providers.tvm.rules import known_difference

__all__ = ["decline_reason", "TRIVIAL"]

T = onnx.TensorProto
_TYPES = frozenset({T.FLOAT, T.DOUBLE, T.FLOAT16, T.INT8, T.INT16, T.INT32, T.INT64, T.UINT8,
                    T.UINT16, T.UINT32, T.UINT64, T.BOOL})
# constants up to this size go to the trial conversion as values (shapes, axes, pads the
# converters must read); bigger ones (weights) as typed inputs
_SMALL = 4096
# groups made only of these ops move no arithmetic: a compiled module would cost more
TRIVIAL = frozenset({"Identity", "Reshape", "Shape", "Size", "Squeeze", "Unsqueeze", "Flatten",
                     "Constant", "Cast", "CastLike", "Dropout", "Gather", "Concat", "Slice",
                     "ConstantOfShape", "Expand", "Transpose"})

_cache: dict[str, str] = {}
_lock = threading.Lock()


def _convert_map() -> dict[str, Any]:
    from tvm.relax.frontend.onnx import onnx_frontend

    return onnx_frontend._get_convert_map()


def decline_reason(node: Any, graph: Any) -> str:
    """Why TVM does not take ``node`` ("" when it does)."""
    if node.domain not in ("", "ai.onnx"):
        return f"TVM's ONNX frontend converts only ai.onnx ops, not {node.domain} ones"
    if node.has_subgraphs:
        return "control flow stays with onnxrt (its bodies are offered on their own)"
    if node.op_type not in _convert_map():
        return f"TVM's Relax ONNX frontend has no converter for {node.op_type}"
    wrong = known_difference(node, graph)
    if wrong:
        return wrong
    infos = list(zip(node.inputs, node.input_info)) + list(zip(node.outputs, node.output_info))
    for name, vi in infos:
        if not name:
            continue
        if graph.is_constant(name):
            continue
        if not vi.type.startswith("tensor("):
            what = vi.type or "of unknown type"
            return f"value {name!r} is {what}, not a tensor TVM compiles"
        if vi.elem_type not in _TYPES:
            return f"value {name!r} is {vi.type}: TVM's frontend is not used for that type"
    model, key = _trial_model(node, graph)
    with _lock:
        hit = _cache.get(key)
    if hit is not None:
        return hit
    why = _try_convert(model, [vi for o, vi in zip(node.outputs, node.output_info) if o])
    with _lock:
        _cache[key] = why
    return why


def _trial_model(node: Any, graph: Any) -> tuple[onnx.ModelProto, str]:
    h = hashlib.sha256(node.proto.SerializeToString(deterministic=True))
    inputs, inits = [], []
    for name, vi in zip(node.inputs, node.input_info):
        if not name or any(i.name == name for i in inputs) or any(i.name == name for i in inits):
            continue
        if graph.is_constant(name):
            arr = np.asarray(graph.constant(name))
            if arr.size <= _SMALL:
                inits.append(numpy_helper.from_array(arr, name))
                h.update(b"c" + name.encode() + str(arr.dtype).encode() + arr.tobytes())
                continue
            inputs.append(helper.make_tensor_value_info(
                name, helper.np_dtype_to_tensor_dtype(arr.dtype), list(arr.shape)))
            h.update(b"w" + name.encode() + str(arr.dtype).encode() + str(arr.shape).encode())
            continue
        shape = None if vi.shape is None else [
            d if isinstance(d, int) and d >= 0 else f"d{k}" for k, d in enumerate(vi.shape)]
        inputs.append(helper.make_tensor_value_info(name, vi.elem_type, shape))
        h.update(b"i" + name.encode() + str(vi.elem_type).encode() + str(shape).encode())
    outputs = [helper.make_tensor_value_info(o, vi.elem_type or T.FLOAT, None)
               for o, vi in zip(node.outputs, node.output_info) if o]
    g = helper.make_graph([node.proto], "probe", inputs, outputs, inits)
    opset = int(graph.opsets.get("", graph.opsets.get("ai.onnx", node.opset)))
    h.update(str(opset).encode())
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    return m, h.hexdigest()


def _try_convert(model: onnx.ModelProto, outputs: list[Any]) -> str:
    from tvm.relax.frontend.onnx import from_onnx

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = from_onnx(model, dtype_dict=_dtypes(model), keep_params_in_input=False)
    except Exception as e:
        return "TVM's frontend cannot convert it: " + _first_line(e)
    # a converter may leave out outputs (LayerNormalization's Mean and InvStdDev) or give
    # them another rank: what it returns must be what the node promises
    ret = mod["main"].ret_ty
    fields = list(ret.fields) if hasattr(ret, "fields") else [ret]
    if len(fields) != len(outputs):
        return (f"TVM's converter gives {len(fields)} output(s), the node has "
                f"{len(outputs)}")
    for k, (f, vi) in enumerate(zip(fields, outputs)):
        ndim = getattr(f, "ndim", -1) if type(f).__name__ == "TensorType" else -1
        if vi.shape is not None and ndim is not None and ndim >= 0 and ndim != len(vi.shape):
            return (f"TVM's converter gives output {k} rank {ndim}, the node's is "
                    f"{len(vi.shape)}")
    return ""


def _dtypes(model: onnx.ModelProto) -> dict[str, str]:
    out = {}
    for i in model.graph.input:
        et = i.type.tensor_type.elem_type
        if et:
            out[i.name] = str(np.dtype(helper.tensor_dtype_to_np_dtype(et)))
    return out


def _first_line(e: Exception) -> str:
    text = str(e).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    # TVM's errors carry a traceback; its last line says what went wrong
    msg = lines[-1] if lines else type(e).__name__
    return (msg[:300] + "...") if len(msg) > 300 else msg


