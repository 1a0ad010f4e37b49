"""hypothesis strategies for single-op models of every compiled-kernel family: attributes
(valid and hostile), shapes (empty, symbolic, mismatched) and dtypes, with inputs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from hypothesis import strategies as st
from onnx import helper, numpy_helper

MS = "com.microsoft"
NODE = "fuzz_node"


@dataclass
class Case:
    model: bytes
    feeds: dict[str, np.ndarray]
    label: str
    rtol: float = 1e-4
    atol: float = 1e-5

    def __repr__(self) -> str:     # what hypothesis prints for a failing example
        m = onnx.load_from_string(self.model)
        n = m.graph.node[0]
        attrs = {a.name: onnx.helper.get_attribute_value(a) for a in n.attribute}
        shapes = {k: (v.shape, str(v.dtype)) for k, v in self.feeds.items()}
        inits = {t.name: list(t.dims) for t in m.graph.initializer}
        return f"Case({self.label}: {n.op_type} {attrs} feeds {shapes} initializers {inits})"


_TOL = {np.float16: (2e-2, 2e-2), np.float32: (1e-4, 1e-4), np.float64: (1e-7, 1e-9)}


def _data(draw: Any, shape: tuple[int, ...], dt: Any, seed: int, nan: bool = False
          ) -> np.ndarray:
    x = np.random.RandomState(seed).standard_normal(shape).astype(dt)
    if nan and x.size and draw(st.booleans()):
        flat = x.reshape(-1)
        flat[np.random.RandomState(seed + 1).randint(0, flat.size, max(1, flat.size // 7))] = \
            np.nan
    return x


def _model(op: str, inputs: list[tuple[str, Any, Any]], attrs: dict[str, Any],
           inits: dict[str, np.ndarray], out_dt: Any, n_out: int = 1, domain: str = "",
           opset: int = 19, post: str | None = None) -> bytes:
    """inputs: (name, dtype, declared shape or None); ``post``: an activation applied to
    the first output (the fusions of the higher optimization levels then apply)."""
    vis = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.dtype(d)), s)
           for n, d, s in inputs if n not in inits]
    outs = [f"y{i}" for i in range(n_out)]
    first = ["t0"] + outs[1:] if post else outs
    node = helper.make_node(op, [n for n, _, _ in inputs], first, name=NODE, domain=domain,
                            **{k: v for k, v in attrs.items() if v is not None})
    nodes = [node] + ([helper.make_node(post, ["t0"], ["y0"], name="post")] if post else [])
    g = helper.make_graph(
        nodes, "fuzz", vis,
        [helper.make_tensor_value_info(o, helper.np_dtype_to_tensor_dtype(np.dtype(out_dt)),
                                       None) for o in outs],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    ops = [helper.make_opsetid("", opset)]
    if domain:
        ops.append(helper.make_opsetid(domain, 1))
    m = helper.make_model(g, opset_imports=ops)
    m.ir_version = 8
    return m.SerializeToString()


def _declared(draw: Any, shape: tuple[int, ...]) -> Any:
    """The shape the model declares: exact, symbolic dims, or none at all."""
    how = draw(st.sampled_from(["exact", "exact", "symbolic", "none"]))
    if how == "exact":
        return list(shape)
    if how == "symbolic":
        return [f"d{i}" for i in range(len(shape))]
    return None


HOSTILE_STEP = st.sampled_from([1, 1, 1, 2, 3, 100, 0, -1])
HOSTILE_DIL = st.sampled_from([1, 1, 1, 2, 3, 0, -1])
HOSTILE_PAD = st.sampled_from([0, 0, 0, 1, 2, 5, -1, -3])


def _window_attrs(draw: Any, nd: int, kernel: list[int] | None, pool: bool) -> dict[str, Any]:
    a: dict[str, Any] = {}
    if kernel is not None and (pool or draw(st.booleans())):
        a["kernel_shape"] = kernel
    if draw(st.booleans()):
        a["strides"] = draw(st.lists(HOSTILE_STEP, min_size=nd, max_size=nd))
    if draw(st.booleans()):
        a["dilations"] = draw(st.lists(HOSTILE_DIL, min_size=nd, max_size=nd))
    mode = draw(st.sampled_from(["pads", "pads", "none", "SAME_UPPER", "SAME_LOWER", "VALID"]))
    if mode == "pads":
        a["pads"] = draw(st.lists(HOSTILE_PAD, min_size=2 * nd, max_size=2 * nd))
    elif mode != "none":
        a["auto_pad"] = mode
    return a


@st.composite
def conv(draw: Any, depthwise: bool = False, transpose: bool = False) -> Case:
    nd = draw(st.sampled_from([1, 2, 2]))
    dt = draw(st.sampled_from([np.float32, np.float32, np.float64]))
    n = draw(st.sampled_from([1, 1, 2, 0]))
    group = draw(st.sampled_from([1, 1, 2, 3]))
    cg = 1 if depthwise else draw(st.integers(1, 3))
    c = cg * group if not draw(st.integers(0, 9)) == 0 else cg * group + 1
    mult = draw(st.integers(1, 2))
    kernel = draw(st.lists(st.integers(1, 5), min_size=nd, max_size=nd))
    spatial = tuple(draw(st.lists(st.integers(1, 12), min_size=nd, max_size=nd)))
    if depthwise:
        group = c = max(c, 2)
    m_out = group * mult
    if transpose:
        wshape = (c, mult) + tuple(kernel)
    else:
        wshape = (m_out, cg) + tuple(kernel)
    seed = draw(st.integers(0, 2 ** 16))
    w = np.random.RandomState(seed + 7).standard_normal(wshape).astype(dt)
    a = _window_attrs(draw, nd, kernel, False)
    a["group"] = group
    if transpose and draw(st.booleans()):
        a["output_padding"] = draw(st.lists(st.integers(-1, 2), min_size=nd, max_size=nd))
    xs = (n, c) + spatial
    inputs = [("x", dt, _declared(draw, xs)), ("w", dt, list(wshape))]
    inits = {"w": w} if draw(st.sampled_from([True, True, True, False])) else {}
    feeds = {"x": _data(draw, xs, dt, seed)}
    if "w" not in inits:
        feeds["w"] = w
    if draw(st.booleans()):
        nb = (mult * group) if transpose else m_out
        b = np.random.RandomState(seed + 3).standard_normal(nb).astype(dt)
        inputs.append(("b", dt, [nb]))
        inits["b"] = b
    op = "ConvTranspose" if transpose else "Conv"
    label = "depthwise Conv" if depthwise else op
    post = draw(st.sampled_from([None, None, "Relu", "Sigmoid"]))   # FusedConv at level 2+
    rtol, atol = _TOL[dt]
    return Case(_model(op, inputs, a, inits, dt, post=post), feeds, label, rtol * 10,
                atol * 10)


@st.composite
def pool(draw: Any) -> Case:
    op = draw(st.sampled_from(["MaxPool", "MaxPool", "AveragePool", "LpPool"]))
    nd = draw(st.sampled_from([1, 2, 2]))
    dt = draw(st.sampled_from([np.float32, np.float32, np.float64, np.float16]))
    n = draw(st.sampled_from([1, 2, 0]))
    c = draw(st.integers(1, 4))
    kernel = draw(st.lists(st.integers(1, 4), min_size=nd, max_size=nd))
    spatial = tuple(draw(st.lists(st.integers(1, 14), min_size=nd, max_size=nd)))
    a = _window_attrs(draw, nd, kernel, True)
    if draw(st.booleans()):
        a["ceil_mode"] = draw(st.sampled_from([0, 1, 1, 2]))
    if op == "AveragePool" and draw(st.booleans()):
        a["count_include_pad"] = 1
    if op == "LpPool":
        a["p"] = draw(st.sampled_from([1, 2, 2, 3]))
    xs = (n, c) + spatial
    seed = draw(st.integers(0, 2 ** 16))
    x = _data(draw, xs, dt, seed, nan=op == "MaxPool")
    opset = draw(st.sampled_from([19, 19, 18, 12]))
    if opset < 18 and op == "LpPool":
        opset = 18
    rtol, atol = _TOL[dt]
    return Case(_model(op, [("x", dt, _declared(draw, xs))], a, {}, dt, opset=opset),
                {"x": x}, op, rtol, atol)


@st.composite
def layer_norm(draw: Any) -> Case:
    op = draw(st.sampled_from(["LayerNormalization", "SimplifiedLayerNormalization",
                               "SkipLayerNormalization", "SkipSimplifiedLayerNormalization"]))
    dt = draw(st.sampled_from([np.float32, np.float32, np.float16]))
    rank = draw(st.integers(2, 3)) if op.startswith("Skip") else draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 9), min_size=rank, max_size=rank)))
    eps = draw(st.sampled_from([1e-5, 1e-5, 1e-12, 0.0, -1e-5, -1.0]))
    seed = draw(st.integers(0, 2 ** 16))
    a: dict[str, Any] = {"epsilon": eps}
    # onnxruntime registers SimplifiedLayerNormalization in the ONNX domain
    domain = MS if op.startswith("Skip") else ""
    last = shape[-1]
    if not op.startswith("Skip"):
        axis = draw(st.integers(-rank - 1, rank))
        a["axis"] = axis
        ax = axis + rank if axis < 0 else axis
        norm = shape[ax:] if 0 <= ax < rank else (last,)
    else:
        norm = (last,)
    if draw(st.integers(0, 9)) == 0:
        norm = norm[:-1] + (norm[-1] + 1,)      # a mismatched scale
    r = np.random.RandomState(seed)
    inits = {"gamma": r.standard_normal(norm).astype(dt)}
    inputs = [("x", dt, _declared(draw, shape))]
    feeds = {"x": _data(draw, shape, dt, seed)}
    if op.startswith("Skip"):
        inputs.append(("skip", dt, list(shape)))
        feeds["skip"] = _data(draw, shape, dt, seed + 1)
    inputs.append(("gamma", dt, list(norm)))
    if op in ("LayerNormalization", "SkipLayerNormalization"):
        inits["beta"] = r.standard_normal(norm).astype(dt)
        inputs.append(("beta", dt, list(norm)))
    rtol, atol = _TOL[dt]
    return Case(_model(op, inputs, a, inits, dt, domain=domain, opset=17), feeds, op,
                rtol * 10, atol * 10)


@st.composite
def gemm(draw: Any) -> Case:
    op = draw(st.sampled_from(["Gemm", "MatMul", "MatMul"]))
    dt = draw(st.sampled_from([np.float32, np.float32, np.float64]))
    m, k, n = (draw(st.sampled_from([0, 1, 3, 17, 64])) for _ in range(3))
    k2 = k if draw(st.integers(0, 9)) else k + 1
    seed = draw(st.integers(0, 2 ** 16))
    a: dict[str, Any] = {}
    if op == "Gemm":
        ta, tb = draw(st.integers(0, 1)), draw(st.integers(0, 1))
        a = {"transA": ta, "transB": tb, "alpha": draw(st.sampled_from([1.0, 0.5])),
             "beta": draw(st.sampled_from([1.0, 2.0]))}
        ash = (k, m) if ta else (m, k)
        bsh = (n, k2) if tb else (k2, n)
    else:
        batch = tuple(draw(st.lists(st.integers(1, 3), max_size=2)))
        ash = batch + (m, k)
        bsh = (k2, n) if draw(st.booleans()) else batch[-1:] + (k2, n)
    x = _data(draw, ash, dt, seed)
    y = np.random.RandomState(seed + 1).standard_normal(bsh).astype(dt)
    inputs = [("a", dt, _declared(draw, ash)), ("b", dt, list(bsh))]
    inits = {"b": y} if draw(st.booleans()) else {}
    feeds = {"a": x}
    if "b" not in inits:
        feeds["b"] = y
    if op == "Gemm" and draw(st.booleans()):
        inits["c"] = np.random.RandomState(seed + 2).standard_normal((n,)).astype(dt)
        inputs.append(("c", dt, [n]))
    rtol, atol = _TOL[dt]
    return Case(_model(op, inputs, a, inits, dt), feeds, op, rtol * 10, atol * 100)


@st.composite
def attention(draw: Any) -> Case:
    b, s = draw(st.integers(1, 2)), draw(st.integers(1, 9))
    heads = draw(st.sampled_from([1, 2, 4, 3, 0]))
    hd = draw(st.sampled_from([2, 4, 8]))
    hidden = max(heads, 1) * hd
    cols = 3 * hidden if draw(st.integers(0, 9)) else 3 * hidden + 1
    seed = draw(st.integers(0, 2 ** 16))
    r = np.random.RandomState(seed)
    a: dict[str, Any] = {"num_heads": heads}
    if draw(st.booleans()):
        a["unidirectional"] = 1
    if draw(st.integers(0, 4)) == 0:
        a["qkv_hidden_sizes"] = draw(st.sampled_from(
            [[hidden, hidden, hidden], [hidden, hidden, 2 * hidden], [hidden, hidden + 1, hidden]]))
    inits = {"w": (r.standard_normal((hidden, cols)) * 0.2).astype(np.float32),
             "bias": (r.standard_normal(cols) * 0.1).astype(np.float32)}
    inputs = [("x", np.float32, _declared(draw, (b, s, hidden))),
              ("w", np.float32, [hidden, cols]), ("bias", np.float32, [cols])]
    feeds = {"x": r.standard_normal((b, s, hidden)).astype(np.float32)}
    return Case(_model("Attention", inputs, a, inits, np.float32, domain=MS, opset=17),
                feeds, "Attention", 1e-3, 1e-4)


@st.composite
def gelu(draw: Any) -> Case:
    op = draw(st.sampled_from(["Gelu", "Gelu-ms", "BiasGelu", "FastGelu"]))
    dt = draw(st.sampled_from([np.float32, np.float32, np.float16]))
    shape = tuple(draw(st.lists(st.integers(0, 9), min_size=1, max_size=3)))
    seed = draw(st.integers(0, 2 ** 16))
    x = _data(draw, shape, dt, seed) * dt(3)
    inputs = [("x", dt, _declared(draw, shape))]
    feeds = {"x": x}
    inits: dict[str, np.ndarray] = {}
    a: dict[str, Any] = {}
    domain, opset = MS, 17
    if op == "Gelu":
        domain, opset = "", 20
        a["approximate"] = draw(st.sampled_from(["none", "tanh", "bogus"]))
    if op in ("BiasGelu", "FastGelu") and (op == "BiasGelu" or draw(st.booleans())):
        nb = shape[-1] if draw(st.integers(0, 9)) else shape[-1] + 1
        inits["bias"] = np.random.RandomState(seed + 1).standard_normal(nb).astype(dt)
        inputs.append(("bias", dt, [nb]))
    rtol, atol = _TOL[dt]
    return Case(_model(op.split("-")[0], inputs, a, inits, dt, domain=domain, opset=opset),
                feeds, op, rtol * 10, atol * 10)


FAMILIES = {
    "conv": conv(),
    "conv_transpose": conv(transpose=True),
    "depthwise": conv(depthwise=True),
    "pool": pool(),
    "layer_norm": layer_norm(),
    "gemm_matmul": gemm(),
    "attention": attention(),
    "gelu": gelu(),
}


def numpy_pool(x: np.ndarray, out_shape: tuple[int, ...], attrs: dict[str, Any],
               kind: str = "max") -> np.ndarray:
    """MaxPool (NaN propagating like np.maximum), LpPool or AveragePool (``kind`` max, lp,
    avg) by their definition over the input's taps inside the window (the oracle where
    onnxruntime and onnx.reference disagree with the spec or each other, see the README);
    computed in float64. With count_include_pad the pads count, not ceil_mode's overhang."""
    nd = x.ndim - 2
    k = attrs["kernel_shape"]
    s = attrs.get("strides") or [1] * nd
    d = attrs.get("dilations") or [1] * nd
    ap = attrs.get("auto_pad", b"NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else ap
    if ap in ("SAME_UPPER", "SAME_LOWER"):
        begin, end = [], []
        for i in range(nd):
            total = max(0, (out_shape[2 + i] - 1) * s[i] + (k[i] - 1) * d[i] + 1
                        - x.shape[2 + i])
            begin.append(total // 2 if ap == "SAME_UPPER" else total - total // 2)
            end.append(total - begin[-1])
    elif ap == "VALID":
        begin, end = [0] * nd, [0] * nd
    else:
        pads = list(attrs.get("pads") or [0] * 2 * nd)
        begin, end = pads[:nd], pads[nd:]
    include = bool(attrs.get("count_include_pad", 0))
    p = float(attrs.get("p", 2))
    y = np.full(out_shape, -np.inf if kind == "max" else 0.0, dtype=np.float64)
    xf = x.astype(np.float64)
    for pos in np.ndindex(*out_shape[2:]):
        taps = [[q * s[i] - begin[i] + j * d[i] for j in range(k[i])
                 if 0 <= q * s[i] - begin[i] + j * d[i] < x.shape[2 + i]]
                for i, q in enumerate(pos)]
        if all(taps):
            win = xf[(slice(None), slice(None)) + np.ix_(*taps)]
            win = win.reshape(win.shape[0], win.shape[1], -1)
            if kind == "max":
                v = win.max(axis=2)
            elif kind == "lp":
                v = (np.abs(win) ** p).sum(axis=2) ** (1 / p)
            else:
                count = win.shape[2]
                if include:
                    count = 1
                    for i, q in enumerate(pos):
                        count *= sum(1 for j in range(k[i]) if -begin[i] <= q * s[i] - begin[i]
                                     + j * d[i] < x.shape[2 + i] + end[i])
                v = win.sum(axis=2) / count
            y[(slice(None), slice(None)) + pos] = v
    return y.astype(x.dtype)


def numpy_max_pool(x: np.ndarray, out_shape: tuple[int, ...], attrs: dict[str, Any]
                   ) -> np.ndarray:
    return numpy_pool(x, out_shape, attrs, "max")
