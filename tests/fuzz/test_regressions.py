"""Regression tests for every class of defect hostile models found (each case the fuzzers or
a person found is kept here). Cases that once crashed run in a worker process, at one and
two threads: a crash is a failed test, not a dead test run."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt as ort
from fuzz.cases import numpy_pool
from fuzz.harness import request, worker

NODE = "n0"


def _model(op: str, x_shape, dt=np.float32, inits: dict | None = None, outs=("y",),
           opset: int = 19, domain: str = "", declared=True, **attrs) -> bytes:
    inits = inits or {}
    t = helper.np_dtype_to_tensor_dtype(np.dtype(dt))
    node = helper.make_node(op, ["x"] + list(inits), list(outs), name=NODE, domain=domain,
                            **attrs)
    g = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", t, x_shape if declared else None)],
        [helper.make_tensor_value_info(o, t if i == 0 else TensorProto.INT64, None)
         for i, o in enumerate(outs)],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain
                                               else [])
    return helper.make_model(g, opset_imports=ops).SerializeToString()


def _w(*shape, dt=np.float64) -> np.ndarray:
    return np.random.RandomState(0).standard_normal(shape).astype(dt)


# (model, input shape, dtype, the attribute the error must name). The first three are the
# issue's SIGSEGVs; the others crashed (SIGSEGV or abort) under the first fuzzing runs.
CRASHERS = {
    "conv_strides_-1": (lambda: _model("Conv", [1, 2, 3, 3], np.float64, {"w": _w(4, 2, 5, 5)},
                                       strides=[-1, -1], pads=[2, 2, 2, 2]),
                        (1, 2, 3, 3), np.float64, "strides"),
    "conv_dilations_-1": (lambda: _model("Conv", [1, 2, 3, 3], np.float64,
                                         {"w": _w(4, 2, 5, 5)}, dilations=[-1, -1]),
                          (1, 2, 3, 3), np.float64, "dilations"),
    "avgpool_negative_pads_stride_100": (
        lambda: _model("AveragePool", [1, 3, 8, 8], kernel_shape=[3, 3],
                       pads=[-1, -1, -1, -1], strides=[100, 100], declared=False),
        (1, 3, 8, 8), np.float32, "pads"),
    "avgpool_1d_negative_pad": (
        lambda: _model("AveragePool", [1, 4, 3], np.float64, kernel_shape=[2],
                       dilations=[1], pads=[-3, 2]),
        (1, 4, 3), np.float64, "pads"),
    "depthwise_dilations_-2": (
        lambda: _model("Conv", [2, 8, 1, 16], np.float64, {"w": _w(8, 1, 2, 1)}, group=8,
                       dilations=[-2, -2], pads=[5, 5, 2, 2]),
        (2, 8, 1, 16), np.float64, "dilations"),
    "depthwise_dilations_-2_valid": (
        lambda: _model("Conv", [1, 4, 3, 40], np.float64, {"w": _w(8, 1, 3, 7)}, group=4,
                       dilations=[-2, 3], auto_pad="VALID"),
        (1, 4, 3, 40), np.float64, "dilations"),
    # answered differently at different optimization levels / thread counts before
    "maxpool_dilations_-1": (
        lambda: _model("MaxPool", [1, 2, 9, 9], kernel_shape=[3, 3], dilations=[-1, -1]),
        (1, 2, 9, 9), np.float32, "dilations"),
    "depthwise_negative_pads": (
        lambda: _model("Conv", [1, 4, 9, 9], np.float32, {"w": _w(4, 1, 3, 3, dt=np.float32)},
                       group=4, pads=[-1, -1, 0, 0]),
        (1, 4, 9, 9), np.float32, "pads"),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("case", sorted(CRASHERS))
def test_hostile_window_attributes_are_refused_not_run(case: str, threads: int) -> None:
    build, shape, dt, attr = CRASHERS[case]
    x = np.random.RandomState(1).standard_normal(shape).astype(dt)
    for level in (0, 99):
        r = worker("onnxrt").run(request(build(), {"x": x}, level=level, threads=threads))
        assert r["status"] == "error", f"{case}: {r['status']} at level {level}: {r}"
        assert r["cls"] == "Fail", r
        msg = r["msg"]
        assert f"Node ({NODE})" in msg and f"attribute {attr}" in msg and "is invalid" in msg, msg


def _session(model: bytes, **so_kw) -> ort.InferenceSession:
    so = ort.SessionOptions()
    for k, v in so_kw.items():
        setattr(so, k, v)
    return ort.InferenceSession(model, so, providers=["CPUExecutionProvider"])


def test_maxpool_empty_batch_with_negative_pads_is_refused() -> None:
    # answered with a (0, 3, 9, 9) array before; the spec allows no negative pads
    m = _model("MaxPool", [0, 3, 8, 8], kernel_shape=[2, 2], pads=[-1, 0, 0, 0])
    with pytest.raises(ort.Fail, match=r"attribute pads = \[-1, 0, 0, 0\] is invalid"):
        _session(m)


@pytest.mark.parametrize("op,domain,opset", [("LayerNormalization", "", 17),
                                             ("SimplifiedLayerNormalization", "", 17),
                                             ("SkipLayerNormalization", "com.microsoft", 17)])
def test_negative_epsilon_is_refused(op: str, domain: str, opset: int) -> None:
    g = np.ones(8, np.float32)
    inputs = ["x", "skip", "g"] if op.startswith("Skip") else ["x", "g"]
    node = helper.make_node(op, inputs, ["y"], name=NODE, domain=domain, epsilon=-1e-3)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, 1, [2, 8]) for n in inputs if n != "g"],
        [helper.make_tensor_value_info("y", 1, None)], [numpy_helper.from_array(g, "g")])
    ops = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain
                                               else [])
    m = helper.make_model(graph, opset_imports=ops).SerializeToString()
    with pytest.raises(ort.Fail, match=r"Node \(n0\).*attribute epsilon = -0.00100\d* is invalid"):
        _session(m)


@pytest.mark.parametrize("dt", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("indices", [False, True])
@pytest.mark.parametrize("shape,attrs", [((1, 1, 7), {"kernel_shape": [2]}),
                                         ((2, 3, 9, 9), {"kernel_shape": [3, 3]}),
                                         ((2, 3, 9, 9), {"kernel_shape": [3, 3],
                                                         "strides": [2, 2]})])
def test_maxpool_propagates_nan_on_every_path(dt, indices, shape, attrs) -> None:
    """NaN propagates as np.maximum does, whichever kernel runs (compiled, NumPy, with the
    Indices output); onnxruntime's own kernels disagree with each other here (README)."""
    x = np.random.RandomState(0).standard_normal(shape).astype(dt)
    x.reshape(-1)[::3] = np.nan
    m = _model("MaxPool", list(shape), dt, outs=("y", "i") if indices else ("y",), **attrs)
    y = _session(m).run(None, {"x": x})[0]
    want = numpy_pool(x, y.shape, attrs, "max")
    np.testing.assert_array_equal(np.isnan(y), np.isnan(want))
    np.testing.assert_allclose(np.nan_to_num(y.astype(np.float64)),
                               np.nan_to_num(want.astype(np.float64)))


def test_lppool_same_upper_ceil_mode_dilations_float16_follows_the_spec() -> None:
    """onnxruntime gives a (1, 2, 3, 3) output here: the spec's SAME_UPPER output is
    ceil(input / stride) = (4, 3), and the values are its sums (checked in float64)."""
    attrs = dict(kernel_shape=[3, 2], auto_pad="SAME_UPPER", ceil_mode=1, dilations=[2, 2],
                 strides=[2, 2], p=2)
    x = np.random.RandomState(0).standard_normal((1, 2, 7, 6)).astype(np.float16)
    y = _session(_model("LpPool", [1, 2, 7, 6], np.float16, **attrs)).run(None, {"x": x})[0]
    assert y.shape == (1, 2, 4, 3)
    np.testing.assert_allclose(y.astype(np.float64),
                               numpy_pool(x, y.shape, attrs, "lp").astype(np.float64),
                               rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("op,attrs,shape,what", [
    ("MaxPool", {"kernel_shape": [2, 2, 2]}, (1, 1, 8, 8), "input X shape"),
    ("Conv", {"strides": [-1, -1], "pads": [1, 1, 1, 1]}, (1, 2, 6, 6), "attribute strides"),
    ("Softmax", {"axis": 5}, (2, 3), "attribute axis"),
    ("Flatten", {"axis": -4}, (2, 3), "attribute axis"),
    ("Gather", {"axis": 2}, (2, 3), "attribute axis"),
])
def test_invalid_attributes_give_clear_errors_at_run_time(op, attrs, shape, what) -> None:
    """Shapes unknown at session creation: the check runs before the kernel, and the error
    names the node, the attribute or input and its value (numba typing errors, NumPy
    reshape and axis errors came out before)."""
    inits = {"w": _w(3, 2, 3, 3, dt=np.float32)} if op == "Conv" else \
        {"i": np.array([0], np.int64)} if op == "Gather" else {}
    m = _model(op, list(shape), inits=inits, declared=False, **attrs)
    x = np.ones(shape, np.float32)
    try:
        sess = _session(m)
    except ort.Fail as e:      # refused at creation where the attributes alone are invalid
        msg = str(e)
    else:
        with pytest.raises(ort.Fail) as ei:
            sess.run(None, {"x": x})
        msg = str(ei.value)
    assert NODE in msg and what in msg and "is invalid" in msg, msg


def _conv_proto() -> onnx.ModelProto:
    return onnx.load_from_string(_model("Conv", [1, 2, 5, 5], np.float32,
                                        {"w": _w(3, 2, 3, 3, dt=np.float32)}))


def test_mutated_initializer_data_is_named() -> None:
    m = _conv_proto()
    m.graph.initializer[0].dims[0] = 67        # the raw bytes hold 3 x 2 x 3 x 3 floats
    with pytest.raises(ort.InvalidGraph, match=r"tensor 'w': field raw_data holds 216 bytes"):
        _session(m.SerializeToString())


def test_mutated_attribute_type_is_named() -> None:
    m = _conv_proto()
    a = m.graph.node[0].attribute.add()
    a.name, a.type, a.s = "kernel_shape", onnx.AttributeProto.STRING, b"3x3"
    with pytest.raises(ort.Fail, match=r"attribute kernel_shape = 'STRING' is invalid: the "
                                       r"spec declares type INTS"):
        _session(m.SerializeToString())


def test_unknown_attribute_is_named() -> None:
    m = _conv_proto()
    m.graph.node[0].attribute.append(helper.make_attribute("stride", [2, 2]))
    with pytest.raises(ort.Fail, match=r"attribute 'stride' = \[2, 2\] is invalid"):
        _session(m.SerializeToString())


def test_invalid_utf8_and_opset_version_are_named() -> None:
    m = _conv_proto()
    data = m.SerializeToString().replace(b"\x1a\x02n0", b"\x1a\x02\xff\xfe")
    with pytest.raises(ort.InvalidGraph, match="not valid UTF-8"):
        _session(data)
    m.opset_import[0].version = 2 ** 40
    with pytest.raises(ort.InvalidGraph, match="not a valid opset version"):
        _session(m.SerializeToString())


def test_absurd_initializer_fails_before_allocating() -> None:
    m = _conv_proto()
    t = m.graph.initializer.add()
    t.name, t.data_type = "huge", TensorProto.FLOAT
    t.dims.extend([1 << 20, 1 << 20, 1 << 10])      # 4 PiB promised, no data
    with pytest.raises(ort.InvalidGraph, match=r"tensor 'huge'.*GiB.*\(field dims\)"):
        _session(m.SerializeToString())


def test_absurd_allocation_at_run_time_fails_before_allocating() -> None:
    """ConstantOfShape over a computed shape: refused with the size it would take (run in
    a worker with a 1 MiB bound, so that nothing real is at stake)."""
    import os

    shape = helper.make_node("Shape", ["x"], ["s"], name="shape")
    node = helper.make_node("ConstantOfShape", ["s"], ["y"], name=NODE)
    g = helper.make_graph([shape, node], "g", [helper.make_tensor_value_info("x", 1, None)],
                          [helper.make_tensor_value_info("y", 1, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()
    old = os.environ.get("ONNXRT_MAX_ALLOC_BYTES")
    os.environ["ONNXRT_MAX_ALLOC_BYTES"] = str(1 << 20)
    try:
        from fuzz.harness import Worker

        w = Worker("onnxrt")
        r = w.run(request(m, {"x": np.zeros((1024, 1024), np.float32)}))
        w.stop()
    finally:
        if old is None:
            del os.environ["ONNXRT_MAX_ALLOC_BYTES"]
        else:
            os.environ["ONNXRT_MAX_ALLOC_BYTES"] = old
    assert r["status"] == "error", r
    assert r["cls"] == "Fail" and NODE in r["msg"], r
    assert "ConstantOfShape: a tensor of shape [1024, 1024]" in r["msg"], r


# -- found by the fuzzing suite's first long runs ----------------------------------------

def test_empty_products_and_convs_give_empty_outputs() -> None:
    """NumPy reshape errors came out of MatMul over an empty stack and a depthwise Conv
    (weight given at run time, the NumPy path) over an empty batch."""
    a = helper.make_tensor_value_info("x", 1, None)
    b = helper.make_tensor_value_info("b", 1, None)
    g = helper.make_graph([helper.make_node("MatMul", ["x", "b"], ["y"], name=NODE)], "g",
                          [a, b], [helper.make_tensor_value_info("y", 1, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()
    y = _session(m).run(None, {"x": np.zeros((1, 0, 0), np.float32),
                               "b": np.zeros((0, 0), np.float32)})[0]
    assert y.shape == (1, 0, 0)
    g = helper.make_graph([helper.make_node("Conv", ["x", "b"], ["y"], name=NODE, group=2,
                                            pads=[0, 0])], "g", [a, b],
                          [helper.make_tensor_value_info("y", 1, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]).SerializeToString()
    y = _session(m).run(None, {"x": np.zeros((0, 2, 1), np.float32),
                               "b": np.ones((2, 1, 1), np.float32)})[0]
    assert y.shape == (0, 2, 1)


def test_conv_transpose_output_below_one_is_refused() -> None:
    m = _model("ConvTranspose", [1, 2, 1], inits={"w": _w(2, 1, 1, dt=np.float32)},
               declared=False, pads=[0, 2])
    with pytest.raises(ort.Fail, match=r"n0.*attribute pads = \[0, 2\] is invalid"):
        _session(m).run(None, {"x": np.ones((1, 2, 1), np.float32)})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_pool_window_of_padding_only_is_refused(op: str) -> None:
    """SAME padding with dilations left a window of padding only: MaxPool gave -inf,
    AveragePool NaN."""
    m = _model(op, [1, 1, 1], declared=False, auto_pad="SAME_UPPER", dilations=[2],
               kernel_shape=[2])
    with pytest.raises(ort.Fail, match=r"n0.*attribute auto_pad = 'SAME_UPPER' is invalid.*"
                                       r"padding only"):
        _session(m).run(None, {"x": np.ones((1, 1, 1), np.float32)})
