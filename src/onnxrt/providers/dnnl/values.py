"""What a oneDNN program holds per value (its memory, layout and ONNX shape), and the
constant weights reordered once per group and shared by every shape's program."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["Val", "WeightCache"]


@dataclass
class Val:
    """A value inside the group: its oneDNN memory, the layout it is in, its ONNX shape."""
    mem: Any
    md: Any
    shape: tuple[int, ...]
    # memories that alias this value's buffer and need its handle each run (group inputs)
    aliases: list[Any] = field(default_factory=list)
    is_input: bool = False


class WeightCache:
    """Constant tensors reordered into a primitive's layout, kept for the group's lifetime
    (every input shape compiled for the group shares them)."""

    def __init__(self) -> None:
        self.items: dict[str, list[tuple[Any, Any, np.ndarray]]] = {}
        self.lock = threading.Lock()

