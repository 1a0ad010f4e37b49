"""Models made by the public converters (skl2onnx, onnxmltools) against onnxruntime, at
batch 1 and at batches large enough that the compiled kernels split their work over
threads; the compiled paths against the NumPy ones; the Scan distance pattern of
skl2onnx's k-nearest neighbours against its generic path."""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto as TP
from onnx import helper as oh

import onnxrt
from onnxrt.providers.cpu.nn import jit

sklearn = pytest.importorskip("sklearn", reason="scikit-learn comes with the test extra")
skl2onnx = pytest.importorskip("skl2onnx", reason="skl2onnx comes with the test extra")

from skl2onnx import to_onnx  # noqa: E402
from skl2onnx.common.data_types import FloatTensorType  # noqa: E402
from sklearn.datasets import make_classification, make_regression  # noqa: E402


def _data(n=600, f=8, classes=3, seed=0):
    x, y = make_classification(n_samples=n, n_features=f, n_informative=5,
                               n_classes=classes, random_state=seed)
    return x.astype(np.float32), y


def _convert(model, f, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_onnx(model, initial_types=[("X", FloatTensorType([None, f]))],
                       target_opset={"": 17, "ai.onnx.ml": 3}, **kw).SerializeToString()


def _same(r, o, rtol, atol):
    if isinstance(r, list):         # ZipMap: one dict per row
        assert isinstance(o, list) and len(r) == len(o)
        for a, b in zip(r, o):
            assert set(a) == set(b)
            for k in a:
                assert abs(a[k] - b[k]) <= atol + rtol * abs(a[k]), (k, a[k], b[k])
        return
    r = np.asarray(r)
    assert o.shape == r.shape and o.dtype == r.dtype, (o.shape, r.shape, o.dtype, r.dtype)
    if r.dtype.kind in "iuOU":
        np.testing.assert_array_equal(o, r)
    else:
        np.testing.assert_allclose(o, r, rtol=rtol, atol=atol)


def _compare(data, x, rtol=1e-5, atol=1e-5, threads=2):
    ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"])
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = threads
    ours = onnxrt.InferenceSession(data, so)
    for rows in (x[:1], x):
        feeds = {"X": np.ascontiguousarray(rows)}
        for r, o in zip(ref.run(None, feeds), ours.run(None, feeds)):
            _same(r, o, rtol, atol)
    return ours


def _numpy_path(data, x):
    """Outputs with the compiled kernels off (sessions made while disabled)."""
    jit.set_enabled(False)
    try:
        return onnxrt.InferenceSession(data).run(None, {"X": x})
    finally:
        jit.set_enabled(True)


@pytest.mark.parametrize("kind", ["rf_classifier", "gb_regressor", "et_regressor_multi",
                                  "gb_classifier_binary"])
def test_sklearn_trees(kind):
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingClassifier,
                                  GradientBoostingRegressor, RandomForestClassifier)

    x, y = _data()
    if kind == "rf_classifier":
        m = RandomForestClassifier(n_estimators=30, max_depth=7, random_state=0).fit(x, y)
    elif kind == "gb_regressor":
        xr, yr = make_regression(n_samples=600, n_features=8, random_state=0)
        x = xr.astype(np.float32)
        m = GradientBoostingRegressor(n_estimators=40, max_depth=3, random_state=0).fit(x, yr)
    elif kind == "et_regressor_multi":
        m = ExtraTreesRegressor(n_estimators=20, max_depth=6, random_state=0).fit(
            x, np.stack([y, y * 0.5 + x[:, 0]], axis=1))
    else:
        m = GradientBoostingClassifier(n_estimators=30, random_state=0).fit(x, y > 0)
    data = _convert(m, x.shape[1])
    # 600 rows x 30 trees split the rows over the threads, one row the trees
    ours = _compare(data, x)
    if jit.enabled():
        got = ours.run(None, {"X": x})
        for r, o in zip(_numpy_path(data, x), got):
            _same(r, o, 1e-5, 1e-5)


def test_tree_split_by_trees_for_one_row():
    # a large forest and one row: the trees are split over the threads, partial sums added
    from sklearn.ensemble import RandomForestRegressor

    from onnxrt.providers.cpu.ml import tree_compiled

    if tree_compiled.kernel() is None:
        pytest.skip("numba is disabled here (ONNXRT_JIT=0): only the NumPy path runs")
    x, y = _data(n=300)
    m = RandomForestRegressor(n_estimators=400, max_depth=8, random_state=0).fit(x, y)
    data = _convert(m, x.shape[1])
    _compare(data, x[:3])
    lay = None
    sess = onnxrt.InferenceSession(data)
    for st in sess._plan.steps:
        forest = getattr(st.fn, "forest", None)
        if forest is not None:
            lay = forest._layout
    assert lay is not None
    fn = tree_compiled.kernel()
    for agg in (1, 2, 3):
        one, h1 = lay.scores(x[:5], agg, np.float32, fn, parts=1)
        four, h4 = lay.scores(x[:5], agg, np.float32, fn, parts=4)   # by trees: 5 < 4*64
        np.testing.assert_allclose(four, one, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(h4, h1)


def test_tree_nan_inputs():
    # NaN features fail every comparison (the node's false branch) where no missing-value
    # direction is set; test_ml.py covers nodes_missing_value_tracks_true
    from sklearn.ensemble import RandomForestClassifier

    x, y = _data()
    m = RandomForestClassifier(n_estimators=20, max_depth=6, random_state=0).fit(x, y)
    xn = x.copy()
    xn[::3, 1] = np.nan
    xn[::5, 4] = np.nan
    _compare(_convert(m, x.shape[1]), xn)


@pytest.mark.parametrize("labels", ["int", "str"])
def test_logistic_regression_zipmap(labels):
    from sklearn.linear_model import LogisticRegression

    x, y = _data(classes=4)
    if labels == "str":
        y = np.array(["a", "b", "c", "d"])[y]
    m = LogisticRegression(max_iter=300).fit(x, y)
    _compare(_convert(m, x.shape[1]), x)


def test_svc_probabilities_compiled_coupling():
    from sklearn.svm import SVC

    x, y = _data(n=300, classes=4)
    m = SVC(probability=True, random_state=0).fit(x, y)
    data = _convert(m, x.shape[1])
    ours = _compare(data, x, rtol=1e-4, atol=1e-5)
    if jit.enabled():
        got = ours.run(None, {"X": x})
        for r, o in zip(_numpy_path(data, x), got):
            _same(r, o, 1e-6, 1e-7)


def test_pipeline_scaler_onehot():
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    x, y = _data()
    cat = (np.abs(x[:, :2]) * 3).astype(np.int64) % 4
    xx = np.concatenate([x, cat.astype(np.float32)], axis=1)
    prep = ColumnTransformer([("num", StandardScaler(), list(range(8))),
                              ("cat", OneHotEncoder(handle_unknown="ignore"), [8, 9])])
    m = Pipeline([("prep", prep), ("clf", LogisticRegression(max_iter=300))]).fit(xx, y)
    _compare(_convert(m, xx.shape[1]), xx)


@pytest.mark.parametrize("model", ["classifier", "regressor"])
def test_knn_scan(model):
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

    x, y = _data(n=400)
    m = (KNeighborsClassifier(n_neighbors=5) if model == "classifier"
         else KNeighborsRegressor(n_neighbors=3)).fit(x[:300], y[:300])
    data = _convert(m, x.shape[1])
    ours = _compare(data, x[300:], rtol=1e-4, atol=1e-4)
    scans = [st.fn for st in ours._plan.steps if st.node.op_type == "Scan"]
    assert scans and all(s.cdist for s in scans)    # the distance body runs as one call


def test_lightgbm_and_xgboost_style_trees():
    lightgbm = pytest.importorskip("lightgbm", reason="lightgbm comes with the test extra")
    onnxmltools = pytest.importorskip("onnxmltools", reason="onnxmltools: the test extra")
    from onnxmltools.convert.common.data_types import FloatTensorType as F

    x, y = _data(n=800, classes=2)
    m = lightgbm.LGBMClassifier(n_estimators=60, num_leaves=15, verbose=-1,
                                random_state=0).fit(x, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        data = onnxmltools.convert_lightgbm(m, initial_types=[("X", F([None, x.shape[1]]))],
                                            target_opset=15, zipmap=True).SerializeToString()
    sess = _compare(data, x)
    (forest,) = [st.fn.forest for st in sess._plan.steps if hasattr(st.fn, "forest")]
    if forest._layout is not None:
        assert forest._layout.fast == 2    # all BRANCH_LEQ, missing values tracked
    xn = x.copy()
    xn[::3, 0] = np.nan         # LightGBM sends missing values down a learned side
    xn[::4, 2] = np.nan
    _compare(data, xn)


def _scan_model(reduce_op: str, keepdims: int) -> onnx.ModelProto:
    """Scan over rows of B with state A, each step ``reduce_op(A - b_t, axes=[1])``."""
    body = oh.make_graph(
        [oh.make_node("Identity", ["a_in"], ["a_out"]),
         oh.make_node("Sub", ["a_in", "b_t"], ["d"]),
         oh.make_node(reduce_op, ["d"], ["r"], axes=[1], keepdims=keepdims)],
        "body", [oh.make_tensor_value_info("a_in", TP.FLOAT, [None, 3]),
                 oh.make_tensor_value_info("b_t", TP.FLOAT, [3])],
        [oh.make_tensor_value_info("a_out", TP.FLOAT, [None, 3]),
         oh.make_tensor_value_info("r", TP.FLOAT, None)])
    node = oh.make_node("Scan", ["A", "B"], ["A_out", "D"], body=body, num_scan_inputs=1)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("A", TP.FLOAT, [None, 3]),
                                    oh.make_tensor_value_info("B", TP.FLOAT, [None, 3])],
                      [oh.make_tensor_value_info("A_out", TP.FLOAT, None),
                       oh.make_tensor_value_info("D", TP.FLOAT, None)])
    return oh.make_model(g, opset_imports=[oh.make_opsetid("", 17)], ir_version=9)


@pytest.mark.parametrize("reduce_op,keepdims,fast", [("ReduceSumSquare", 0, True),
                                                     ("ReduceSumSquare", 1, False),
                                                     ("ReduceMax", 0, False)])
def test_scan_distance_pattern_only_where_it_applies(reduce_op, keepdims, fast):
    rng = np.random.default_rng(0)
    feeds = {"A": rng.standard_normal((7, 3)).astype(np.float32),
             "B": rng.standard_normal((11, 3)).astype(np.float32)}
    data = _scan_model(reduce_op, keepdims).SerializeToString()
    exp = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)
    sess = onnxrt.InferenceSession(data)
    (scan,) = [st.fn for st in sess._plan.steps if st.node.op_type == "Scan"]
    assert scan.cdist is fast
    for e, g in zip(exp, sess.run(None, feeds)):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)
    # no scanned rows: an empty (0, N) result
    empty = {"A": feeds["A"], "B": np.zeros((0, 3), np.float32)}
    if fast:
        assert sess.run(None, empty)[1].shape == (0, 7)


@pytest.mark.parametrize("n,strings", [(1, False), (3, True), (40, True), (40, False)])
def test_zipmap_rows(n, strings):
    # the written-out row builder (up to 32 classes) and the generic one beyond
    lab = (dict(classlabels_strings=[f"c{i}" for i in range(n)]) if strings
           else dict(classlabels_int64s=list(range(5, 5 + n))))
    node = oh.make_node("ZipMap", ["X"], ["Z"], domain="ai.onnx.ml", **lab)
    kt = TP.STRING if strings else TP.INT64
    out_t = oh.make_sequence_type_proto(oh.make_map_type_proto(kt, oh.make_tensor_type_proto(
        TP.FLOAT, None)))
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("X", TP.FLOAT, [None, n])],
                      [oh.make_value_info("Z", out_t)])
    data = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17),
                                           oh.make_opsetid("ai.onnx.ml", 1)],
                         ir_version=9).SerializeToString()
    x = np.random.default_rng(0).random((50, n)).astype(np.float32)
    ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None,
                                                                                    {"X": x})
    got = onnxrt.InferenceSession(data).run(None, {"X": x})
    assert got[0] == ref[0]


@pytest.mark.parametrize("dtype,et", [(np.int64, TP.INT64), (np.float32, TP.FLOAT),
                                      (np.float64, TP.DOUBLE)])
def test_one_hot_encoder_integer_lookup(dtype, et):
    # categories unsorted and repeated (the last position wins), values outside the list
    node = oh.make_node("OneHotEncoder", ["X"], ["Y"], domain="ai.onnx.ml",
                        cats_int64s=[7, 3, 11, 3, -2], zeros=1)
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("X", et, [None, 3])],
                      [oh.make_tensor_value_info("Y", TP.FLOAT, None)])
    data = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17),
                                           oh.make_opsetid("ai.onnx.ml", 1)],
                         ir_version=9).SerializeToString()
    x = np.array([[7, 3, 5], [-2, 11, 3], [0, 100, -2]], dtype)
    ref = onnxruntime.InferenceSession(data, providers=["CPUExecutionProvider"]).run(
        None, {"X": x})
    got = onnxrt.InferenceSession(data).run(None, {"X": x})
    np.testing.assert_array_equal(got[0], ref[0])


def test_tree_negative_feature_id_is_refused():
    # the compiled walk reads features without bounds checks: a model naming feature -1
    # fails at session creation, naming the problem
    node = oh.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", n_targets=1,
        nodes_treeids=[0, 0, 0], nodes_nodeids=[0, 1, 2], nodes_featureids=[-1, 0, 0],
        nodes_modes=["BRANCH_LEQ", "LEAF", "LEAF"], nodes_values=[0.5, 0, 0],
        nodes_truenodeids=[1, 0, 0], nodes_falsenodeids=[2, 0, 0],
        target_treeids=[0, 0], target_nodeids=[1, 2], target_ids=[0, 0],
        target_weights=[1.0, 2.0])
    g = oh.make_graph([node], "g", [oh.make_tensor_value_info("X", TP.FLOAT, [None, 2])],
                      [oh.make_tensor_value_info("Y", TP.FLOAT, None)])
    data = oh.make_model(g, opset_imports=[oh.make_opsetid("", 17),
                                           oh.make_opsetid("ai.onnx.ml", 1)],
                         ir_version=9).SerializeToString()
    with pytest.raises(Exception, match="feature"):
        onnxrt.InferenceSession(data).run(None, {"X": np.zeros((2, 2), np.float32)})
