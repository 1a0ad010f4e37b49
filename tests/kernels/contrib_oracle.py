"""One-node com.microsoft models run on onnxrt and on onnxruntime (the oracle), shared by the
test_contrib_* files."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto as TP
from onnx import helper as oh
from onnx import numpy_helper

import onnxrt

MS = "com.microsoft"


def _elem(a: np.ndarray) -> int:
    if a.dtype == object or a.dtype.kind in "US":
        return TP.STRING
    return oh.np_dtype_to_tensor_dtype(a.dtype)


def ms_model(op: str, inputs: Sequence[tuple[str, Any]], outputs: Sequence[str] | int = 1,
             consts: Sequence[str] = (), onnx_opset: int = 17, domain: str = MS,
             out_types: Sequence[int] | None = None, **attrs: Any) -> onnx.ModelProto:
    """A model of one ``domain::op`` node. ``inputs``: (name, array) pairs, '' or None for an
    absent optional input; names in ``consts`` become initializers, the rest graph inputs.
    Output types are left for the runtimes to infer unless ``out_types`` gives them."""
    if isinstance(outputs, int):
        outputs = [f"y{i}" for i in range(outputs)]
    names = [n if a is not None else "" for n, a in inputs]
    node = oh.make_node(op, names, list(outputs), domain=domain, **attrs)
    g_in, inits = [], []
    for n, a in inputs:
        if a is None:
            continue
        a = np.asarray(a)
        if n in consts:
            if a.dtype == object:
                inits.append(oh.make_tensor(n, TP.STRING, a.shape,
                                            [s.encode() for s in a.reshape(-1)]))
            else:
                inits.append(numpy_helper.from_array(a, n))
        else:
            g_in.append(oh.make_tensor_value_info(n, _elem(a), a.shape))
    g_out = [oh.make_tensor_value_info(o, out_types[i], None) if out_types
             else onnx.ValueInfoProto(name=o) for i, o in enumerate(outputs)]
    g = oh.make_graph([node], "g", g_in, g_out, initializer=inits)
    imports = [oh.make_opsetid("", onnx_opset)] + ([oh.make_opsetid(domain, 1)] if domain
                                                   else [])
    return oh.make_model(g, opset_imports=imports, ir_version=9)


def feeds_of(inputs: Sequence[tuple[str, Any]], consts: Sequence[str] = ()) -> dict[str, Any]:
    return {n: np.asarray(a) for n, a in inputs if a is not None and n not in consts}


def run_ort(model: onnx.ModelProto, feeds: dict[str, Any], **so: Any) -> list[Any]:
    opts = onnxruntime.SessionOptions()
    opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL
    for k, v in so.items():
        setattr(opts, k, v)
    s = onnxruntime.InferenceSession(model.SerializeToString(), opts,
                                     providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def run_ours(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)


def both(op: str, inputs: Sequence[tuple[str, Any]], outputs: Sequence[str] | int = 1,
         consts: Sequence[str] = (), **kw: Any) -> tuple[list[Any], list[Any]]:
    """(onnxruntime's outputs, onnxrt's outputs) of one node on the given inputs."""
    m = ms_model(op, inputs, outputs, consts, **kw)
    f = feeds_of(inputs, consts)
    return run_ort(m, f), run_ours(m, f)


def assert_close(ref: Sequence[Any], got: Sequence[Any], rtol: float = 1e-5,
                 atol: float = 1e-6) -> None:
    assert len(ref) == len(got), (len(ref), len(got))
    for i, (r, o) in enumerate(zip(ref, got)):
        r, o = np.asarray(r), np.asarray(o)
        assert o.dtype == r.dtype, f"output {i}: dtype {o.dtype}, expected {r.dtype}"
        assert o.shape == r.shape, f"output {i}: shape {o.shape}, expected {r.shape}"
        if r.dtype == object or r.dtype.kind in "biuUS":
            np.testing.assert_array_equal(o, r, err_msg=f"output {i}")
        else:
            np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=rtol,
                                       atol=atol, err_msg=f"output {i}")


def assert_q_close(ref: Any, got: Any, max_off: int = 1, frac: float = 0.02) -> None:
    """Quantized outputs equal up to ``max_off`` steps on at most ``frac`` of the elements
    (where onnxruntime computes in float32 with its own operation order, a value on a
    rounding tie may land one step away)."""
    r, o = np.asarray(ref), np.asarray(got)
    assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
    d = np.abs(o.astype(np.int64) - r.astype(np.int64))
    assert d.max(initial=0) <= max_off, f"off by {d.max()} steps"
    assert (d > 0).mean() <= frac if d.size else True, f"{(d > 0).mean():.3f} differ"
