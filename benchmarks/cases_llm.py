"""LLM cases: onnxruntime-genai builder decoders (llm_models.py: Llama architecture, random
weights) at two sizes, fp32 and int4: a 64-token prefill, and 16 greedy decoding steps from
a 128-position past feeding the present KV back (its tokens/s printed by
quant_compare.py). Needs onnxruntime-genai and transformers (the ``bench`` extra)."""

from __future__ import annotations

from typing import Any

import onnxruntime_genai  # noqa: F401  (a missing bench extra skips this module)

import llm_models as lm

CATEGORY = "llm"


def cases(quick: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    steps = 4 if quick else 16
    for size in (("small",) if quick else ("small", "medium")):
        for prec in ("fp32", "int4"):
            model = lm.build(size, prec)
            out.append({"name": f"llm_{size}_{prec}_prefill64", "category": CATEGORY,
                        "model": model, "feeds": lm.prefill_feeds(size)})
            out.append({"name": f"llm_{size}_{prec}_decode", "category": CATEGORY,
                        "model": model, "tokens": steps,
                        "stream": lm.decode_stream(size, lm.output_names(model),
                                                   steps=steps)})
    return out
