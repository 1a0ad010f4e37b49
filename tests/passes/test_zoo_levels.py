"""The light zoo at the two levels the conformance suite does not run (basic, extended):
every optimization keeps the stored outputs within the suite's tolerance."""

from __future__ import annotations

import os

import onnx
import pytest
from onnx import numpy_helper

import onnxrt as ort
from conformance.test_model_sets import LIGHT, LIGHT_DIR, light_input
from oracle import assert_all_similar


@pytest.mark.parametrize("name", LIGHT)
@pytest.mark.parametrize("level", ["ORT_ENABLE_BASIC", "ORT_ENABLE_EXTENDED"])
def test_light_zoo_level(name, level):
    path = os.path.join(LIGHT_DIR, f"light_{name}.onnx")
    model = onnx.load(path)
    so = ort.SessionOptions()
    so.graph_optimization_level = getattr(ort.GraphOptimizationLevel, level)
    sess = ort.InferenceSession(path, so)
    feeds = {a.name: light_input(next(vi for vi in model.graph.input if vi.name == a.name))
             for a in sess.get_inputs()}
    refs = []
    for i in range(len(model.graph.output)):
        t = onnx.TensorProto()
        with open(os.path.join(LIGHT_DIR, f"light_{name}_output_{i}.pb"), "rb") as f:
            t.ParseFromString(f.read())
        refs.append(numpy_helper.to_array(t))
    assert_all_similar(refs, sess.run(None, feeds), 1e-3, 1e-7,
                       [o.name for o in model.graph.output])
