"""A compile-based provider's group of nodes becomes one fused node of the graph: the group
handed to the provider's ``compile`` as a standalone model, the callable it returns kept in
the node's annotations for the planner."""

from __future__ import annotations

from typing import Any

import onnx
from onnx import helper

from onnxrt.errors import CannotCompile, EPFail, ModelRequiresCompilation
from onnxrt.framework.ep_context import StaleContext
from onnxrt.framework.fused import FusedSubgraph, HostGroup, PerShapeCompile
from onnxrt.ir.attrs import constant_node_value, tensor_to_array
from onnxrt.ir.graph import Graph, SubGraph
from onnxrt.ir.walk import node_reads

__all__ = ["fuse_group", "FUSED_DOMAIN"]

FUSED_DOMAIN = "onnxrt.fused"


def _constants(g: Graph | SubGraph, reads: list[str]) -> dict[str, Any]:
    """The values among ``reads`` known now: the graph's constants and Constant nodes (only
    these are converted: a model of many groups would convert every weight per group)."""
    want = set(reads)
    out: dict[str, Any] = {}
    for name, v in g.constant_values().items():
        if name in want:
            out[name] = tensor_to_array(v) if isinstance(v, onnx.TensorProto) else v
    for n in g.nodes:
        if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and n.output and \
                n.output[0] in want:
            try:
                out[n.output[0]] = constant_node_value(n)
            except Exception:
                continue
    return out


def fuse_group(root: Graph, g: Graph | SubGraph, grp: Any, members: list[onnx.NodeProto],
               types: dict[str, Any], opsets: dict[str, int], allow_compile: bool = True,
               host: Any = None) -> onnx.NodeProto:
    """Replace ``members`` (the nodes of ``grp`` in ``g``) by one fused node, compiled by
    the group's provider; annotations go to ``root``. ``host``: the session's
    ``KernelLookup``, which runs a per-shape group at the shapes its provider cannot compile
    (None: such a shape fails the run with ``EPFail``), and a group whose provider raises
    ``CannotCompile`` at session creation; a provider that compiles per shape by itself
    finds it as ``fused.host`` (framework/fused.py ``host_run_for``)."""
    ep = grp.provider
    ids = {id(m) for m in members}
    used_outside: set[str] = {vi.name for vi in g.outputs}
    for n in g.nodes:
        if id(n) not in ids:
            used_outside.update(node_reads(n))
    produced = {o for m in members for o in m.output if o}
    out_names = [o for m in members for o in m.output if o and o in used_outside]
    reads = list(dict.fromkeys(r for m in members for r in node_reads(m)
                               if r and r not in produced))
    known = _constants(g, reads)
    in_names = [r for r in reads if r not in known]
    consts = {r: known[r] for r in reads if r in known}
    fused = FusedSubgraph(grp.name, ep.name, members, in_names, out_names, consts,
                          dict(opsets), types, g.name)
    fused.host = host
    ctx = getattr(grp, "context", None)
    if ctx is None and not allow_compile:
        raise ModelRequiresCompilation(
            f"{ep.name} needs to compile fused node {grp.name!r} ({len(members)} nodes), and "
            f"session.disable_model_compile is set: compile the model first (ModelCompiler)")
    try:
        if ctx is not None:
            fn = ep.load_context(ctx, fused)
        else:
            fn = PerShapeCompile(ep, fused, host) if ep.compile_per_shape \
                else _compile_or_host(ep, fused, host)
    except StaleContext:
        raise
    except Exception as e:
        if ctx is not None:
            raise EPFail(f"{ep.name} failed to load EPContext node {grp.name!r}: "
                         f"{type(e).__name__}: {e}") from e
        raise EPFail(f"{ep.name} failed to compile fused node {grp.name!r} "
                     f"({len(members)} nodes): {type(e).__name__}: {e}") from e
    node = helper.make_node(f"{ep.name}_fused", in_names, out_names, name=grp.name,
                            domain=FUSED_DOMAIN)
    first = next(n for n in g.nodes if id(n) in ids)
    if isinstance(g, Graph):
        g.replace(members, node, first)
    else:
        out = []
        for n in g.nodes:
            if n is first:
                out.append(node)
            if id(n) not in ids:
                out.append(n)
        g.nodes = out
    root.annotate(node, provider=ep, fused=fused, compiled=fn)
    grp.compiled = fn
    return node


def _compile_or_host(ep: Any, fused: FusedSubgraph, host: Any) -> Any:
    try:
        return ep.compile(fused)
    except CannotCompile as e:
        return HostGroup(ep, fused, host, e)
