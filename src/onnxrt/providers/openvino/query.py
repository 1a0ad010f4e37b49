"""Which nodes OpenVINO supports, asked of OpenVINO itself.

The offered nodes are written out as one ONNX model (every node renamed uniquely, every value
a model output so nothing is dropped as dead), converted with OpenVINO's ONNX frontend in
partial mode (an op it cannot convert becomes a framework node instead of failing the whole
model), and passed to ``Core.query_model``. OpenVINO answers with the names of its own ops;
each ONNX node owns the OpenVINO ops that produce its output tensors (ONNX value names
survive conversion as tensor names) back to the tensors that are ONNX values, so a node is
supported when every op it owns is. When the whole model cannot be read (an element type
OpenVINO lacks, say), each node is asked alone, cached per node signature.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import threading
from typing import Any, Iterable

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxrt.providers.openvino import runtime
from onnxrt.providers.openvino.rules import known_difference

__all__ = ["query_support"]

_FRAMEWORK_OPS = frozenset({"FrameworkNode", "ONNXFrameworkNode", "NotSupportedONNXNode",
                            "ONNXSubgraphFrameworkNode"})
_BOUNDARY_OPS = frozenset({"Parameter", "Constant", "Result"})
# element types this provider does not hand to OpenVINO (no OpenVINO tensor, or no numpy
# bridge for its bits): a node reading or producing them stays here
_NO_OV_TYPE = frozenset(getattr(onnx.TensorProto, t) for t in (
    "COMPLEX64", "COMPLEX128", "UNDEFINED", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
    "FLOAT8E5M2FNUZ", "FLOAT8E8M0", "UINT4", "INT4", "FLOAT4E2M1", "UINT2", "INT2")
    if hasattr(onnx.TensorProto, t))

_node_cache: dict[str, str] = {}
_node_cache_lock = threading.Lock()


def _read(model_bytes: bytes) -> Any:
    """An ov.Model from ONNX bytes, unconvertible ops left as framework nodes."""
    fe = runtime.onnx_frontend()
    return fe.convert_partially(fe.load(io.BytesIO(model_bytes)))


def _tensor_vi(name: str, info: Any, with_shape: bool = True) -> onnx.ValueInfoProto:
    if info is None or not info.elem_type:
        vi = onnx.ValueInfoProto()
        vi.name = name  # no type: OpenVINO infers it
        return vi
    shape = info.shape if with_shape else None
    if shape is not None:
        shape = [d if isinstance(d, (int, str)) else None for d in shape]
    return helper.make_tensor_value_info(name, info.elem_type, shape)


def _decline_reason(node: Any, graph: Any, value_info: dict[str, Any],
                    known: set[str]) -> str:
    """Why a node cannot even be put in front of OpenVINO ("" when it can). Values it reads
    from outside the queried nodes need a known tensor type (they become the query model's
    inputs); values it produces need none (OpenVINO infers them), but a known non-tensor or
    complex type rules the node out."""
    if node.has_subgraphs:
        return "control flow stays with onnxrt (its bodies are offered on their own)"
    diff = known_difference(node, graph)
    if diff:
        return diff
    for name in node.inputs:
        if not name or name in known or graph.is_constant(name):
            continue
        vi = value_info.get(name)
        if vi is None or not vi.type.startswith("tensor("):
            what = vi.type if vi is not None else "of unknown type"
            return f"its input {name!r} is {what}, not a tensor OpenVINO can take"
    for name in list(node.inputs) + list(node.outputs):
        vi = value_info.get(name) if name else None
        if vi is None or vi.type == "unknown":
            continue
        if not vi.type.startswith("tensor("):
            return f"value {name!r} is a {vi.type}, not a tensor OpenVINO can take"
        if vi.elem_type in _NO_OV_TYPE:
            return f"value {name!r} has element type {vi.type}, which OpenVINO lacks"
    return ""


def _build(nodes: list[Any], graph: Any, known_types: dict[str, Any]) -> onnx.ModelProto:
    """One model of ``nodes``: unknown-producer values are inputs (constants initializers),
    every node output a model output, nodes named ``q<id>``."""
    produced = {o for n in nodes for o in n.outputs if o}
    inputs: dict[str, None] = {}
    inits: list[onnx.TensorProto] = []
    seen_init: set[str] = set()
    for n in nodes:
        for i in n.inputs:
            if not i or i in produced or i in inputs or i in seen_init:
                continue
            if graph.is_constant(i):
                inits.append(numpy_helper.from_array(np.asarray(graph.constant(i)), i))
                seen_init.add(i)
            else:
                inputs[i] = None
    protos = []
    for n in nodes:
        p = onnx.NodeProto()
        p.CopyFrom(n.proto)
        p.name = f"q{n.id}"
        protos.append(p)
    # a value is an output when something outside the queried nodes reads it, or nothing
    # does (so OpenVINO keeps the node); every value an output would make query_model slower
    # (densenet121: 0.77 s against 0.4 s) and tensor names survive conversion anyway
    ids = {n.id for n in nodes}
    graph_outs = set(graph.outputs)
    outs = [o for n in nodes for o in n.outputs if o and (
        o in graph_outs or not graph.consumers(o) or
        any(c.id not in ids for c in graph.consumers(o)))]
    g = helper.make_graph(protos, "query",
                          [_tensor_vi(i, known_types.get(i)) for i in inputs],
                          [_tensor_vi(o, known_types.get(o), with_shape=False) for o in outs],
                          inits)
    opsets: dict[str, int] = {}
    for n in nodes:
        opsets[n.domain] = max(opsets.get(n.domain, 0), n.opset)
    opsets.setdefault("", 13)
    return helper.make_model(g, opset_imports=[helper.make_opsetid(d, v)
                                               for d, v in opsets.items()])


def _owned_ops(ov_model: Any, onnx_names: set[str]) -> tuple[dict[str, list[Any]], set[str]]:
    """ONNX value name -> the OpenVINO ops computing it from other ONNX values; and the set
    of ONNX value names present in the OpenVINO model."""
    producer: dict[str, tuple[Any, int]] = {}
    for op in ov_model.get_ordered_ops():
        for k, out in enumerate(op.outputs()):
            for nm in out.get_names():
                if nm in onnx_names:
                    producer.setdefault(nm, (op, k))

    def is_boundary(out: Any) -> bool:
        return bool(out.get_names() & onnx_names) or \
            out.get_node().get_type_name() in _BOUNDARY_OPS

    owned: dict[str, list[Any]] = {}
    for name, (op, k) in producer.items():
        start = op.outputs()[k]
        # an output that is also another ONNX value (Identity, Dropout) owns no op
        if len(start.get_names() & onnx_names) > 1 or op.get_type_name() in _BOUNDARY_OPS:
            owned[name] = []
            continue
        # (Python wrappers of OpenVINO nodes are made per access: key them by instance id)
        ops, seen, stack = [], {op.get_instance_id()}, [op]
        while stack:
            cur = stack.pop()
            ops.append(cur)
            for inp in cur.inputs():
                src = inp.get_source_output()
                nxt = src.get_node()
                key = nxt.get_instance_id()
                if key in seen or is_boundary(src):
                    continue
                seen.add(key)
                stack.append(nxt)
        owned[name] = ops
    return owned, set(producer)


def _judge(nodes: list[Any], ov_model: Any, supported: dict[str, str],
           onnx_names: set[str], device: str) -> dict[int, str]:
    owned, present = _owned_ops(ov_model, onnx_names)
    out: dict[int, str] = {}
    for n in nodes:
        outs = [o for o in n.outputs if o]
        found = [o for o in outs if o in present]
        if not found:
            out[n.id] = "OpenVINO's ONNX reader produced none of its outputs"
            continue
        reason = ""
        for o in found:
            for op in owned.get(o, ()):
                t = op.get_type_name()
                if t in _FRAMEWORK_OPS:
                    reason = (f"OpenVINO cannot convert {n.domain or 'ai.onnx'}::{n.op_type}-"
                              f"{n.since_version}")
                    break
                if op.get_friendly_name() not in supported:
                    reason = f"OpenVINO's {device} plugin does not support its {t} op"
                    break
            if reason:
                break
        out[n.id] = reason
    return out


def _whole(nodes: list[Any], graph: Any, types: dict[str, Any], device: str,
           config: dict[str, Any]) -> dict[int, str]:
    model = _build(nodes, graph, types)
    ov_model = _read(model.SerializeToString())
    supported = runtime.core().query_model(ov_model, device, config)
    names = {i.name for i in model.graph.input} | {t.name for t in model.graph.initializer}
    names |= {o for n in nodes for o in n.outputs if o}
    return _judge(nodes, ov_model, dict(supported), names, device)


def _signature(node: Any, graph: Any, types: dict[str, Any]) -> str:
    """What decides support for one node: op, attributes, input/output types, constants."""
    p = onnx.NodeProto()
    p.CopyFrom(node.proto)
    p.name = ""
    h = hashlib.sha256(p.SerializeToString())
    h.update(f"{node.domain}:{node.opset}".encode())
    for i in list(node.inputs) + list(node.outputs):
        vi = types.get(i)
        h.update(repr((i, vi.elem_type if vi else None, vi.shape if vi else None)).encode())
        if i in node.inputs and i and graph.is_constant(i):
            a = np.asarray(graph.constant(i))
            h.update(a.tobytes() if a.dtype != object else repr(a.tolist()).encode())
    return h.hexdigest()


def _one_by_one(nodes: list[Any], graph: Any, types: dict[str, Any], device: str,
                config: dict[str, Any]) -> dict[int, str]:
    out: dict[int, str] = {}
    ckey = json.dumps([device, config], sort_keys=True, default=str)
    for n in nodes:
        key = _signature(n, graph, types) + ckey
        with _node_cache_lock:
            hit = _node_cache.get(key)
        if hit is None:
            try:
                hit = _whole([n], graph, types, device, config)[n.id]
            except Exception as e:
                hit = f"OpenVINO could not answer for it ({_first_line(e)})"
            with _node_cache_lock:
                _node_cache[key] = hit
        out[n.id] = hit
    return out


def _first_line(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    # OpenVINO's messages start with "Exception from src/...": the last line says what
    useful = [ln for ln in lines if not ln.startswith("Exception from") and
              not ln.startswith("Check '")]
    return (useful[0] if useful else (lines[0] if lines else type(e).__name__))[:200]


def query_support(graph: Any, nodes: Iterable[Any], device: str, config: dict[str, Any],
                  cache_dir: str = "", cache_key: str = "") -> dict[int, str]:
    """Node id -> "" when OpenVINO supports the node on ``device``, else the reason why not.
    With ``cache_dir``, answers are kept there keyed by the nodes, the OpenVINO version and
    ``cache_key`` (the device settings), so a second session skips the query."""
    nodes = list(nodes)
    types = dict(graph.value_info)
    result: dict[int, str] = {}
    known: set[str] = set()
    ok_nodes = []
    for n in nodes:
        why = _decline_reason(n, graph, types, known)
        if why:
            result[n.id] = why
            continue
        ok_nodes.append(n)
        known.update(o for o in n.outputs if o)
    if not ok_nodes:
        return result
    path = ""
    if cache_dir:
        path = _cache_path(ok_nodes, graph, types, cache_dir, cache_key)
        cached = _load_cached(path, ok_nodes)
        if cached is not None:
            result.update(cached)
            return result
    try:
        answer = _whole(ok_nodes, graph, types, device, config)
    except Exception:
        answer = _one_by_one(ok_nodes, graph, types, device, config)
    result.update(answer)
    if path:
        _store(path, ok_nodes, answer)
    return result


def _cache_path(nodes: list[Any], graph: Any, types: dict[str, Any], cache_dir: str,
                cache_key: str) -> str:
    h = hashlib.sha256()
    h.update(f"{runtime.version()}|{cache_key}".encode())
    for n in nodes:
        h.update(_signature(n, graph, types).encode())
    return os.path.join(cache_dir, f"onnxrt-ov-query-{h.hexdigest()[:32]}.json")


def _load_cached(path: str, nodes: list[Any]) -> dict[int, str] | None:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    if not isinstance(data, list) or len(data) != len(nodes):
        return None
    return {n.id: str(r) for n, r in zip(nodes, data)}


def _store(path: str, nodes: list[Any], answer: dict[int, str]) -> None:
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump([answer.get(n.id, "") for n in nodes], f)
        os.replace(tmp, path)
    except OSError:
        pass  # a cache that cannot be written only costs time
