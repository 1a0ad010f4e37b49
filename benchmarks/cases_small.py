"""Small, latency-bound models (torch_models.py, exported with torch.onnx.export): a
MobileNetV3-Small-class classifier (HardSwish, HardSigmoid-gated squeeze-excitation), a
YOLOv8-n-class detector, a CRNN OCR line recognizer (conv stack + bidirectional LSTM), a
keyword spotter (depthwise-separable CNN), an MNIST-class CNN and an MLP at batch 1 and 64.
Needs torch the first time (the exports are cached)."""

from __future__ import annotations

from typing import Any

import torch_models as tmod

CATEGORY = "small"

# (case name, model, batch)
_CASES = [("mobilenet_v3_b1", "mobilenet_v3", 1), ("yolo_n_320_b1", "yolo", 1),
          ("crnn_ocr_b1", "crnn", 1), ("kws_dscnn_b1", "kws", 1),
          ("tiny_cnn_b1", "tiny_cnn", 1), ("mlp_b1", "mlp", 1), ("mlp_b64", "mlp", 64),
          ("mobilenet_v3_b8", "mobilenet_v3", 8)]
_QUICK = ("mobilenet_v3_b1", "tiny_cnn_b1", "mlp_b64")


def cases(quick: bool = False) -> list[dict[str, Any]]:
    out = []
    for name, model, batch in _CASES:
        if quick and name not in _QUICK:
            continue
        out.append({"name": name, "category": CATEGORY,
                    "model": (lambda m=model: tmod.image_model(m)),
                    "feeds": (lambda m=model, b=batch: tmod.image_input(m, b))})
    return out
