"""Tensor manipulation and indexing kernels against onnxruntime (and onnx.reference or a
NumPy formula where onnxruntime lacks the opset or the dtype)."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest

import onnxrt
from models import single_node_model

ort = pytest.importorskip("onnxruntime")


_model = single_node_model


def run(op, inputs, attrs=None, n_out=1, opset=21, const=()):
    m = _model(op, inputs, attrs or {}, n_out, opset, set(const))
    feeds = {f"in{i}": a for i, a in enumerate(inputs) if a is not None and i not in const}
    return onnxrt.InferenceSession(m.SerializeToString()).run(None, feeds)


def ort_run(op, inputs, attrs=None, n_out=1, opset=21, const=()):
    m = _model(op, inputs, attrs or {}, n_out, opset, set(const))
    feeds = {f"in{i}": a for i, a in enumerate(inputs) if a is not None and i not in const}
    s = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
    return s.run(None, feeds)


def ref_run(op, inputs, attrs=None, n_out=1, opset=21, const=()):
    from onnx.reference import ReferenceEvaluator

    m = _model(op, inputs, attrs or {}, n_out, opset, set(const))
    feeds = {f"in{i}": a for i, a in enumerate(inputs) if a is not None and i not in const}
    return ReferenceEvaluator(m).run(None, feeds)


def same(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.shape == w.shape, (g.shape, w.shape)
        assert g.dtype == w.dtype, (g.dtype, w.dtype)
        np.testing.assert_array_equal(g, w)


def check(op, inputs, attrs=None, n_out=1, opset=21, const=(), oracle=ort_run):
    same(run(op, inputs, attrs, n_out, opset, const),
         oracle(op, inputs, attrs, n_out, opset, const))


I64 = np.int64
rng = np.random.default_rng(0)
X = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)


# -- shapes ----------------------------------------------------------------------------------

@pytest.mark.parametrize("shape,allowzero", [([0, -1], 0), ([0, 12, -1], 0), ([-1], 0),
                                             ([2, 0, 4], 1), ([0, 3], 1)])
def test_reshape(shape, allowzero):
    x = X if not allowzero or 0 not in shape[1:] else np.zeros((2, 0, 4), np.float32)
    if shape == [0, 3] and allowzero:
        x = np.zeros((3, 0), np.float32)
    check("Reshape", [x, np.array(shape, I64)], {"allowzero": allowzero}, opset=14)


def test_reshape_v1_attribute():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = run("Reshape", [x], {"shape": [0, -1]}, opset=1)[0]
    np.testing.assert_array_equal(out, x.reshape(2, 12))


def test_shape_ops_return_views():
    from onnxrt.framework.kernel import NodeInfo
    from onnxrt.providers.cpu import CPU

    def kernel(op, version, n_in, consts=None, **attrs):
        kd = CPU.lookup("", op, version)
        info = NodeInfo(name="n", op_type=op, domain="", since_version=version, opset=version,
                        inputs=tuple(f"i{j}" for j in range(n_in)), outputs=("o",),
                        attrs=attrs, constant_inputs=consts or {})
        return kd.impl(info) if kd.is_class else (lambda *a: kd.impl(*a, **attrs))

    x = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    views = [
        kernel("Reshape", 14, 2, {1: np.array([6, -1])}, allowzero=0)(x, np.array([6, -1])),
        kernel("Reshape", 14, 2, allowzero=0)(x, np.array([0, 0, -1])),
        kernel("Transpose", 21, 1, perm=[3, 1, 0, 2])(x),
        kernel("Flatten", 21, 1, axis=2)(x),
        kernel("Squeeze", 21, 2)(x[:1], np.array([0])),
        kernel("Unsqueeze", 21, 2)(x, np.array([0, -1])),
        kernel("Slice", 13, 3, {1: np.array([1]), 2: np.array([3])})(
            x, np.array([1]), np.array([3])),
        kernel("Slice", 13, 5)(x, np.array([-1]), np.array([0]), np.array([-1]),
                               np.array([-2])),
        kernel("Identity", 21, 1)(x),
        kernel("Gather", 13, 2, axis=1)(x, np.array(2)),
    ]
    views += list(kernel("Split", 18, 2, num_outputs=2, axis=3)(x))
    for v in views:
        assert isinstance(v, np.ndarray) and np.shares_memory(v, x)


def test_reshape_bad_shape_raises():
    with pytest.raises(Exception, match="Reshape"):
        run("Reshape", [X, np.array([7, -1], I64)])


@pytest.mark.parametrize("start,end", [(0, None), (1, None), (-1, None), (1, -1), (-10, 10),
                                       (3, 1)])
def test_shape(start, end):
    attrs = {"start": start} if end is None else {"start": start, "end": end}
    check("Shape", [X], attrs)


def test_size_flatten_identity():
    check("Size", [X])
    for axis in (-4, -1, 0, 2, 4):
        check("Flatten", [X], {"axis": axis})
    check("Identity", [X])


@pytest.mark.parametrize("axes", [None, [2], [-2, 0]])
def test_squeeze(axes):
    x = np.ones((1, 3, 1, 2), np.float32)
    check("Squeeze", [x] + ([] if axes is None else [np.array(axes, I64)]))
    assert run("Squeeze", [x], {} if axes is None else {"axes": axes}, opset=11)[0].shape == \
        ort_run("Squeeze", [x], {} if axes is None else {"axes": axes}, opset=11)[0].shape


def test_squeeze_non_one_raises():
    with pytest.raises(Exception, match="not 1"):
        run("Squeeze", [X, np.array([1], I64)])


def test_squeeze_unsqueeze_repeated_runs_and_bad_axes():
    """Output shapes are remembered per (input shape, axes): one session run over inputs of
    two shapes in turn, axes fed at run time, keeps onnxruntime's results, and a bad axis
    fails on every run (a failure is never remembered)."""
    for op, good, bad in (("Squeeze", [-1], [0]), ("Unsqueeze", [0, -1], [5])):
        g = onnx.helper.make_graph(
            [onnx.helper.make_node(op, ["in0", "in1"], ["out0"])], "g",
            [onnx.helper.make_tensor_value_info("in0", onnx.TensorProto.FLOAT, None),
             onnx.helper.make_tensor_value_info("in1", onnx.TensorProto.INT64, [None])],
            [onnx.helper.make_tensor_value_info("out0", onnx.TensorProto.FLOAT, None)])
        m = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 21)],
                                   ir_version=10)
        ours = onnxrt.InferenceSession(m.SerializeToString())
        ref = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"])
        for x in (np.ones((2, 3, 1), np.float32), np.ones((4, 1), np.float32)) * 2:
            f = {"in0": x, "in1": np.array(good, I64)}
            same(ours.run(None, f), ref.run(None, f))
            for _ in range(2):
                with pytest.raises(Exception, match="not 1|out of range"):
                    ours.run(None, {"in0": x, "in1": np.array(bad, I64)})


@pytest.mark.parametrize("axes", [[0], [-1], [1, 3], [4, 0, 2]])
def test_unsqueeze(axes):
    x = rng.standard_normal((3, 2)).astype(np.float32)
    check("Unsqueeze", [x, np.array(axes, I64)])
    check("Unsqueeze", [x], {"axes": axes}, opset=11)


@pytest.mark.parametrize("shape", [[3, 1, 1], [2, 1, 6], [6], [1, 1, 1, 1]])
def test_expand(shape):
    x = np.arange(6, dtype=np.int32).reshape(1, 6) if shape != [3, 1, 1] else \
        np.arange(3, dtype=np.int32).reshape(3, 1)
    check("Expand", [x, np.array(shape, I64)])


def test_expand_output_is_writable():
    y = run("Expand", [np.ones((1, 3), np.float32), np.array([4, 3], I64)])[0]
    y[0, 0] = 5.0


@pytest.mark.parametrize("value", [None, np.array([7], np.int32), np.array([1.5], np.float16)])
def test_constant_of_shape(value):
    attrs = {} if value is None else {"value": onnx.numpy_helper.from_array(value)}
    check("ConstantOfShape", [np.array([2, 3], I64)], attrs)


@pytest.mark.parametrize("shape,k,dtype", [((3, 3), 0, None), ((3, 5), 2, None),
                                           ((5, 3), -2, 6), ((2, 4), 9, 11)])
def test_eyelike(shape, k, dtype):
    attrs = {"k": k} if dtype is None else {"k": k, "dtype": dtype}
    check("EyeLike", [np.zeros(shape, np.float32)], attrs)


# -- layout ----------------------------------------------------------------------------------

def test_transpose_and_concat():
    check("Transpose", [X])
    check("Transpose", [X], {"perm": [2, 0, 3, 1]})
    a, b = X[:, :1], X[:, 1:]
    check("Concat", [a, b], {"axis": -3})
    check("Concat", [np.array(["a", "b"], dtype=object), np.array(["c"], dtype=object)],
          {"axis": 0})


@pytest.mark.parametrize("axis", [1, 2, -1])
def test_big_concat_copies_over_threads_like_numpy(axis, monkeypatch):
    """Outputs above _PAR_CONCAT_BYTES are copied by the session's threads, a range of the
    leading dimensions each: the same array as np.concatenate (a NumPy formula), also
    with a non-contiguous input, uneven widths and three inputs."""
    from onnxrt.framework.parallel import ThreadPool
    from onnxrt.providers.cpu.tensor import layout

    monkeypatch.setattr(layout, "_PAR_CONCAT_BYTES", 1024)
    used = []
    real = ThreadPool.parallel_for
    monkeypatch.setattr(ThreadPool, "parallel_for",
                        lambda self, n, fn: (used.append(n), real(self, n, fn)))
    rng = np.random.default_rng(11)
    middle = {1: (3, 2, 7, 6), 2: (3, 5, 4, 6), -1: (3, 5, 7, 2)}[axis]
    xs = [rng.standard_normal((3, 5, 7, 6)).astype(np.float32),
          rng.standard_normal(middle).astype(np.float32),
          np.asfortranarray(rng.standard_normal((3, 5, 7, 6)).astype(np.float32))]
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 2
    m = _model("Concat", xs, {"axis": axis}, 1, 21, set())
    got = onnxrt.InferenceSession(m.SerializeToString(), so).run(
        None, {f"in{i}": a for i, a in enumerate(xs)})[0]
    np.testing.assert_array_equal(got, np.concatenate(xs, axis=axis))
    assert used == [2]
    # mixed dtypes are not the split's: np.concatenate's promotion decides
    assert layout._concat_split([xs[0], xs[0].astype(np.float64)], 1, ThreadPool(2)) is None


@pytest.mark.parametrize("opset,attrs,split,n", [
    (11, {"axis": 1, "split": [1, 2]}, None, 2),
    (11, {"axis": -1}, None, 5),
    (13, {"axis": 2}, [1, 0, 3], 3),
    (18, {"axis": 3, "num_outputs": 2}, None, 2),
    (18, {"axis": 3, "num_outputs": 3}, None, 3),
    (18, {"axis": 0}, [2], 1),
])
def test_split(opset, attrs, split, n):
    ins = [X] + ([] if split is None else [np.array(split, I64)])
    check("Split", ins, attrs, n_out=n, opset=opset)
    check("Split", ins, attrs, n_out=n, opset=opset, const=(1,) if split else ())


@pytest.mark.parametrize("starts,ends,axes,steps", [
    ([0, 1], [2, 3], None, None),
    ([-1], [-100], [1], [-1]),
    ([10, -3], [-10, 1000], [3, 2], [-2, 1]),
    ([1], [2**62], [-1], [2]),
    ([3], [-2**62], [-1], [-3]),
    ([2], [1], [0], [1]),
])
def test_slice(starts, ends, axes, steps):
    ins = [X, np.array(starts, I64), np.array(ends, I64)]
    if axes is not None:
        ins.append(np.array(axes, I64))
    if steps is not None:
        ins.append(np.array(steps, I64))
    check("Slice", ins)
    check("Slice", ins, const=range(1, len(ins)))


def test_slice_v1_attributes():
    got = run("Slice", [X], {"starts": [1, -2], "ends": [3, 100], "axes": [1, 3]}, opset=1)[0]
    np.testing.assert_array_equal(got, X[:, 1:3, :, -2:])


def test_slice_returns_view():
    x = np.arange(100, dtype=np.float32).reshape(10, 10)
    y = run("Slice", [x, np.array([2], I64), np.array([5], I64)], const=(1, 2))[0]
    np.testing.assert_array_equal(y, x[2:5])


def test_tile():
    check("Tile", [X[:, :2], np.array([1, 2, 3, 1], I64)])
    got = run("Tile", [X, np.array(3, I64), np.array(1, I64)], opset=1)[0]
    np.testing.assert_array_equal(got, np.tile(X, (1, 3, 1, 1)))


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@pytest.mark.parametrize("pads,axes", [([1, 2, 0, 1, 1, 0, 1, 3], None),
                                       ([0, -1, 1, 0, 1, -1, 0, 1], None),
                                       ([2, 1, 1, 2], [1, -1]), ([1, 1], [2])])
def test_pad(mode, pads, axes):
    ins = [X, np.array(pads, I64), np.array(2.5, np.float32)]
    if axes is not None:
        ins.append(np.array(axes, I64))
    check("Pad", ins, {"mode": mode}, opset=19)


# the padded modes are slice copies inside the output, one axis after another: pads as large
# as each mode allows (reflect: dim - 1, wrap: the dim), on one axis, on all, on a 1-D and a
# 3-D streaming-detector-like input, in float and int
@pytest.mark.parametrize("mode", ["reflect", "edge", "wrap"])
@pytest.mark.parametrize("shape,pads", [
    ((7,), [6, 6]), ((7,), [0, 3]), ((1, 1, 9), [0, 0, 8, 0, 0, 8]),
    ((2, 3, 4, 5), [1, 2, 3, 4, 1, 2, 3, 4]), ((3, 4), [2, 0, 0, 3]), ((2, 1), [1, 0, 1, 0])])
def test_pad_modes_by_copies(mode, shape, pads):
    x = rng.standard_normal(shape).astype(np.float32)
    if mode == "reflect" and any(max(pads[i], pads[i + len(shape)]) > d - 1
                                 for i, d in enumerate(shape)):
        pytest.skip("onnxruntime refuses reflect pads of the whole dim (tested below)")
    check("Pad", [x, np.array(pads, I64)], {"mode": mode}, opset=19)
    check("Pad", [(x * 10).astype(np.int32), np.array(pads, I64)], {"mode": mode}, opset=19)


def test_pad_wrap_beyond_the_dim():
    """wrap pads larger than the dim wrap more than once (onnx.reference as the oracle)."""
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    check("Pad", [x, np.array([1, 4, 3, 7], I64)], {"mode": "wrap"}, opset=19, oracle=ref_run)


def test_pad_int_and_old_versions():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    check("Pad", [x, np.array([1, 0, 0, 2], I64), np.array(-7, np.int32)])
    check("Pad", [x, np.array([1, 1, 1, 1], I64)], {"mode": "reflect"}, opset=13)
    got = run("Pad", [x], {"pads": [0, 1, 2, 0], "value": 3.0}, opset=2)[0]
    np.testing.assert_array_equal(got, np.pad(x, ((0, 2), (1, 0)), constant_values=3))
    got = run("Pad", [x], {"paddings": [1, 0, 0, 0], "mode": "edge"}, opset=1)[0]
    np.testing.assert_array_equal(got, np.pad(x, ((1, 0), (0, 0)), mode="edge"))


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space(mode):
    x = rng.standard_normal((2, 8, 3, 4)).astype(np.float32)
    check("DepthToSpace", [x], {"blocksize": 2, "mode": mode})
    check("SpaceToDepth", [x], {"blocksize": 1})
    y = rng.standard_normal((2, 3, 4, 6)).astype(np.float32)
    check("SpaceToDepth", [y], {"blocksize": 2})
    if mode == "CRD":  # SpaceToDepth-28 mode: the inverse of DepthToSpace
        s2d = run("SpaceToDepth", [y], {"blocksize": 2, "mode": "CRD"}, opset=28)[0]
        back = run("DepthToSpace", [s2d], {"blocksize": 2, "mode": "CRD"})[0]
        np.testing.assert_array_equal(back, y)


@pytest.mark.parametrize("shape,axes", [([3, 7], [1, 3]), ([1, 2, 6, 2], None),
                                        ([5], [-2])])
def test_center_crop_pad(shape, axes):
    attrs = {} if axes is None else {"axes": axes}
    check("CenterCropPad", [X, np.array(shape, I64)], attrs, oracle=ref_run)


@pytest.mark.parametrize("batch_axis,time_axis", [(1, 0), (0, 1)])
def test_reverse_sequence(batch_axis, time_axis):
    x = rng.standard_normal((4, 5, 2)).astype(np.float32)
    if batch_axis == 0:
        x = x.transpose(1, 0, 2).copy()
    lens = np.array([4, 0, 3, 1, 2], I64) if batch_axis == 1 else np.array([1, 4, 0, 2, 3], I64)
    check("ReverseSequence", [x, lens], {"batch_axis": batch_axis, "time_axis": time_axis})


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -2, 0, 3])
def test_trilu(upper, k):
    x = rng.integers(-9, 9, (2, 4, 5)).astype(np.int64)
    check("Trilu", [x] + ([] if k is None else [np.array(k, I64)]), {"upper": upper})


# -- indexing --------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather(axis):
    idx = np.array([[0, -1], [1, 1]], I64)
    check("Gather", [X, idx], {"axis": axis})
    check("Gather", [X, np.array(-2, np.int32)], {"axis": axis})


def test_gather_out_of_range_raises():
    with pytest.raises(Exception, match="out of range"):
        run("Gather", [X, np.array([0, 2], I64)])


def test_gather_elements():
    idx = rng.integers(-3, 3, (2, 2, 4, 1))
    check("GatherElements", [X, idx], {"axis": 1})
    check("GatherElements", [X, rng.integers(0, 5, X.shape)], {"axis": -1})
    with pytest.raises(Exception, match="out of range"):
        run("GatherElements", [X, np.full((1, 1, 1, 1), 7, I64)], {"axis": 2})


@pytest.mark.parametrize("b,idx_shape", [(0, (3, 2)), (0, (2, 4)), (1, (2, 3, 1)),
                                         (2, (2, 3, 2)), (0, (1,))])
def test_gather_nd(b, idx_shape):
    k = idx_shape[-1]
    hi = X.shape[b:b + k]
    idx = np.stack([rng.integers(-d, d, idx_shape[:-1]) for d in hi], axis=-1).astype(I64)
    check("GatherND", [X, idx], {"batch_dims": b})


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_elements(reduction):
    data = rng.standard_normal((3, 4)).astype(np.float32)
    idx = np.array([[1, 0, 2, -1], [0, 0, 1, 2]], I64)  # repeats exercise reductions
    upd = rng.standard_normal((2, 4)).astype(np.float32)
    if reduction == "none":
        idx = np.array([[1, 0, 2, -1], [0, 2, 1, 0]], I64)
    check("ScatterElements", [data, idx, upd], {"axis": 0, "reduction": reduction}, opset=18)


def test_scatter_elements_partial_and_bfloat16():
    data = np.zeros((3, 4), np.float32)
    idx = np.array([[3, 0]], I64)
    upd = np.array([[1.0, 2.0]], np.float32)
    check("ScatterElements", [data, idx, upd], {"axis": 1})
    check("Scatter", [data, idx, upd], {"axis": 1}, opset=10)
    bf = data.astype(ml_dtypes.bfloat16)
    got = run("ScatterElements", [bf, np.array([[1, 1]], I64),
                                  np.array([[1.5, 2.0]], ml_dtypes.bfloat16)],
              {"axis": 1, "reduction": "add"}, opset=18)[0]
    assert got.dtype == bf.dtype and float(got[0, 1]) == 3.5


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    data = rng.standard_normal((4, 3, 2)).astype(np.float32)
    idx = np.array([[[0, 1]], [[-1, 2]], [[0, 1]]], I64) if reduction != "none" \
        else np.array([[[0, 1]], [[3, 2]]], I64)
    upd = rng.standard_normal(idx.shape[:-1] + (2,)).astype(np.float32)
    check("ScatterND", [data, idx, upd], {"reduction": reduction}, opset=18)


def test_tensor_scatter():
    past = rng.standard_normal((2, 3, 6, 4)).astype(np.float32)
    upd = rng.standard_normal((2, 3, 2, 4)).astype(np.float32)
    for mode, w in (("linear", np.array([1, 4], I64)), ("circular", np.array([5, 3], I64))):
        got = run("TensorScatter", [past, upd, w], {"mode": mode}, opset=24)[0]
        want = past.copy()
        for b in range(2):
            for s in range(2):
                want[b, :, (w[b] + s) % 6] = upd[b, :, s]
        np.testing.assert_array_equal(got, want)
    got = run("TensorScatter", [past.transpose(0, 2, 1, 3).copy(),
                                upd.transpose(0, 2, 1, 3).copy()], {"axis": 1}, opset=24)[0]
    np.testing.assert_array_equal(got[:, :2], upd.transpose(0, 2, 1, 3))


def test_compress_nonzero():
    cond = np.array([True, False, True])
    check("Compress", [X, cond], {"axis": 1})
    check("Compress", [X, cond])
    check("Compress", [X, np.array([False, True])], {"axis": -1})
    check("NonZero", [np.array([[0, 1, 0], [3, 0, 2]], np.int32)])
    check("NonZero", [np.array(3.0, np.float32)])
    check("NonZero", [np.zeros((2, 0), np.float32)])


@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
def test_one_hot(axis):
    idx = np.array([[0, 3, -1], [5, -4, 2]], I64)
    check("OneHot", [idx, np.array(4, I64), np.array([0.5, 2.0], np.float32)], {"axis": axis})
    check("OneHot", [idx.astype(np.float32), np.array(4.0, np.float32),
                     np.array([1, 9], np.int32)], {"axis": axis}, oracle=ref_run)


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1, -1])
def test_unique(sorted_, axis):
    x = np.array([[1, 3, 1, 3], [2, 0, 2, 0], [1, 3, 1, 3]], np.float32)
    attrs = {"sorted": sorted_} if axis is None else {"sorted": sorted_, "axis": axis}
    check("Unique", [x], attrs, n_out=4)


@pytest.mark.parametrize("args", [(1, 10, 3), (10, 1, -3), (5, 5, 1), (-3, 3, 2)])
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_range(args, dtype):
    check("Range", [np.array(a, dtype) for a in args])


def test_range_float_fraction_and_half():
    check("Range", [np.array(v, np.float32) for v in (0.1, 1.0, 0.3)])
    got = run("Range", [np.array(v, np.float16) for v in (0, 2000, 1.5)])[0]
    want = (np.float32(0) + np.arange(1334, dtype=np.float32) * np.float32(1.5))
    np.testing.assert_array_equal(got, want.astype(np.float16))


def test_zero_d_values_stay_arrays():
    s = np.array(2.5, np.float32)
    cases = [("Identity", [s], {}), ("Cast", [s], {"to": onnx.TensorProto.BOOL}),
             ("Cast", [s], {"to": onnx.TensorProto.INT64}), ("Shape", [s], {}),
             ("Size", [s], {}), ("Gather", [np.arange(3.0), np.array(-1, I64)], {}),
             ("Squeeze", [np.ones((1, 1), np.float32)], {}),
             ("Reshape", [np.ones(1, np.float32), np.zeros(0, I64)], {}),
             ("ConstantOfShape", [np.zeros(0, I64)], {}),
             ("Expand", [s, np.array([1], I64)], {}), ("NonZero", [s], {}),
             ("Unique", [s], {}), ("GatherElements", [np.arange(3.0), np.array([2], I64)], {})]
    for op, ins, attrs in cases:
        n_out = 4 if op == "Unique" else 1
        got = run(op, ins, attrs, n_out=n_out)
        want = ort_run(op, ins, attrs, n_out=n_out)
        for g in got:
            assert isinstance(g, np.ndarray), (op, type(g))
        same(got, want)


@pytest.mark.parametrize("reduction", ["add", "mul", "max", "min"])
def test_scatter_many_duplicates_keep_sequential_order(reduction):
    # enough updates for the sort-and-reduceat path; results must match bit for bit
    r = np.random.default_rng(1)
    data = r.uniform(0.5, 1.5, (6, 10)).astype(np.float32)
    idx = r.integers(-6, 6, (40, 10))
    upd = r.uniform(0.5, 1.5, (40, 10)).astype(np.float32)
    check("ScatterElements", [data, idx, upd], {"axis": 0, "reduction": reduction}, opset=18)
    nd_idx = r.integers(0, 6, (30, 1))
    nd_upd = r.uniform(0.5, 1.5, (30, 10)).astype(np.float32)
    check("ScatterND", [data, nd_idx, nd_upd], {"reduction": reduction}, opset=18)
    check("ScatterND", [data.astype(np.int32), nd_idx, (nd_upd * 3).astype(np.int32)],
          {"reduction": reduction}, opset=18)
