"""onnxrt with the OpenVINO execution provider against onnxruntime's CPU provider on the zoo
CNNs, in one process, alternating runs on the same inputs; prints per model the median latency
of each engine, the ratio onnxrt+OpenVINO / onnxruntime (median of the per-run ratios),
session creation times (a cold one, and a warm one from a compiled-model cache) and the
largest difference between the outputs.

    python benchmarks/openvino_vs_onnxruntime.py [resnet50 squeezenet ...] [--runs 20]
"""

from __future__ import annotations

import os

# idle BLAS threads busy-wait and slow the other engine: let them sleep quickly
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort_ref  # noqa: E402

import onnxrt as ort  # noqa: E402
from onnxrt.cli.inputs import generate  # noqa: E402
from onnxrt.providers.openvino import OpenVINOExecutionProvider  # noqa: E402
from onnxrt.zoo import zoo_models  # noqa: E402
from run import ref_session  # noqa: E402  (benchmarks/run.py, the main benchmark)




def ov_session(path: str, options: dict) -> ort.InferenceSession:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ort.InferenceSession(path, providers=[OpenVINOExecutionProvider(**options),
                                                     "CPUExecutionProvider"])


def bench(name: str, path: str, runs: int, warmup: int, batch: int | None, threads: int,
          cache_dir: str) -> dict:
    opts = {"num_of_threads": threads}
    t = time.perf_counter()
    ours = ov_session(path, opts)
    create_cold = time.perf_counter() - t
    # a second session from the compiled-model cache (the first fills it)
    ov_session(path, {**opts, "cache_dir": cache_dir})
    t = time.perf_counter()
    ov_session(path, {**opts, "cache_dir": cache_dir})
    create_warm = time.perf_counter() - t
    t = time.perf_counter()
    ref = ref_session(path, threads)
    create_ref = time.perf_counter() - t
    on_ov = sum(len(sg.get_nodes()) for sg in ours.get_provider_graph_assignment_info()
                if sg.ep_name == OpenVINOExecutionProvider.name)
    total = sum(len(sg.get_nodes()) for sg in ours.get_provider_graph_assignment_info())
    feeds = {a.name: generate(a, {}, batch) for a in ours.get_inputs()}
    for _ in range(warmup):
        ours.run(None, feeds)
        ref.run(None, feeds)
    # alternate which engine goes first (ABBA) so a drift in the machine's load hits both
    t_ours, t_ref = [], []
    for k in range(runs):
        for engine in ((0, 1) if k % 2 == 0 else (1, 0)):
            t = time.perf_counter()
            if engine == 0:
                a = ours.run(None, feeds)
                t_ours.append(time.perf_counter() - t)
            else:
                b = ref.run(None, feeds)
                t_ref.append(time.perf_counter() - t)
    err = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
              for x, y in zip(a, b))
    mo, mr = statistics.median(t_ours), statistics.median(t_ref)
    # the median of per-pair ratios is steadier than a ratio of medians on a shared machine
    pair = statistics.median(x / y for x, y in zip(t_ours, t_ref))
    return {"model": name, "onnxrt_openvino_ms": mo * 1e3, "onnxruntime_ms": mr * 1e3,
            "ratio": pair, "ratio_of_medians": mo / mr, "create_cold_ms": create_cold * 1e3,
            "create_cached_ms": create_warm * 1e3, "create_onnxruntime_ms": create_ref * 1e3,
            "nodes_on_openvino": f"{on_ov}/{total}", "max_abs_diff": err}


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
    print(f"{'model':<14} {'ov ms':>9} {'ort ms':>9} {'ratio':>6} {'cold ms':>8} "
          f"{'cached ms':>9} {'ort create':>10} {'on ov':>9} {'max|diff|':>10}")
    with tempfile.TemporaryDirectory(prefix="onnxrt-ov-cache-") as cache_dir:
        for n in names:
            r = bench(n, zoo[n], args.runs, args.warmup, args.batch, args.threads, cache_dir)
            rows.append(r)
            print(f"{n:<14} {r['onnxrt_openvino_ms']:>9.2f} {r['onnxruntime_ms']:>9.2f} "
                  f"{r['ratio']:>6.2f} {r['create_cold_ms']:>8.0f} {r['create_cached_ms']:>9.0f} "
                  f"{r['create_onnxruntime_ms']:>10.0f} {r['nodes_on_openvino']:>9} "
                  f"{r['max_abs_diff']:>10.2e}", flush=True)
    geo = float(np.exp(np.mean(np.log([r["ratio"] for r in rows]))))
    print(f"geometric mean ratio onnxrt+OpenVINO / onnxruntime: {geo:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "geomean_ratio": geo}, f, indent=2)


if __name__ == "__main__":
    main()
