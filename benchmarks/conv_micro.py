"""Conv, pooling and Gemm micro-benchmarks: onnxrt vs onnxruntime, same process, alternating.

    python benchmarks/conv_micro.py [--reps 30] [--threads=2] [--only NAME]

Prints the median time of each engine, the ratio onnxrt / onnxruntime of the medians and of
the minima (lower is better; on a loaded machine the minima are the steadier measure).
"""

from __future__ import annotations

import argparse
import os
import sys

# before numpy is imported: idle BLAS threads sleep, and BLAS uses as many threads as
# onnxruntime is given (a loaded 2-core machine makes 2-thread timings of both engines noisy)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
_threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), "2")
os.environ.setdefault("OPENBLAS_NUM_THREADS", _threads)

import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

# name, input shape, weight shape, attributes
CONVS = [
    ("1x1 256->64 @56", (1, 256, 56, 56), (64, 256, 1, 1), {}),
    ("3x3 64->64 @56", (1, 64, 56, 56), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
    ("7x7/2 3->64 @224", (1, 3, 224, 224), (64, 3, 7, 7), {"pads": [3, 3, 3, 3],
                                                            "strides": [2, 2]}),
    ("3x3/2 128->128 @56", (1, 128, 56, 56), (128, 128, 3, 3), {"pads": [1, 1, 1, 1],
                                                                "strides": [2, 2]}),
    ("dw 3x3 32 @112", (1, 32, 112, 112), (32, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 32}),
    ("dw 3x3/2 96 @112", (1, 96, 112, 112), (96, 1, 3, 3), {"pads": [1, 1, 1, 1], "group": 96,
                                                            "strides": [2, 2]}),
    ("grouped 3x3 g32 128 @56", (1, 128, 56, 56), (128, 4, 3, 3), {"pads": [1, 1, 1, 1],
                                                                   "group": 32}),
    ("3x3 64->64 @224 (vgg)", (1, 64, 224, 224), (64, 64, 3, 3), {"pads": [1, 1, 1, 1]}),
]
POOLS = [
    ("maxpool 3x3/2 64 @112", "MaxPool", (1, 64, 112, 112),
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    ("avgpool 3x3/1 256 @28", "AveragePool", (1, 256, 28, 28),
     {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1], "count_include_pad": 0}),
    ("globalavg 2048 @7", "GlobalAveragePool", (1, 2048, 7, 7), {}),
]


def _model(node: onnx.NodeProto, x_shape: tuple[int, ...], inits: list[onnx.TensorProto]
           ) -> bytes:
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, list(x_shape))],
                          [helper.make_tensor_value_info("y", 1, None)], inits)
    m = helper.make_model(g, ir_version=9, opset_imports=[helper.make_opsetid("", 17)])
    return m.SerializeToString()


def _cases(rng: np.random.Generator):
    for name, xs, ws, attrs in CONVS:
        w = rng.standard_normal(ws).astype(np.float32) * 0.1
        b = rng.standard_normal(ws[0]).astype(np.float32)
        node = helper.make_node("Conv", ["x", "w", "b"], ["y"], **attrs)
        inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")]
        yield name, xs, _model(node, xs, inits), 2.0 * np.prod(ws) * np.prod(xs[2:]) / (
            np.prod(attrs.get("strides", [1, 1])))
    for name, op, xs, attrs in POOLS:
        yield name, xs, _model(helper.make_node(op, ["x"], ["y"], **attrs), xs, []), 0
    for m, k, n in [(1, 2048, 1000), (64, 768, 3072)]:
        w = rng.standard_normal((k, n)).astype(np.float32)
        node = helper.make_node("Gemm", ["x", "w"], ["y"])
        yield (f"gemm {m}x{k}x{n}", (m, k), _model(node, (m, k), [numpy_helper.from_array(
            w, "w")]), 2.0 * m * k * n)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--threads", type=int, default=int(_threads))
    ap.add_argument("--only", default="")
    args = ap.parse_args()

    import onnxruntime as ort

    import onnxrt

    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    rng = np.random.default_rng(0)
    print(f"{'case':28s} {'onnxrt ms':>10s} {'ort ms':>9s} {'ratio':>6s} {'min r':>6s} "
          f"{'GFLOP/s':>8s}")
    ratios = []
    for name, xs, model, flops in _cases(rng):
        if args.only and args.only not in name:
            continue
        x = rng.standard_normal(xs).astype(np.float32)
        ours = onnxrt.InferenceSession(model)
        ref = ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])
        a, b = ours.run(None, {"x": x})[0], ref.run(None, {"x": x})[0]
        np.testing.assert_allclose(a, b, rtol=1e-3, atol=1e-3, err_msg=name)
        t_ours, t_ref = [], []
        for _ in range(args.reps):       # alternate so drift hits both engines alike
            t0 = time.perf_counter()
            ours.run(None, {"x": x})
            t1 = time.perf_counter()
            ref.run(None, {"x": x})
            t2 = time.perf_counter()
            t_ours.append(t1 - t0)
            t_ref.append(t2 - t1)
        mo, mr = np.median(t_ours), np.median(t_ref)
        lo = min(t_ours) / min(t_ref)
        ratios.append((mo / mr, lo))
        gf = f"{flops / min(t_ours) / 1e9:8.1f}" if flops else ""
        print(f"{name:28s} {mo * 1e3:10.3f} {mr * 1e3:9.3f} {mo / mr:6.2f} {lo:6.2f} {gf}")
    if ratios:
        med, mins = np.log(np.array(ratios)).mean(axis=0)
        print(f"geometric mean ratio: medians {np.exp(med):.2f}, minima {np.exp(mins):.2f}")


if __name__ == "__main__":
    main()
