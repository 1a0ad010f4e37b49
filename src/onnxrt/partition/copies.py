"""Explicit copy nodes where a value crosses devices, as onnxruntime inserts MemcpyFromHost
and MemcpyToHost after partitioning.

Every input a node reads is wanted on its provider's device (on the host for the inputs
its kernel reads there: shapes, axes); a value produced elsewhere gets a copy node, one per
value and device, placed before its first reader. Device-to-device goes through the host.
Results of a nested graph go back to the host, where the control-flow kernel reads them;
the main graph's outputs stay where they are produced. The planner turns a copy of a
constant into a copied constant, done once at session creation.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

from onnx import helper

from onnxrt.framework.device import CPU_DEVICE, Device
from onnxrt.ir.graph import Graph, SubGraph, subgraph_reads
from onnxrt.ir.walk import has_subgraphs, topo_order

__all__ = ["CopyRecord", "insert_copies"]


@dataclass(frozen=True)
class CopyRecord:
    """A device copy the graph makes: which value, from where to where, for whom."""

    value: str
    src: str
    dst: str
    consumer: str
    graph: str


def insert_copies(root: Graph, g: Graph | SubGraph, providers: Sequence[Any],
                  is_main: bool) -> list[CopyRecord]:
    """Put copy nodes into ``g`` (annotated in ``root``); the copies made."""
    records: list[CopyRecord] = []
    where: dict[str, Device] = {}            # values produced off the host
    made: dict[tuple[str, Device], str] = {}
    pending: list[Any] = []

    def on(x: str, dev: Device, who: str) -> str:
        src = where.get(x, CPU_DEVICE)
        if src == dev:
            return x
        key = (x, dev)
        if key in made:
            return made[key]
        if not dev.is_host and not src.is_host:   # device to device goes through the host
            x_host = on(x, CPU_DEVICE, who)
            name = on(x_host, dev, who)
            made[key] = name
            return name
        name = f"{x}@{dev}"
        node = helper.make_node("MemcpyToHost" if dev.is_host else "MemcpyFromHost", [x],
                                [name], name=f"copy:{x}->{dev}")
        root.annotate(node, device=dev, source=src)
        if x in g.types:
            g.types[name] = g.types[x]
        pending.append(node)
        if not dev.is_host:
            where[name] = dev
        made[key] = name
        records.append(CopyRecord(x, str(src), str(dev), who, g.name))
        return name

    out: list[Any] = []
    for n in topo_order(g.nodes, g.name):
        meta = root.meta(n)
        dev = meta.provider.device if meta is not None and meta.provider is not None \
            else CPU_DEVICE
        if meta is not None and meta.fused is not None:
            who = f"fused node {n.name!r}"
            host_in: frozenset[int] = frozenset()
        else:
            who = f"node {n.name!r} ({n.op_type})"
            host_in = meta.kernel.host_inputs if meta is not None and meta.kernel else \
                frozenset()
        for k, x in enumerate(n.input):
            if x:
                y = on(x, CPU_DEVICE if k in host_in else dev, who)
                if y != x:
                    n.input[k] = y
        if has_subgraphs(n):      # outer values its subgraphs read, passed along by name
            for x in sorted(subgraph_reads(n)):
                y = on(x, dev, who)
                if y != x:
                    root.annotate(n).implicit[x] = y
        out += pending
        pending.clear()
        out.append(n)
        if not dev.is_host:
            for o in n.output:
                if o:
                    where[o] = dev
    if not is_main:
        for vi in g.outputs:
            y = on(vi.name, CPU_DEVICE, f"graph {g.name!r} output")
            if y != vi.name:
                vi.name = y
        out += pending
    g.nodes = out
    if isinstance(g, Graph):
        g.touch()
    return records
