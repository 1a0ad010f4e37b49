"""Dead nodes: nodes none of whose outputs is read. Not a rule of its own: the driver runs
it first and after every rule that changed the graph (onnxruntime reports it as
DeadNodeElimination)."""

from __future__ import annotations

from onnxrt.ir.graph import Graph

__all__ = ["eliminate_dead"]


def eliminate_dead(g: Graph) -> bool:
    """Nodes none of whose outputs is read (ONNX nodes have no side effects)."""
    changed = False
    while True:
        # one set lookup per output (a consumers() call each made this ~5% of creating a
        # session of 100,000 small nodes)
        read, outs = g.read_names(), set(g.output_names)
        dead = [n for n in g.nodes
                if not any(o and (o in read or o in outs) for o in n.output)]
        if not dead:
            return changed
        g.remove(dead)
        changed = True
