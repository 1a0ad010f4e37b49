"""A session's graph written as a compiled model: each fused node a compile-based provider
compiled becomes an EPContext node holding its blob (framework/ep_context.py); the rest of
the graph is written as the session runs it."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxrt.framework.ep_context import (EP_CONTEXT_DOMAIN, ContextBlob, is_ep_context,
                                         make_ep_context_node)
from onnxrt.framework.compatibility import COMPATIBILITY_KEY_PREFIX
from onnxrt.ir.graph import Graph
from onnxrt.partition.fused_nodes import FUSED_DOMAIN

__all__ = ["CompiledModel", "write_compiled"]


@dataclass
class CompiledModel:
    """The compiled model, the blob files to write beside it (name relative to the model ->
    bytes), and how many groups became EPContext nodes."""

    model: onnx.ModelProto
    files: dict[str, bytes] = field(default_factory=dict)
    contexts: int = 0


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name)[:80] or "ctx"


def write_compiled(graph: Graph, *, embed: bool, model_stem: str) -> CompiledModel:
    """``graph`` (a built session's) as a compiled model. ``embed``: blobs inside the
    EPContext nodes, else in files ``<model_stem>_<node>.bin`` beside the model."""
    m = graph.to_model()
    fused = {}
    copies: list[onnx.NodeProto] = []
    for n in graph.nodes:
        meta = graph.meta(n)
        if meta is None:
            continue
        if meta.fused is not None and n.domain == FUSED_DOMAIN:
            fused[n.name] = meta
        elif meta.source is not None:
            copies.append(n)
    out = CompiledModel(m)
    nodes: list[onnx.NodeProto] = []
    extra_inits: dict[str, np.ndarray] = {}
    compat: dict[str, str] = {}
    for n in m.graph.node:
        meta = fused.get(n.name) if n.domain == FUSED_DOMAIN else None
        if meta is None:
            nodes.append(n)
            continue
        ep, fs = meta.provider, meta.fused
        blob: ContextBlob | None = ep.export_context(fs, meta.compiled)
        if blob is None:
            if len(fs.nodes) == 1 and is_ep_context(fs.nodes[0]):
                raise ValueError(f"{ep.name} cannot write EPContext node {n.name!r} again")
            nodes.extend(fs.nodes)  # compiled again when the model is loaded
            extra_inits.update(fs.constants)
            continue
        if embed:
            cache, mode = blob.data, 1
        else:
            fname = f"{model_stem}_{_safe(n.name)}.bin"
            k = 1
            while fname in out.files:
                k += 1
                fname = f"{model_stem}_{_safe(n.name)}_{k}.bin"
            out.files[fname] = blob.data
            cache, mode = fname.encode(), 0
        nodes.append(make_ep_context_node(n.name, ep.name, list(fs.inputs), list(fs.outputs),
                                          blob, cache, mode))
        out.contexts += 1
        if blob.compatibility:
            compat[ep.name] = blob.compatibility
    del m.graph.node[:]
    m.graph.node.extend(nodes)
    _drop_copies(m, copies)
    have = {t.name for t in m.graph.initializer}
    for name, v in extra_inits.items():
        if name not in have:
            m.graph.initializer.append(numpy_helper.from_array(np.asarray(v), name))
    if out.contexts and not any(o.domain == EP_CONTEXT_DOMAIN for o in m.opset_import):
        m.opset_import.append(helper.make_opsetid(EP_CONTEXT_DOMAIN, 1))
    keep = [o for o in m.opset_import if o.domain != FUSED_DOMAIN]
    del m.opset_import[:]
    m.opset_import.extend(keep)
    for ep_name, info in compat.items():
        key = COMPATIBILITY_KEY_PREFIX + ep_name
        props = [p for p in m.metadata_props if p.key != key]
        del m.metadata_props[:]
        m.metadata_props.extend(props)
        m.metadata_props.add(key=key, value=info)
    return out


def _drop_copies(m: onnx.ModelProto, copies: list[onnx.NodeProto]) -> None:
    """Remove the device copies partitioning inserted: a loading session inserts its own."""
    if not copies:
        return
    names = {c.name for c in copies}
    outputs = {o.name for o in m.graph.output}
    rename: dict[str, str] = {}
    for c in copies:
        src, dst = c.input[0], c.output[0]
        if dst in outputs:
            rename[src] = dst   # the graph output keeps its name: its producer takes it
        else:
            rename[dst] = src
    kept = [n for n in m.graph.node if not (n.name in names and n.op_type.startswith("Memcpy"))]
    for n in kept:
        for i, v in enumerate(n.input):
            n.input[i] = _follow(rename, v)
        for i, v in enumerate(n.output):
            n.output[i] = _follow(rename, v)
    del m.graph.node[:]
    m.graph.node.extend(kept)


def _follow(rename: dict[str, str], v: str) -> str:
    seen = set()
    while v in rename and v not in seen:
        seen.add(v)
        v = rename[v]
    return v


def default_output_path(input_path: str) -> str:
    """onnxruntime's name for a compiled model: ``model.onnx`` -> ``model_ctx.onnx``."""
    root, ext = os.path.splitext(input_path)
    return f"{root}_ctx{ext or '.onnx'}"
