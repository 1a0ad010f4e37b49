"""The small CNNs' per-node savings measured in one process: onnxrt as it is, onnxrt with
Conv's bound calls and the 2x2 MaxPool path turned off (the code before them), and
onnxruntime, in interleaved rounds on the same inputs (2 threads each).

    python benchmarks/small_cnn_ab.py [--models kws,tiny_cnn,mobilenet_v3,yolo,shufflenet]
                                      [--rounds 7] [--threads 2]

Prints per model the median latency of each and its ratio to onnxruntime (the median of
the per-round ratios). Run it under the machine's CPU lock.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort_ref  # noqa: E402

import onnxrt  # noqa: E402
from onnxrt.framework import warmup  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _model(name: str) -> tuple[bytes, dict[str, np.ndarray]]:
    if name == "shufflenet":
        import cases_cnn

        case = next(c for c in cases_cnn.cases() if c["name"] == "shufflenet_b1")
        mb, feeds = case["model"], case["feeds"]
        return (mb() if callable(mb) else mb), (feeds() if callable(feeds) else feeds)
    import torch_models

    return torch_models.image_model(name), torch_models.image_input(name, 1)


def _before(sess: Any) -> Any:
    """The session's convs and pools as they ran before the bound calls and the 2x2 pool."""
    for st in sess._plan.steps:
        conv = getattr(st.fn, "conv", st.fn)
        if hasattr(conv, "_bound"):
            conv._bind = lambda *a, **k: None
        if hasattr(st.fn, "_pair"):
            st.fn._pair = False
    return sess


def _median_ms(sess: Any, feeds: dict[str, np.ndarray], n: int) -> float:
    for _ in range(3):
        sess.run(None, feeds)
    t = []
    for _ in range(n):
        t0 = time.perf_counter()
        sess.run(None, feeds)
        t.append(time.perf_counter() - t0)
    return float(np.median(t)) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="kws,tiny_cnn,mobilenet_v3,yolo,shufflenet")
    p.add_argument("--rounds", type=int, default=7)
    p.add_argument("--threads", type=int, default=2)
    args = p.parse_args()
    for name in args.models.split(","):
        mb, feeds = _model(name)
        onnxrt.InferenceSession(mb)
        warmup.wait(1800)
        so = onnxrt.SessionOptions()
        so.intra_op_num_threads = args.threads
        ro = ort_ref.SessionOptions()
        ro.intra_op_num_threads = args.threads
        sessions = {"onnxrt": onnxrt.InferenceSession(mb, so),
                    "before": _before(onnxrt.InferenceSession(mb, so)),
                    "onnxruntime": ort_ref.InferenceSession(
                        mb, ro, providers=["CPUExecutionProvider"])}
        ref = sessions["onnxruntime"].run(None, feeds)
        for key in ("onnxrt", "before"):
            diff = max(float(np.abs(a - b).max())
                       for a, b in zip(sessions[key].run(None, feeds), ref))
            if diff > 1e-3:
                raise SystemExit(f"{name}: {key} differs from onnxruntime by {diff}")
        # about 0.3 s of onnxruntime runs per block
        n = int(min(200, max(5, 300 / max(_median_ms(sessions["onnxruntime"], feeds, 5),
                                          1e-3))))
        times: dict[str, list[float]] = {k: [] for k in sessions}
        for _ in range(args.rounds):
            for key, sess in sessions.items():
                times[key].append(_median_ms(sess, feeds, n))
        line = f"{name:14s} onnxruntime {np.median(times['onnxruntime']):8.3f} ms"
        for key in ("before", "onnxrt"):
            ratio = np.median([a / b for a, b in zip(times[key], times["onnxruntime"])])
            line += f" | {key} {np.median(times[key]):8.3f} ms {ratio:5.2f}x"
        print(line, flush=True)


if __name__ == "__main__":
    main()
