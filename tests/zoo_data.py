"""The zoo that ships inside the onnx package: the backend runner's inputs and the stored
outputs, shared by every test that runs the nine CNNs."""

from __future__ import annotations

import glob
import os
from typing import Any

import numpy as np
import onnx
from onnx import numpy_helper

LIGHT_DIR = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT = sorted(os.path.basename(p)[len("light_"):-len(".onnx")]
               for p in glob.glob(os.path.join(LIGHT_DIR, "light_*.onnx")))


def light_path(name: str) -> str:
    return os.path.join(LIGHT_DIR, f"light_{name}.onnx")


def light_input(vi: onnx.ValueInfoProto) -> np.ndarray:
    """The backend runner's deterministic input for the light models: arange / n."""
    shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                  for d in vi.type.tensor_type.shape.dim)
    n = int(np.prod(shape))
    return (np.arange(n).reshape(shape) / n).astype(np.float32)


def light_feeds(model: onnx.ModelProto, sess: Any) -> dict[str, np.ndarray]:
    """Inputs for every input the session asks for."""
    by_name = {vi.name: vi for vi in model.graph.input}
    return {a.name: light_input(by_name[a.name]) for a in sess.get_inputs()}


def light_expected(name: str, model: onnx.ModelProto) -> list[np.ndarray]:
    """The outputs stored beside the model."""
    refs = []
    for i in range(len(model.graph.output)):
        t = onnx.TensorProto()
        with open(os.path.join(LIGHT_DIR, f"light_{name}_output_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        refs.append(numpy_helper.to_array(t))
    return refs
