"""If: run one of two planned branches and return its outputs."""

from __future__ import annotations

from typing import Any

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.controlflow._common import outer_of, scalar_bool


@CPU.kernel("If", since=1, context=True, host_inputs=(0,))
class If:
    """Every version: v11+ only widen the output types (sequences, optionals)."""

    def __init__(self, node: NodeInfo) -> None:
        self.node = node
        self.then_branch = node.attrs["then_branch"]
        self.else_branch = node.attrs["else_branch"]
        n_then = len(self.then_branch.output_names)
        n_else = len(self.else_branch.output_names)
        if n_then != n_else:
            raise ValueError(f"If branches have different output counts: then_branch "
                             f"{n_then}, else_branch {n_else}")
        if n_then < node.num_outputs:
            raise ValueError(f"If branches produce {n_then} outputs; the node has "
                             f"{node.num_outputs}")
        self.n_out = node.num_outputs

    def __call__(self, cond: Any, *outer_vals: Any, ctx: Any) -> tuple[Any, ...]:
        branch = self.then_branch if scalar_bool(cond, "If cond") else self.else_branch
        outer = outer_of(self.node, outer_vals) if outer_vals else None
        res = branch.run([], outer, ctx)
        return tuple(res[: self.n_out])
