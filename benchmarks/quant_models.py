"""Quantized models for the benchmark, made the way users make them: onnxruntime's own
quantization tool (``quantize_dynamic``, ``quantize_static`` in QDQ and QOperator formats,
the int4 ``MatMulNBitsQuantizer``) applied to float models built here: the BERT- and
GPT-2-like transformers of transformer_models.py and two CNNs in the torchvision
architectures' shapes with random weights (ResNet-18 and MobileNetV2, batch norms folded).

Quantizing takes seconds to a minute per model, so the results are kept in a cache folder
(``ONNXRT_BENCH_CACHE``, default ``~/.cache/onnxrt-bench``), keyed by name and the
onnxruntime version."""

from __future__ import annotations

import hashlib
import os
import tempfile
from typing import Any, Callable

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import transformer_models as tm

OPSET = 17


# -- float CNNs -------------------------------------------------------------------------------

class _Cnn:
    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []
        self.n = 0

    def _name(self, base: str) -> str:
        self.n += 1
        return f"{base}_{self.n}"

    def const(self, v: np.ndarray, base: str) -> str:
        name = self._name(base)
        self.inits.append(numpy_helper.from_array(v, name))
        return name

    def op(self, op: str, ins: list[str], **attrs: Any) -> str:
        out = self._name(op.lower())
        self.nodes.append(h.make_node(op, ins, [out], name=self._name(op), **attrs))
        return out

    def conv(self, x: str, cin: int, cout: int, k: int, stride: int = 1, group: int = 1,
             act: str | None = "Relu") -> str:
        fan_in = cin // group * k * k
        w = (self.rng.standard_normal((cout, cin // group, k, k)) *
             np.sqrt(2.0 / fan_in)).astype(np.float32)
        b = (self.rng.standard_normal(cout) * 0.05).astype(np.float32)
        y = self.op("Conv", [x, self.const(w, "w"), self.const(b, "b")], kernel_shape=[k, k],
                    strides=[stride, stride], pads=[k // 2] * 4, group=group)
        if act == "Relu":
            return self.op("Relu", [y])
        if act == "Relu6":
            return self.op("Clip", [y, self.const(np.array(0, np.float32), "lo"),
                                    self.const(np.array(6, np.float32), "hi")])
        return y

    def head(self, x: str, cin: int, classes: int = 1000) -> str:
        p = self.op("Flatten", [self.op("GlobalAveragePool", [x])], axis=1)
        w = (self.rng.standard_normal((cin, classes)) / np.sqrt(cin)).astype(np.float32)
        b = np.zeros(classes, np.float32)
        return self.op("Gemm", [p, self.const(w, "fc_w"), self.const(b, "fc_b")])

    def model(self, y: str, name: str, size: int) -> onnx.ModelProto:
        self.nodes.append(h.make_node("Identity", [y], ["logits"], name="out"))
        g = h.make_graph(self.nodes, name,
                         [h.make_tensor_value_info("input", T.FLOAT, [1, 3, size, size])],
                         [h.make_tensor_value_info("logits", T.FLOAT, [1, 1000])], self.inits)
        return h.make_model(g, opset_imports=[h.make_opsetid("", OPSET)], ir_version=8,
                            producer_name="onnxrt-benchmark")


def resnet18(size: int = 224) -> onnx.ModelProto:
    b = _Cnn(11)
    x = b.op("MaxPool", [b.conv("input", 3, 64, 7, 2)], kernel_shape=[3, 3], strides=[2, 2],
             pads=[1, 1, 1, 1])
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        for i in range(2):
            s = stride if i == 0 else 1
            y = b.conv(b.conv(x, cin, cout, 3, s), cout, cout, 3, 1, act=None)
            short = x if (s == 1 and cin == cout) else b.conv(x, cin, cout, 1, s, act=None)
            x = b.op("Relu", [b.op("Add", [y, short])])
            cin = cout
    return b.model(b.head(x, cin), "resnet18_like", size)


def mobilenet_v2(size: int = 224) -> onnx.ModelProto:
    b = _Cnn(12)
    x = b.conv("input", 3, 32, 3, 2, act="Relu6")
    cin = 32
    for t, c, n, s in ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2),
                       (6, 96, 3, 1), (6, 160, 3, 2), (6, 320, 1, 1)):
        for i in range(n):
            stride = s if i == 0 else 1
            hid = cin * t
            y = x if t == 1 else b.conv(x, cin, hid, 1, act="Relu6")
            y = b.conv(y, hid, hid, 3, stride, group=hid, act="Relu6")
            y = b.conv(y, hid, c, 1, act=None)
            x = b.op("Add", [x, y]) if stride == 1 and cin == c else y
            cin = c
    x = b.conv(x, cin, 1280, 1, act="Relu6")
    return b.model(b.head(x, 1280), "mobilenet_v2_like", size)


def cnn_input(size: int = 224, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"input": rng.standard_normal((1, 3, size, size)).astype(np.float32)}


# -- quantization -----------------------------------------------------------------------------

def _cache_dir() -> str:
    d = os.environ.get("ONNXRT_BENCH_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "onnxrt-bench")
    os.makedirs(d, exist_ok=True)
    return d


def cached(key: str, make: Callable[[], bytes]) -> bytes:
    """``make()``'s model bytes, stored under ``key`` and the onnxruntime version."""
    import onnxruntime

    tag = hashlib.sha1(f"{key}|{onnxruntime.__version__}|{onnx.__version__}".encode())
    path = os.path.join(_cache_dir(), f"{key}-{tag.hexdigest()[:10]}.onnx")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    data = make()
    tmp = path + f".{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return data


class _Reader:
    """A calibration data reader over a few feed dicts."""

    def __init__(self, feeds: list[dict[str, np.ndarray]]) -> None:
        self.it = iter(feeds)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.it, None)

    def rewind(self) -> None:
        pass


def _through_files(model: onnx.ModelProto, fn: Callable[[str, str], None]) -> bytes:
    """Run a file-to-file quantizer on ``model``; the output's bytes (external data kept
    off: the models stay under 2 GB)."""
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.onnx"), os.path.join(d, "out.onnx")
        onnx.save(model, src)
        fn(src, dst)
        return onnx.load(dst).SerializeToString()


def dynamic(model: onnx.ModelProto) -> bytes:
    from onnxruntime.quantization import QuantType, quantize_dynamic

    return _through_files(model, lambda s, d: quantize_dynamic(s, d,
                                                               weight_type=QuantType.QInt8))


def static(model: onnx.ModelProto, calib: list[dict[str, np.ndarray]], qdq: bool,
           per_channel: bool = False) -> bytes:
    from onnxruntime.quantization import QuantFormat, QuantType, quantize_static

    def run(s: str, d: str) -> None:
        quantize_static(s, d, _Reader(calib),
                        quant_format=QuantFormat.QDQ if qdq else QuantFormat.QOperator,
                        activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8,
                        per_channel=per_channel)
    return _through_files(model, run)


def int4(model: onnx.ModelProto, block_size: int = 32, accuracy_level: int | None = None,
         symmetric: bool = False) -> bytes:
    from onnxruntime.quantization.matmul_nbits_quantizer import MatMulNBitsQuantizer

    q = MatMulNBitsQuantizer(model, block_size=block_size, is_symmetric=symmetric,
                             accuracy_level=accuracy_level)
    q.process()
    return q.model.model.SerializeToString()


# -- the models the quantized category uses ---------------------------------------------------

def bert_float(layers: int) -> onnx.ModelProto:
    return tm.bert(layers=layers)


def gpt2_float(layers: int) -> onnx.ModelProto:
    return tm.gpt2(layers=layers)


def bert_calib(n: int = 2) -> list[dict[str, np.ndarray]]:
    out = []
    for i in range(n):
        f = tm.bert_inputs(1)
        f["input_ids"] = np.random.default_rng(i + 5).integers(0, 30522, f["input_ids"].shape)
        out.append(f)
    return out


def cnn_calib(size: int, n: int = 2) -> list[dict[str, np.ndarray]]:
    return [cnn_input(size, seed=i + 3) for i in range(n)]
