"""EPContext nodes in partitioning: each is claimed, before any provider's
``get_capability``, by the session provider that wrote it (its ``source``), as a fused group
of one node that the provider loads instead of compiling."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from onnxrt.errors import EPFail
from onnxrt.framework.ep_context import is_ep_context, parse_ep_context

if TYPE_CHECKING:
    from onnxrt.partition.partitioner import Partition

__all__ = ["ContextLoad", "claim_contexts"]


@dataclass(frozen=True)
class ContextLoad:
    """How a session treats compiled models: ``base_dir``, the folder blob files are read
    from (None: nowhere); ``allow_compile`` False (``session.disable_model_compile``): a group
    that would need compiling is an error (ModelRequiresCompilation)."""

    base_dir: str | None = None
    allow_compile: bool = True


def claim_contexts(part: Partition, path: str, ids: list[int], load: ContextLoad,
                   new_group: Any) -> list[int]:
    """Claim the EPContext nodes among ``ids`` for their providers; the ids left."""
    left = []
    for i in ids:
        view = part.nodes[i]
        if not is_ep_context(view.proto):
            left.append(i)
            continue
        ctx = parse_ep_context(view.proto, load.base_dir)
        ep = next((e for e in part.providers if e.name == ctx.source), None)
        if ep is None or not ep.loads_contexts():
            names = ", ".join(e.name for e in part.providers)
            why = ("which this session does not use" if ep is None else
                   "which cannot load EPContext nodes")
            raise EPFail(f"EPContext node {ctx.name!r} was compiled by "
                         f"{ctx.source or 'an unnamed provider'}, {why} (the session's "
                         f"providers: {names}); add that provider, or use the model as it "
                         f"was before compiling")
        new_group(ep, i, path, ctx)
    return left
