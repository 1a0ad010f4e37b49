"""Claims a provider makes on nodes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

__all__ = ["Capability"]


@dataclass(frozen=True, init=False)
class Capability:
    """A provider's claim on nodes. ``fuse=True`` asks for the nodes to become one fused node
    that the provider compiles (compile-based providers); otherwise each node runs through
    the provider's kernel for it."""

    nodes: tuple[int, ...]
    fuse: bool
    name: str

    def __init__(self, nodes: Iterable[Any], fuse: bool = False, name: str = "") -> None:
        ids = []
        for n in nodes:
            ids.append(int(getattr(n, "id", n)))
        object.__setattr__(self, "nodes", tuple(dict.fromkeys(ids)))
        object.__setattr__(self, "fuse", bool(fuse))
        object.__setattr__(self, "name", name)
