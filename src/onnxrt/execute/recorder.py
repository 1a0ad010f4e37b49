"""Record every value a run computes, by name, as host arrays (for node-by-node comparison)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

__all__ = ["ValueRecorder"]


class ValueRecorder:
    """A node-event hook that keeps a host copy of every named output of every step of the
    main graph (fused nodes expose only their group outputs)."""

    def __init__(self, to_host: dict[str, Callable[[Any], Any]]) -> None:
        self.to_host = to_host
        self.values: dict[str, Any] = {}
        self.producer: dict[str, Any] = {}
        self.main_plan: Any = None

    def node_event(self, step: Any, args: list[Any], outs: list[Any], t0: int,
                   plan: Any = None) -> None:
        if plan is not None and self.main_plan is not None and plan is not self.main_plan:
            return
        if step.provider == "copy":
            return
        conv = self.to_host.get(step.provider)
        for name, v in zip(step.node.outputs, outs):
            if not name or v is None:
                continue
            if conv is not None:
                v = conv(v)
            self.values[name] = np.array(v, copy=True) if isinstance(
                v, (np.ndarray, np.generic)) else v
            self.producer[name] = step
