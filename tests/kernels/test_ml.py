"""ai.onnx.ml kernels against onnxruntime (the oracle implements every ai.onnx.ml op)."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh

import onnxrt

ML = "ai.onnx.ml"


def _vi(name, t, shape):
    if isinstance(t, onnx.TypeProto):
        return oh.make_value_info(name, t)
    return oh.make_tensor_value_info(name, t, shape)


def _model(op, attrs, ins, outs, ml_opset=3, onnx_opset=17):
    node = oh.make_node(op, [i[0] for i in ins], [o[0] for o in outs], domain=ML, **attrs)
    g = oh.make_graph([node], "g", [_vi(*i) for i in ins], [_vi(*o) for o in outs])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", onnx_opset),
                                           oh.make_opsetid(ML, ml_opset)], ir_version=10)


def _compare(model, feeds, rtol=1e-5, atol=1e-6):
    data = model.SerializeToString()
    ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    out = onnxrt.InferenceSession(data).run(None, feeds)
    assert len(ref) == len(out)
    for r, o in zip(ref, out):
        _same(r, o, rtol, atol)
    return out


def _same(r, o, rtol, atol):
    if isinstance(r, list):
        assert isinstance(o, list) and len(r) == len(o)
        for a, b in zip(r, o):
            _same(a, b, rtol, atol)
        return
    if isinstance(r, dict):
        assert isinstance(o, dict) and set(r) == set(o)
        for k in r:
            assert abs(r[k] - o[k]) <= atol + rtol * abs(r[k])
        return
    r = np.asarray(r)
    assert isinstance(o, np.ndarray)
    assert o.shape == r.shape, (o.shape, r.shape)
    assert o.dtype == r.dtype, (o.dtype, r.dtype)
    if r.dtype == object:
        assert r.tolist() == o.tolist()
    else:
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol, equal_nan=True)


X = np.array([[1, 2, 0.5], [-3, 1, 2], [0.5, -0.2, -1], [0, 0, 0], [2, -1, 3],
              [np.nan, 0.3, 1]], np.float32)
TRANSFORMS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"]


# -- linear models ----------------------------------------------------------------------------
@pytest.mark.parametrize("pt", TRANSFORMS + ["PROBIT"])
@pytest.mark.parametrize("kind", ["multi3", "two_rows", "binary_int", "binary_str"])
def test_linear_classifier(pt, kind):
    x = X[:5]
    coef = {"multi3": [0.5, -0.3, 0.2, 0.1, -1, 0.4, 0.3, 0.3, -0.2],
            "two_rows": [0.5, -0.3, 0.2, 0.1, -1, 0.4]}.get(kind, [0.5, -0.3, 0.1])
    rows = len(coef) // 3
    if pt == "PROBIT" and rows == 1:
        pytest.skip("onnxruntime writes uninitialized memory for binary PROBIT")
    labels = dict(classlabels_strings=["a", "b"]) if kind == "binary_str" else \
        dict(classlabels_ints=list(range(max(rows, 2))))
    out_t = TP.STRING if kind == "binary_str" else TP.INT64
    m = _model("LinearClassifier", dict(coefficients=coef, intercepts=[0.1, 0, -0.1][:rows],
                                        post_transform=pt, **labels),
               [("X", TP.FLOAT, [None, 3])], [("Y", out_t, [None]), ("Z", TP.FLOAT, [None, None])],
               ml_opset=1)
    _compare(m, {"X": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("pt", TRANSFORMS)
@pytest.mark.parametrize("targets", [1, 2])
@pytest.mark.parametrize("dtype", [np.float32])
def test_linear_regressor(pt, targets, dtype):
    coef = [0.5, -0.3, 0.2, 0.1, -1, 0.4][: 3 * targets]
    et = {np.float32: TP.FLOAT, np.float64: TP.DOUBLE, np.int64: TP.INT64}[dtype]
    m = _model("LinearRegressor", dict(coefficients=coef, intercepts=[0.1, -0.2][:targets],
                                       targets=targets, post_transform=pt),
               [("X", et, [None, 3])], [("Y", TP.FLOAT, [None, targets])], ml_opset=1)
    _compare(m, {"X": (X[:5] * 2).astype(dtype)}, rtol=1e-5, atol=1e-6)


# -- tree ensembles ---------------------------------------------------------------------------
# tree 0: f0 <= 0.2 ? (f2 < 1 ? L : L) : L ; tree 1: f1 > 0.5 ? L : L ; tree 2: f2 == 0 ? L : L
_NODES = dict(
    nodes_treeids=[0, 0, 0, 0, 0, 1, 1, 1, 2, 2, 2],
    nodes_nodeids=[0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2],
    nodes_featureids=[0, 2, 0, 0, 0, 1, 0, 0, 2, 0, 0],
    nodes_modes=["BRANCH_LEQ", "BRANCH_LT", "LEAF", "LEAF", "LEAF", "BRANCH_GT", "LEAF", "LEAF",
                 "BRANCH_EQ", "LEAF", "LEAF"],
    nodes_values=[0.2, 1.0, 0, 0, 0, 0.5, 0, 0, 0.0, 0, 0],
    nodes_truenodeids=[1, 3, 0, 0, 0, 1, 0, 0, 1, 0, 0],
    nodes_falsenodeids=[2, 4, 0, 0, 0, 2, 0, 0, 2, 0, 0],
    nodes_missing_value_tracks_true=[1, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0],
)
_LEAVES = [(0, 2), (0, 3), (0, 4), (1, 1), (1, 2), (2, 1), (2, 2)]


def _weights(prefix, ids, table):
    t, n, c, w = [], [], [], []
    for (tree, node), ws in zip(_LEAVES, table):
        for cid, wv in zip(ids, ws):
            t.append(tree)
            n.append(node)
            c.append(cid)
            w.append(wv)
    return {f"{prefix}_treeids": t, f"{prefix}_nodeids": n, f"{prefix}_ids": c,
            f"{prefix}_weights": w}


_W2 = [[0.5, -0.1], [0.2, 0.3], [-0.4, 0.6], [0.1, 0.1], [0.7, -0.2], [0.05, 0.3], [-0.3, 0.2]]


@pytest.mark.parametrize("agg", ["SUM", "AVERAGE", "MIN", "MAX"])
@pytest.mark.parametrize("pt", ["NONE", "LOGISTIC", "SOFTMAX"])
@pytest.mark.parametrize("targets", [1, 2])
def test_tree_regressor(agg, pt, targets):
    attrs = dict(_NODES, n_targets=targets, aggregate_function=agg, post_transform=pt,
                 base_values=[0.1, -0.2][:targets],
                 **_weights("target", list(range(targets)), [w[:targets] for w in _W2]))
    m = _model("TreeEnsembleRegressor", attrs, [("X", TP.FLOAT, [None, 3])],
               [("Y", TP.FLOAT, [None, targets])])
    _compare(m, {"X": X}, rtol=1e-5, atol=1e-6)


def test_tree_regressor_double_and_big():
    rng = np.random.default_rng(0)
    attrs = dict(_NODES, n_targets=1, **_weights("target", [0], [[w[0]] for w in _W2]))
    m = _model("TreeEnsembleRegressor", attrs, [("X", TP.DOUBLE, [None, 3])],
               [("Y", TP.FLOAT, [None, 1])])
    _compare(m, {"X": rng.normal(size=(1000, 3))}, rtol=1e-5, atol=1e-6)


_CLASS_CASES = {
    "bin_pos_c1": ([1], [[0.2], [0.7], [0.4], [0.1], [0.3], [0.6], [0.2]], [0, 1]),
    "bin_pos_c0": ([0], [[0.2], [0.7], [0.4], [0.1], [0.3], [0.6], [0.2]], [0, 1]),
    "bin_mixed_c0": ([0], [[-0.2], [0.7], [0.4], [-0.9], [0.3], [-0.6], [0.2]], [0, 1]),
    "bin_both": ([0, 1], [[0.6, 0.4], [0.3, 0.7], [0.9, 0.1], [0.5, 0.5], [0.2, 0.8],
                          [0.4, 0.6], [0.1, 0.9]], [0, 1]),
    "multi3": ([0, 1, 2], [[0.6, 0.4, 0], [0.3, 0.2, 0.5], [0.9, 0.1, 0], [0.1, 0.5, 0.4],
                           [0.2, 0.2, 0.6], [0.3, 0.3, 0.4], [0.5, 0.4, 0.1]], [5, 6, 7]),
    "multi3_unfed": ([0, 2], [[0.6, 0.4], [0.3, 0.2], [0.9, 0.1], [0.1, 0.5], [0.2, 0.6],
                              [0.3, 0.4], [0.5, 0.1]], [0, 1, 2]),
}


@pytest.mark.parametrize("case,nbase", [(c, b) for c in sorted(_CLASS_CASES)
                                         for b in ((0, 3) if c.startswith("multi")
                                                   else (0, 1, 2))])
@pytest.mark.parametrize("pt", TRANSFORMS)
@pytest.mark.parametrize("strings", [False, True])
def test_tree_classifier(case, pt, nbase, strings):
    ids, table, labels = _CLASS_CASES[case]
    lab = dict(classlabels_strings=[f"c{v}" for v in labels]) if strings else \
        dict(classlabels_int64s=labels)
    attrs = dict(_NODES, post_transform=pt, **lab, **_weights("class", ids, table))
    if nbase:
        attrs["base_values"] = [0.1, 0.3, -0.2][:nbase]
    m = _model("TreeEnsembleClassifier", attrs, [("X", TP.FLOAT, [None, 3])],
               [("Y", TP.STRING if strings else TP.INT64, [None]),
                ("Z", TP.FLOAT, [None, None])])
    _compare(m, {"X": X}, rtol=1e-5, atol=1e-6)


def _tree5(agg, pt, dtype, member=False, ort_codes=False):
    # interior nodes: 0: f0 <= 0.2 -> (1, leaf 0) ; 1: f2 < 1 -> (leaf 1, leaf 2)
    # tree 2 root 2: f1 member {0.3, 2} or f1 >= 0.5 -> (leaf 3, leaf 4)
    np_t = {TP.FLOAT: np.float32, TP.DOUBLE: np.float64}[dtype]
    modes = [0, 1, 6 if member else 2]
    if ort_codes:  # onnxruntime reads 1 as LOGISTIC and 2 as SOFTMAX, the spec the reverse
        pt = {1: 2, 2: 1}.get(pt, pt)
    attrs = dict(
        n_targets=2, aggregate_function=agg, post_transform=pt, tree_roots=[0, 2],
        nodes_featureids=[0, 2, 1], nodes_modes=oh.make_tensor("m", TP.UINT8, [3], modes),
        nodes_splits=oh.make_tensor("s", dtype, [3], np.array([0.2, 1.0, 0.5], np_t)),
        nodes_truenodeids=[1, 1, 3], nodes_trueleafs=[0, 1, 1],
        nodes_falsenodeids=[0, 2, 4], nodes_falseleafs=[1, 1, 1],
        nodes_missing_value_tracks_true=[1, 0, 0],
        leaf_targetids=[0, 1, 0, 1, 0],
        leaf_weights=oh.make_tensor("w", dtype, [5], np.array([0.5, -0.2, 0.3, 0.8, -0.4], np_t)))
    if member:
        attrs["membership_values"] = oh.make_tensor("mv", dtype, [3],
                                                    np.array([0.3, 2.0, np.nan], np_t))
    return _model("TreeEnsemble", attrs, [("X", dtype, [None, 3])], [("Y", dtype, [None, 2])],
                  ml_opset=5, onnx_opset=21)


@pytest.mark.parametrize("agg", [0, 1, 2, 3])
@pytest.mark.parametrize("pt", [0, 1, 2, 3])
@pytest.mark.parametrize("dtype", [TP.FLOAT, TP.DOUBLE])
def test_tree_ensemble5(agg, pt, dtype):
    x = np.vstack([X, [[0, 0.3, 0], [1, 2, 5]]])
    x = x.astype(np.float32 if dtype == TP.FLOAT else np.float64)
    data = _tree5(agg, pt, dtype, ort_codes=True).SerializeToString()
    ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"X": x})
    out = onnxrt.InferenceSession(_tree5(agg, pt, dtype).SerializeToString()).run(None, {"X": x})
    _same(ref[0], out[0], 1e-5, 1e-6)


def test_linear_regressor_int_input():
    m = _model("LinearRegressor", dict(coefficients=[0.5, -0.3, 2.0], intercepts=[0.25]),
               [("X", TP.INT64, [None, 3])], [("Y", TP.FLOAT, [None, 1])], ml_opset=1)
    x = np.array([[1, 2, 3], [-4, 5, 0]], np.int64)
    out = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"X": x})[0]
    np.testing.assert_allclose(out, x @ np.array([[0.5], [-0.3], [2.0]]) + 0.25, rtol=1e-6)
    assert out.dtype == np.float32


def test_tree_ensemble5_member():
    x = np.vstack([X, [[0, 0.3, 0], [1, 2, 5]]]).astype(np.float32)
    _compare(_tree5(1, 0, TP.FLOAT, member=True), {"X": x})


# -- SVM --------------------------------------------------------------------------------------
def _svc(k, vpc, proba, kt, pt, seed=1):
    rng = np.random.default_rng(seed)
    nsv = sum(vpc)
    npairs = k * (k - 1) // 2
    attrs = dict(classlabels_ints=list(range(10, 10 + k)), vectors_per_class=vpc,
                 support_vectors=rng.normal(size=nsv * 3).round(2).tolist(),
                 coefficients=rng.normal(size=(k - 1) * nsv).round(2).tolist(),
                 rho=rng.normal(size=npairs).round(2).tolist(), kernel_type=kt,
                 kernel_params=[0.3, 0.1, 2], post_transform=pt)
    if proba:
        attrs.update(prob_a=(-rng.random(npairs) - 0.5).round(2).tolist(),
                     prob_b=rng.normal(size=npairs).round(2).tolist())
    return _model("SVMClassifier", attrs, [("X", TP.FLOAT, [None, 3])],
                  [("Y", TP.INT64, [None]), ("Z", TP.FLOAT, [None, None])], ml_opset=1)


@pytest.mark.parametrize("kt", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("proba", [False, True])
@pytest.mark.parametrize("k", [2, 3, 4])
@pytest.mark.parametrize("pt", TRANSFORMS)
def test_svm_classifier(kt, proba, k, pt):
    vpc = [2, 1, 2, 3][:k]
    x = np.random.default_rng(2).normal(size=(7, 3)).astype(np.float32)
    _compare(_svc(k, vpc, proba, kt, pt), {"X": x}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kt", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("proba", [False, True])
@pytest.mark.parametrize("k", [2, 4])
def test_svm_classifier_few_rows_compiled(kt, proba, k, monkeypatch):
    """Batches of up to 16 rows run as one compiled call (SVMClassifier._few_rows): it
    must agree with onnxruntime at 1 and 16 rows, and the 17-row batch takes BLAS."""
    from onnxrt.providers.cpu.ml import svm
    from onnxrt.providers.cpu.nn import jit

    if not jit.enabled() or svm._svc_kernel() is None:
        pytest.skip("numba is not usable here (ONNXRT_JIT=0 or not installed)")
    calls = []
    orig = svm.SVMClassifier._few_rows
    monkeypatch.setattr(svm.SVMClassifier, "_few_rows",
                        lambda self, fn, xf: calls.append(len(xf)) or orig(self, fn, xf))
    m = _svc(k, [3, 2, 4, 1][:k], proba, kt, "NONE", seed=4)
    x = np.random.default_rng(5).normal(size=(17, 3)).astype(np.float32)
    for n in (1, 16, 17):
        _compare(m, {"X": x[:n]}, rtol=1e-4, atol=1e-5)
    assert calls == [1, 16]


@pytest.mark.parametrize("pt", TRANSFORMS)
def test_svm_classifier_linear_mode(pt):
    attrs = dict(classlabels_strings=["a", "b", "c"],
                 coefficients=[0.5, -0.3, 0.2, 0.1, 0.4, -0.6, 1.0, 0.2, 0.3],
                 rho=[0.1], kernel_type="LINEAR", kernel_params=[0.3, 0.1, 2],
                 post_transform=pt)
    m = _model("SVMClassifier", attrs, [("X", TP.FLOAT, [None, 3])],
               [("Y", TP.STRING, [None]), ("Z", TP.FLOAT, [None, None])], ml_opset=1)
    _compare(m, {"X": X[:5]}, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("kt", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("one_class", [0, 1])
@pytest.mark.parametrize("n_supports", [0, 3])
@pytest.mark.parametrize("pt", ["NONE", "LOGISTIC"])
def test_svm_regressor(kt, one_class, n_supports, pt):
    rng = np.random.default_rng(3)
    attrs = dict(kernel_type=kt, kernel_params=[0.2, 0.5, 3], one_class=one_class,
                 post_transform=pt,
                 n_supports=n_supports, rho=[0.25],
                 coefficients=rng.normal(size=n_supports or 3).round(2).tolist())
    if n_supports:
        attrs["support_vectors"] = rng.normal(size=n_supports * 3).round(2).tolist()
    m = _model("SVMRegressor", attrs, [("X", TP.FLOAT, [None, 3])],
               [("Y", TP.FLOAT, [None, 1])], ml_opset=1)
    _compare(m, {"X": rng.normal(size=(6, 3)).astype(np.float32)}, rtol=1e-4, atol=1e-5)


# -- preprocessing ----------------------------------------------------------------------------
def _one(op, attrs, x, in_t, out_t, out_shape=None, ml_opset=1, **kw):
    m = _model(op, attrs, [("X", in_t, list(x.shape))], [("Y", out_t, out_shape)],
               ml_opset=ml_opset)
    return _compare(m, {"X": x}, **kw)


def test_array_feature_extractor():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = _model("ArrayFeatureExtractor", {}, [("X", TP.FLOAT, [2, 3, 4]), ("I", TP.INT64, [2])],
               [("Y", TP.FLOAT, None)])
    _compare(m, {"X": x, "I": np.array([3, 1], np.int64)})
    xs = np.array([["a", "b", "c"]], dtype=object)
    m = _model("ArrayFeatureExtractor", {}, [("X", TP.STRING, [1, 3]), ("I", TP.INT64, [1])],
               [("Y", TP.STRING, None)])
    _compare(m, {"X": xs, "I": np.array([2], np.int64)})
    m = _model("ArrayFeatureExtractor", {}, [("X", TP.INT64, [5]), ("I", TP.INT64, [2])],
               [("Y", TP.INT64, None)])
    _compare(m, {"X": np.arange(5, dtype=np.int64), "I": np.array([4, 0], np.int64)})


@pytest.mark.parametrize("dtype,et", [(np.float32, TP.FLOAT), (np.float64, TP.DOUBLE),
                                      (np.int64, TP.INT64), (np.int32, TP.INT32)])
def test_binarizer_scaler_normalizer(dtype, et):
    x = (np.array([[1, -2, 3.5, 0], [0.2, 5, -1, 2]]) * 2).astype(dtype)
    if dtype == np.float32:  # onnxruntime has Binarizer for float only
        _one("Binarizer", dict(threshold=0.5), x, et, et)
    _one("Scaler", dict(offset=[0.5, 1.0, -1.0, 0.0], scale=[2.0, 0.5, 1.0, 3.0]), x, et,
         TP.FLOAT)
    _one("Scaler", dict(offset=[0.5], scale=[2.0]), x, et, TP.FLOAT)
    for norm in ("MAX", "L1", "L2"):
        _one("Normalizer", dict(norm=norm), x, et, TP.FLOAT)


def test_imputer():
    x = np.array([[1, np.nan, 3], [np.nan, 5, -1]], np.float32)
    _one("Imputer", dict(imputed_value_floats=[9.0, 8.0, 7.0], replaced_value_float=np.nan), x,
         TP.FLOAT, TP.FLOAT)
    _one("Imputer", dict(imputed_value_floats=[0.5], replaced_value_float=3.0), x,
         TP.FLOAT, TP.FLOAT)
    xi = np.array([[1, -1, 3], [-1, 5, -1]], np.int64)
    _one("Imputer", dict(imputed_value_int64s=[9, 8, 7], replaced_value_int64=-1), xi,
         TP.INT64, TP.INT64)


def test_category_mapper_and_one_hot():
    attrs = dict(cats_strings=["a", "b", "c"], cats_int64s=[5, 7, 9])
    xs = np.array([["a", "c"], ["zz", "b"]], dtype=object)
    _one("CategoryMapper", dict(attrs, default_int64=-4), xs, TP.STRING, TP.INT64)
    xi = np.array([[5, 6], [9, 7]], np.int64)
    _one("CategoryMapper", dict(attrs, default_string="none"), xi, TP.INT64, TP.STRING)
    _one("OneHotEncoder", dict(cats_strings=["a", "b", "c"]), xs, TP.STRING, TP.FLOAT)
    _one("OneHotEncoder", dict(cats_int64s=[5, 6, 9]), xi, TP.INT64, TP.FLOAT)
    _one("OneHotEncoder", dict(cats_int64s=[5, 6, 9]), xi.astype(np.float64), TP.DOUBLE,
         TP.FLOAT)


@pytest.mark.parametrize("rows", [1, 3, 40])     # a few rows take a dict lookup, more NumPy's
def test_one_hot_encoder_rows(rows):
    r = np.random.default_rng(rows)
    xi = r.integers(3, 11, size=(rows, 2)).astype(np.int64)     # 3, 4, 8, 10: not categories
    cats = dict(cats_int64s=[5, 6, 9, 7, 6])                    # 6 twice: its last position
    _one("OneHotEncoder", cats, xi, TP.INT64, TP.FLOAT)
    _one("OneHotEncoder", cats, xi + 0.75, TP.DOUBLE, TP.FLOAT)  # truncated to int64
    known = np.array([5, 9, 7] * 14, np.int64)[:rows].reshape(rows, 1)
    _one("OneHotEncoder", dict(cats, zeros=0), known, TP.INT64, TP.FLOAT)
    m = _model("OneHotEncoder", dict(cats, zeros=0), [("X", TP.INT64, [rows, 2])],
               [("Y", TP.FLOAT, None)])
    with pytest.raises(Exception, match="not in the list|zeros"):
        onnxrt.InferenceSession(m.SerializeToString()).run(None, {"X": xi * 0 + 4})


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_normalizer_zero_rows_and_inputs_kept(norm):
    x = np.array([[0.0, 0.0, 0.0], [1.5, -2.0, 0.5], [-1.0, -3.0, -0.5]])
    keep = x.copy()
    _one("Normalizer", dict(norm=norm), x, TP.DOUBLE, TP.FLOAT)
    _one("Normalizer", dict(norm=norm), x[1], TP.DOUBLE, TP.FLOAT)
    np.testing.assert_array_equal(x, keep)


def test_label_encoder_versions():
    xs = np.array(["Amy", "Dori", "Sally", "Amy"], dtype=object)
    _one("LabelEncoder", dict(classes_strings=["Sally", "Amy"], default_int64=-7), xs,
         TP.STRING, TP.INT64, ml_opset=1)
    _one("LabelEncoder", dict(keys_strings=["Amy", "Sally"], values_floats=[1.5, 2.0]),
         xs, TP.STRING, TP.FLOAT, ml_opset=2)
    xf = np.array([[1.5, np.nan], [2.0, 7.0]], np.float32)
    _one("LabelEncoder", dict(keys_floats=[1.5, 2.0], values_strings=["a", "b"],
                              default_string="?"), xf, TP.FLOAT, TP.STRING, ml_opset=2)
    # the spec: a NaN key matches any NaN input (onnxruntime never matches NaN)
    m = _model("LabelEncoder", dict(keys_floats=[1.5, np.nan], values_strings=["a", "n"]),
               [("X", TP.FLOAT, [2, 2])], [("Y", TP.STRING, [2, 2])], ml_opset=2)
    out = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"X": xf})[0]
    assert out.tolist() == [["a", "n"], ["_Unused", "_Unused"]]
    xi = np.array([3, 1, 4, 1, 5], np.int64)
    _one("LabelEncoder", dict(keys_int64s=[1, 5, 3], values_int64s=[10, 50, 30]), xi,
         TP.INT64, TP.INT64, ml_opset=2)
    keys = oh.make_tensor("k", TP.INT64, [3], [1, 5, 3])
    vals = oh.make_tensor("v", TP.DOUBLE, [3], [0.1, 0.5, 0.3])
    dflt = oh.make_tensor("d", TP.DOUBLE, [1], [-9.0])
    _one("LabelEncoder", dict(keys_tensor=keys, values_tensor=vals, default_tensor=dflt),
         xi, TP.INT64, TP.DOUBLE, ml_opset=4)
    # int32 -> int16 tensors (onnxruntime has no kernel for this pair): a NumPy formula
    m = _model("LabelEncoder", dict(keys_tensor=oh.make_tensor("k", TP.INT32, [2], [4, 1]),
                                    values_tensor=oh.make_tensor("v", TP.INT16, [2], [-4, -1])),
               [("X", TP.INT32, [5])], [("Y", TP.INT16, [5])], ml_opset=4)
    out = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"X": xi.astype(np.int32)})
    assert out[0].dtype == np.int16 and out[0].tolist() == [-1, -1, -4, -1, -1]


def _map_type(key, value):
    return oh.make_map_type_proto(key, oh.make_tensor_type_proto(value, None))


def test_zipmap():
    x = np.array([[0.1, 0.9], [0.7, 0.3]], np.float32)
    for labels, key in ((dict(classlabels_int64s=[3, 8]), TP.INT64),
                        (dict(classlabels_strings=["no", "yes"]), TP.STRING)):
        seq = oh.make_sequence_type_proto(_map_type(key, TP.FLOAT))
        m = _model("ZipMap", labels, [("X", TP.FLOAT, [None, 2])], [("Y", seq, None)])
        out = _compare(m, {"X": x})[0]
        assert isinstance(out, list) and all(isinstance(d, dict) for d in out)


def test_dict_vectorizer_and_cast_map():
    m = _model("DictVectorizer", dict(string_vocabulary=["a", "b", "c"]),
               [("X", _map_type(TP.STRING, TP.FLOAT), None)], [("Y", TP.FLOAT, None)])
    _compare(m, {"X": {"c": 1.5, "a": -2.0}})
    m = _model("DictVectorizer", dict(int64_vocabulary=[7, 3]),
               [("X", _map_type(TP.INT64, TP.FLOAT), None)], [("Y", TP.FLOAT, None)])
    _compare(m, {"X": {3: 1.5, 9: 4.0}})
    for cast_to, out_t in (("TO_FLOAT", TP.FLOAT), ("TO_INT64", TP.INT64)):
        for form in ("DENSE", "SPARSE"):
            m = _model("CastMap", dict(cast_to=cast_to, map_form=form, max_map=6),
                       [("X", _map_type(TP.INT64, TP.FLOAT), None)], [("Y", out_t, None)])
            _compare(m, {"X": {4: 2.5, 1: -1.0, 0: 3.0}})
    for form in ("DENSE", "SPARSE"):
        m = _model("CastMap", dict(cast_to="TO_STRING", map_form=form, max_map=6),
                   [("X", _map_type(TP.INT64, TP.FLOAT), None)], [("Y", TP.STRING, None)])
        _compare(m, {"X": {4: 2.5, 1: -1.25}})


def test_feature_vectorizer():
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[5, 7, 9], [6, 8, 10]], np.float32)
    m = _model("FeatureVectorizer", dict(inputdimensions=[2, 2]),
               [("A", TP.FLOAT, [2, 2]), ("B", TP.FLOAT, [2, 3])], [("Y", TP.FLOAT, None)])
    _compare(m, {"A": a, "B": b})


def test_label_encoder_repeated_key_last_wins():
    # the spec: "If a key is repeated, the last key takes precedence" (onnxruntime keeps the
    # first one; we follow the spec)
    m = _model("LabelEncoder", dict(keys_int64s=[1, 2, 1], values_int64s=[10, 20, 30]),
               [("X", TP.INT64, [3])], [("Y", TP.INT64, [3])], ml_opset=2)
    out = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"X": np.array([1, 2, 3])})
    assert out[0].tolist() == [30, 20, -1]


def test_linear_classifier_binary_without_intercepts():
    # one coefficient row for two labels, found from the declared feature count
    m = _model("LinearClassifier", dict(coefficients=[0.5, -0.3], classlabels_ints=[4, 9]),
               [("X", TP.FLOAT, [None, 2])], [("Y", TP.INT64, [None]),
                                              ("Z", TP.FLOAT, [None, 2])], ml_opset=1)
    x = np.array([[1, 2], [2, 1]], np.float32)
    y, z = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"X": x})
    s = x @ np.array([0.5, -0.3], np.float32)
    assert y.tolist() == [4, 9]
    np.testing.assert_allclose(z, np.stack([1 - s, s], axis=1), rtol=1e-6)


# -- the float32 fast paths (Scaler, Normalizer, LinearClassifier's SOFTMAX in place) ---------
@pytest.mark.parametrize("rows", [1, 4])
def test_float32_rows_scaler_normalizer_linear(rows):
    r = np.random.default_rng(rows)
    x = r.normal(size=(rows, 4)).astype(np.float32)
    x[0, :] = 0.0                               # a zero row: its norm stays 1
    _one("Scaler", dict(offset=[0.5, 1.0, -1.0, 0.0], scale=[2.0, 0.5, 1.0, 3.0]), x,
         TP.FLOAT, TP.FLOAT)
    for norm in ("MAX", "L1", "L2"):
        _one("Normalizer", dict(norm=norm), x, TP.FLOAT, TP.FLOAT)
        _one("Normalizer", dict(norm=norm), -np.abs(x), TP.FLOAT, TP.FLOAT)
    m = _model("LinearClassifier", dict(coefficients=r.normal(size=12).tolist(),
                                        intercepts=[0.1, 0.0, -0.1], post_transform="SOFTMAX",
                                        classlabels_ints=[0, 1, 2]),
               [("X", TP.FLOAT, [None, 4])], [("Y", TP.INT64, [None]),
                                              ("Z", TP.FLOAT, [None, 3])], ml_opset=1)
    _compare(m, {"X": x * 30})                  # large scores: the max is taken off first


def test_scaler_width_checked_once_per_width_and_session_kept():
    m = _model("Scaler", dict(offset=[0.5, 1.0, -1.0], scale=[2.0, 0.5, 1.0]),
               [("X", TP.FLOAT, [None, None])], [("Y", TP.FLOAT, None)])
    s = onnxrt.InferenceSession(m.SerializeToString())
    good = np.ones((1, 3), np.float32)
    s.run(None, {"X": good})
    with pytest.raises(Exception, match="Scaler: offset has 3 values for 4 features"):
        s.run(None, {"X": np.ones((1, 4), np.float32)})
    np.testing.assert_allclose(s.run(None, {"X": good})[0], [[1.0, 0.0, 2.0]])
