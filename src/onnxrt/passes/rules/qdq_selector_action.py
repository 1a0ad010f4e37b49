"""The QDQSelectorActionTransformer rule (onnxruntime's name for it): a float op between
DequantizeLinear inputs and a QuantizeLinear output -- the form ``quantize_static`` writes in
QDQ format -- becomes the integer op that computes it directly:

- Conv -> QLinearConv (the int32 bias of a DequantizeLinear with scale x_scale * w_scale);
- MatMul -> QLinearMatMul, or com.microsoft MatMulIntegerToFloat where the output stays float;
- Gemm -> com.microsoft QGemm (requantized, or float out);
- Add, Mul -> com.microsoft QLinearAdd, QLinearMul;
- AveragePool, GlobalAveragePool -> com.microsoft QLinearAveragePool,
  QLinearGlobalAveragePool; Concat -> com.microsoft QLinearConcat;
- Sigmoid, LeakyRelu, Softmax -> com.microsoft QLinearSigmoid, QLinearLeakyRelu,
  QLinearSoftmax;
- the ops that only move or select values (MaxPool, Reshape, Transpose, Squeeze,
  Unsqueeze, Flatten, Gather, Slice, Expand, Tile, DepthToSpace, SpaceToDepth, Resize in
  nearest mode) run on the 8-bit tensor itself when the DequantizeLinear and
  QuantizeLinear around them carry the same scale and zero point: both are dropped.

The quantized tensors are read from the DequantizeLinear inputs; a DequantizeLinear that
other nodes still read stays for them (onnxruntime duplicates it instead), one read by
nothing is removed with the other dead nodes. Only 8-bit per-tensor activations (weights
may be per output channel) are fused, as onnxruntime's CPU selectors do; anything else is
left as written and runs in float.
"""

from __future__ import annotations

import numpy as np
import onnx

from onnxrt.ir.graph import MS_DOMAIN, Graph, attr
from onnxrt.passes.patterns import copy_attrs, make_node
from onnxrt.passes.registry import EXTENDED, rule

_Q8 = (np.dtype(np.uint8), np.dtype(np.int8))
_DROP = {"MaxPool", "Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Gather",
         "Slice", "Expand", "Tile", "DepthToSpace", "SpaceToDepth", "Resize"}
_UNARY = {"Sigmoid": "QLinearSigmoid", "LeakyRelu": "QLinearLeakyRelu",
          "Softmax": "QLinearSoftmax", "AveragePool": "QLinearAveragePool",
          "GlobalAveragePool": "QLinearGlobalAveragePool"}
_OPS = ("Conv", "MatMul", "Gemm", "Add", "Mul", "Concat") + tuple(_UNARY) + tuple(_DROP)


class _QParams:
    """A DequantizeLinear's or QuantizeLinear's constant scale and zero point."""

    def __init__(self, node: onnx.NodeProto, scale: np.ndarray, zp: np.ndarray,
                 zp_name: str) -> None:
        self.node = node
        self.data = node.input[0]
        self.scale_name = node.input[1]
        self.zp_name = zp_name
        self.scale = scale
        self.zp = zp
        self.axis = int(attr(node, "axis", 1))

    @property
    def per_tensor(self) -> bool:
        return self.scale.size == 1 and self.zp.size == 1

    def same(self, other: _QParams) -> bool:
        return (self.per_tensor and other.per_tensor and self.zp.dtype == other.zp.dtype
                and np.array_equal(self.scale.reshape(-1), other.scale.reshape(-1))
                and np.array_equal(self.zp.reshape(-1), other.zp.reshape(-1)))


def _qparams(g: Graph, n: onnx.NodeProto | None, op: str,
             data_type: np.dtype | None = None) -> _QParams | None:
    if n is None or n.op_type != op or n.domain not in ("", "ai.onnx", MS_DOMAIN):
        return None
    if int(attr(n, "block_size", 0)) or len(n.input) < 2:
        return None
    scale = g.const(n.input[1])
    if scale is None or scale.dtype != np.float32:
        return None
    zp_name = n.input[2] if len(n.input) > 2 else ""
    if zp_name:
        zp = g.const(zp_name)
        if zp is None:
            return None
    else:   # a missing zero point is 0 of the quantized type (uint8 for QuantizeLinear)
        dt = data_type if data_type is not None else np.dtype(np.uint8)
        zp = np.zeros(scale.shape, dt)
        zp_name = g.add_const(zp, n.input[1] + "_zp")
    if zp.size != scale.size:
        return None
    return _QParams(n, scale, zp, zp_name)


def _dq(g: Graph, name: str, int8_only: bool = True) -> _QParams | None:
    """The DequantizeLinear producing ``name``, its quantized input 8-bit."""
    n = g.producer(name) if name else None
    if n is None or n.op_type != "DequantizeLinear":
        return None
    dt = _np_type(g, n.input[0])
    if dt is None or (int8_only and dt not in _Q8):
        return None
    p = _qparams(g, n, "DequantizeLinear", dt)
    return p if p is not None and p.zp.dtype == dt else None


def _q(g: Graph, name: str) -> _QParams | None:
    """The one QuantizeLinear reading ``name`` (read by nothing else, no graph output),
    per tensor, to an 8-bit type, saturating."""
    if not g.only_use(name):
        return None
    n = g.consumers(name)[0]
    if int(attr(n, "saturate", 1)) != 1:
        return None
    out_dt = _np_type(g, n.output[0]) if n.output else None
    p = _qparams(g, n, "QuantizeLinear", out_dt)
    if p is None or not p.per_tensor or p.zp.dtype not in _Q8:
        return None
    if out_dt is not None and out_dt != p.zp.dtype:
        return None
    return p


def _np_type(g: Graph, name: str) -> np.dtype | None:
    et = g.elem_type(name)
    if not et:
        return None
    try:
        return np.dtype(onnx.helper.tensor_dtype_to_np_dtype(et))
    except (KeyError, TypeError):
        return None


def _triple(p: _QParams) -> list[str]:
    return [p.data, p.scale_name, p.zp_name]


def _emit(g: Graph, node: onnx.NodeProto, new: onnx.NodeProto, q: _QParams | None) -> bool:
    dead = [node] + ([q.node] if q is not None else [])
    g.replace(dead, new, q.node if q is not None else node)
    if new.domain == MS_DOMAIN:
        g.uses_domain(MS_DOMAIN)
    return True


def _int32_bias(g: Graph, name: str, scale: np.ndarray) -> str | None:
    """The int32 constant behind a bias DequantizeLinear whose scale is ``scale`` (x_scale *
    w_scale, per output channel or not) and zero point 0: the bias the integer op adds."""
    p = _dq(g, name, int8_only=False)
    if p is None or g.const(p.data) is None or g.const(p.data).dtype != np.int32:
        return None
    if np.any(p.zp):
        return None
    s = np.broadcast_to(np.asarray(scale, np.float32).reshape(-1), p.scale.reshape(-1).shape) \
        if p.scale.size >= np.size(scale) else None
    if s is None or not np.allclose(p.scale.reshape(-1), s, rtol=1e-5, atol=0):
        return None
    return p.data


def _weight(g: Graph, name: str, axis: int, channels: int | None) -> _QParams | None:
    """A constant 8-bit weight's DequantizeLinear: per tensor, or per channel along
    ``axis`` (``channels`` values)."""
    w = _dq(g, name)
    if w is None or g.const(w.data) is None:
        return None
    if w.per_tensor:
        return w
    rank = g.const(w.data).ndim
    if w.scale.ndim != 1 or (w.axis + rank) % rank != axis or w.scale.size != channels:
        return None
    return w


def _conv(g: Graph, n: onnx.NodeProto) -> bool:
    x = _dq(g, n.input[0])
    if x is None or not x.per_tensor or len(n.input) < 2:
        return False
    wq = _dq(g, n.input[1])
    wv = g.const(wq.data) if wq is not None else None
    if wv is None or wv.ndim < 3:
        return False
    w = _weight(g, n.input[1], 0, wv.shape[0])
    q = _q(g, n.output[0])
    if w is None or q is None:
        return False
    inputs = _triple(x) + _triple(w) + [q.scale_name, q.zp_name]
    if len(n.input) > 2 and n.input[2]:
        b = _int32_bias(g, n.input[2], x.scale.reshape(()) * w.scale)
        if b is None:
            return False
        inputs.append(b)
    new = make_node("QLinearConv", inputs, [q.node.output[0]], (n.name or "conv") + "_quant")
    copy_attrs(n, new)
    return _emit(g, n, new, q)


def _matmul(g: Graph, n: onnx.NodeProto) -> bool:
    a, b = _dq(g, n.input[0]), _dq(g, n.input[1])
    if a is None or b is None or not a.per_tensor:
        return False
    bv = g.const(b.data)
    if not b.per_tensor:    # per column of a constant 2-D B only
        if bv is None or bv.ndim != 2 or _weight(g, n.input[1], 1, bv.shape[1]) is None:
            return False
    q = _q(g, n.output[0])
    if q is not None:
        new = make_node("QLinearMatMul", _triple(a) + _triple(b) + [q.scale_name, q.zp_name],
                        [q.node.output[0]], (n.name or "matmul") + "_quant")
        return _emit(g, n, new, q)
    if bv is None:  # onnxruntime's MatMulIntegerToFloat selector wants a constant B
        return False
    new = make_node("MatMulIntegerToFloat", [a.data, b.data, a.scale_name, b.scale_name,
                                             a.zp_name, b.zp_name],
                    [n.output[0]], (n.name or "matmul") + "_quant", MS_DOMAIN)
    return _emit(g, n, new, None)


def _gemm(g: Graph, n: onnx.NodeProto) -> bool:
    a = _dq(g, n.input[0])
    if a is None or not a.per_tensor or attr(n, "transA", 0):
        return False
    bq = _dq(g, n.input[1])
    bv = g.const(bq.data) if bq is not None else None
    if bv is None or bv.ndim != 2:
        return False
    tb = int(attr(n, "transB", 0))
    b = _weight(g, n.input[1], 0 if tb else 1, bv.shape[0 if tb else 1])
    if b is None:
        return False
    q = _q(g, n.output[0])
    inputs = _triple(a) + _triple(b)
    if len(n.input) > 2 and n.input[2]:
        if float(attr(n, "beta", 1.0)) != 1.0:
            return False
        c = _int32_bias(g, n.input[2], float(attr(n, "alpha", 1.0)) * a.scale.reshape(()) *
                        b.scale)
        if c is None:
            return False
        inputs.append(c)
    elif q is not None:
        inputs.append("")
    out = [q.node.output[0]] if q is not None else [n.output[0]]
    if q is not None:
        inputs += [q.scale_name, q.zp_name]
    new = make_node("QGemm", inputs, out, (n.name or "gemm") + "_quant", MS_DOMAIN)
    copy_attrs(n, new, skip=("beta",))
    return _emit(g, n, new, q)


def _binary(g: Graph, n: onnx.NodeProto) -> bool:
    if len(n.input) != 2:
        return False
    a, b = _dq(g, n.input[0]), _dq(g, n.input[1])
    q = _q(g, n.output[0])
    if (a is None or b is None or q is None or not a.per_tensor or not b.per_tensor
            or not a.zp.dtype == b.zp.dtype == q.zp.dtype):
        return False
    new = make_node("QLinear" + n.op_type, _triple(a) + _triple(b) + [q.scale_name, q.zp_name],
                    [q.node.output[0]], (n.name or n.op_type) + "_quant", MS_DOMAIN)
    return _emit(g, n, new, q)


def _unary(g: Graph, n: onnx.NodeProto) -> bool:
    x = _dq(g, n.input[0])
    q = _q(g, n.output[0])
    if x is None or q is None or not x.per_tensor or x.zp.dtype != q.zp.dtype:
        return False
    if n.op_type == "AveragePool" and any(d != 1 for d in attr(n, "dilations", []) or []):
        return False
    new = make_node(_UNARY[n.op_type], _triple(x) + [q.scale_name, q.zp_name],
                    [q.node.output[0]], (n.name or n.op_type) + "_quant", MS_DOMAIN)
    copy_attrs(n, new)
    if n.op_type == "Softmax":   # its axis means what the model's opset says
        new.attribute.append(onnx.helper.make_attribute("opset", g.opset))
    return _emit(g, n, new, q)


def _concat(g: Graph, n: onnx.NodeProto) -> bool:
    q = _q(g, n.output[0])
    if q is None:
        return False
    ins = [_dq(g, x) for x in n.input]
    if any(p is None or not p.per_tensor or p.zp.dtype != q.zp.dtype for p in ins):
        return False
    inputs = [q.scale_name, q.zp_name]
    for p in ins:
        inputs += _triple(p)
    new = make_node("QLinearConcat", inputs, [q.node.output[0]],
                    (n.name or "concat") + "_quant", MS_DOMAIN)
    copy_attrs(n, new)
    return _emit(g, n, new, q)


def _drop(g: Graph, n: onnx.NodeProto) -> bool:
    """The data-movement op on the quantized tensor; its DQ and Q pair dropped."""
    if n.op_type == "MaxPool" and (g.opset < 12 or (len(n.output) > 1 and n.output[1])):
        return False
    if n.op_type == "Resize" and attr(n, "mode", b"nearest") not in (b"nearest", "nearest"):
        return False
    x = _dq(g, n.input[0])
    q = _q(g, n.output[0])
    if x is None or q is None or not x.same(q):
        return False
    new = onnx.NodeProto()
    new.CopyFrom(n)
    new.input[0] = x.data
    new.output[0] = q.node.output[0]
    return _emit(g, n, new, q)


@rule("QDQSelectorActionTransformer", EXTENDED, order=90, ops=_OPS)
def fuse_qdq(g: Graph, n: onnx.NodeProto) -> bool:
    if n.domain not in ("", "ai.onnx") or not n.output:
        return False
    op = n.op_type
    if op == "Conv":
        return _conv(g, n)
    if op == "MatMul":
        return _matmul(g, n)
    if op == "Gemm":
        return _gemm(g, n)
    if op in ("Add", "Mul"):
        return _binary(g, n)
    if op == "Concat":
        return _concat(g, n)
    if op in _UNARY:
        return _unary(g, n)
    return _drop(g, n)
