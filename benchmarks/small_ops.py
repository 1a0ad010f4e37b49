"""One-node models at a streaming detector's shapes (silero-vad's shape arithmetic and
activations): the time of one run on onnxrt and onnxruntime, one process, alternating.

    python benchmarks/small_ops.py [CASE ...]

Columns: each engine's run (min over 5 x 2000 runs, twice), then each minus the same
engine's run of a one-node Identity model (the kernel's own share, roughly).
"""

from __future__ import annotations

import sys
import time
from typing import Any

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

F, I, B = T.FLOAT, T.INT64, T.BOOL


def _model(op: str, ins: list[tuple[int, list[int], np.ndarray]], out_t: int,
           inits: tuple[Any, ...] = (), **attrs: Any) -> tuple[bytes, dict[str, np.ndarray]]:
    names = [f"i{k}" for k in range(len(ins))]
    inputs = [h.make_tensor_value_info(n, t, s) for n, (t, s, _) in zip(names, ins)]
    node = h.make_node(op, names + [i.name for i in inits], ["y"], **attrs)
    g = h.make_graph([node], "g", inputs, [h.make_tensor_value_info("y", out_t, None)],
                     initializer=list(inits))
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 16)], ir_version=8)
    return m.SerializeToString(), {n: v for n, (_, _, v) in zip(names, ins)}


def _c(name: str, arr: Any) -> Any:
    return nh.from_array(np.asarray(arr), name)


def _cases() -> dict[str, tuple[bytes, dict[str, np.ndarray]]]:
    rng = np.random.default_rng(0)

    def f(*s: int) -> np.ndarray:
        return rng.random(s, dtype=np.float32)

    def i64(*v: int) -> np.ndarray:
        return np.array(v, np.int64)

    s0 = np.array(3, np.int64)
    return {
        "Identity": _model("Identity", [(F, [1, 128], f(1, 128))], F),
        "Shape": _model("Shape", [(F, [1, 128, 1], f(1, 128, 1))], I),
        "Gather[3]i64,idx[1]": _model("Gather", [(I, [3], i64(1, 128, 1))], I,
                                      (_c("ix", i64(2)),), axis=0),
        "Gather[2,1,128],idx0d": _model("Gather", [(F, [2, 1, 128], f(2, 1, 128))], F,
                                        (_c("ix", np.array(0, np.int64)),), axis=0),
        "Unsqueeze[1,128]": _model("Unsqueeze", [(F, [1, 128], f(1, 128))], F,
                                   (_c("ax", i64(1)),)),
        "Squeeze[1,1,128]": _model("Squeeze", [(F, [1, 1, 128], f(1, 1, 128))], F,
                                   (_c("ax", i64(1)),)),
        "Squeeze[1]i64": _model("Squeeze", [(I, [1], i64(5))], I, (_c("ax", i64(0)),)),
        "Cast i64->bool 0d": _model("Cast", [(I, [], s0)], B, to=B),
        "Cast f->f": _model("Cast", [(F, [1, 129, 3], f(1, 129, 3))], F, to=F),
        "Relu[1,128,3]": _model("Relu", [(F, [1, 128, 3], f(1, 128, 3))], F),
        "Sigmoid[1,1,1]": _model("Sigmoid", [(F, [1, 1, 1], f(1, 1, 1))], F),
        "ReduceMean[1,1]": _model("ReduceMean", [(F, [1, 1], f(1, 1))], F, axes=[1],
                                  keepdims=0),
        "Concat2x[1,1,128]": _model("Concat", [(F, [1, 1, 128], f(1, 1, 128)),
                                               (F, [1, 1, 128], f(1, 1, 128))], F, axis=0),
        "Pad reflect[1,512]": _model("Pad", [(F, [1, 512], f(1, 512))], F,
                                     (_c("p", i64(0, 32, 0, 32)),), mode="reflect"),
        "Slice[1,258,3]": _model("Slice", [(F, [1, 258, 3], f(1, 258, 3))], F,
                                 (_c("s", i64(0)), _c("e", i64(129)), _c("a", i64(1)),
                                  _c("st", i64(1)))),
        "Equal 0d i64": _model("Equal", [(I, [], s0), (I, [], s0)], B),
    }


def _time(sess: Any, feeds: dict[str, np.ndarray], n: int = 2000) -> float:
    run = sess.run
    best = 1e9
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(n):
            run(None, feeds)
        best = min(best, (time.perf_counter() - t0) / n)
    return best * 1e6


def main(argv: list[str]) -> None:
    import onnxruntime as ort

    import onnxrt

    cases = _cases()
    sessions = {}
    for k in argv or list(cases):
        m, feeds = cases[k]
        so = onnxrt.SessionOptions()
        so.intra_op_num_threads = 1
        so2 = ort.SessionOptions()
        so2.intra_op_num_threads = 1
        a = onnxrt.InferenceSession(m, so, providers=["CPUExecutionProvider"])
        b = ort.InferenceSession(m, so2, providers=["CPUExecutionProvider"])
        ra, rb = a.run(None, feeds)[0], b.run(None, feeds)[0]
        assert ra.shape == rb.shape and np.allclose(ra, rb), k
        sessions[k] = (a, b, feeds)
    res: dict[str, tuple[float, float]] = {}
    for _ in range(2):
        for k, (a, b, feeds) in sessions.items():
            x, y = _time(a, feeds), _time(b, feeds)
            pa, pb = res.get(k, (1e9, 1e9))
            res[k] = (min(pa, x), min(pb, y))
    ia, ib = res.get("Identity", (0.0, 0.0))
    print(f"{'case':24s} {'onnxrt us':>9s} {'ort us':>7s} {'onnxrt-Id':>9s} {'ort-Id':>7s}")
    for k, (x, y) in res.items():
        print(f"{k:24s} {x:9.2f} {y:7.2f} {x - ia:9.2f} {y - ib:7.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
