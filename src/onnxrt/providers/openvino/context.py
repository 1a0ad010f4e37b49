"""OpenVINO's compiled groups kept in EPContext nodes: ``CompiledModel.export_model`` writes
the blob, ``Core.import_model`` loads it without converting or compiling the ONNX subgraph.

A blob is tied to the OpenVINO version that wrote it, the device it was compiled for (the
device's full name: another CPU model may lack the instructions its kernels were made for)
and the inference precision; any difference is a ``StaleContext``, never a guess.
"""

from __future__ import annotations

import io
import json
from typing import Any, Callable

from onnxrt.framework.ep_context import ContextBlob, EPContext, StaleContext
from onnxrt.providers.openvino import runtime

__all__ = ["export_blob", "import_blob", "hardware_name", "compatibility_string",
           "judge_compatibility"]

PROVIDER = "OpenVINOExecutionProvider"


def hardware_name(device: str) -> str:
    """``device`` and what OpenVINO calls the hardware behind it, e.g. ``CPU:AMD EPYC``."""
    try:
        full = str(runtime.core().get_property(device, "FULL_DEVICE_NAME"))
    except Exception:   # a meta device (AUTO, HETERO...) has no single name
        full = ""
    return f"{device}:{full}" if full else device


def _precision(settings: Any) -> str:
    cfg = settings.compile_config()
    hint, mode = cfg.get("INFERENCE_PRECISION_HINT"), cfg.get("EXECUTION_MODE_HINT")
    return "/".join(str(v) for v in (hint, mode) if v)


def compatibility_string(settings: Any) -> str:
    """What a compiled model records for this provider (``ep_compatibility_info.*``)."""
    return json.dumps({"openvino": runtime.version(), "hardware": hardware_name(settings.device)},
                      sort_keys=True)


def judge_compatibility(info: str, devices: list[str]) -> int:
    """An OrtCompiledModelCompatibility for a compatibility string on OpenVINO devices:
    SUPPORTED_OPTIMAL (1) when version and hardware match one of them, else UNSUPPORTED (3)."""
    try:
        d = json.loads(info)
        version, hw = d["openvino"], d["hardware"]
    except (ValueError, KeyError, TypeError):
        return 3
    if version != runtime.version():
        return 3
    return 1 if any(hardware_name(dev) == hw for dev in devices) else 3


def export_blob(runner: Any, settings: Any) -> ContextBlob | None:
    """The blob of a compiled group, or None for one that is not a single compiled model
    (compiled per input shape, or typed only at the first run)."""
    from onnxrt.providers.openvino.compiled import _Runner

    if not isinstance(runner, _Runner):
        return None
    buf = io.BytesIO()
    runner.compiled.export_model(buf)
    return ContextBlob(data=buf.getvalue(), sdk_version=runtime.version(),
                       hardware=hardware_name(settings.device),
                       notes={"device": settings.device, "precision": _precision(settings)},
                       compatibility=compatibility_string(settings))


def import_blob(ctx: EPContext, fused: Any, settings: Any,
                make_runner: Callable[[Any, list[str], list[str], list[Any]], Any]) -> Any:
    """The runner of an EPContext node OpenVINO wrote, after checking it was made here."""
    where = f"EPContext node {ctx.name!r}"
    if ctx.source != PROVIDER:
        raise StaleContext(f"{where} was compiled by {ctx.source or 'an unnamed provider'}, "
                           f"not {PROVIDER}")
    if ctx.sdk_version != runtime.version():
        raise StaleContext(f"{where} was compiled by OpenVINO {ctx.sdk_version or '(unknown)'}"
                           f"; this is OpenVINO {runtime.version()}: compile the model again")
    here = hardware_name(settings.device)
    if ctx.hardware != here:
        raise StaleContext(f"{where} was compiled for {ctx.hardware or '(unknown device)'}; "
                           f"this session runs on {here}: compile the model again")
    want = ctx.notes.get("precision", "")
    if want != _precision(settings):
        raise StaleContext(f"{where} was compiled with inference precision {want or 'default'}"
                           f"; this session asks for {_precision(settings) or 'default'}: "
                           f"compile the model again")
    data = ctx.blob()
    config = settings.compile_config()
    config.pop("CACHE_DIR", None)
    try:
        compiled = runtime.core().import_model(io.BytesIO(data), settings.device, config)
    except Exception as e:
        from onnxrt.providers.openvino.query import _first_line

        raise StaleContext(f"{where}: OpenVINO refused its blob ({_first_line(e)}); compile "
                           f"the model again") from e
    if fused.constants:
        raise StaleContext(f"{where} reads constant(s) {sorted(fused.constants)}; the inputs "
                           f"of a compiled group are always values computed at run time")
    return make_runner(compiled, list(fused.inputs), list(fused.outputs),
                       fused.output_dtypes())
