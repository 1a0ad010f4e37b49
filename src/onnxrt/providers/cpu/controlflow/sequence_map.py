"""SequenceMap: apply a body to each position of the input sequence(s)."""

from __future__ import annotations

from typing import Any

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.controlflow._common import check_io, outer_of


@CPU.kernel("SequenceMap", since=17, context=True)
class SequenceMap:
    def __init__(self, node: NodeInfo) -> None:
        self.node = node
        self.body = node.attrs["body"]
        self.n_own = node.num_inputs
        check_io(node, self.body, self.n_own, node.num_outputs, "body")
        self.k = len(self.body.output_names)

    def __call__(self, *inputs: Any, ctx: Any) -> tuple[Any, ...]:
        own = inputs[: self.n_own]
        outer = outer_of(self.node, inputs[self.n_own:]) if len(inputs) > self.n_own else None
        first = own[0]
        if not isinstance(first, (list, tuple)):
            raise TypeError(f"SequenceMap input 0 must be a sequence, got {type(first).__name__}")
        n = len(first)
        is_seq = [isinstance(x, (list, tuple)) for x in own]
        for j, x in enumerate(own):
            if is_seq[j] and len(x) != n:
                raise ValueError(f"SequenceMap input {j} has {len(x)} elements; input 0 has {n}")
        outs: list[list[Any]] = [[] for _ in range(self.k)]
        body = self.body
        for i in range(n):
            ctx.check_terminate()
            res = body.run([x[i] if s else x for x, s in zip(own, is_seq)], outer, ctx)
            for acc, v in zip(outs, res):
                acc.append(v)
        return tuple(outs)
