"""Batched MatMul cases: rank-3/4 products over leading dimensions, as attention exported
without fusions computes them (scores Q K^T and context P V), each against a single product
of the same total size in onnxruntime's hands."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

CATEGORY = "batched_matmul"


def _model(sa: list[int], sb: list[int]) -> bytes:
    g = h.make_graph([h.make_node("MatMul", ["a", "b"], ["y"])], "bmm",
                     [h.make_tensor_value_info("a", T.FLOAT, sa),
                      h.make_tensor_value_info("b", T.FLOAT, sb)],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8)\
        .SerializeToString()


def cases(quick: bool = False) -> list[dict[str, Any]]:
    rng = np.random.default_rng(0)
    shapes = [([1, 4, 128, 64], [1, 4, 64, 128]), ([1, 12, 128, 64], [1, 12, 64, 128]),
              ([1, 12, 128, 128], [1, 12, 128, 64]), ([8, 128, 64], [8, 64, 128]),
              ([4, 512, 768], [768, 768])]
    if quick:
        shapes = shapes[:1]
    out = []
    for sa, sb in shapes:
        name = "bmm_" + "x".join(map(str, sa)) + "_" + "x".join(map(str, sb))
        feeds = {"a": rng.standard_normal(sa).astype(np.float32),
                 "b": rng.standard_normal(sb).astype(np.float32)}
        out.append({"name": name, "category": CATEGORY, "model": _model(sa, sb),
                    "feeds": feeds, "runs": 30})
    return out
