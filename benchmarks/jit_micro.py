"""Compiled (numba) kernels vs the NumPy path vs onnxruntime: same process, alternating.

    python benchmarks/jit_micro.py [--reps 40] [--threads=1] [--only NAME] [--no-compile]
                                   [--json PATH] [--zoo shufflenet,inception_v1]

Per case: the path onnxrt chooses (conv/dwcl/pool/spool: compiled; numpy: no compiled kernel won
there), median times of onnxrt with the compiled kernels enabled, onnxrt with the NumPy
path and onnxruntime (the order rotated each round), the ratios jit/numpy, jit/ort and
numpy/ort of the medians and [of the minima] (on a loaded machine the minima are the
steadier measure). Then the first-session cost of the compiled kernels in fresh processes:
numba import, compile with a cold cache (an empty NUMBA_CACHE_DIR) and load from the warm
cache. ``--zoo`` times whole zoo models instead.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

# before numpy is imported: idle BLAS threads sleep
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
_threads = next((a.split("=", 1)[1] for a in sys.argv if a.startswith("--threads=")), "1")

import time  # noqa: E402

import numpy as np  # noqa: E402
from onnx import helper, numpy_helper  # noqa: E402

P1 = [1, 1, 1, 1]
# name, op, input shape, weight shape (conv) or None, attributes
CASES = [
    ("dw 3x3 32 @112", "Conv", (1, 32, 112, 112), (32, 1, 3, 3), {"pads": P1, "group": 32}),
    ("dw 3x3/2 96 @112", "Conv", (1, 96, 112, 112), (96, 1, 3, 3),
     {"pads": P1, "group": 96, "strides": [2, 2]}),
    ("dw 3x3 144 @56", "Conv", (1, 144, 56, 56), (144, 1, 3, 3), {"pads": P1, "group": 144}),
    ("dw 3x3 136 @28 (shufflenet)", "Conv", (1, 136, 28, 28), (136, 1, 3, 3),
     {"pads": P1, "group": 136}),
    ("dw 3x3 272 @14 (shufflenet)", "Conv", (1, 272, 14, 14), (272, 1, 3, 3),
     {"pads": P1, "group": 272}),
    ("dw 3x3 544 @7 (shufflenet)", "Conv", (1, 544, 7, 7), (544, 1, 3, 3),
     {"pads": P1, "group": 544}),
    ("dw 5x5 240 @28", "Conv", (1, 240, 28, 28), (240, 1, 5, 5), {"pads": [2] * 4, "group": 240}),
    ("dw 3x3 32 @112 b8", "Conv", (8, 32, 112, 112), (32, 1, 3, 3), {"pads": P1, "group": 32}),
    ("maxpool 3x3/2 64 @112", "MaxPool", (1, 64, 112, 112), None,
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": P1}),
    ("maxpool 3x3/2 192 @56 (inception)", "MaxPool", (1, 192, 56, 56), None,
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [0, 0, 1, 1]}),
    ("maxpool 3x3/1 480 @28 (inception)", "MaxPool", (1, 480, 28, 28), None,
     {"kernel_shape": [3, 3], "pads": P1}),
    ("maxpool 3x3/2 96 @55 (alexnet)", "MaxPool", (1, 96, 55, 55), None,
     {"kernel_shape": [3, 3], "strides": [2, 2]}),
    ("maxpool 2x2/2 64 @224 (vgg)", "MaxPool", (1, 64, 224, 224), None,
     {"kernel_shape": [2, 2], "strides": [2, 2]}),
    ("avgpool 3x3/1 256 @28", "AveragePool", (1, 256, 28, 28), None,
     {"kernel_shape": [3, 3], "pads": P1, "count_include_pad": 0}),
    ("avgpool 3x3/2 240 @28 (shufflenet)", "AveragePool", (1, 240, 28, 28), None,
     {"kernel_shape": [3, 3], "strides": [2, 2], "pads": P1}),
    ("avgpool 3x3/1 64 @56 b8", "AveragePool", (8, 64, 56, 56), None,
     {"kernel_shape": [3, 3], "pads": P1, "count_include_pad": 1}),
    ("lrn 5 64 @56 (inception)", "LRN", (1, 64, 56, 56), None,
     {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),
    ("lrn 5 96 @55 (alexnet)", "LRN", (1, 96, 55, 55), None,
     {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),
    ("lrn 5 256 @27 (alexnet)", "LRN", (1, 256, 27, 27), None,
     {"size": 5, "alpha": 1e-4, "beta": 0.75, "bias": 1.0}),
]


def _sessions(model: str | bytes, threads: int, single_inter_op: bool = False) -> tuple:
    """onnxrt with the compiled kernels, onnxrt on the NumPy path, onnxruntime (its threads
    not spinning), all on ``threads`` threads."""
    import onnxruntime as ort

    import onnxrt
    from onnxrt.providers.cpu.nn import jit

    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = threads
    oso = ort.SessionOptions()
    oso.intra_op_num_threads = threads
    if single_inter_op:
        oso.inter_op_num_threads = 1
    oso.add_session_config_entry("session.intra_op.allow_spinning", "0")
    oso.add_session_config_entry("session.inter_op.allow_spinning", "0")
    jit.set_enabled(True)
    s_jit = onnxrt.InferenceSession(model, so)
    jit.set_enabled(False)
    s_np = onnxrt.InferenceSession(model, so)
    jit.set_enabled(True)
    return s_jit, s_np, ort.InferenceSession(model, oso, providers=["CPUExecutionProvider"])


def model_bytes(op: str, xs: tuple[int, ...], ws: tuple[int, ...] | None, attrs: dict,
                seed: int = 0) -> bytes:
    rng = np.random.default_rng(seed)
    inits = []
    ins = ["x"]
    if ws is not None:
        inits = [numpy_helper.from_array(rng.standard_normal(ws).astype(np.float32) * 0.3, "w"),
                 numpy_helper.from_array(rng.standard_normal(ws[0]).astype(np.float32), "b")]
        ins = ["x", "w", "b"]
    node = helper.make_node(op, ins, ["y"], **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", 1, list(xs))],
                          [helper.make_tensor_value_info("y", 1, None)], inits)
    m = helper.make_model(g, ir_version=9, opset_imports=[helper.make_opsetid("", 17)])
    return m.SerializeToString()


def _median_min(ts: list[float]) -> tuple[float, float]:
    return float(np.median(ts)) * 1e3, float(np.min(ts)) * 1e3


def bench(args: argparse.Namespace) -> list[dict]:
    from onnxrt.providers.cpu.nn import jit

    rows = []
    print(f"{'case':36s} {'path':5s} {'jit':>8s} {'numpy':>8s} {'ort':>8s}  {'jit/np':>6s} "
          f"{'jit/ort':>7s} {'np/ort':>6s}  (medians ms; ratios of medians, [of minima])")
    for name, op, xs, ws, attrs in CASES:
        if args.only and args.only not in name:
            continue
        mb = model_bytes(op, xs, ws, attrs)
        x = np.random.default_rng(1).standard_normal(xs).astype(np.float32)
        s_jit, s_np, s_ort = _sessions(mb, args.threads, single_inter_op=True)
        feeds = {"x": x}
        calls: list[str] = []
        real = jit._call
        jit._call = lambda pool, key, *a: (calls.append(key), real(pool, key, *a))[1]
        try:
            s_jit.run(None, feeds)
        finally:
            jit._call = real
        path = calls[0] if calls else "numpy"
        y_j, y_n, y_o = (s.run(None, feeds)[0] for s in (s_jit, s_np, s_ort))
        err_np = float(np.max(np.abs(y_j - y_n)))
        err_ort = float(np.max(np.abs(y_j - y_o)))
        ts: dict[str, list[float]] = {"jit": [], "numpy": [], "ort": []}
        engines = [("jit", s_jit), ("numpy", s_np), ("ort", s_ort)]
        for i in range(args.reps):
            # rotate the order: the engine that runs right after another one finds the
            # caches cold (measured: ~15% on sub-millisecond cases)
            for k, s in engines[i % 3:] + engines[:i % 3]:
                t0 = time.perf_counter()
                s.run(None, feeds)
                ts[k].append(time.perf_counter() - t0)
        med = {k: _median_min(v) for k, v in ts.items()}
        r = {"case": name, "path": path, **{f"{k}_ms": med[k][0] for k in med},
             **{f"{k}_min_ms": med[k][1] for k in med},
             "jit_over_numpy": med["jit"][0] / med["numpy"][0],
             "jit_over_ort": med["jit"][0] / med["ort"][0],
             "numpy_over_ort": med["numpy"][0] / med["ort"][0],
             "max_abs_diff_numpy": err_np, "max_abs_diff_ort": err_ort}
        rows.append(r)
        mins = (med["jit"][1] / med["numpy"][1], med["jit"][1] / med["ort"][1],
                med["numpy"][1] / med["ort"][1])
        print(f"{name:36s} {path:5s} {med['jit'][0]:8.3f} {med['numpy'][0]:8.3f} "
              f"{med['ort'][0]:8.3f}  {r['jit_over_numpy']:6.2f} {r['jit_over_ort']:7.2f} "
              f"{r['numpy_over_ort']:6.2f}"
              f"  [{mins[0]:.2f} {mins[1]:.2f} {mins[2]:.2f}]  diff {err_np:.1e}/{err_ort:.1e}")
    return rows


_PROBE = r"""
import time, sys
t0 = time.perf_counter()
import numba
t1 = time.perf_counter()
sys.path.insert(0, {bench_dir!r})
import onnxrt
from jit_micro import CASES, model_bytes
ops = {{"Conv": None, "MaxPool": None, "AveragePool": None, "LRN": None}}
for name, op, xs, ws, attrs in CASES:
    if ops.get(op, 1) is None:
        ops[op] = model_bytes(op, xs, ws, attrs)
t2 = time.perf_counter()
for mb in ops.values():
    onnxrt.InferenceSession(mb)
t3 = time.perf_counter()
print(t1 - t0, t3 - t2)
"""


def compile_times() -> dict[str, float]:
    """numba import, then the session creations that compile (cold cache) or load (warm)
    the kernels of Conv, MaxPool, AveragePool and LRN, each in a fresh process."""
    out = {}
    code = _PROBE.format(bench_dir=os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, NUMBA_CACHE_DIR=d)
        for label in ("cold", "warm"):
            res = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                                 text=True, check=True)
            imp, sess = (float(v) for v in res.stdout.split())
            out["numba_import_s"] = imp
            out[f"sessions_{label}_cache_s"] = sess
    return out


def bench_zoo(args: argparse.Namespace) -> list[dict]:
    """Whole zoo models (the CNNs shipped with onnx): the same three engines, alternating."""
    from onnxrt.cli.inputs import generate
    from onnxrt.zoo import zoo_models

    rows = []
    for name in args.zoo.split(","):
        s_jit, s_np, s_ort = _sessions(zoo_models()[name], args.threads)
        feeds = {a.name: generate(a, {}, None) for a in s_jit.get_inputs()}
        ts: dict[str, list[float]] = {"jit": [], "numpy": [], "ort": []}
        engines = [("jit", s_jit), ("numpy", s_np), ("ort", s_ort)]
        for i in range(args.reps + 1):
            for k, s in engines[i % 3:] + engines[:i % 3]:
                t0 = time.perf_counter()
                s.run(None, feeds)
                if i:
                    ts[k].append(time.perf_counter() - t0)
        med = {k: float(np.median(v)) * 1e3 for k, v in ts.items()}
        rows.append({"model": name, **{f"{k}_ms": v for k, v in med.items()}})
        print(f"{name:16s} jit {med['jit']:8.2f}  numpy {med['numpy']:8.2f}  ort {med['ort']:8.2f}"
              f"  jit/numpy {med['jit'] / med['numpy']:.3f}  jit/ort {med['jit'] / med['ort']:.2f}"
              f"  numpy/ort {med['numpy'] / med['ort']:.2f}")
    return rows


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=40)
    ap.add_argument("--threads", type=int, default=int(_threads))
    ap.add_argument("--only", default="")
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--json", default="")
    ap.add_argument("--zoo", default="", help="comma-separated zoo models instead of kernels")
    args = ap.parse_args()
    from onnxrt.providers.cpu.nn import jit

    if not jit.available():
        sys.exit("numba is not installed: pip install numba")
    if args.zoo:
        zrows = bench_zoo(args)
        if args.json:
            with open(args.json, "w") as f:
                json.dump({"threads": args.threads, "models": zrows}, f, indent=1)
        return
    rows = bench(args)
    ratios = [r["jit_over_ort"] for r in rows]
    if ratios:
        gm = float(np.exp(np.mean(np.log(ratios))))
        gn = float(np.exp(np.mean(np.log([r["numpy_over_ort"] for r in rows]))))
        print(f"geometric mean: jit/ort {gm:.2f}, numpy/ort {gn:.2f}")
    comp = {} if args.no_compile else compile_times()
    for k, v in comp.items():
        print(f"{k}: {v:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"threads": args.threads, "cases": rows,
                       **comp}, f, indent=1)


if __name__ == "__main__":
    main()
