"""TensorrtExecutionProvider on a machine with an NVIDIA GPU: the nine zoo CNNs
(onnx/backend/test/data/light) through TensorRT, compared with onnxrt's CPU results, and
timed against onnxruntime-gpu's TensorRT provider when that is installed.

    python benchmarks/trt_check.py [resnet50 squeezenet ...] [--runs 50] [--fp16]
        [--cache-dir DIR] [--device-id 0] [--json out.json]

Exits 0 with a message where TensorRT or a CUDA GPU is missing; exits 1 when a model's
results differ from the CPU's beyond tolerance. TensorRT computes fp32 convolutions in TF32
on Ampere and later GPUs (as onnxruntime's TensorRT provider does), hence the tolerances.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from typing import Any

import numpy as np

import onnxrt as ort
from onnxrt.cli.inputs import generate
from onnxrt.providers.tensorrt import TensorrtExecutionProvider
from onnxrt.zoo import zoo_models

TRT = "TensorrtExecutionProvider"


def _timed(fn: Any, feeds: dict[str, Any], runs: int, warmup: int) -> float:
    for _ in range(warmup):
        fn(None, feeds)
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn(None, feeds)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _ort_trt(path: str, opts: dict[str, str]) -> Any | None:
    """onnxruntime-gpu's TensorRT provider, or None where it is not installed."""
    try:
        import onnxruntime
    except ImportError:
        return None
    if TRT not in onnxruntime.get_available_providers():
        return None
    sess = onnxruntime.InferenceSession(
        path, providers=[(TRT, opts), "CUDAExecutionProvider", "CPUExecutionProvider"])
    return sess if sess.get_providers()[0] == TRT else None


def check(name: str, path: str, args: argparse.Namespace) -> dict[str, Any]:
    opts = {"device_id": str(args.device_id), "trt_fp16_enable": "1" if args.fp16 else "0"}
    if args.cache_dir:
        opts.update(trt_engine_cache_enable="1", trt_engine_cache_path=args.cache_dir,
                    trt_timing_cache_enable="1")
    cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feeds = {a.name: generate(a, {}, None) for a in cpu.get_inputs()}
    t = time.perf_counter()
    ep = TensorrtExecutionProvider(**opts)
    # basic passes only, as onnxruntime does for TensorRT: fused com.microsoft ops would
    # hide nodes from TensorRT's parser
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_BASIC
    sess = ort.InferenceSession(path, so, providers=[ep, "CPUExecutionProvider"])
    create_s = time.perf_counter() - t
    on_trt = sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info()
                 if sg.ep_name == TRT)
    n_nodes = sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info())
    ref = cpu.run(None, feeds)
    got = sess.run(None, feeds)
    rtol, atol = (5e-2, 5e-2) if args.fp16 else (1e-2, 1e-3)
    err = max(float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
              for a, b in zip(got, ref))
    ok = all(np.allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=rtol,
                         atol=atol) for a, b in zip(got, ref))
    row: dict[str, Any] = {
        "model": name, "nodes_on_trt": on_trt, "nodes": n_nodes,
        "engines": ep.allocation_stats().get("engines_built", 0),
        "cache_hits": ep.allocation_stats().get("engine_cache_hits", 0),
        "create_s": create_s, "max_abs_diff": err, "ok": ok,
        "onnxrt_trt_ms": _timed(sess.run, feeds, args.runs, args.warmup),
        "onnxruntime_trt_ms": None,
    }
    ref_sess = _ort_trt(path, opts)
    if ref_sess is not None:
        row["onnxruntime_trt_ms"] = _timed(ref_sess.run, feeds, args.runs, args.warmup)
    return row


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*")
    p.add_argument("--runs", type=int, default=50)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--fp16", action="store_true")
    p.add_argument("--device-id", type=int, default=0)
    p.add_argument("--cache-dir", default="")
    p.add_argument("--json", default="")
    args = p.parse_args(argv)
    why = TensorrtExecutionProvider.unavailable_reason()
    if why:
        print(f"trt_check: nothing to do here: {why}")
        return 0
    zoo = zoo_models()
    names = args.models or list(zoo)
    unknown = [n for n in names if n not in zoo]
    if unknown:
        print(f"trt_check: unknown model(s) {unknown}; the zoo has {sorted(zoo)}")
        return 2
    print(f"{'model':<14} {'on TRT':>9} {'engines':>7} {'create s':>8} {'max|diff|':>10} "
          f"{'ok':>3} {'onnxrt ms':>10} {'ort-trt ms':>10} {'ratio':>6}")
    rows, ratios = [], []
    for n in names:
        try:
            r = check(n, zoo[n], args)
        except Exception as e:  # report every model, then fail
            print(f"{n:<14} FAILED: {type(e).__name__}: {e}")
            rows.append({"model": n, "ok": False, "error": f"{type(e).__name__}: {e}"})
            continue
        rows.append(r)
        ref = r["onnxruntime_trt_ms"]
        ratio = r["onnxrt_trt_ms"] / ref if ref else None
        if ratio:
            ratios.append(ratio)
        print(f"{n:<14} {r['nodes_on_trt']:>4}/{r['nodes']:<4} {r['engines']:>7} "
              f"{r['create_s']:>8.1f} {r['max_abs_diff']:>10.2e} {'yes' if r['ok'] else 'NO':>3} "
              f"{r['onnxrt_trt_ms']:>10.3f} {ref if ref is None else f'{ref:.3f}':>10} "
              f"{'' if ratio is None else f'{ratio:.2f}':>6}")
    if ratios:
        gm = math.exp(sum(math.log(x) for x in ratios) / len(ratios))
        print(f"geometric mean onnxrt/onnxruntime (TensorRT both): {gm:.2f}")
    else:
        print("onnxruntime-gpu with TensorRT is not installed: no comparison timings")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)
    return 0 if all(r.get("ok") for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
