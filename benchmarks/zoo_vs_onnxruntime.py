"""onnxrt against onnxruntime on the zoo CNNs, in one process, alternating runs on the same
inputs; prints per model the median latency of each engine and the ratio onnxrt/onnxruntime.

    python benchmarks/zoo_vs_onnxruntime.py [resnet50 squeezenet ...] [--runs 20] [--batch 1]
"""

from __future__ import annotations

import os

# idle BLAS threads busy-wait and slow the other engine: let them sleep quickly
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort_ref  # noqa: E402

import onnxrt as ort  # noqa: E402
from onnxrt.cli.inputs import generate  # noqa: E402
from onnxrt.zoo import zoo_models  # noqa: E402


def ref_session(path: str, threads: int) -> ort_ref.InferenceSession:
    so = ort_ref.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort_ref.InferenceSession(path, so, providers=["CPUExecutionProvider"])


def bench(name: str, path: str, runs: int, warmup: int, batch: int | None, threads: int) -> dict:
    t = time.perf_counter()
    ours = ort.InferenceSession(path)
    create_ours = time.perf_counter() - t
    t = time.perf_counter()
    ref = ref_session(path, threads)
    create_ref = time.perf_counter() - t
    feeds = {a.name: generate(a, {}, batch) for a in ours.get_inputs()}
    for _ in range(warmup):
        ours.run(None, feeds)
        ref.run(None, feeds)
    t_ours, t_ref = [], []
    for _ in range(runs):
        t = time.perf_counter()
        a = ours.run(None, feeds)
        t_ours.append(time.perf_counter() - t)
        t = time.perf_counter()
        b = ref.run(None, feeds)
        t_ref.append(time.perf_counter() - t)
    err = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
              for x, y in zip(a, b))
    mo, mr = statistics.median(t_ours), statistics.median(t_ref)
    return {"model": name, "onnxrt_ms": mo * 1e3, "onnxruntime_ms": mr * 1e3,
            "ratio": mo / mr, "create_onnxrt_ms": create_ours * 1e3,
            "create_onnxruntime_ms": create_ref * 1e3, "max_abs_diff": err}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=None)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", default="")
    args = p.parse_args()
    zoo = zoo_models()
    names = args.models or list(zoo)
    rows = []
    print(f"{'model':<14} {'onnxrt ms':>10} {'ort ms':>9} {'ratio':>6} "
          f"{'create ms':>10} {'ort create':>10} {'max|diff|':>10}")
    for n in names:
        r = bench(n, zoo[n], args.runs, args.warmup, args.batch, args.threads)
        rows.append(r)
        print(f"{n:<14} {r['onnxrt_ms']:>10.2f} {r['onnxruntime_ms']:>9.2f} {r['ratio']:>6.2f} "
              f"{r['create_onnxrt_ms']:>10.0f} {r['create_onnxruntime_ms']:>10.0f} "
              f"{r['max_abs_diff']:>10.2e}", flush=True)
    geo = float(np.exp(np.mean(np.log([r["ratio"] for r in rows]))))
    print(f"geometric mean ratio onnxrt/onnxruntime: {geo:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "geomean_ratio": geo}, f, indent=2)


if __name__ == "__main__":
    main()
