"""``python -m onnxrt.providers.cpu.nn.warm MARKER``: compile the CPU provider's kernels into
numba's disk cache, then write MARKER (framework/warmup.py starts this in the background on
a machine whose cache is empty).

What it compiles is what sessions take: sessions over a small convolutional model whose
nodes reach every compiled conv and pool path (dense 3x3 and 1x1 with each fused
activation and a residual, strided, grouped and depthwise convs, overlapping,
non-overlapping and 3x3/1 pools) at one and two threads, batch 1 and 2, then the kernels
other modules compile once (GELUs, layer norms, attention heads, the matrix-product split,
the hot pool's serving loop, the integer products and quantized adds, MatMulNBits, the
decoding attention step, the recurrent loops, tree walks, SVM coupling and Scan distances).
A kernel it misses still compiles where first needed.
"""

from __future__ import annotations

import os
import sys
import traceback
from typing import Any

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def _model() -> bytes:
    rng = np.random.default_rng(0)
    inits, nodes = [], []

    def w(name: str, *shape: int) -> str:
        inits.append(numpy_helper.from_array(
            (rng.standard_normal(shape) * 0.1).astype(np.float32), name))
        return name

    def conv(x: str, y: str, cin: int, cout: int, k: int, stride: int = 1,
             group: int = 1) -> str:
        nodes.append(helper.make_node(
            "Conv", [x, w(y + "_w", cout, cin // group, k, k), w(y + "_b", cout)], [y],
            pads=[k // 2] * 4, strides=[stride, stride], group=group))
        return y

    inits += [numpy_helper.from_array(np.float32(0), "lo"),
              numpy_helper.from_array(np.float32(6), "hi")]

    def op(kind: str, ins: list[str], y: str, **attrs) -> str:
        nodes.append(helper.make_node(kind, ins, [y], **attrs))
        return y

    x = op("Relu", [conv("x", "c1", 8, 32, 3)], "r1")
    x = op("HardSwish", [conv(x, "c2", 32, 32, 3)], "r2")
    x = op("Clip", [conv(x, "c2b", 32, 32, 3), "lo", "hi"], "r2b")
    x = op("LeakyRelu", [conv(x, "c3", 32, 32, 1)], "r3", alpha=0.1)
    x = op("Relu", [op("Add", [conv(x, "c4", 32, 32, 1), "r1"], "a4")], "r4")
    x = op("HardSigmoid", [conv(x, "c5", 32, 32, 3, group=32)], "r5")
    x = op("Sigmoid", [conv(x, "c6", 32, 32, 3, stride=2, group=32)], "r6")
    x = op("Mul", [x, op("Sigmoid", [conv(x, "c7", 32, 32, 3, group=4)], "r7")], "r7b")
    x = conv(x, "c8", 32, 64, 3, stride=2)
    a = op("MaxPool", [x], "p1", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    b = op("AveragePool", [x], "p2", kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1])
    x = op("Concat", [a, b], "cat", axis=1)
    bn = [w("bn_s", 128), w("bn_b", 128), w("bn_m", 128)]
    inits.append(numpy_helper.from_array(np.ones(128, np.float32), "bn_v"))
    x = op("Relu", [op("BatchNormalization", [x] + bn + ["bn_v"], "bn")], "bnr")
    x = op("MaxPool", [x], "p3", kernel_shape=[3, 3], strides=[2, 2])
    x = op("AveragePool", [x], "p4", kernel_shape=[2, 2], strides=[2, 2])
    x = op("GlobalAveragePool", [x], "gap")
    x = op("Flatten", [x], "flat")
    op("Gemm", [x, w("fc_w", 10, 128), w("fc_b", 10)], "y", transB=1)
    g = helper.make_graph(
        nodes, "warm", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8, 64, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, ir_version=8,
                             opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _quant_model() -> bytes:
    """QLinearConv dense and depthwise, and com.microsoft QLinearAdd, on uint8 activations."""
    rng = np.random.default_rng(0)

    def t(name: str, v: np.ndarray) -> Any:
        return numpy_helper.from_array(v, name)

    inits = [t("s", np.array(0.05, np.float32)), t("z", np.array(128, np.uint8)),
             t("ws", np.array(0.02, np.float32)), t("wz", np.array(0, np.int8)),
             t("w", rng.integers(-20, 20, (8, 8, 3, 3)).astype(np.int8)),
             t("wd", rng.integers(-20, 20, (8, 1, 3, 3)).astype(np.int8))]
    nodes = [helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"]),
             helper.make_node("QLinearConv", ["q", "s", "z", "w", "ws", "wz", "s", "z"],
                              ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("QLinearConv", ["c1", "s", "z", "wd", "ws", "wz", "s", "z"],
                              ["c2"], pads=[1, 1, 1, 1], group=8),
             helper.make_node("QLinearAdd", ["c1", "s", "z", "c2", "s", "z", "s", "z"],
                              ["a"], domain="com.microsoft"),
             helper.make_node("DequantizeLinear", ["a", "s", "z"], ["y"])]
    g = helper.make_graph(
        nodes, "warm_q", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, ir_version=8, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    ).SerializeToString()


def compile_all() -> None:
    import onnxrt
    from onnxrt.framework import hotpool
    from onnxrt.framework.parallel import ThreadPool
    from onnxrt.providers.cpu.contrib import attention, gelu, layer_norm
    from onnxrt.providers.cpu.nn import jit

    data = _model()
    for threads in (1, 2):
        so = onnxrt.SessionOptions()
        so.intra_op_num_threads = threads
        s = onnxrt.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        for n in (1, 2):
            s.run(None, {"x": np.ones((n, 8, 64, 64), np.float32)})
    hotpool._compiled()
    jit._install_native()
    gelu._gelu_kernel()
    gelu._fast_gelu_kernel()
    layer_norm._norm_kernel()
    attention._heads_kernel()
    # the kernels of the other families (each build warms its own signatures): without them
    # here, every process after the warm-up compiled these at its first session that needed
    # one (1.5 s for a quantized ResNet)
    from onnxrt.providers.cpu.contrib import gqa_decode
    from onnxrt.providers.cpu.controlflow import scan_cdist
    from onnxrt.providers.cpu.ml import svm, tree_compiled
    from onnxrt.providers.cpu.quant import nbits
    from onnxrt.providers.cpu.rnn import compiled as rnn_compiled
    for build in (gqa_decode.kernel, rnn_compiled.kernel, tree_compiled.kernel,
                  svm._couple_kernel, svm._svc_kernel, scan_cdist.kernel):
        build()
    # a 4-bit weight warms both MatMulNBits paths (float and accuracy_level 4) as it is made
    nbits.NBitsWeight(np.zeros((4, 1, 16), np.uint8), np.ones((4, 1), np.float32),
                      np.full((4, 1), 8, np.float32), None, 32, 4, 4, 32)
    # the integer convolutions (dense and depthwise) and the quantized add warm as their
    # kernels are made, at session creation
    onnxrt.InferenceSession(_quant_model(), providers=["CPUExecutionProvider"])
    a = np.ones((64, 256), np.float32)
    pool = ThreadPool(2)
    try:
        jit.split_matmul(a, np.ones((256, 256), np.float32), pool)
        pool.parallel_for(2, lambda i: None)
    finally:
        pool.close()


def main(argv: list[str]) -> int:
    marker = argv[1]
    os.makedirs(os.path.dirname(marker) or ".", exist_ok=True)
    with open(marker + ".lock", "w") as lock:
        try:
            import fcntl
        except ImportError:     # no flock here: two processes may compile at once
            fcntl = None
        if fcntl is not None:
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:     # another process compiles for the same marker
                return 0
        if os.path.exists(marker):
            return 0
        try:
            compile_all()
        except Exception:
            with open(marker + ".failed", "w") as f:
                f.write(traceback.format_exc())
            return 1
        tmp = f"{marker}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write("compiled\n")
        os.replace(tmp, marker)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
