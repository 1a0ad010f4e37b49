"""The provider's options, with onnxruntime's names and meaning, turned into OpenVINO
compile settings.

Parsing checks the syntax without openvino (so a typo is an InvalidArgument even where
OpenVINO is missing); ``resolve`` checks them against the devices OpenVINO finds.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field, replace
from typing import Any

from onnxrt.errors import InvalidArgument

__all__ = ["DEFAULTS", "Settings", "parse_options"]

PROVIDER = "OpenVINOExecutionProvider"

# onnxruntime's OpenVINO option names and defaults
DEFAULTS: dict[str, Any] = {
    "device_type": "CPU",
    "precision": "",              # "" = the device's default: FP32 on CPU, FP16 on GPU/NPU
    "num_of_threads": 0,          # 0 = OpenVINO's choice (all cores)
    "num_streams": 1,
    "cache_dir": "",
    "enable_dynamic_shapes": True,
    "disable_dynamic_shapes": False,
    "load_config": "",
}

_PHYSICAL = re.compile(r"^(CPU|GPU|NPU)(\.\d+)?$")
_META = ("AUTO", "HETERO", "MULTI")
# precision -> (INFERENCE_PRECISION_HINT, EXECUTION_MODE_HINT)
_PRECISIONS = {"FP32": ("f32", None), "FP16": ("f16", None), "BF16": ("bf16", None),
               "ACCURACY": (None, "ACCURACY")}
# capability a device must report (OPTIMIZATION_CAPABILITIES) for a precision
_NEEDS_CAPABILITY = {"FP16": "FP16", "BF16": "BF16"}


@dataclass(frozen=True)
class Settings:
    """What the options mean for OpenVINO."""

    device: str                          # the OpenVINO device string: CPU, AUTO:GPU,CPU...
    meta: str                            # AUTO, HETERO, MULTI or "" for a physical device
    devices: tuple[str, ...]             # the physical devices it names (empty: AUTO's pick)
    precision: dict[str, str]            # physical device -> FP32/FP16/BF16/ACCURACY
    explicit_precision: bool
    num_threads: int
    num_streams: int
    cache_dir: str
    dynamic: bool
    load_config: dict[str, dict[str, Any]] = field(default_factory=dict)

    def device_config(self, dev: str) -> dict[str, Any]:
        """Properties for one physical device: ours, then load_config's."""
        kind = dev.split(".")[0]
        cfg: dict[str, Any] = {}
        prec = self.precision.get(dev) or self.precision.get(kind) or _default_precision(kind)
        hint, mode = _PRECISIONS[prec]
        if hint:
            cfg["INFERENCE_PRECISION_HINT"] = hint
        if mode:
            cfg["EXECUTION_MODE_HINT"] = mode
        if kind == "CPU" and self.num_threads > 0:
            cfg["INFERENCE_NUM_THREADS"] = self.num_threads
        if self.num_streams > 0:
            cfg["NUM_STREAMS"] = self.num_streams
        cfg.update(self.load_config.get(dev, {}))
        return cfg

    def compile_config(self) -> dict[str, Any]:
        """The config for ``Core.compile_model`` / ``query_model`` on ``self.device``."""
        if not self.meta:
            cfg = self.device_config(self.device)
        else:
            cfg = dict(self.load_config.get(self.meta, {}))
            props = {d: self.device_config(d) for d in self.devices}
            if props:
                cfg["DEVICE_PROPERTIES"] = props
        if self.cache_dir:
            cfg["CACHE_DIR"] = self.cache_dir
        return cfg

    def key(self) -> str:
        """Identifies everything that changes what OpenVINO compiles (cache keys)."""
        cfg = self.compile_config()
        cfg.pop("CACHE_DIR", None)
        return json.dumps([self.device, cfg, self.dynamic], sort_keys=True, default=str)


def _default_precision(kind: str) -> str:
    # onnxruntime's defaults; on CPU f32 is forced because OpenVINO would otherwise pick
    # bf16 on CPUs that have it and drift from the model's results by up to 7e-3
    return "FP32" if kind == "CPU" else "FP16"


def _as_int(name: str, v: Any, lo: int) -> int:
    try:
        n = int(str(v).strip()) if not isinstance(v, bool) else None
    except ValueError:
        n = None
    if n is None or n < lo:
        raise InvalidArgument(f"{PROVIDER}: option {name} must be an integer >= {lo}, "
                              f"got {v!r}")
    return n


def _as_bool(name: str, v: Any) -> bool:
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    s = str(v).strip().lower()
    if s in ("1", "true", "yes", "on"):
        return True
    if s in ("0", "false", "no", "off", ""):
        return False
    raise InvalidArgument(f"{PROVIDER}: option {name} must be true or false, got {v!r}")


def parse_device(text: str) -> tuple[str, str, tuple[str, ...], str]:
    """(device string, meta kind, physical devices, precision implied by a legacy name)."""
    s = str(text).strip().upper()
    implied = ""
    # onnxruntime's legacy names: CPU_FP32, GPU_FP16, GPU.0_FP32...
    m = re.match(r"^(.*)_(FP32|FP16)$", s)
    if m and ":" not in s:
        s, implied = m.group(1), m.group(2)
    meta, _, rest = s.partition(":")
    if meta in _META:
        devs = tuple(d.strip() for d in rest.split(",") if d.strip()) if rest else ()
        if not devs and meta != "AUTO":
            raise InvalidArgument(f"{PROVIDER}: device_type {text!r}: {meta} needs a list "
                                  f"of devices, e.g. {meta}:GPU,CPU")
        bad = [d for d in devs if not _PHYSICAL.match(d)]
        if bad:
            raise InvalidArgument(f"{PROVIDER}: device_type {text!r}: unknown device(s) "
                                  f"{', '.join(bad)} (expected CPU, GPU, GPU.<n>, NPU)")
        return (f"{meta}:{','.join(devs)}" if devs else meta), meta, devs, implied
    if rest or not _PHYSICAL.match(s):
        raise InvalidArgument(
            f"{PROVIDER}: device_type {text!r} is not one of CPU, GPU, GPU.<n>, NPU, AUTO, "
            f"AUTO:<devices>, HETERO:<devices>, MULTI:<devices> (or a legacy name such as "
            f"CPU_FP32 / GPU_FP16)")
    return s, "", (s,), implied


def _load_config(text: Any) -> dict[str, dict[str, Any]]:
    if isinstance(text, dict):
        data = text
    else:
        s = str(text).strip()
        if not s:
            return {}
        if not s.startswith("{"):
            if not os.path.isfile(s):
                raise InvalidArgument(f"{PROVIDER}: load_config must be JSON text or the path "
                                      f"of a JSON file; {s!r} is neither")
            with open(s, encoding="utf-8") as f:
                s = f.read()
        try:
            data = json.loads(s)
        except json.JSONDecodeError as e:
            raise InvalidArgument(f"{PROVIDER}: load_config is not valid JSON: {e}") from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise InvalidArgument(f"{PROVIDER}: load_config must map device names to objects of "
                              f"properties, e.g. {{\"CPU\": {{\"NUM_STREAMS\": \"2\"}}}}")
    return {str(k).upper(): dict(v) for k, v in data.items()}


def parse_options(opts: dict[str, Any], given: set[str]) -> Settings:
    """Settings from the merged options; ``given`` names the options the user set."""
    device, meta, devs, implied = parse_device(opts["device_type"])
    prec_text = str(opts["precision"] or "").strip().upper()
    if prec_text and prec_text not in _PRECISIONS:
        raise InvalidArgument(f"{PROVIDER}: precision {opts['precision']!r} is not one of "
                              f"{', '.join(_PRECISIONS)}")
    if implied and prec_text and implied != prec_text:
        raise InvalidArgument(f"{PROVIDER}: device_type {opts['device_type']!r} implies "
                              f"precision {implied}, but precision is {prec_text}")
    prec_text = prec_text or implied
    precision = {d: prec_text or _default_precision(d.split(".")[0]) for d in devs}
    if not devs and prec_text:
        precision = {k: prec_text for k in ("CPU", "GPU", "NPU")}
    threads = _as_int("num_of_threads", opts["num_of_threads"], 0)
    if threads and devs and not any(d == "CPU" for d in devs):
        raise InvalidArgument(f"{PROVIDER}: num_of_threads applies to the CPU device only; "
                              f"device_type is {device}")
    streams = _as_int("num_streams", opts["num_streams"], 1)
    enable = _as_bool("enable_dynamic_shapes", opts["enable_dynamic_shapes"])
    disable = _as_bool("disable_dynamic_shapes", opts["disable_dynamic_shapes"])
    if {"enable_dynamic_shapes", "disable_dynamic_shapes"} <= given and enable == disable:
        raise InvalidArgument(f"{PROVIDER}: enable_dynamic_shapes={enable} contradicts "
                              f"disable_dynamic_shapes={disable}")
    dynamic = enable and not disable
    if "disable_dynamic_shapes" in given and "enable_dynamic_shapes" not in given:
        dynamic = not disable
    if any(d.startswith("NPU") for d in devs):
        dynamic = False  # the NPU compiles static shapes only
    cache_dir = str(opts["cache_dir"] or "")
    if cache_dir:
        cache_dir = os.path.abspath(os.path.expanduser(cache_dir))
        if os.path.exists(cache_dir) and not os.path.isdir(cache_dir):
            raise InvalidArgument(f"{PROVIDER}: cache_dir {cache_dir!r} is not a directory")
    lc = _load_config(opts["load_config"])
    allowed = set(devs) | {d.split(".")[0] for d in devs} | ({meta} if meta else set())
    if meta == "AUTO" and not devs:
        allowed |= {"CPU", "GPU", "NPU"}
    for dev, props in lc.items():
        if dev not in allowed:
            raise InvalidArgument(f"{PROVIDER}: load_config sets properties of {dev}, which "
                                  f"device_type {device} does not use")
        clash = _clashes(props, prec_text if "precision" in given else "",
                         threads if "num_of_threads" in given else 0,
                         streams if "num_streams" in given else 0)
        if clash:
            raise InvalidArgument(f"{PROVIDER}: load_config sets {clash} of {dev}, which the "
                                  f"provider option {_OPTION_OF[clash]} also sets; keep one")
    return Settings(device, meta, devs, precision, bool(prec_text), threads, streams,
                    cache_dir, dynamic, lc)


_OPTION_OF = {"INFERENCE_PRECISION_HINT": "precision", "EXECUTION_MODE_HINT": "precision",
              "INFERENCE_NUM_THREADS": "num_of_threads", "NUM_STREAMS": "num_streams"}


def _clashes(props: dict[str, Any], precision: str, threads: int, streams: int) -> str:
    for k in props:
        if precision and k in ("INFERENCE_PRECISION_HINT", "EXECUTION_MODE_HINT"):
            return k
        if threads and k == "INFERENCE_NUM_THREADS":
            return k
        if streams and k == "NUM_STREAMS":
            return k
    return ""


def check_against_devices(s: Settings) -> Settings:
    """Check the settings against what OpenVINO finds here and return them with AUTO's
    devices spelled out. A device that is absent raises RuntimeError (the session falls back
    to the next provider with a warning); a property or precision the device does not
    support raises InvalidArgument."""
    from onnxrt.providers.openvino import runtime

    present = runtime.available_devices()
    kinds = {d.split(".")[0] for d in present}
    for d in s.devices:
        if d not in present and not ("." not in d and d in kinds):
            raise RuntimeError(f"OpenVINO finds no {d} device here (devices: "
                               f"{', '.join(present) or 'none'})")
    if not present:
        raise RuntimeError("OpenVINO finds no device here")
    core = runtime.core()
    if not s.devices:
        # plain AUTO: name the devices, so each gets its settings (f32 on CPU) and the query
        # knows where to look
        s = replace(s, device=f"{s.meta}:{','.join(present)}", devices=tuple(present),
                    precision={d: s.precision.get(d.split(".")[0])
                               or _default_precision(d.split(".")[0]) for d in present})
    for d in s.devices:
        caps = _get(core, d, "OPTIMIZATION_CAPABILITIES") or []
        prec = s.precision.get(d) or s.precision.get(d.split(".")[0], "")
        need = _NEEDS_CAPABILITY.get(prec)
        if need and s.explicit_precision and need not in caps:
            raise InvalidArgument(f"{PROVIDER}: precision {prec} is not supported by {d} here "
                                  f"(its capabilities: {', '.join(caps)})")
    for dev, props in s.load_config.items():
        supported = _get(core, dev, "SUPPORTED_PROPERTIES") or {}
        for k in props:
            mode = str(supported.get(k, "")) if isinstance(supported, dict) else ""
            if k not in supported:
                raise InvalidArgument(f"{PROVIDER}: load_config: {dev} has no property {k!r} "
                                      f"(its properties: {', '.join(sorted(supported))})")
            if mode == "RO":
                raise InvalidArgument(f"{PROVIDER}: load_config: property {k!r} of {dev} is "
                                      f"read-only")
    return s


def _get(core: Any, dev: str, prop: str) -> Any:
    try:
        return core.get_property(dev, prop)
    except Exception:
        return None
