"""The benchmark: onnxrt against onnxruntime (CPU, default options, the same thread count) in
one process, alternating runs on the same inputs.

Per model: median latency of each engine, the ratio onnxrt / onnxruntime, session creation
time of each, peak memory allocated by onnxrt during one run; then the geometric mean of
the ratios. Models: the nine zoo CNNs at batch 1 and 8, a BERT-base-like encoder at batch 1
and 8 (sequence 128), a GPT-2-small-like decoder (sequence 128), and a 1,000-node chain of
tiny element-wise ops for the per-node overhead.

    python benchmarks/run.py [--quick] [--only resnet50,bert_b1] [--json results.json]

Last, in two child processes sharing a new, empty numba cache directory: the session
creation of the models whose kernels numba compiles, first with the cache empty (what the
first session on a new machine pays), then filled (``--only compile`` runs just this).

The BLAS onnxrt's compiled kernels call (MKL with the [mkl] extra installed, else numpy's
OpenBLAS; ONNXRT_BLAS=openblas picks the latter) is printed first and stored in the JSON.
"""

from __future__ import annotations

import os

# idle threads of one engine busy-wait and slow the other: BLAS threads sleep after 4 ms
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import tracemalloc  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort_ref  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import onnxrt as ort  # noqa: E402
import transformer_models as tm  # noqa: E402
from onnxrt.zoo import free_batch, zoo_models  # noqa: E402


def light_input(model: onnx.ModelProto, batch: int) -> dict[str, np.ndarray]:
    init = {t.name for t in model.graph.initializer}
    feeds = {}
    for vi in model.graph.input:
        if vi.name in init:
            continue
        shape = [d.dim_value if d.HasField("dim_value") else 1
                 for d in vi.type.tensor_type.shape.dim]
        shape[0] = batch
        n = int(np.prod(shape))
        feeds[vi.name] = (np.arange(n).reshape(shape) / n).astype(np.float32)
    return feeds


def with_batch(model: onnx.ModelProto, batch: int) -> onnx.ModelProto:
    """The model with a free batch dimension (the zoo files fix it to 1)."""
    return model if batch == 1 else free_batch(model)


def ref_session(data: bytes, threads: int) -> Any:
    so = ort_ref.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return ort_ref.InferenceSession(data, so, providers=["CPUExecutionProvider"])


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    t = time.perf_counter()
    r = fn()
    return r, time.perf_counter() - t


def openvino_session(data: bytes, threads: int) -> Any:
    import warnings

    from onnxrt.providers.openvino import OpenVINOExecutionProvider

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ort.InferenceSession(data, providers=[
            OpenVINOExecutionProvider(num_of_threads=threads), "CPUExecutionProvider"])


def bench(name: str, data: bytes, feeds: dict[str, np.ndarray], runs: int, warmup: int,
          threads: int, providers: list[Any] | None = None,
          openvino: bool = False) -> dict[str, Any]:
    ours, c_ours = timed(lambda: ort.InferenceSession(data, providers=providers))
    ref, c_ref = timed(lambda: ref_session(data, threads))
    ov = None
    if openvino:
        ov, c_ov = timed(lambda: openvino_session(data, threads))
    for _ in range(warmup):
        ours.run(None, feeds)
        ref.run(None, feeds)
        if ov is not None:
            ov.run(None, feeds)
    t_ours, t_ref, t_ov = [], [], []
    a = b = None
    engines = [("ours", ours, t_ours), ("ref", ref, t_ref)]
    if ov is not None:
        engines.append(("ov", ov, t_ov))
    for k in range(runs):
        # rotate which engine runs first: the first after another engine pays for its caches
        for tag, sess, times in engines[k % len(engines):] + engines[:k % len(engines)]:
            res, t = timed(lambda: sess.run(None, feeds))
            times.append(t)
            if tag == "ours":
                a = res
            elif tag == "ref":
                b = res
    tracemalloc.start()
    ours.run(None, feeds)
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    err = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
              for x, y in zip(a, b))
    mo, mr = statistics.median(t_ours), statistics.median(t_ref)
    row = {"model": name, "onnxrt_ms": mo * 1e3, "onnxruntime_ms": mr * 1e3, "ratio": mo / mr,
           "create_onnxrt_ms": c_ours * 1e3, "create_onnxruntime_ms": c_ref * 1e3,
           "create_ratio": c_ours / c_ref, "peak_mb": peak / 2**20, "max_abs_diff": err,
           "runs": runs}
    if ov is not None:
        mv = statistics.median(t_ov)
        row.update(openvino_ms=mv * 1e3, openvino_ratio=mv / mr, create_openvino_ms=c_ov * 1e3)
    return row


def overhead(threads: int, n: int = 1000) -> dict[str, Any]:
    nodes = [onnx.helper.make_node("Neg", [f"v{i}"], [f"v{i + 1}"]) for i in range(n)]
    g = onnx.helper.make_graph(
        nodes, "chain", [onnx.helper.make_tensor_value_info("v0", onnx.TensorProto.FLOAT, [1])],
        [onnx.helper.make_tensor_value_info(f"v{n}", onnx.TensorProto.FLOAT, [1])])
    data = onnx.helper.make_model(g, opset_imports=[onnx.helper.make_opsetid("", 17)],
                                  ir_version=8).SerializeToString()
    r = bench(f"chain{n}", data, {"v0": np.ones(1, np.float32)}, 200, 20, threads)
    r["onnxrt_us_per_node"] = r["onnxrt_ms"] * 1e3 / n
    r["onnxruntime_us_per_node"] = r["onnxruntime_ms"] * 1e3 / n
    return r


# the child process of first_session_compile: one session of each model family whose
# kernels numba compiles (dense, grouped and depthwise convs, pools, matrix products,
# attention, GELUs, layer norms), timed together
_COMPILE_CHILD = """
import sys, time
sys.path.insert(0, sys.argv[1])
t0 = time.perf_counter()
import onnx, onnxrt as ort, transformer_models as tm
from onnxrt.zoo import zoo_models
t1 = time.perf_counter()
zoo = zoo_models()
models = [onnx.load(zoo[n]).SerializeToString() for n in ("resnet50", "shufflenet")]
models += [tm.bert(layers=1).SerializeToString(), tm.gpt2(layers=1).SerializeToString()]
t2 = time.perf_counter()
for m in models:
    ort.InferenceSession(m)
print(t1 - t0, time.perf_counter() - t2)
"""


def first_session_compile() -> dict[str, float]:
    """Session creation for resnet50, shufflenet, a BERT and a GPT-2 layer in a fresh
    process whose numba cache is empty (the first session on a new machine compiles the
    kernels) and again in another with that cache filled (every later process)."""
    import subprocess
    import tempfile
    here = os.path.dirname(os.path.abspath(__file__))
    out: dict[str, float] = {}
    with tempfile.TemporaryDirectory() as cache:
        env = dict(os.environ, NUMBA_CACHE_DIR=cache)
        for tag in ("cold", "warm"):
            r = subprocess.run([sys.executable, "-c", _COMPILE_CHILD, here], env=env,
                               capture_output=True, text=True, check=True)
            imp, create = (float(v) for v in r.stdout.split()[-2:])
            out[f"import_{tag}_s"], out[f"create_{tag}_s"] = imp, create
    return out


def cases(quick: bool) -> list[tuple[str, Callable[[], tuple[bytes, dict[str, Any]]], int]]:
    out = []
    zoo = zoo_models()
    for batch in (1, 8):
        for name, path in zoo.items():
            def make(path: str = path, batch: int = batch) -> tuple[bytes, dict[str, Any]]:
                m = with_batch(onnx.load(path), batch)
                return m.SerializeToString(), light_input(m, batch)
            runs = (5 if quick else 15) if batch == 1 else (3 if quick else 6)
            out.append((f"{name}_b{batch}", make, runs))
    layers = 2 if quick else 12
    for batch in (1, 8):
        def make_bert(batch: int = batch) -> tuple[bytes, dict[str, Any]]:
            return tm.bert(layers=layers).SerializeToString(), tm.bert_inputs(batch)
        out.append((f"bert_b{batch}", make_bert, 3 if quick else (8 if batch == 1 else 4)))

    def make_gpt2() -> tuple[bytes, dict[str, Any]]:
        return tm.gpt2(layers=layers).SerializeToString(), tm.gpt2_inputs()
    out.append(("gpt2_s128", make_gpt2, 3 if quick else 6))
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="fewer runs, 2-layer transformers")
    p.add_argument("--only", default="", help="comma-separated case names")
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", default="benchmark_results.json")
    p.add_argument("--openvino", action="store_true",
                   help="add a column: onnxrt with the OpenVINO provider")
    args = p.parse_args()
    only = {s.strip() for s in args.only.split(",") if s.strip()}
    from onnxrt.providers.cpu import blas
    lib = blas.name(np.float32) or "none"
    print(f"onnxrt's compiled kernels call {lib} (ONNXRT_BLAS; MKL needs the [mkl] extra), "
          f"{args.threads} threads")
    rows = []
    head = (f"{'model':<18} {'onnxrt ms':>10} {'ort ms':>9} {'ratio':>6} {'create':>8} "
            f"{'ort create':>10} {'peak MB':>8} {'max|diff|':>10}"
            + (f" {'OV ms':>9} {'OV ratio':>8}" if args.openvino else ""))
    print(head)
    for name, make, runs in cases(args.quick):
        if only and name not in only:
            continue
        try:
            data, feeds = make()
            r = bench(name, data, feeds, runs, 2, args.threads, openvino=args.openvino)
        except Exception as e:  # a case one engine cannot run is reported, not fatal
            print(f"{name:<18} skipped: {type(e).__name__}: {str(e).splitlines()[0][:100]}")
            rows.append({"model": name, "error": f"{type(e).__name__}: {e}"})
            continue
        rows.append(r)
        print(f"{name:<18} {r['onnxrt_ms']:>10.2f} {r['onnxruntime_ms']:>9.2f} "
              f"{r['ratio']:>6.2f} {r['create_onnxrt_ms']:>8.0f} "
              f"{r['create_onnxruntime_ms']:>10.0f} {r['peak_mb']:>8.1f} "
              f"{r['max_abs_diff']:>10.2e}"
              + (f" {r['openvino_ms']:>9.2f} {r['openvino_ratio']:>8.2f}"
                 if "openvino_ms" in r else ""), flush=True)
    if not only or "chain1000" in only:
        r = overhead(args.threads)
        rows.append(r)
        print(f"{'chain1000':<18} {r['onnxrt_ms']:>10.3f} {r['onnxruntime_ms']:>9.3f} "
              f"{r['ratio']:>6.2f}   per node: onnxrt {r['onnxrt_us_per_node']:.2f} us, "
              f"onnxruntime {r['onnxruntime_us_per_node']:.2f} us")
    compile_s = None
    if not only or "compile" in only:
        compile_s = first_session_compile()
        print(f"first-session compile (resnet50, shufflenet, a BERT and a GPT-2 layer): "
              f"sessions made in {compile_s['create_cold_s']:.1f} s with numba's cache "
              f"empty, {compile_s['create_warm_s']:.1f} s with it filled (import onnxrt "
              f"{compile_s['import_cold_s']:.1f} / {compile_s['import_warm_s']:.1f} s)")
    ok = [r for r in rows if "ratio" in r]
    geo = float(np.exp(np.mean(np.log([r["ratio"] for r in ok])))) if ok else float("nan")
    worst = max(ok, key=lambda r: r["ratio"]) if ok else None
    cgeo = float(np.exp(np.mean(np.log([r["create_ratio"] for r in ok])))) if ok else float("nan")
    print(f"geometric mean of onnxrt/onnxruntime time ratios: {geo:.2f} over {len(ok)} cases; "
          f"worst {worst['model']} {worst['ratio']:.2f}" if worst else "no results")
    print(f"geometric mean of session-creation ratios: {cgeo:.2f}")
    ovr = [r["openvino_ratio"] for r in ok if "openvino_ratio" in r]
    ov_geo = float(np.exp(np.mean(np.log(ovr)))) if ovr else None
    if ov_geo is not None:
        print(f"geometric mean of onnxrt+OpenVINO/onnxruntime ratios: {ov_geo:.2f} "
              f"over {len(ovr)} cases")
    with open(args.json, "w") as f:
        json.dump({"rows": rows, "geomean_ratio": geo, "geomean_create_ratio": cgeo,
                   "geomean_openvino_ratio": ov_geo, "first_session_compile": compile_s,
                   "threads": args.threads, "quick": args.quick, "blas": lib}, f, indent=2)
    print(f"written: {args.json}")


if __name__ == "__main__":
    main()
