"""A/B of the depthwise int8 conv loops (providers/cpu/quant/igemm.py) in one process: the
exact float32 per-plane loop against the int32 per-plane loop it replaces, on MobileNetV2's
depthwise shapes (one thread, the compiled kernel alone), then the QDQ MobileNetV2 of
cases_quantized.py through whole sessions (with the float32 loop, without it, onnxruntime),
alternating runs at 2 threads.

    python benchmarks/quant_dw_ab.py [--runs N]

Run it under the machine's CPU lock."""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable

import numpy as np
import onnxruntime as ort_ref

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnxrt  # noqa: E402
from onnxrt.providers.cpu.quant import igemm  # noqa: E402

SHAPES = [(32, 112, 1), (96, 112, 2), (144, 56, 1), (144, 56, 2), (192, 28, 1), (384, 14, 1),
          (576, 14, 1), (960, 7, 1)]


def _median_ms(fns: list[Callable[[], Any]], runs: int) -> list[float]:
    for f in fns:
        f()
    ts: list[list[float]] = [[] for _ in fns]
    for _ in range(runs):
        for f, t in zip(fns, ts):
            a = time.perf_counter()
            f()
            t.append(time.perf_counter() - a)
    return [statistics.median(t) * 1e3 for t in ts]


def kernels(runs: int) -> None:
    rng = np.random.default_rng(0)
    print("depthwise 3x3, one thread: C x H s  int32-plane ms  float32 ms  speed-up")
    for c, hw, s in SHAPES:
        x = rng.integers(0, 256, (1, c, hw, hw)).astype(np.uint8)
        w = rng.integers(-128, 128, (c, 1, 3, 3)).astype(np.int8)
        new, old = igemm.PackedConvW(w, None, c), igemm.PackedConvW(w, None, c)
        old.rows32 = None
        epi = igemm.Epilogue(igemm.MODE_QUANT, np.uint8, scale=np.full(c, 3e-3, np.float32),
                             zp=100.0, qrange=(0, 255))
        a, b = _median_ms([lambda p=p: igemm.conv2d(x, 128, p, [1, 1], [s, s], [1] * 4, epi,
                                                    dw_nhwc=False) for p in (old, new)], runs)
        print(f"  {c:4d} x {hw:3d} s{s}  {a:7.3f}  {b:7.3f}  {a / b:5.2f}x")


def model(runs: int) -> None:
    import cases_quantized as cq

    case = next(c for c in cq.cases() if c["name"] == "mobilenetv2_qdq")
    data, feeds = case["model"](), case["feeds"]()
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 2
    new = onnxrt.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    keep = igemm.DW_F32_MAX_TAPS
    igemm.DW_F32_MAX_TAPS = 0       # the sessions made now pack no float32 taps
    try:
        old = onnxrt.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    finally:
        igemm.DW_F32_MAX_TAPS = keep
    ro = ort_ref.SessionOptions()
    ro.intra_op_num_threads = 2
    ro.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ref = ort_ref.InferenceSession(data, ro, providers=["CPUExecutionProvider"])
    ya, yb = old.run(None, feeds)[0], new.run(None, feeds)[0]
    assert np.array_equal(ya, yb), "the two loops disagree"
    a, b, r = _median_ms([lambda s=s: s.run(None, feeds) for s in (old, new, ref)], runs)
    print(f"mobilenetv2_qdq, 2 threads: int32-plane {a:.2f} ms ({a / r:.2f}x onnxruntime), "
          f"float32 {b:.2f} ms ({b / r:.2f}x), onnxruntime {r:.2f} ms")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=20)
    args = ap.parse_args()
    kernels(args.runs)
    model(args.runs)


if __name__ == "__main__":
    main()
