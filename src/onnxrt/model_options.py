"""SessionOptions that change the model a session builds or writes: initializers given by the
user, free-dimension overrides, the ORT config embedded in a model's metadata, and the
optimized model saved with its big initializers in an external file."""

from __future__ import annotations

import copy
import json
import os
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

from onnxrt.errors import InvalidArgument

__all__ = ["user_initializers", "override_free_dims", "config_from_model",
           "save_optimized_model"]


def user_initializers(so: Any) -> dict[str, onnx.TensorProto]:
    """``add_initializer`` / ``add_external_initializers`` values as TensorProtos by name,
    for the loader to put in place of the model's (before any external data is read)."""
    from onnxrt.values import OrtValue

    out = {}
    for name, v in so._initializers.items():
        arr = v.numpy() if isinstance(v, OrtValue) else np.asarray(v)
        if not isinstance(arr, np.ndarray):
            raise InvalidArgument(f"initializer {name!r} given in SessionOptions must be a "
                                  f"tensor, got {type(arr).__name__}")
        if arr.dtype.kind in "US":
            arr = arr.astype(object)
        out[name] = numpy_helper.from_array(arr, name)
    return out


def check_user_initializers(model: onnx.ModelProto, given: dict[str, onnx.TensorProto]
                            ) -> None:
    """Every initializer given in SessionOptions names one of the model's (the loader put
    them in place and checked their element types)."""
    inits = {t.name for t in model.graph.initializer}
    missing = sorted(set(given) - inits)
    if missing:
        raise InvalidArgument(f"SessionOptions initializer(s) {', '.join(map(repr, missing))} "
                              f"are not initializers of the model's main graph (it has: "
                              f"{', '.join(sorted(inits)) or 'none'})")


def override_free_dims(model: onnx.ModelProto, by_name: dict[str, int],
                       by_denotation: dict[str, int]) -> onnx.ModelProto:
    """The model with the graph inputs' free dimensions fixed, matched by their symbol
    (``add_free_dimension_override_by_name``) or their denotation
    (``add_free_dimension_override_by_denotation``); a symbol fixed on an input is fixed
    wherever else the graph's declared shapes use it."""
    if not by_name and not by_denotation:
        return model
    for k, v in {**by_name, **by_denotation}.items():
        if int(v) < 0:
            raise InvalidArgument(f"free dimension override {k!r}: {v} is negative")
    fixed: dict[str, int] = dict(by_name)
    g = model.graph
    for vi in g.input:
        for d in _dims(vi.type):
            if d.denotation and d.denotation in by_denotation and not d.HasField("dim_value"):
                if d.dim_param:
                    fixed.setdefault(d.dim_param, by_denotation[d.denotation])
                d.dim_value = by_denotation[d.denotation]
    if fixed:
        for vi in [*g.input, *g.output, *g.value_info]:
            for d in _dims(vi.type):
                if d.HasField("dim_param") and d.dim_param in fixed:
                    d.dim_value = fixed[d.dim_param]
    return model


def _dims(tp: onnx.TypeProto) -> list[Any]:
    while tp.WhichOneof("value") == "optional_type":
        tp = tp.optional_type.elem_type
    if tp.WhichOneof("value") == "tensor_type" and tp.tensor_type.HasField("shape"):
        return list(tp.tensor_type.shape.dim)
    return []


# the session options a model's "ort_config" metadata may set, and how to read each
_CONFIG_KEYS = {
    "intra_op_num_threads": int,
    "inter_op_num_threads": int,
    "execution_mode": int,
    "graph_optimization_level": int,
    "enable_profiling": bool,
}


def wants_model_config(so: Any) -> bool:
    return (os.environ.get("ORT_LOAD_CONFIG_FROM_MODEL") == "1"
            or so._config.get("session.load_config_from_model") == "1")


def config_from_model(model: onnx.ModelProto, so: Any) -> Any:
    """SessionOptions with the model's embedded ORT config applied (a copy: the caller's
    object is not changed), when onnxruntime's switch for it is on: the environment variable
    ``ORT_LOAD_CONFIG_FROM_MODEL=1`` or the config entry ``session.load_config_from_model``
    = ``1``. The metadata entry ``ort_config`` holds ``{"session_options": {...}}``."""
    if not wants_model_config(so):
        return so
    text = next((p.value for p in model.metadata_props if p.key == "ort_config"), None)
    if text is None:
        return so
    try:
        cfg = json.loads(text)
    except json.JSONDecodeError as e:
        raise InvalidArgument(f"the model's ort_config metadata is not JSON: {e}") from None
    opts = cfg.get("session_options", {}) if isinstance(cfg, dict) else None
    if not isinstance(opts, dict):
        raise InvalidArgument("the model's ort_config must be {\"session_options\": {...}}")
    unknown = sorted(set(opts) - set(_CONFIG_KEYS))
    if unknown:
        raise InvalidArgument(f"the model's ort_config sets {', '.join(unknown)}, which onnxrt "
                              f"does not read from a model; it reads {', '.join(_CONFIG_KEYS)}")
    from onnxrt.options import ExecutionMode, GraphOptimizationLevel

    new = copy.copy(so)
    new._config = dict(so._config)
    for key, value in opts.items():
        v = _CONFIG_KEYS[key](value)
        if key == "execution_mode":
            v = ExecutionMode(v)
        elif key == "graph_optimization_level":
            v = GraphOptimizationLevel(v)
        setattr(new, key, v)
    return new


def save_optimized_model(model: onnx.ModelProto, so: Any) -> None:
    """Write ``optimized_model_filepath``; with the config entry
    ``session.optimized_model_external_initializers_file_name``, initializers of at least
    ``session.optimized_model_external_initializers_min_size_in_bytes`` (default 1024)
    go to that file, beside the model."""
    path = so.optimized_model_filepath
    cfg = so._config
    ext = cfg.get("session.optimized_model_external_initializers_file_name", "")
    if not ext:
        onnx.save(model, path)
        return
    if os.path.isabs(ext) or os.path.dirname(os.path.normpath(ext)) not in ("", "."):
        raise InvalidArgument(f"session.optimized_model_external_initializers_file_name "
                              f"{ext!r} must be a file name in the optimized model's folder")
    raw = cfg.get("session.optimized_model_external_initializers_min_size_in_bytes", "1024")
    try:
        threshold = int(raw)
    except ValueError:
        raise InvalidArgument(f"session.optimized_model_external_initializers_min_size_in_"
                              f"bytes must be an integer, not {raw!r}") from None
    out = onnx.ModelProto()
    out.CopyFrom(model)
    folder = os.path.dirname(os.path.abspath(path))
    target = os.path.join(folder, ext)
    if os.path.exists(target):
        os.remove(target)  # onnx appends to an existing file
    onnx.save_model(out, path, save_as_external_data=True, all_tensors_to_one_file=True,
                    location=ext, size_threshold=threshold, convert_attribute=False)
