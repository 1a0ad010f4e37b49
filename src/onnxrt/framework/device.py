"""Devices: where an execution provider's values live."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Device", "CPU_DEVICE"]


@dataclass(frozen=True)
class Device:
    """A memory location: ``Device("cpu")``, ``Device("cuda", 0)``.

    ``Device("cuda:1")`` is accepted too and parsed into type and id.
    """

    type: str = "cpu"
    id: int = 0

    def __post_init__(self) -> None:
        if ":" in self.type:
            t, _, i = self.type.partition(":")
            object.__setattr__(self, "type", t)
            object.__setattr__(self, "id", int(i or 0))
        object.__setattr__(self, "type", self.type.lower())

    @property
    def is_host(self) -> bool:
        return self.type == "cpu"

    def __str__(self) -> str:
        return "cpu" if self.type == "cpu" else f"{self.type}:{self.id}"


CPU_DEVICE = Device("cpu", 0)
