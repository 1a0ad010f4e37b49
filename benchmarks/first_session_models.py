"""The models whose first session the benchmark times in fresh processes (run.py
first_session): ``build(name) -> (model bytes, feeds)``."""

from __future__ import annotations

from typing import Any


def build(name: str) -> tuple[bytes, dict[str, Any]]:
    if name in ("resnet50", "shufflenet", "squeezenet", "densenet121", "inception_v2"):
        import onnx
        from cases_cnn import light_input

        from onnxrt.zoo import zoo_models
        m = onnx.load(zoo_models()[name])
        return m.SerializeToString(), light_input(m, 1)
    if name == "mobilenet_hs":
        import torch_models as tmod
        return tmod.image_model("mobilenet_v3"), tmod.image_input("mobilenet_v3", 1)
    if name == "bert_layer":
        import transformer_models as tm
        return tm.bert(layers=1).SerializeToString(), tm.bert_inputs(1)
    if name == "gpt2_layer":
        import transformer_models as tm
        return tm.gpt2(layers=1).SerializeToString(), tm.gpt2_inputs()
    raise ValueError(f"unknown first-session model {name!r}")

