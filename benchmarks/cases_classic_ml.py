"""Benchmark cases: classic machine learning converted to ONNX (ai.onnx.ml operators).

Models are trained at call time on synthetic data (scikit-learn's make_classification /
make_regression, fixed seeds) and converted with the public converters: skl2onnx for
scikit-learn (random forest, gradient boosting, logistic regression with ZipMap, SVC with
probabilities, a ColumnTransformer pipeline with Scaler/OneHotEncoder/ZipMap, k-nearest
neighbours, which skl2onnx writes as a Scan over the training rows), onnxmltools for
LightGBM (1,000 trees) and XGBoost. Each model runs at batch 1 and at batch 1,000.

``cases(quick=False)`` returns a list of dicts in the format every benchmark case module
shares (see benchmarks/cases_sequence.py): ``name``, ``category`` (``CATEGORY``),
``model`` (bytes), ``feeds`` (dict of arrays), optional ``note``. ``quick`` trains smaller
models. A model whose package is missing is left out, with a line on stderr.
"""

from __future__ import annotations

import sys
import warnings
from typing import Any, Callable

import numpy as np

CATEGORY = "classic_ml"

_FEATURES = 20
_BATCHES = (1, 1000)
_NUMERIC = 6        # numeric columns of the pipeline's table (3 categorical ones beside)


def _data(n: int = 2000, classes: int = 2, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import make_classification

    x, y = make_classification(n_samples=n, n_features=_FEATURES, n_informative=10,
                               n_classes=classes, random_state=seed)
    return x.astype(np.float32), y


def _skl(model: Any, n_features: int = _FEATURES, options: Any = None) -> bytes:
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType

    onx = to_onnx(model, initial_types=[("X", FloatTensorType([None, n_features]))],
                  target_opset={"": 17, "ai.onnx.ml": 3}, options=options)
    return onx.SerializeToString()


def _random_forest(quick: bool) -> tuple[bytes, np.ndarray, str]:
    from sklearn.ensemble import RandomForestClassifier

    x, y = _data(classes=3)
    m = RandomForestClassifier(n_estimators=20 if quick else 100, max_depth=10,
                               random_state=0).fit(x, y)
    return _skl(m), x, "sklearn RandomForestClassifier, 3 classes, ZipMap"


def _gradient_boosting(quick: bool) -> tuple[bytes, np.ndarray, str]:
    from sklearn.datasets import make_regression
    from sklearn.ensemble import GradientBoostingRegressor

    x, y = make_regression(n_samples=2000, n_features=_FEATURES, random_state=0)
    x = x.astype(np.float32)
    m = GradientBoostingRegressor(n_estimators=30 if quick else 200, max_depth=4,
                                  random_state=0).fit(x, y)
    return _skl(m), x, "sklearn GradientBoostingRegressor (TreeEnsembleRegressor)"


def _lightgbm(quick: bool) -> tuple[bytes, np.ndarray, str]:
    import lightgbm as lgb
    from onnxmltools import convert_lightgbm
    from onnxmltools.convert.common.data_types import FloatTensorType

    x, y = _data(n=5000)
    n = 100 if quick else 1000
    m = lgb.LGBMClassifier(n_estimators=n, num_leaves=31, learning_rate=0.05, verbose=-1,
                           random_state=0).fit(x, y)
    onx = convert_lightgbm(m, initial_types=[("X", FloatTensorType([None, _FEATURES]))],
                           target_opset=15, zipmap=True)
    return onx.SerializeToString(), x, f"LightGBM LGBMClassifier, {n} trees, onnxmltools"


def _xgboost(quick: bool) -> tuple[bytes, np.ndarray, str]:
    import xgboost as xgb
    from onnxmltools import convert_xgboost
    from onnxmltools.convert.common.data_types import FloatTensorType

    x, y = _data(classes=3)
    n = 30 if quick else 200
    m = xgb.XGBClassifier(n_estimators=n, max_depth=6, random_state=0).fit(x, y)
    onx = convert_xgboost(m, initial_types=[("X", FloatTensorType([None, _FEATURES]))],
                          target_opset=15)
    return onx.SerializeToString(), x, f"XGBoost XGBClassifier, 3 classes, {n} rounds"


def _logistic(quick: bool) -> tuple[bytes, np.ndarray, str]:
    from sklearn.linear_model import LogisticRegression

    x, y = _data(classes=4)
    m = LogisticRegression(max_iter=500).fit(x, y)
    return _skl(m), x, "sklearn LogisticRegression, 4 classes, ZipMap"


def _svc(quick: bool) -> tuple[bytes, np.ndarray, str]:
    from sklearn.svm import SVC

    x, y = _data(n=300 if quick else 1000, classes=3)
    m = SVC(probability=True, random_state=0).fit(x, y)
    return _skl(m), x, "sklearn SVC (RBF, probabilities), 3 classes, ZipMap"


def _pipeline(quick: bool) -> tuple[bytes, dict[str, np.ndarray], str]:
    """Numeric columns through StandardScaler, categorical ones (int64) through
    OneHotEncoder, then logistic regression: Scaler, OneHotEncoder, Concat,
    LinearClassifier, ZipMap."""
    from skl2onnx import to_onnx
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    x, y = _data(classes=3)
    rng = np.random.default_rng(0)
    cats = rng.integers(0, 8, size=(x.shape[0], 3)).astype(np.int64)
    import pandas as pd

    cols = [f"f{i}" for i in range(_NUMERIC)]
    df = pd.DataFrame(x[:, :_NUMERIC], columns=cols)
    for j in range(cats.shape[1]):
        df[f"c{j}"] = cats[:, j]
    num = ColumnTransformer([("num", StandardScaler(), cols),
                             ("cat", OneHotEncoder(handle_unknown="ignore"),
                              [f"c{j}" for j in range(cats.shape[1])])])
    pipe = Pipeline([("prep", num), ("clf", LogisticRegression(max_iter=500))]).fit(df, y)
    # one input per column, as skl2onnx converts pipelines over data frames
    initial = [(c, FloatTensorType([None, 1])) for c in cols]
    initial += [(f"c{j}", Int64TensorType([None, 1])) for j in range(cats.shape[1])]
    onx = to_onnx(pipe, initial_types=initial, target_opset={"": 17, "ai.onnx.ml": 3})
    feeds = {c: x[:, i:i + 1] for i, c in enumerate(cols)}
    feeds.update({f"c{j}": cats[:, j:j + 1] for j in range(cats.shape[1])})
    return onx.SerializeToString(), feeds, ("sklearn Pipeline(ColumnTransformer(StandardScaler, "
                                            "OneHotEncoder), LogisticRegression), ZipMap")


def _knn(quick: bool) -> tuple[bytes, np.ndarray, str]:
    from sklearn.neighbors import KNeighborsClassifier

    x, y = _data(n=500 if quick else 2000, classes=3)
    m = KNeighborsClassifier(n_neighbors=5).fit(x, y)
    return _skl(m), x, "sklearn KNeighborsClassifier (Scan over training rows), ZipMap"


def _linear_svr(quick: bool) -> tuple[bytes, np.ndarray, str]:
    from sklearn.datasets import make_regression
    from sklearn.svm import SVR

    x, y = make_regression(n_samples=300 if quick else 1000, n_features=_FEATURES,
                           random_state=0)
    m = SVR(kernel="rbf", C=10.0).fit(x.astype(np.float32), y)
    return _skl(m), x.astype(np.float32), "sklearn SVR (RBF): SVMRegressor"


_MODELS: list[tuple[str, Callable[[bool], tuple[bytes, Any, str]]]] = [
    ("random_forest", _random_forest),
    ("gradient_boosting", _gradient_boosting),
    ("lightgbm_1000", _lightgbm),
    ("xgboost", _xgboost),
    ("logreg_zipmap", _logistic),
    ("svc_rbf", _svc),
    ("svr_rbf", _linear_svr),
    ("pipeline_scaler_onehot", _pipeline),
    ("knn_scan", _knn),
]


def _rows(x: Any, n: int) -> dict[str, np.ndarray]:
    if isinstance(x, dict):
        return {k: np.ascontiguousarray(v[:n]) for k, v in x.items()}
    return {"X": np.ascontiguousarray(x[:n])}


def cases(quick: bool = False) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for name, make in _MODELS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                data, x, note = make(quick)
        except Exception as e:      # a package missing or a converter refusing
            print(f"classic_ml: {name} left out: {type(e).__name__}: {e}", file=sys.stderr)
            continue
        for b in _BATCHES:
            out.append({"name": f"{name}_b{b}", "category": CATEGORY, "model": data,
                        "feeds": _rows(x, b), "note": note})
    return out
