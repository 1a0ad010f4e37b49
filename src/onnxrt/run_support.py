"""What InferenceSession needs around a run that is not a pipeline stage: onnxruntime's
C-level session view, feeds that must never be aliased, LoRA adapters' feeds, and the host
arena's options."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from onnxrt.errors import InvalidArgument
from onnxrt.execute.memory import use_arena
from onnxrt.options import RunOptions, SessionOptions
from onnxrt.values import IOBinding, OrtValue, OrtValueVector

__all__ = ["CSession", "feed_ids", "with_adapters", "shrink", "apply_arena"]


class CSession:
    """The C-level session object onnxruntime's Python layer wraps (``session._sess``), with
    its argument orders, over the same onnxrt session."""

    def __init__(self, session: Any) -> None:
        self._session = session

    def run_with_ort_values(self, feeds: dict[str, OrtValue], output_names: Sequence[str],
                            run_options: RunOptions | None = None) -> OrtValueVector:
        return OrtValueVector(self._session.run_with_ort_values(list(output_names) or None,
                                                                feeds, run_options))

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None
                           ) -> None:
        self._session.run_with_iobinding(iobinding, run_options)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._session, name)


def feed_ids(feeds: Any) -> frozenset[int]:
    """ids of the caller's arrays in a feed dict: an output that is one of them (an input
    passed through unchanged) is copied, never returned as the caller's own buffer."""
    if not isinstance(feeds, dict):
        return frozenset()
    ids = []
    for v in feeds.values():
        if isinstance(v, OrtValue):
            v = v.value()
        if isinstance(v, np.ndarray):
            ids.append(id(v))
    return frozenset(ids)


def with_adapters(feeds: dict[str, Any], adapters: Sequence[Any]) -> dict[str, Any]:
    """The feeds plus every active adapter's parameters (which replace the model's
    overridable initializers or feed its inputs of the same names for this run)."""
    out = dict(feeds) if isinstance(feeds, dict) else feeds
    if not isinstance(out, dict):
        return out
    for ad in adapters:
        for name, arr in ad.parameters().items():
            if name in feeds:
                raise InvalidArgument(f"'{name}' is fed by the caller and by an active LoRA "
                                      f"adapter; give it once")
            out[name] = arr
    return out


def shrink(spec: str) -> None:
    """onnxruntime's run option ``memory.enable_memory_arena_shrinkage`` ("cpu:0;gpu:0")."""
    from onnxrt.execute.memory import shrink_arena

    for entry in filter(None, (e.strip() for e in str(spec).split(";"))):
        kind = entry.split(":", 1)[0].strip().lower()
        if kind != "cpu":
            raise InvalidArgument(f"memory.enable_memory_arena_shrinkage: onnxrt shrinks the "
                                  f"CPU arena only (device memory belongs to the device's "
                                  f"engine), not {entry!r}")
        shrink_arena()


def apply_arena(so: SessionOptions, eps: Sequence[Any]) -> None:
    """The host arena: SessionOptions.enable_cpu_mem_arena, the CPU provider's use_arena and
    arena_extend_strategy options, a shared allocator registered with
    create_and_register_allocator for sessions with ``session.use_env_allocators`` = 1."""
    from onnxrt.framework.allocators import registered_allocator
    from onnxrt.execute.memory import set_extend_strategy

    cpu = next((ep for ep in eps if ep.name == "CPUExecutionProvider"), None)
    opts = cpu.provider_options if cpu is not None else {}
    use = so.enable_cpu_mem_arena and str(opts.get("use_arena", "1")).strip() not in (
        "0", "false", "False")
    strategy = opts.get("arena_extend_strategy", "kNextPowerOfTwo")
    strategy = {"0": "kNextPowerOfTwo", "1": "kSameAsRequested"}.get(str(strategy),
                                                                     str(strategy))
    if strategy not in ("kNextPowerOfTwo", "kSameAsRequested"):
        raise InvalidArgument(f"CPUExecutionProvider option arena_extend_strategy must be "
                              f"kNextPowerOfTwo or kSameAsRequested, not {strategy!r}")
    shared, cfg = registered_allocator()
    if so._config.get("session.use_env_allocators") == "1" and shared:
        use = True
        if cfg is not None and cfg.arena_extend_strategy in (0, 1):
            strategy = ("kNextPowerOfTwo", "kSameAsRequested")[cfg.arena_extend_strategy]
    if use:
        use_arena()
        if strategy != "kNextPowerOfTwo" or "arena_extend_strategy" in opts:
            set_extend_strategy(strategy)
