"""CNN cases: the nine image classifiers of the model zoo that ships inside the ``onnx``
package (resnet50, densenet121, inception v1/v2, shufflenet, squeezenet, vgg19, alexnet,
zfnet512) at batch 1 and batch 8 (the zoo files fix the batch to 1: it is freed here)."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx

from onnxrt.zoo import free_batch, zoo_models

CATEGORY = "cnn"

# --quick: the three smallest, batch 1 only
_QUICK = ("squeezenet", "shufflenet", "inception_v1")


def light_input(model: onnx.ModelProto, batch: int) -> dict[str, np.ndarray]:
    """Deterministic inputs in [0, 1) for every graph input that is not an initializer."""
    init = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        shape = [d.dim_value if d.HasField("dim_value") else 1
                 for d in vi.type.tensor_type.shape.dim]
        shape[0] = batch
        n = int(np.prod(shape))
        feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def _case(name: str, path: str, batch: int) -> dict[str, Any]:
    memo: dict[str, Any] = {}

    def model() -> bytes:
        m = onnx.load(path)
        m = m if batch == 1 else free_batch(m)
        memo["feeds"] = light_input(m, batch)
        return m.SerializeToString()

    # built when the case runs (vgg19 is 548 MB): the feeds come with the model
    return {"name": f"{name}_b{batch}", "category": CATEGORY, "model": model,
            "feeds": lambda: memo["feeds"]}


def cases(quick: bool = False) -> list[dict[str, Any]]:
    zoo = zoo_models()
    out = []
    for batch in ((1,) if quick else (1, 8)):
        for name, path in zoo.items():
            if quick and name not in _QUICK:
                continue
            out.append(_case(name, path, batch))
    return out
