"""Engines for fused subgraphs: optimization profiles, the engine cache, builds.

An engine is built once per subgraph and profile set, and found again in the engine cache
by a key that covers everything that makes an engine differ: TensorRT's version, the GPU
(name and compute capability), the subgraph (a hash of its serialized model) and the build
options (precision, calibration, workspace, optimization level, DLA, profiles). Change any
of them and the key changes, so a stale engine is never loaded.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Mapping, Sequence

import numpy as np
import onnx

from onnxrt.providers.tensorrt.backend import BuildRequest, Engine, GpuInfo
from onnxrt.providers.tensorrt.options import TrtSettings
from onnxrt.providers.tensorrt.partition import lowest_ir_version

if TYPE_CHECKING:
    from onnxrt.providers.tensorrt.provider import TensorrtExecutionProvider

__all__ = ["cache_key", "EngineCache", "CompiledSubgraph", "timing_cache_file",
           "profile_index"]

_LOG = logging.getLogger("onnxrt.tensorrt")
# trt_force_sequential_engine_build: one build at a time in the whole process
_SEQUENTIAL = threading.Lock()
_TIMING_LOCK = threading.Lock()
CACHE_FORMAT = 1

Shape = tuple[int, ...]
Ranges = Mapping[str, tuple[Shape, Shape, Shape]]


def progress(message: str) -> None:
    """Builds take seconds to minutes: say so. INFO on the ``onnxrt.tensorrt`` logger, and
    one plain stderr line when logging is not configured (no warning, nothing to silence)."""
    _LOG.info(message)
    if not _LOG.hasHandlers():
        print(f"onnxrt: {message}", file=sys.stderr, flush=True)


def cache_key(trt_version: str, gpu: GpuInfo, model_hash: str, settings: TrtSettings,
              profiles: Sequence[Ranges]) -> tuple[str, dict[str, Any]]:
    """The engine cache key (hex sha256) and the document it hashes."""
    doc = {
        "format": CACHE_FORMAT,
        "tensorrt": trt_version,
        "gpu": gpu.name,
        "compute_capability": gpu.sm,
        "subgraph": model_hash,
        "fp16": settings.fp16,
        "int8": settings.int8,
        "calibration": settings.calibration_digest() if settings.int8 else "",
        "workspace": settings.workspace,
        "optimization_level": settings.opt_level,
        "dla_core": settings.dla_core if settings.dla else None,
        "profiles": [{name: [list(s) for s in rng] for name, rng in sorted(p.items())}
                     for p in profiles],
    }
    text = json.dumps(doc, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest(), doc


class EngineCache:
    """Serialized engines in a folder, one file per key, with a JSON note beside each that
    says what the key covers (for people; lookups use the file name only)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory or "."

    def path(self, key: str, gpu: GpuInfo) -> str:
        return os.path.join(self.directory, f"TensorrtExecutionProvider_sm{gpu.sm}_"
                                            f"{key[:40]}.engine")

    def read(self, key: str, gpu: GpuInfo) -> bytes | None:
        try:
            with open(self.path(key, gpu), "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write(self, key: str, gpu: GpuInfo, data: bytes, doc: dict[str, Any]) -> str:
        path = self.path(key, gpu)
        _atomic_write(path, data)
        _atomic_write(path[:-len(".engine")] + ".json",
                      json.dumps(doc, indent=1, sort_keys=True).encode())
        return path


def _atomic_write(path: str, data: bytes) -> None:
    """Write then rename, so a concurrent reader never sees half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp_trt_")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def timing_cache_file(settings: TrtSettings, trt_version: str, gpu: GpuInfo) -> str:
    return os.path.join(settings.timing_cache_path or ".",
                        f"TensorrtExecutionProvider_trt{trt_version}_sm{gpu.sm}.timing")


def _normalized(model: onnx.ModelProto) -> onnx.ModelProto:
    """The subgraph without what differs between sessions of the same model (its fused
    node's name), at the lowest IR version that holds its opsets."""
    m = onnx.ModelProto()
    m.CopyFrom(model)
    m.graph.name = "trt_subgraph"
    m.producer_name = "onnxrt"
    m.ir_version = lowest_ir_version(m.opset_import)
    untyped = [vi for vi in m.graph.output if not vi.type.HasField("tensor_type")
               or not vi.type.tensor_type.HasField("shape")]
    if untyped:
        # the planner knows only declared types; TensorRT's parser wants typed outputs
        try:
            inferred = onnx.shape_inference.infer_shapes(m)
        except Exception:
            return m
        known = {vi.name: vi.type for vi in list(inferred.graph.value_info) +
                 list(inferred.graph.output) if vi.type.tensor_type.HasField("shape")}
        for vi in untyped:
            if vi.name in known:
                vi.type.CopyFrom(known[vi.name])
    return m


def _typed(model: onnx.ModelProto, known: Mapping[str, Any]) -> onnx.ModelProto:
    """Types (from the partitioner's shape inference) for untyped inputs and outputs."""
    missing = [vi for vi in list(model.graph.input) + list(model.graph.output)
               if not vi.type.HasField("tensor_type") and vi.name in known]
    if not missing:
        return model
    m = onnx.ModelProto()
    m.CopyFrom(model)
    for vi in list(m.graph.input) + list(m.graph.output):
        info = known.get(vi.name)
        if info is None or vi.type.HasField("tensor_type"):
            continue
        shape = None if info.shape is None else \
            [d if isinstance(d, (int, str)) else None for d in info.shape]
        vi.type.CopyFrom(onnx.helper.make_tensor_type_proto(info.elem_type, shape))
    return m


def _elem_type(value: Any) -> int:
    """The ONNX element type of a device value (numpy-like or torch dtype)."""
    name = str(value.dtype).removeprefix("torch.")
    try:
        import ml_dtypes

        dt = np.dtype(getattr(ml_dtypes, name)) if hasattr(ml_dtypes, name) else np.dtype(name)
        return int(onnx.helper.np_dtype_to_tensor_dtype(dt))
    except Exception as e:
        raise ValueError(f"no ONNX element type for a device value of dtype {name}") from e


def _declared(vi: onnx.ValueInfoProto) -> list[int | None] | None:
    """Declared dims (None where dynamic); None when the rank is unknown."""
    tt = vi.type.tensor_type
    if not vi.type.HasField("tensor_type") or not tt.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else None for d in tt.shape.dim]


class CompiledSubgraph:
    """The callable a fused node runs: picks or builds the engine for the input shapes.

    Static inputs: one engine, built at session creation. Dynamic dims named in
    ``trt_profile_*_shapes``: their profiles, also built at session creation; a run whose
    shapes fit no profile is an error. Other dynamic dims (onnxruntime's behaviour): built
    at the first run for the shapes seen, rebuilt with a widened range when a later run
    falls outside it. Inputs of unknown rank: one static engine per shape combination.
    """

    def __init__(self, ep: TensorrtExecutionProvider, fused: Any) -> None:
        self.ep = ep
        self.settings: TrtSettings = ep.settings
        self.fused = fused
        self.name: str = fused.name
        self.n_nodes = len(fused.nodes)
        model = _normalized(_typed(fused.model, ep.value_types))
        self.inputs = [vi.name for vi in model.graph.input]
        self.outputs = [vi.name for vi in model.graph.output]
        self.out_types = [vi.type.tensor_type.elem_type for vi in model.graph.output]
        self.declared = [_declared(vi) for vi in model.graph.input]
        self.lock = threading.Lock()
        self.per_shape = any(d is None for d in self.declared)
        self.explicit = self._explicit_profiles()
        named = set(self.explicit[0]) if self.explicit else set()
        self.implicit = [i for i, d in enumerate(self.declared)
                         if d is not None and None in d and self.inputs[i] not in named]
        self._state: tuple[Engine, dict[int, tuple[Shape, Shape]]] | None = None
        self._by_shape: dict[tuple[Shape, ...], Engine] = {}
        self.model_bytes = model.SerializeToString()
        self.model_hash = hashlib.sha256(self.model_bytes).hexdigest()
        if self.settings.dump_subgraphs:
            self._dump(self.model_bytes)
        if not self.per_shape and not self.implicit:
            self._state = (self._engine(self.model_bytes, self.model_hash,
                                        self._profiles({})), {})
            self.model_bytes = b""        # never rebuilt: do not keep a second weights copy

    # -- profiles --------------------------------------------------------------------------
    def _explicit_profiles(self) -> list[dict[str, tuple[Shape, Shape, Shape]]]:
        profiles = []
        for k, prof in enumerate(self.settings.profiles):
            mine = {}
            for i, name in enumerate(self.inputs):
                if name not in prof.shapes:
                    continue
                rng = prof.shapes[name]
                dims = self.declared[i]
                if dims is not None:
                    if len(dims) != len(rng[0]):
                        raise ValueError(f"trt_profile shapes for input {name!r} have rank "
                                         f"{len(rng[0])}, the model's input has rank "
                                         f"{len(dims)}")
                    for ax, d in enumerate(dims):
                        if d is not None and not rng[0][ax] <= d <= rng[2][ax]:
                            raise ValueError(f"profile {k} for input {name!r} excludes its "
                                             f"fixed dimension {ax} = {d}")
                mine[name] = rng
            if mine:
                profiles.append(mine)
        return profiles

    def _profiles(self, ranges: dict[int, tuple[Shape, Shape]]) -> tuple[dict[str, Any], ...]:
        implicit = {self.inputs[i]: (lo, hi, hi) for i, (lo, hi) in ranges.items()}
        if self.explicit:
            return tuple({**p, **implicit} for p in self.explicit)
        return (implicit,) if implicit else ()

    def _fits(self, ranges: dict[int, tuple[Shape, Shape]], shapes: list[Shape]) -> bool:
        for i in self.implicit:
            lo, hi = ranges[i]
            s = shapes[i]
            if len(s) != len(lo) or not all(a <= d <= b for a, d, b in zip(lo, s, hi)):
                return False
        return True

    def _profile_index(self, shapes: list[Shape]) -> int:
        return profile_index(self.explicit, self.inputs, shapes)

    def static_engine(self) -> Engine | None:
        """The one engine this subgraph runs with, built at session creation; None when
        engines are built at run time (dynamic dims without profiles, unknown ranks)."""
        if self.per_shape or self.implicit or self._state is None:
            return None
        return self._state[0]

    # -- running ----------------------------------------------------------------------------
    def __call__(self, *args: Any) -> list[Any]:
        shapes = [tuple(int(d) for d in a.shape) for a in args]
        if self.per_shape:
            return self._shape_engine(shapes, args).run(args, 0)
        state = self._state
        if state is None or not self._fits(state[1], shapes):
            state = self._widen(shapes)
        return state[0].run(args, self._profile_index(shapes))

    def _widen(self, shapes: list[Shape]) -> tuple[Engine, dict[int, tuple[Shape, Shape]]]:
        with self.lock:
            state = self._state
            if state is not None and self._fits(state[1], shapes):
                return state
            old = state[1] if state is not None else {}
            ranges = {}
            for i in self.implicit:
                s = shapes[i]
                if i in old and len(old[i][0]) == len(s):
                    lo, hi = old[i]
                    s_lo = tuple(min(a, b) for a, b in zip(lo, s))
                    s_hi = tuple(max(a, b) for a, b in zip(hi, s))
                    ranges[i] = (s_lo, s_hi)
                else:
                    ranges[i] = (s, s)
            if state is not None:
                _LOG.info("TensorRT: input shapes %s are outside the profile of %s; "
                          "rebuilding with a wider range", shapes, self.name)
            engine = self._engine(self.model_bytes, self.model_hash, self._profiles(ranges))
            self._state = (engine, ranges)
            return self._state

    def _shape_engine(self, shapes: list[Shape], args: Sequence[Any]) -> Engine:
        key = tuple(shapes)
        engine = self._by_shape.get(key)
        if engine is None:
            with self.lock:
                engine = self._by_shape.get(key)
                if engine is None:
                    model = self.fused.build_model([list(s) for s in shapes])
                    for vi, s, a in zip(model.graph.input, shapes, args):
                        if not vi.type.HasField("tensor_type"):
                            vi.type.CopyFrom(onnx.helper.make_tensor_type_proto(
                                _elem_type(a), list(s)))
                    model = _normalized(model)
                    data = model.SerializeToString()
                    engine = self._engine(data, hashlib.sha256(data).hexdigest(), ())
                    self._by_shape[key] = engine
        return engine

    # -- building and the cache -------------------------------------------------------------
    def _engine(self, model: bytes, model_hash: str, profiles: Sequence[Ranges]) -> Engine:
        ep, s = self.ep, self.settings
        key, doc = cache_key(ep.trt_version, ep.gpu, model_hash, s, profiles)
        cache = EngineCache(s.engine_cache_path) if s.engine_cache else None
        load = (s.device_id, self.inputs, self.outputs, self.out_types)
        if cache is not None:
            data = cache.read(key, ep.gpu)
            if data is not None:
                try:
                    engine = ep.backend.load(data, *load)
                except Exception as e:
                    _LOG.warning("TensorRT: cached engine %s cannot be loaded (%s: %s); "
                                 "building it again", cache.path(key, ep.gpu),
                                 type(e).__name__, e)
                else:
                    ep.count("engine_cache_hits")
                    _LOG.info("TensorRT: engine for %s loaded from %s", self.name,
                              cache.path(key, ep.gpu))
                    return engine
        data = self._build(model, profiles)
        if cache is not None:
            cache.write(key, ep.gpu, data, doc)
        return ep.backend.load(data, *load)

    def _build(self, model: bytes, profiles: Sequence[Ranges]) -> bytes:
        ep, s = self.ep, self.settings
        timing_path = timing_cache_file(s, ep.trt_version, ep.gpu) if s.timing_cache else ""
        timing: bytes | None = None
        if timing_path:
            try:
                with open(timing_path, "rb") as f:
                    timing = f.read()
            except FileNotFoundError:
                timing = b""
        req = BuildRequest(
            model=model, name=self.name, device_id=s.device_id, inputs=tuple(self.inputs),
            outputs=tuple(self.outputs), profiles=tuple(profiles), fp16=s.fp16, int8=s.int8,
            dynamic_ranges=dict(s.dynamic_ranges), workspace=s.workspace,
            opt_level=s.opt_level, dla_core=s.dla_core if s.dla else None,
            timing_cache=timing, detailed_log=s.detailed_log)
        what = [f"{self.n_nodes} node(s)"] + [w for w, on in (("fp16", s.fp16),
                                                                ("int8", s.int8)) if on]
        if profiles:
            what.append(f"{len(profiles)} optimization profile(s)")
        guard = _SEQUENTIAL if s.sequential_build else contextlib.nullcontext()
        with guard:
            progress(f"TensorRT: building an engine for {self.name} ({', '.join(what)}); "
                     f"this can take a while")
            t0 = time.perf_counter()
            data, new_timing = ep.backend.build(req)
            dt = time.perf_counter() - t0
        ep.count("engines_built")
        progress(f"TensorRT: engine for {self.name} built in {dt:.1f} s")
        if timing_path and new_timing:
            with _TIMING_LOCK:
                _atomic_write(timing_path, new_timing)
        return data

    def _dump(self, data: bytes) -> None:
        folder = self.settings.engine_cache_path or "."
        safe = re.sub(r"[^A-Za-z0-9_.-]", "_", self.name)
        path = os.path.join(folder, f"{safe}.onnx")
        _atomic_write(path, data)
        _LOG.info("TensorRT: subgraph %s written to %s", self.name, path)


def profile_index(explicit: Sequence[Ranges], inputs: Sequence[str], shapes: Sequence[Shape]
                  ) -> int:
    """The optimization profile (from ``trt_profile_*_shapes``) the input shapes fit."""
    if not explicit:
        return 0
    for k, prof in enumerate(explicit):
        if all(_within(prof[n], shapes[inputs.index(n)]) for n in prof):
            return k
    got = {n: shapes[inputs.index(n)] for n in explicit[0]}
    ranges = [{n: f"{lo}..{hi}" for n, (lo, _, hi) in p.items()} for p in explicit]
    raise ValueError(f"input shapes {got} fit none of the TensorRT optimization profiles "
                     f"given by trt_profile_min_shapes/trt_profile_max_shapes: {ranges}")


def _within(rng: tuple[Shape, Shape, Shape], shape: Shape) -> bool:
    lo, _, hi = rng
    return len(shape) == len(lo) and all(a <= d <= b for a, d, b in zip(lo, shape, hi))
