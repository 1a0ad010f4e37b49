"""The model zoo that ships inside the onnx package (onnx/backend/test/data/light/): small
files whose weights are generated in-graph, with real CNN architectures and stored outputs."""

from __future__ import annotations

import glob
import os

import onnx

__all__ = ["zoo_dir", "zoo_models", "resolve_model", "free_batch"]


def zoo_dir() -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def zoo_models() -> dict[str, str]:
    """Model name -> path, e.g. ``resnet50`` -> .../light_resnet50.onnx."""
    out = {}
    for p in sorted(glob.glob(os.path.join(zoo_dir(), "light_*.onnx"))):
        out[os.path.basename(p)[len("light_"):-len(".onnx")]] = p
    return out


def resolve_model(name_or_path: str) -> str:
    """A path as given, or the zoo model of that name."""
    if os.path.exists(name_or_path):
        return name_or_path
    zoo = zoo_models()
    key = name_or_path.lower()
    if key in zoo:
        return zoo[key]
    if key.startswith("light_") and key[6:] in zoo:
        return zoo[key[6:]]
    raise FileNotFoundError(
        f"{name_or_path!r} is neither a file nor a zoo model (zoo: {', '.join(zoo)})")


def free_batch(model: onnx.ModelProto, name: str = "N") -> onnx.ModelProto:
    """A copy of a zoo model whose batch dimension is free: the zoo files fix it to 1 on
    the inputs and outputs and in the Reshape targets (which get -1 there instead)."""
    from onnx import numpy_helper

    m = onnx.ModelProto()
    m.CopyFrom(model)
    init = {t.name: t for t in m.graph.initializer}
    for vi in list(m.graph.input) + list(m.graph.output):
        if vi.name in init or not vi.type.tensor_type.shape.dim:
            continue
        vi.type.tensor_type.shape.dim[0].ClearField("dim_value")
        vi.type.tensor_type.shape.dim[0].dim_param = name
    for node in m.graph.node:
        if node.op_type != "Reshape" or len(node.input) < 2 or node.input[1] not in init:
            continue
        t = init[node.input[1]]
        shape = numpy_helper.to_array(t).copy()
        if shape.ndim == 1 and shape.size > 1 and shape[0] == 1 and -1 not in shape:
            shape[0] = -1
            t.CopyFrom(numpy_helper.from_array(shape, t.name))
    return m
