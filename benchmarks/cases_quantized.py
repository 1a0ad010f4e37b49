"""Quantized cases: models made with onnxruntime's quantization tool (quant_models.py) from the
benchmark's float models: quantize_dynamic on the BERT- and GPT-2-like transformers,
quantize_static in QDQ and QOperator formats on ResNet-18- and MobileNetV2-like CNNs (and
QDQ on BERT), the int4 MatMulNBitsQuantizer on both transformers (one at accuracy_level 4,
onnxruntime's int8 compute). The transformers have 4 layers (2 with ``quick``): the ratio
is per layer, the quantizer's run and the cache stay small."""

from __future__ import annotations

from typing import Any

import quant_models as qm
import transformer_models as tm

CATEGORY = "quantized"


def cases(quick: bool = False) -> list[dict[str, Any]]:
    layers = 2 if quick else 4
    size = 96 if quick else 224
    bert = lambda: qm.bert_float(layers)          # noqa: E731
    gpt2 = lambda: qm.gpt2_float(layers)          # noqa: E731
    specs: list[tuple[str, Any, Any]] = [
        ("bert_dyn", lambda: qm.dynamic(bert()), lambda: tm.bert_inputs(1)),
        ("gpt2_dyn", lambda: qm.dynamic(gpt2()), tm.gpt2_inputs),
        ("resnet18_qdq", lambda: qm.static(qm.resnet18(size), qm.cnn_calib(size), qdq=True),
         lambda: qm.cnn_input(size)),
        ("resnet18_qop", lambda: qm.static(qm.resnet18(size), qm.cnn_calib(size), qdq=False),
         lambda: qm.cnn_input(size)),
        ("mobilenetv2_qdq", lambda: qm.static(qm.mobilenet_v2(size), qm.cnn_calib(size),
                                              qdq=True, per_channel=True),
         lambda: qm.cnn_input(size)),
        ("mobilenetv2_qop", lambda: qm.static(qm.mobilenet_v2(size), qm.cnn_calib(size),
                                              qdq=False), lambda: qm.cnn_input(size)),
        ("gpt2_int4", lambda: qm.int4(gpt2()), tm.gpt2_inputs),
        ("bert_int4_acc4", lambda: qm.int4(bert(), accuracy_level=4),
         lambda: tm.bert_inputs(1)),
    ]
    if not quick:
        specs.append(("bert_qdq", lambda: qm.static(bert(), qm.bert_calib(), qdq=True),
                      lambda: tm.bert_inputs(1)))
    tag = f"l{layers}s{size}"
    return [{"name": name, "category": CATEGORY,
             "model": lambda name=name, make=make: qm.cached(f"{name}-{tag}", make),
             "feeds": feeds} for name, make, feeds in specs]
