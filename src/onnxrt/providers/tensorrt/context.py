"""TensorRT's engines kept in EPContext nodes: the blob is the serialized engine
(``ICudaEngine.serialize``), loaded back with ``IRuntime.deserialize_cuda_engine`` without
parsing the ONNX subgraph or building.

An engine is tied to the TensorRT version that built it, the GPU (its compute capability;
the device name is checked too, as engines tuned on one model of a GPU family are not
promised to run on another) and the settings that change its numbers: fp16/int8 (with the
calibration), the DLA core and the optimization profiles. Any difference is a
``StaleContext``, never a guess. Only groups with one engine built at session creation are
written (static shapes, or dynamic ones covered by ``trt_profile_*_shapes``); a group whose
engines are built at run time is written as its nodes and built again on load.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Sequence

from onnxrt.framework.ep_context import ContextBlob, EPContext, StaleContext
from onnxrt.providers.tensorrt.backend import Engine, GpuInfo
from onnxrt.providers.tensorrt.engine import CompiledSubgraph, profile_index
from onnxrt.providers.tensorrt.options import TrtSettings

if TYPE_CHECKING:
    from onnxrt.providers.tensorrt.provider import TensorrtExecutionProvider

__all__ = ["ContextRunner", "export_blob", "import_blob", "hardware_name",
           "compatibility_string", "judge_compatibility"]

Shape = tuple[int, ...]
Ranges = dict[str, tuple[Shape, Shape, Shape]]


def hardware_name(gpu: GpuInfo) -> str:
    return f"{gpu.name} (sm{gpu.sm})"


def compatibility_string(version: str, gpu: GpuInfo) -> str:
    """What a compiled model records for this provider (``ep_compatibility_info.*``)."""
    return json.dumps({"tensorrt": version, "gpu": gpu.name, "compute_capability": gpu.sm},
                      sort_keys=True)


def judge_compatibility(info: str, version: str, gpus: Sequence[GpuInfo]) -> int:
    """An OrtCompiledModelCompatibility for a compatibility string, given this TensorRT's
    version and the GPUs in question: SUPPORTED_OPTIMAL (1) when the version matches and
    one GPU has the name and compute capability the engines were built for, else
    UNSUPPORTED (3), as the provider refuses such engines."""
    try:
        d = json.loads(info)
        want = (d["tensorrt"], d["gpu"], d["compute_capability"])
    except (ValueError, KeyError, TypeError):
        return 3
    if want[0] != version:
        return 3
    return 1 if any((g.name, g.sm) == want[1:] for g in gpus) else 3


def _precision(s: TrtSettings) -> str:
    parts = [p for p, on in (("fp16", s.fp16), ("int8", s.int8)) if on]
    if s.int8:
        parts.append(f"calibration={s.calibration_digest()[:16]}")
    return "+".join(parts) or "fp32"


def _dla(s: TrtSettings) -> int | None:
    return s.dla_core if s.dla else None


def _profiles_doc(profiles: Sequence[Ranges]) -> list[dict[str, list[list[int]]]]:
    return [{n: [list(x) for x in rng] for n, rng in sorted(p.items())} for p in profiles]


def _session_profiles(s: TrtSettings, inputs: Sequence[str]) -> list[Ranges]:
    """The ``trt_profile_*_shapes`` of this session that name the engine's inputs."""
    out = []
    for prof in s.profiles:
        mine = {n: prof.shapes[n] for n in inputs if n in prof.shapes}
        if mine:
            out.append(mine)
    return out


class ContextRunner:
    """A fused EPContext node's callable: one deserialized engine, inputs taken in the
    node's order and handed over in the engine's."""

    def __init__(self, engine: Engine, inputs: list[str], outputs: list[str],
                 out_types: list[int], explicit: list[Ranges], node_inputs: list[str],
                 node_outputs: list[str]) -> None:
        self.engine = engine
        self.inputs = inputs
        self.outputs = outputs
        self.out_types = out_types
        self.explicit = explicit
        self._in = [node_inputs.index(n) for n in inputs]
        self._out = [outputs.index(n) for n in node_outputs]

    def static_engine(self) -> Engine:
        return self.engine

    def __call__(self, *args: Any) -> list[Any]:
        ordered = [args[i] for i in self._in]
        shapes = [tuple(int(d) for d in a.shape) for a in ordered]
        res = self.engine.run(ordered, profile_index(self.explicit, self.inputs, shapes))
        return [res[i] for i in self._out]


def export_blob(ep: TensorrtExecutionProvider, compiled: Any) -> ContextBlob | None:
    """The serialized engine of a group and what a loading session checks, or None for a
    group whose engines are built at run time."""
    if not isinstance(compiled, (CompiledSubgraph, ContextRunner)):
        return None
    engine = compiled.static_engine()
    if engine is None:
        return None
    s, gpu = ep.settings, ep.gpu
    data = ep.backend.serialize(engine)
    notes = {"gpu": gpu.name, "compute_capability": gpu.sm, "precision": _precision(s),
             "dla_core": _dla(s), "inputs": list(compiled.inputs),
             "outputs": list(compiled.outputs), "output_types": list(compiled.out_types),
             "profiles": _profiles_doc(compiled.explicit)}
    return ContextBlob(data=data, sdk_version=ep.trt_version, hardware=hardware_name(gpu),
                       notes=notes, compatibility=compatibility_string(ep.trt_version, gpu))


def import_blob(ctx: EPContext, fused: Any, ep: TensorrtExecutionProvider) -> ContextRunner:
    """The runner of an EPContext node this provider wrote, after checking it was built for
    this TensorRT, this GPU and these settings."""
    where = f"EPContext node {ctx.name!r}"
    again = "compile the model again"
    s, gpu, n = ep.settings, ep.gpu, ctx.notes
    if ctx.source != ep.name:
        raise StaleContext(f"{where} was compiled by {ctx.source or 'an unnamed provider'}, "
                           f"not {ep.name}")
    if ctx.sdk_version != ep.trt_version:
        raise StaleContext(f"{where} holds an engine built by TensorRT "
                           f"{ctx.sdk_version or '(unknown)'}; this is TensorRT "
                           f"{ep.trt_version}: {again}")
    if n.get("compute_capability") != gpu.sm or n.get("gpu") != gpu.name:
        raise StaleContext(f"{where} holds an engine built for "
                           f"{ctx.hardware or '(unknown GPU)'}; this session runs on "
                           f"{hardware_name(gpu)} (device_id {s.device_id}): {again}")
    want = n.get("precision")
    if want != _precision(s):
        raise StaleContext(f"{where} holds an engine built with precision {want}; this "
                           f"session asks for {_precision(s)} (trt_fp16_enable, "
                           f"trt_int8_enable, the calibration table): {again}")
    if n.get("dla_core") != _dla(s):
        raise StaleContext(f"{where} holds an engine built for DLA core {n.get('dla_core')}"
                           f"; this session asks for {_dla(s)}: {again}")
    try:
        inputs = [str(x) for x in n["inputs"]]
        outputs = [str(x) for x in n["outputs"]]
        out_types = [int(x) for x in n["output_types"]]
        stored = [{k: tuple(tuple(int(d) for d in x) for x in rng) for k, rng in p.items()}
                  for p in n["profiles"]]
    except (KeyError, TypeError, ValueError) as e:
        raise StaleContext(f"{where}: its notes do not describe a TensorRT engine "
                           f"({type(e).__name__}: {e}); {again}") from e
    if sorted(inputs) != sorted(fused.inputs) or sorted(outputs) != sorted(fused.outputs):
        raise StaleContext(f"{where}: its engine reads {inputs} and writes {outputs}, the node "
                           f"reads {list(fused.inputs)} and writes {list(fused.outputs)}")
    if fused.constants:
        raise StaleContext(f"{where} reads constant(s) {sorted(fused.constants)}; the inputs "
                           f"of a compiled group are always values computed at run time")
    if _profiles_doc(_session_profiles(s, inputs)) != _profiles_doc(stored):
        raise StaleContext(f"{where} holds an engine built with optimization profiles "
                           f"{_profiles_doc(stored)}; this session's trt_profile_*_shapes "
                           f"give {_profiles_doc(_session_profiles(s, inputs))}: {again}")
    data = ctx.blob()
    try:
        engine = ep.backend.load(data, s.device_id, inputs, outputs, out_types)
    except Exception as e:
        raise StaleContext(f"{where}: TensorRT refused its engine ({type(e).__name__}: {e}); "
                           f"{again}") from e
    return ContextRunner(engine, inputs, outputs, out_types, stored, list(fused.inputs),
                         list(fused.outputs))
