"""A worker process that runs fuzz cases for one engine, so that a crash or a hang of the
engine is a failed case and not a dead test run.

Protocol: one JSON request per line on stdin, one JSON reply per line on stdout. A request
is ``{"model": base64 bytes, "feeds": {name: base64 .npy}, "level": int, "threads": int}``;
the reply ``{"status": "ok", "outputs": [base64 .npy]}`` or ``{"status": "error", "cls":
name, "module": module, "msg": text}``. Started as ``python -m fuzz.worker ENGINE`` with
ENGINE ``onnxrt``, ``onnxruntime`` or ``reference`` (onnx.reference).
"""

from __future__ import annotations

import base64
import io
import json
import os
import sys
from typing import Any

import numpy as np


def encode(a: Any) -> str:
    buf = io.BytesIO()
    np.save(buf, np.asarray(a), allow_pickle=False)
    return base64.b64encode(buf.getvalue()).decode()


def decode(s: str) -> np.ndarray:
    return np.load(io.BytesIO(base64.b64decode(s)), allow_pickle=False)


def _run(engine: str, mod: Any, req: dict[str, Any]) -> list[Any]:
    model = base64.b64decode(req["model"])
    feeds = {k: decode(v) for k, v in req.get("feeds", {}).items()}
    if engine == "reference":
        import onnx
        from onnx.reference import ReferenceEvaluator

        return list(ReferenceEvaluator(onnx.load_from_string(model)).run(None, feeds))
    so = mod.SessionOptions()
    so.graph_optimization_level = mod.GraphOptimizationLevel(
        {0: 0, 1: 1, 2: 2, 99: 99}[int(req.get("level", 99))])
    so.intra_op_num_threads = int(req.get("threads", 1))
    if engine == "onnxruntime":
        so.log_severity_level = 4
    sess = mod.InferenceSession(model, so, providers=["CPUExecutionProvider"])
    if req.get("load_only"):
        return []
    return list(sess.run(None, feeds))


def main() -> None:
    engine = sys.argv[1]
    if engine == "onnxrt":
        import onnxrt as mod
    elif engine == "onnxruntime":
        import onnxruntime as mod
        mod.set_default_logger_severity(4)
    else:
        mod = None
    out = sys.stdout
    sys.stdout = sys.stderr     # nothing but replies on the protocol stream
    out.write(json.dumps({"status": "ready", "pid": os.getpid()}) + "\n")
    out.flush()
    for line in sys.stdin:
        req = json.loads(line)
        try:
            res = _run(engine, mod, req)
            reply = {"status": "ok", "outputs": [encode(r) for r in res]}
        except Exception as e:  # every refusal is reported, judged by the test
            reply = {"status": "error", "cls": type(e).__name__,
                     "module": type(e).__module__, "msg": str(e)[:2000],
                     "bases": [c.__name__ for c in type(e).__mro__]}
        out.write(json.dumps(reply) + "\n")
        out.flush()


if __name__ == "__main__":
    main()
