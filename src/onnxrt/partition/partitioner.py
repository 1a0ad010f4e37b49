"""Assign each node to an execution provider.

Providers claim nodes in priority order; the CPU provider comes last as the fallback.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Sequence

import onnx

from onnxrt.framework.kernel import KernelDef
from onnxrt.framework.provider import ExecutionProvider

__all__ = ["Assignment", "KernelAssigner"]


@dataclass(frozen=True)
class Assignment:
    provider: ExecutionProvider
    kernel: KernelDef


class KernelAssigner:
    """Per-node choice among kernel-based providers: the first, in priority order, that has a
    kernel for the node's op, domain and schema version."""

    def __init__(self, providers: Sequence[ExecutionProvider]) -> None:
        self.providers = list(providers)

    def assign(self, node: onnx.NodeProto, domain: str, since_version: int) -> Assignment | None:
        for ep in self.providers:
            reg = ep.kernels
            if reg is None:
                continue
            kd = reg.lookup(domain, node.op_type, since_version)
            if kd is not None:
                return Assignment(ep, kd)
        return None

    def versions_known(self, domain: str, op_type: str) -> list[str]:
        out = []
        for ep in self.providers:
            if ep.kernels is not None:
                out.extend(f"{kd.describe()} on {ep.name}"
                           for kd in ep.kernels.versions(domain, op_type))
        return out

    def names(self) -> str:
        return ", ".join(ep.name for ep in self.providers)

    def describe(self) -> Any:
        return [ep.name for ep in self.providers]
