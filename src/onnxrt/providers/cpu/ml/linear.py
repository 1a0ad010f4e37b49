"""ai.onnx.ml LinearClassifier and LinearRegressor: one BLAS product per batch."""

from __future__ import annotations

import numpy as np

from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.ml._common import (ML, as_2d_float, labels_array, post_transform,
                                             transform_name)

_F32 = np.float32


def _weights(coefficients, intercepts, rows: int, what: str) -> tuple[np.ndarray, np.ndarray]:
    coef = np.asarray(coefficients or [], dtype=_F32)
    if rows <= 0 or coef.size % rows:
        raise ValueError(f"{what}: {coef.size} coefficients do not split into {rows} rows")
    w = coef.reshape(rows, -1)
    b = np.asarray(intercepts or [], dtype=_F32)
    if b.size == 0:
        b = np.zeros(rows, _F32)
    elif b.size != rows:
        raise ValueError(f"{what}: {b.size} intercepts for {rows} outputs")
    return np.ascontiguousarray(w.T), b


def _feature_count(node: NodeInfo) -> int:
    tp = node.input_types[0] if node.input_types else None
    if tp is None or not tp.HasField("tensor_type"):
        return 0
    dims = tp.tensor_type.shape.dim
    if len(dims) >= 2 and dims[-1].HasField("dim_value"):
        return int(dims[-1].dim_value)
    return 0


@CPU.kernel("LinearClassifier", since=1, domain=ML)
class LinearClassifier:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.labels = labels_array(a, "classlabels_ints", "classlabels_strings")
        if self.labels is None:
            raise ValueError("LinearClassifier needs classlabels_ints or classlabels_strings")
        coef = a.get("coefficients") or []
        b = a.get("intercepts") or []
        # the class-row count: from the intercepts, else from a known feature count (a
        # binary model has one row for two labels), else one row per label
        rows = len(b) if b else 0
        feats = _feature_count(node)
        if not rows and feats and len(coef) % feats == 0:
            rows = len(coef) // feats
        if not rows:
            rows = len(self.labels)
        self.w, self.b = _weights(coef, b, rows, "LinearClassifier")
        self.binary = rows == 1
        if self.binary and self.labels.size != 2:
            raise ValueError("LinearClassifier: one coefficient row (binary classification) "
                             f"needs exactly 2 class labels, got {self.labels.size}")
        self.transform = transform_name(a.get("post_transform", "NONE"))

    def __call__(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        s = as_2d_float(x, _F32) @ self.w + self.b
        if self.binary:
            # one score: the positive class; the negative class is its complement
            pos = s[:, 0]
            label = self.labels[(pos > 0).astype(np.intp)]
            if self.transform == "LOGISTIC":
                pos = post_transform(s, "LOGISTIC")[:, 0]
            elif self.transform == "PROBIT":
                pos = post_transform(s, "PROBIT")[:, 0]
            z = np.stack([1 - pos, pos], axis=1)
            return label, z.astype(_F32)
        # (the array method: np.argmax's Python wrapper costs ~1 us, as much as a row)
        label = self.labels[s.argmax(axis=1)]
        if self.transform == "SOFTMAX" and s.shape[1]:
            # in place on the scores this call made: no temporaries at batch 1
            s -= np.maximum.reduce(s, axis=1, keepdims=True)
            np.exp(s, out=s)
            s /= np.add.reduce(s, axis=1, keepdims=True)
            return label, s
        return label, post_transform(s, self.transform).astype(_F32, copy=False)


@CPU.kernel("LinearRegressor", since=1, domain=ML)
class LinearRegressor:
    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        targets = int(a.get("targets", 1))
        self.w, self.b = _weights(a.get("coefficients"), a.get("intercepts"), targets,
                                  "LinearRegressor")
        self.transform = transform_name(a.get("post_transform", "NONE"))
        if targets == 1 and self.transform != "PROBIT":
            # onnxruntime applies only PROBIT to a single score: we follow it
            self.transform = "NONE"

    def __call__(self, x: np.ndarray) -> np.ndarray:
        s = as_2d_float(x, _F32) @ self.w + self.b
        return post_transform(s, self.transform).astype(_F32, copy=False)
