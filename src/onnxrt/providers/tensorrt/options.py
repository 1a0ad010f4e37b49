"""TensorRT provider options: onnxruntime's names, parsed and validated once per provider.

Every option either acts or is rejected here with a message that names it; nothing is
silently ignored.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from dataclasses import dataclass, field
from typing import Any, Mapping

from onnxrt.errors import InvalidArgument

__all__ = ["DEFAULTS", "TrtSettings", "Profile", "parse_options", "parse_profile_shapes",
           "read_calibration_table"]

# onnxruntime's defaults, except the workspace (0: TensorRT's own default, all the memory
# the device has) and the paths ("" = the current directory, as onnxruntime does)
DEFAULTS: dict[str, Any] = {
    "device_id": 0,
    "trt_max_workspace_size": 0,
    "trt_fp16_enable": False,
    "trt_int8_enable": False,
    "trt_int8_calibration_table_name": "",
    "trt_int8_use_native_calibration_table": False,
    "trt_engine_cache_enable": False,
    "trt_engine_cache_path": "",
    "trt_timing_cache_enable": False,
    "trt_timing_cache_path": "",
    "trt_builder_optimization_level": 3,
    "trt_max_partition_iterations": 1000,
    "trt_min_subgraph_size": 1,
    "trt_dla_enable": False,
    "trt_dla_core": 0,
    "trt_profile_min_shapes": "",
    "trt_profile_max_shapes": "",
    "trt_profile_opt_shapes": "",
    "trt_dump_subgraphs": False,
    "trt_force_sequential_engine_build": False,
    "trt_detailed_build_log": False,
}

Shape = tuple[int, ...]


@dataclass(frozen=True)
class Profile:
    """One optimization profile: ``(min, opt, max)`` shapes by input name."""

    shapes: Mapping[str, tuple[Shape, Shape, Shape]]

    def contains(self, name: str, shape: Shape) -> bool:
        lo, _, hi = self.shapes[name]
        return len(shape) == len(lo) and all(a <= d <= b for a, d, b in zip(lo, shape, hi))


@dataclass(frozen=True)
class TrtSettings:
    device_id: int = 0
    workspace: int = 0
    fp16: bool = False
    int8: bool = False
    calibration_table: str = ""           # resolved path, "" when none
    native_calibration: bool = False
    dynamic_ranges: Mapping[str, float] = field(default_factory=dict)
    engine_cache: bool = False
    engine_cache_path: str = ""
    timing_cache: bool = False
    timing_cache_path: str = ""
    opt_level: int = 3
    max_partition_iterations: int = 1000
    min_subgraph_size: int = 1
    dla: bool = False
    dla_core: int = 0
    profiles: tuple[Profile, ...] = ()
    dump_subgraphs: bool = False
    sequential_build: bool = False
    detailed_log: bool = False

    def calibration_digest(self) -> str:
        """A digest of the dynamic ranges, for the engine cache key."""
        if not self.dynamic_ranges:
            return ""
        text = json.dumps(sorted(self.dynamic_ranges.items()))
        return hashlib.sha256(text.encode()).hexdigest()[:16]

    def profile_inputs(self) -> set[str]:
        return set(self.profiles[0].shapes) if self.profiles else set()


def _bool(opts: Mapping[str, Any], key: str) -> bool:
    v = opts[key]
    if isinstance(v, bool):
        return v
    if isinstance(v, int) and v in (0, 1):
        return bool(v)
    if isinstance(v, str) and v.strip().lower() in ("1", "true", "0", "false"):
        return v.strip().lower() in ("1", "true")
    raise InvalidArgument(f"TensorrtExecutionProvider option {key} must be 0/1 or "
                          f"true/false, not {v!r}")


def _needs(opts: Mapping[str, Any], key: str, switch: str) -> None:
    """An option that acts only when ``switch`` is on is rejected when given without it."""
    if str(opts[key]) != str(DEFAULTS[key]) and not _bool(opts, switch):
        raise InvalidArgument(f"TensorrtExecutionProvider option {key} needs {switch}=1")


def _int(opts: Mapping[str, Any], key: str, lo: int, hi: int | None = None) -> int:
    v = opts[key]
    try:
        if isinstance(v, bool) or isinstance(v, float) and not v.is_integer():
            raise ValueError
        n = int(v.strip()) if isinstance(v, str) else int(v)
    except (TypeError, ValueError):
        raise InvalidArgument(f"TensorrtExecutionProvider option {key} must be an integer, "
                              f"not {v!r}") from None
    if n < lo or (hi is not None and n > hi):
        rng = f"between {lo} and {hi}" if hi is not None else f">= {lo}"
        raise InvalidArgument(f"TensorrtExecutionProvider option {key} must be {rng}, "
                              f"not {n}")
    return n


def parse_profile_shapes(text: str, key: str) -> dict[str, list[Shape]]:
    """onnxruntime's ``name:d1xd2x...,name2:...`` syntax. A name given k times has k
    profiles (the i-th occurrence belongs to profile i)."""
    out: dict[str, list[Shape]] = {}
    if not isinstance(text, str):
        raise InvalidArgument(f"TensorrtExecutionProvider option {key} must be a string "
                              f"like 'input:1x3x224x224,mask:1x128', not {text!r}")
    if not text.strip():
        return out
    for item in text.split(","):
        item = item.strip()
        # names may contain ':' (e.g. 'input:0'); the dims follow the last one
        name, sep, dims = item.rpartition(":")
        bad = InvalidArgument(f"TensorrtExecutionProvider option {key}: {item!r} is not "
                              f"'name:dim1xdim2x...' (dims are non-negative integers)")
        if not sep or not name or not dims:
            raise bad
        try:
            shape = tuple(int(d) for d in dims.lower().split("x"))
        except ValueError:
            raise bad from None
        if any(d < 0 for d in shape):
            raise bad
        out.setdefault(name, []).append(shape)
    return out


def _profiles(opts: Mapping[str, Any]) -> tuple[Profile, ...]:
    keys = ("trt_profile_min_shapes", "trt_profile_opt_shapes", "trt_profile_max_shapes")
    parsed = [parse_profile_shapes(opts[k], k) for k in keys]
    given = [k for k, p in zip(keys, parsed) if p]
    if not given:
        return ()
    if len(given) != 3:
        missing = [k for k in keys if k not in given]
        raise InvalidArgument(f"TensorrtExecutionProvider: {', '.join(given)} given without "
                              f"{', '.join(missing)}; the three profile options go together")
    mins, opts_, maxs = parsed
    if not set(mins) == set(opts_) == set(maxs):
        raise InvalidArgument(
            f"TensorrtExecutionProvider: the profile options name different inputs (min: "
            f"{sorted(mins)}, opt: {sorted(opts_)}, max: {sorted(maxs)})")
    counts = {len(mins[n]) for n in mins} | {len(opts_[n]) for n in mins} | \
        {len(maxs[n]) for n in mins}
    if len(counts) != 1:
        raise InvalidArgument("TensorrtExecutionProvider: every input needs the same number "
                              "of shapes in trt_profile_min/opt/max_shapes (one per profile)")
    n_prof = counts.pop()
    profiles = []
    for k in range(n_prof):
        shapes = {}
        for name in mins:
            lo, mid, hi = mins[name][k], opts_[name][k], maxs[name][k]
            if not len(lo) == len(mid) == len(hi):
                raise InvalidArgument(f"TensorrtExecutionProvider: input {name!r} has shapes "
                                      f"of different ranks in profile {k}: min {lo}, opt "
                                      f"{mid}, max {hi}")
            if not all(a <= b <= c for a, b, c in zip(lo, mid, hi)):
                raise InvalidArgument(f"TensorrtExecutionProvider: input {name!r} in profile "
                                      f"{k} needs min <= opt <= max in every dimension: min "
                                      f"{lo}, opt {mid}, max {hi}")
            shapes[name] = (lo, mid, hi)
        profiles.append(Profile(shapes))
    return tuple(profiles)


def parse_options(opts: Mapping[str, Any]) -> TrtSettings:
    """Validate the provider options (already merged with ``DEFAULTS``)."""
    int8 = _bool(opts, "trt_int8_enable")
    table = opts["trt_int8_calibration_table_name"]
    native = _bool(opts, "trt_int8_use_native_calibration_table")
    if not isinstance(table, str):
        raise InvalidArgument("TensorrtExecutionProvider option "
                              "trt_int8_calibration_table_name must be a file name")
    if (table or native) and not int8:
        what = "trt_int8_calibration_table_name" if table else \
            "trt_int8_use_native_calibration_table"
        raise InvalidArgument(f"TensorrtExecutionProvider option {what} needs "
                              f"trt_int8_enable=1")
    if native and not table:
        raise InvalidArgument("TensorrtExecutionProvider option "
                              "trt_int8_use_native_calibration_table needs "
                              "trt_int8_calibration_table_name")
    _needs(opts, "trt_timing_cache_path", "trt_timing_cache_enable")
    _needs(opts, "trt_dla_core", "trt_dla_enable")
    if opts["trt_engine_cache_path"] and not (
            _bool(opts, "trt_engine_cache_enable") or _bool(opts, "trt_dump_subgraphs")
            or table):
        raise InvalidArgument("TensorrtExecutionProvider option trt_engine_cache_path is "
                              "read with trt_engine_cache_enable=1, trt_dump_subgraphs=1 or "
                              "trt_int8_calibration_table_name; none is set")
    cache_path = str(opts["trt_engine_cache_path"] or "")
    timing_path = str(opts["trt_timing_cache_path"] or "") or cache_path
    ranges: dict[str, float] = {}
    table_path = ""
    if table:
        table_path = table if os.path.isabs(table) else os.path.join(cache_path or ".", table)
        ranges = read_calibration_table(table_path, native)
    dla = _bool(opts, "trt_dla_enable")
    return TrtSettings(
        device_id=_int(opts, "device_id", 0),
        workspace=_int(opts, "trt_max_workspace_size", 0),
        fp16=_bool(opts, "trt_fp16_enable"),
        int8=int8,
        calibration_table=table_path,
        native_calibration=native,
        dynamic_ranges=ranges,
        engine_cache=_bool(opts, "trt_engine_cache_enable"),
        engine_cache_path=cache_path,
        timing_cache=_bool(opts, "trt_timing_cache_enable"),
        timing_cache_path=timing_path,
        opt_level=_int(opts, "trt_builder_optimization_level", 0, 5),
        max_partition_iterations=_int(opts, "trt_max_partition_iterations", 1),
        min_subgraph_size=_int(opts, "trt_min_subgraph_size", 1),
        dla=dla,
        dla_core=_int(opts, "trt_dla_core", 0),
        profiles=_profiles(opts),
        dump_subgraphs=_bool(opts, "trt_dump_subgraphs"),
        sequential_build=_bool(opts, "trt_force_sequential_engine_build"),
        detailed_log=_bool(opts, "trt_detailed_build_log"),
    )


# -- INT8 calibration tables -------------------------------------------------------------------

def read_calibration_table(path: str, native: bool) -> dict[str, float]:
    """Dynamic ranges by tensor name from a calibration table.

    ``native``: TensorRT's own calibration cache (a header line, then ``name: <hex float32
    scale>``; the range is scale * 127). Otherwise the table onnxruntime's quantization tools
    write: the FlatBuffers ``TrtTable`` (key/value strings), or their JSON companion.
    """
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise InvalidArgument(f"TensorrtExecutionProvider: cannot read the INT8 calibration "
                              f"table {path!r}: {e.strerror or e}") from None
    try:
        if native:
            ranges = _native_table(data.decode("utf-8"))
        elif data.lstrip()[:1] == b"{":
            ranges = _json_table(json.loads(data.decode("utf-8")))
        else:
            ranges = _flatbuffer_table(data)
    except (ValueError, UnicodeDecodeError, struct.error, IndexError) as e:
        kind = "TensorRT calibration cache" if native else "onnxruntime calibration table"
        raise InvalidArgument(f"TensorrtExecutionProvider: {path!r} is not a valid {kind} "
                              f"({e})") from None
    if not ranges:
        raise InvalidArgument(f"TensorrtExecutionProvider: the INT8 calibration table "
                              f"{path!r} has no entries")
    return ranges


def _native_table(text: str) -> dict[str, float]:
    out = {}
    for line in text.splitlines()[1:]:
        if not line.strip():
            continue
        name, sep, hexval = line.rpartition(":")
        if not sep:
            raise ValueError(f"line {line!r} is not 'name: hex'")
        scale = struct.unpack(">f", bytes.fromhex(hexval.strip().rjust(8, "0")))[0]
        out[name.strip()] = float(scale) * 127.0
    return out


def _json_table(doc: Any) -> dict[str, float]:
    if not isinstance(doc, dict):
        raise ValueError("expected a JSON object of tensor name -> range")
    out = {}
    for name, v in doc.items():
        if isinstance(v, dict):
            vals = [float(np_scalar(v[k])) for k in ("highest", "lowest") if k in v]
        elif isinstance(v, (list, tuple)):
            vals = [float(np_scalar(x)) for x in v]
        else:
            vals = [float(v)]
        if not vals:
            raise ValueError(f"no range for {name!r}")
        out[str(name)] = max(vals)
    return out


def np_scalar(v: Any) -> Any:
    """JSON may hold a scalar as a one-element list or {"data": ...}."""
    while isinstance(v, (list, tuple)) and len(v) == 1:
        v = v[0]
    if isinstance(v, dict) and "data" in v:
        return np_scalar(v["data"])
    return v


def _flatbuffer_table(buf: bytes) -> dict[str, float]:
    """Reads ``TrtTable { dict: [KeyValue { key: string; value: string }] }`` directly:
    the layout is small enough that a FlatBuffers dependency would buy nothing."""

    def u32(pos: int) -> int:
        return struct.unpack_from("<I", buf, pos)[0]

    def field_pos(table: int, index: int) -> int:
        vtable = table - struct.unpack_from("<i", buf, table)[0]
        vt_size = struct.unpack_from("<H", buf, vtable)[0]
        slot = 4 + 2 * index
        if slot >= vt_size:
            return 0
        off = struct.unpack_from("<H", buf, vtable + slot)[0]
        return table + off if off else 0

    def string(table: int, index: int) -> str:
        p = field_pos(table, index)
        if not p:
            raise ValueError("missing string field")
        s = p + u32(p)
        return buf[s + 4:s + 4 + u32(s)].decode("utf-8")

    root = u32(0)
    p = field_pos(root, 0)
    if not p:
        return {}
    vec = p + u32(p)
    out = {}
    for k in range(u32(vec)):
        elem = vec + 4 + 4 * k
        kv = elem + u32(elem)
        out[string(kv, 0)] = float(string(kv, 1))
    return out
