"""The narrow interface between the TensorRT provider and TensorRT itself.

Everything the provider decides (what to claim, how to group, which options apply, cache
keys and files, optimization profiles) is written against ``Backend``; only
``onnxrt.providers.tensorrt.runtime`` talks to the ``tensorrt`` package. Tests inject a
fake ``Backend`` so all of that logic runs on machines without a GPU.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Sequence

from onnxrt.framework.transfer import DataTransfer

__all__ = ["Backend", "GpuInfo", "BuildRequest", "Engine"]

Shape = tuple[int, ...]


@dataclass(frozen=True)
class GpuInfo:
    """What identifies a GPU for an engine: engines built for one do not load on another."""

    name: str
    compute_capability: tuple[int, int]
    dla_cores: int = 0

    @property
    def sm(self) -> str:
        return f"{self.compute_capability[0]}{self.compute_capability[1]}"


@dataclass(frozen=True)
class BuildRequest:
    """Everything a build needs. ``profiles``: one dict per optimization profile, giving
    ``(min, opt, max)`` for each input with a dynamic dimension (empty when static)."""

    model: bytes
    name: str
    device_id: int = 0
    inputs: tuple[str, ...] = ()
    outputs: tuple[str, ...] = ()
    profiles: tuple[Mapping[str, tuple[Shape, Shape, Shape]], ...] = ()
    fp16: bool = False
    int8: bool = False
    dynamic_ranges: Mapping[str, float] = field(default_factory=dict)
    workspace: int = 0
    opt_level: int = 3
    dla_core: int | None = None
    timing_cache: bytes | None = None     # b"" = start a new one
    detailed_log: bool = False


class Engine:
    """A deserialized engine, ready to run on its device."""

    def run(self, inputs: Sequence[Any], profile: int = 0) -> list[Any]:
        """Device values in (in the engine's input order), device values out."""
        raise NotImplementedError


class Backend:
    """TensorRT as the provider uses it."""

    def version(self) -> str:
        raise NotImplementedError

    def device_count(self) -> int:
        raise NotImplementedError

    def gpu(self, device_id: int) -> GpuInfo:
        raise NotImplementedError

    def supported_subgraphs(self, model: bytes) -> list[list[int]]:
        """The parser's answer: lists of node indices (into ``model.graph.node``) that it
        can turn into one network each; nodes in no list are unsupported."""
        raise NotImplementedError

    def build(self, request: BuildRequest) -> tuple[bytes, bytes | None]:
        """A serialized engine, and the updated timing cache when one was given."""
        raise NotImplementedError

    def serialize(self, engine: Engine) -> bytes:
        """The serialized form of a loaded engine (what ``load`` takes back), for a compiled
        model's EPContext node."""
        raise NotImplementedError

    def load(self, engine: bytes, device_id: int, inputs: Sequence[str],
             outputs: Sequence[str], output_types: Sequence[int]) -> Engine:
        """Deserialize an engine; ``output_types`` are the ONNX element types the model
        promises (TensorRT may compute some in a narrower type)."""
        raise NotImplementedError

    def data_transfer(self, device_id: int) -> DataTransfer:
        raise NotImplementedError
