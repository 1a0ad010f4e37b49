"""Check the torch-backed CUDAExecutionProvider on a machine with an NVIDIA GPU.

    python benchmarks/gpu_check.py [--device-id 0] [--runs 20] [--only conv,resize]
                                   [--skip-conformance] [--skip-zoo] [--json out.json]

1. Conformance: every ONNX backend node case with an op the torch kernels claim runs on
   CUDAExecutionProvider (+ CPU fallback) and is compared with the suite's expected outputs at
   the suite's tolerances (TF32 off, so float32 stays float32).
2. Zoo: the nine light CNNs shipped inside the onnx package run on CUDA and on onnxrt's CPU
   provider; outputs are compared (rtol 1e-3), and median latencies are timed for onnxrt CPU,
   onnxrt CUDA (numpy in/out, and IOBinding with the input and output on the GPU) and, when
   onnxruntime-gpu is installed, onnxruntime's CUDA provider.

Without PyTorch, a CUDA build of it or a visible GPU, it says so and exits with status 0 (there
is nothing to check); with one, it exits 1 if any case or model disagrees.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import statistics
import sys
import time
import traceback
import warnings

import numpy as np


def no_gpu_reason() -> str:
    try:
        import torch
    except Exception as e:  # torch missing or broken
        return f"PyTorch cannot be imported ({type(e).__name__}: {e}); pip install onnxrt[torch]"
    if not torch.version.cuda:
        return f"this PyTorch build ({torch.__version__}) has no CUDA support"
    if not torch.cuda.is_available():
        return "torch.cuda.is_available() is False: no NVIDIA GPU or driver is visible"
    return ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device-id", type=int, default=0)
    ap.add_argument("--runs", type=int, default=20, help="timed runs per model and engine")
    ap.add_argument("--only", default="", help="comma-separated substrings of case names")
    ap.add_argument("--skip-conformance", action="store_true")
    ap.add_argument("--skip-zoo", action="store_true")
    ap.add_argument("--json", default="", help="write the results here as JSON")
    args = ap.parse_args()

    why = no_gpu_reason()
    if why:
        print(f"gpu_check: nothing to check on this machine: {why}.")
        print("gpu_check: run it on a machine with an NVIDIA GPU and a CUDA build of PyTorch.")
        return 0

    import torch

    import onnxrt as ort
    from onnxrt.providers.torch import (CUDAExecutionProvider, ROCMExecutionProvider,
                                        TorchExecutionProvider)

    for cls in (CUDAExecutionProvider, ROCMExecutionProvider, TorchExecutionProvider):
        ort.register_execution_provider(cls)   # harmless once the names are built in
    props = torch.cuda.get_device_properties(args.device_id)
    print(f"gpu_check: {props.name}, {props.total_memory / 2**30:.1f} GiB, torch "
          f"{torch.__version__}, CUDA {torch.version.cuda}, cuDNN "
          f"{torch.backends.cudnn.version()}")
    only = [s for s in args.only.split(",") if s]
    results: dict = {"device": props.name}
    ok = True
    if not args.skip_conformance:
        ok &= conformance(ort, args, only, results)
    if not args.skip_zoo:
        ok &= zoo(ort, args, only, results)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)
        print(f"gpu_check: results written to {args.json}")
    print("gpu_check: " + ("all checks passed" if ok else "SOME CHECKS FAILED"))
    return 0 if ok else 1


def cuda_providers(args, **extra):
    opts = {"device_id": str(args.device_id), **extra}
    return [("CUDAExecutionProvider", opts), "CPUExecutionProvider"]


# -- 1. conformance -------------------------------------------------------------------------

RANDOM_OPS = {"Bernoulli", "RandomUniformLike", "RandomNormalLike", "RandomUniform",
              "RandomNormal", "Multinomial"}


def conformance(ort, args, only, results) -> bool:
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
    from oracle import assert_all_similar, normalize

    from onnxrt.providers.torch.registry import load_kernels

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from onnx.backend.test.loader import load_node_model_tests

        cases = load_node_model_tests()
    kernel_ops = {kd.op_type for kd in load_kernels()}
    counts = {"passed": 0, "failed": 0, "all_on_cpu": 0}
    failures = []
    t0 = time.perf_counter()
    for case in cases:
        ops = {n.op_type for n in case.model.graph.node}
        if not ops & kernel_ops or ops & RANDOM_OPS:
            continue
        if only and not any(s in case.name for s in only):
            continue
        try:
            sess = ort.InferenceSession(case.model.SerializeToString(),
                                        providers=cuda_providers(args, use_tf32="0"))
            on_gpu = sum(sg.ep_name == "CUDAExecutionProvider"
                         for sg in sess.get_provider_graph_assignment_info())
            names = [i.name for i in case.model.graph.input]
            outs = [o.name for o in case.model.graph.output]
            for inputs, refs in case.data_sets:
                feeds = {n: normalize(v) for n, v in zip(names, inputs)}
                assert_all_similar(refs, sess.run(None, feeds), case.rtol, case.atol, outs)
            counts["passed"] += 1
            if not on_gpu:
                counts["all_on_cpu"] += 1
        except Exception as e:
            counts["failed"] += 1
            msg = f"{type(e).__name__}: {e}".replace("\n", " ")[:300]
            failures.append((case.name, msg))
    dt = time.perf_counter() - t0
    print(f"\n== conformance on CUDA: {counts['passed']} passed ({counts['all_on_cpu']} of them "
          f"entirely declined to the CPU), {counts['failed']} failed, {dt:.0f}s")
    for name, msg in failures:
        print(f"  FAIL {name}: {msg}")
    results["conformance"] = {**counts, "failures": failures}
    return not failures


# -- 2. zoo ---------------------------------------------------------------------------------

def light_models() -> list[tuple[str, str]]:
    import onnx

    d = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
    return [(os.path.basename(p)[len("light_"):-len(".onnx")], p)
            for p in sorted(glob.glob(os.path.join(d, "light_*.onnx")))]


def light_feeds(path: str) -> dict:
    import onnx

    m = onnx.load(path)
    init = {t.name for t in m.graph.initializer}
    feeds = {}
    for vi in m.graph.input:
        if vi.name in init:
            continue
        shape = tuple(d.dim_value if d.HasField("dim_value") else 1
                      for d in vi.type.tensor_type.shape.dim)
        n = int(np.prod(shape))
        feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def median_ms(fn, runs: int) -> float:
    fn()  # warm-up: cuDNN autotuning, allocator growth
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return 1e3 * statistics.median(ts)


def zoo(ort, args, only, results) -> bool:
    import torch

    try:
        import onnxruntime as ort_ref
        ref_cuda = "CUDAExecutionProvider" in ort_ref.get_available_providers()
    except Exception:
        ort_ref, ref_cuda = None, False
    print(f"\n== zoo on CUDA (median of {args.runs} runs, ms; onnxruntime-gpu: "
          f"{'yes' if ref_cuda else 'not installed'})")
    head = (f"{'model':14s} {'match':>6s} {'max|diff|':>10s} {'onnxrt cpu':>11s} "
            f"{'onnxrt cuda':>12s} {'iobinding':>10s} {'ort cuda':>9s} {'ratio':>6s}")
    print(head)
    rows = []
    all_ok = True
    for name, path in light_models():
        if only and not any(s in name for s in only):
            continue
        try:
            feeds = light_feeds(path)
            cpu = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
            gpu = ort.InferenceSession(path, providers=cuda_providers(args, use_tf32="0"))
            a, b = cpu.run(None, feeds), gpu.run(None, feeds)
            diff = max(float(np.max(np.abs(x - y))) for x, y in zip(a, b))
            match = all(np.allclose(y, x, rtol=1e-3, atol=1e-5) for x, y in zip(a, b))
            if not match and all(np.ptp(x) == 0 for x in a):
                # tied logits of the light models' synthetic weights: the softmax output is
                # uniform on the CPU and float32 rounding decides it elsewhere; compare logits
                last = gpu._model.graph.node[-1]
                la = cpu.record_values(feeds)[last.input[0]]
                lb = gpu.record_values(feeds)[last.input[0]]
                match = bool(np.allclose(lb, la, rtol=1e-3))
            all_ok &= match
            t_cpu = median_ms(lambda: cpu.run(None, feeds), max(3, args.runs // 4))
            t_gpu = median_ms(lambda: gpu.run(None, feeds), args.runs)
            bind = gpu.io_binding()
            for k, v in feeds.items():
                bind.bind_ortvalue_input(k, ort.OrtValue.ortvalue_from_numpy(
                    v, "cuda", args.device_id))
            for o in gpu.get_outputs():
                bind.bind_output(o.name, "cuda", args.device_id)
            t_bind = median_ms(lambda: gpu.run_with_iobinding(bind), args.runs)
            t_ref = float("nan")
            if ref_cuda:
                rs = ort_ref.InferenceSession(path, providers=[
                    ("CUDAExecutionProvider", {"device_id": args.device_id}),
                    "CPUExecutionProvider"])
                t_ref = median_ms(lambda: rs.run(None, feeds), args.runs)
            ratio = t_gpu / t_ref if ref_cuda else float("nan")
            print(f"{name:14s} {'yes' if match else 'NO':>6s} {diff:10.2e} {t_cpu:11.2f} "
                  f"{t_gpu:12.2f} {t_bind:10.2f} {t_ref:9.2f} {ratio:6.2f}")
            rows.append({"model": name, "match": match, "max_abs_diff": diff,
                         "onnxrt_cpu_ms": t_cpu, "onnxrt_cuda_ms": t_gpu,
                         "onnxrt_cuda_iobinding_ms": t_bind, "onnxruntime_cuda_ms": t_ref})
        except Exception as e:
            all_ok = False
            print(f"{name:14s} ERROR {type(e).__name__}: {e}")
            traceback.print_exc(limit=3)
        torch.cuda.empty_cache()
    ratios = [r["onnxrt_cuda_ms"] / r["onnxruntime_cuda_ms"] for r in rows
              if r["onnxruntime_cuda_ms"] == r["onnxruntime_cuda_ms"]]
    if ratios:
        gm = float(np.exp(np.mean(np.log(ratios))))
        print(f"geometric mean onnxrt CUDA / onnxruntime CUDA: {gm:.2f}")
        results["zoo_geomean_ratio"] = gm
    results["zoo"] = rows
    return all_ok


if __name__ == "__main__":
    sys.exit(main())
