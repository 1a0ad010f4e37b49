"""onnxrt with the oneDNN (DNNL) execution provider against onnxrt's CPU provider and
onnxruntime's CPU provider on the zoo CNNs, in one process, rotating which engine runs first
on the same inputs; prints per model the median latency of each engine, the ratios
DNNL / onnxruntime and DNNL / onnxrt-CPU (medians of the per-round ratios), DNNL's session
creation time and the largest difference from onnxruntime's outputs.

    python benchmarks/dnnl_vs_onnxruntime.py [resnet50 squeezenet ...] [--runs 10] [--batch 8]
    python benchmarks/dnnl_vs_onnxruntime.py --transformers [bert_b1 gpt2_s128 ...]

Models: the zoo's names (free batch with --batch), and with --transformers the cases of
cases_transformer.py (bert_b1, bert_b8, gpt2_s128, vit_s16_b1, minilm_b1_s32,
minilm_b8_s64; their own inputs; all of them when none is named).
"""

from __future__ import annotations

import os

# idle worker threads of one engine must not spin while another engine runs
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402

import onnxrt as ort  # noqa: E402
from onnxrt.cli.inputs import generate  # noqa: E402
from onnxrt.providers.cpu.nn import jit  # noqa: E402
from onnxrt.zoo import free_batch, zoo_models  # noqa: E402
from run import our_session, ref_session  # noqa: E402  (benchmarks/run.py)


def dnnl_session(data: bytes, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(data, so, providers=[
        ("DnnlExecutionProvider", dnnl_options(threads)), "CPUExecutionProvider"])


def dnnl_options(threads: int) -> dict:
    """num_of_threads where the library's threads are OpenMP's (the SYCL build refuses it:
    its CPU threads belong to the OpenCL runtime)."""
    from onnxrt.providers.dnnl import library

    return {"num_of_threads": threads} if library.load().cpu_runtime == "OpenMP" else {}


def transformer_cases() -> dict:
    import cases_transformer

    return {c["name"]: c for c in cases_transformer.cases()}


def load(name: str, path: str | None, batch: int) -> tuple[bytes, dict | None]:
    if path is not None:
        model = onnx.load(path)
        return (model if batch == 1 else free_batch(model)).SerializeToString(), None
    case = transformer_cases()[name]
    m = case["model"]()
    return (m if isinstance(m, bytes) else m.SerializeToString()), case["feeds"]()


def bench(name: str, path: str | None, runs: int, warmup: int, batch: int,
          threads: int) -> dict:
    data, feeds = load(name, path, batch)
    t = time.perf_counter()
    dn = dnnl_session(data, threads)
    if feeds is None:
        feeds = {a.name: generate(a, {}, batch) for a in dn.get_inputs()}
    dn.run(None, feeds)   # the first run builds the primitives for this shape
    create = time.perf_counter() - t
    # the CPU provider's kernels compile in the background once per source change: its
    # session is made once they are in place
    jit.wait_compiled(900)
    cpu = our_session(data, threads)
    ref = ref_session(data, threads)
    info = dn.get_provider_graph_assignment_info()
    on = sum(len(g.get_nodes()) for g in info if g.ep_name == "DnnlExecutionProvider")
    total = sum(len(g.get_nodes()) for g in info)
    engines = [dn, cpu, ref]
    times: list[list[float]] = [[], [], []]
    outs: list[object] = [None, None, None]
    for _ in range(warmup):
        for e in engines:
            e.run(None, feeds)
    for k in range(runs):
        order = [(k + i) % 3 for i in range(3)]   # each engine leads a third of the rounds
        for i in order:
            t = time.perf_counter()
            outs[i] = engines[i].run(None, feeds)
            times[i].append(time.perf_counter() - t)
    err = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
              for x, y in zip(outs[0], outs[2]))
    scale = max(float(np.max(np.abs(np.asarray(y, np.float64)))) for y in outs[2])
    md, mc, mr = (statistics.median(t) for t in times)
    return {"model": name, "batch": batch if path is not None else None, "dnnl_ms": md * 1e3,
            "onnxrt_cpu_ms": mc * 1e3,
            "onnxruntime_ms": mr * 1e3,
            "dnnl_over_ort": statistics.median(a / b for a, b in zip(times[0], times[2])),
            "dnnl_over_cpu": statistics.median(a / b for a, b in zip(times[0], times[1])),
            "create_and_first_run_ms": create * 1e3, "nodes_on_dnnl": f"{on}/{total}",
            "max_rel_diff": err / scale if scale else err}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", default="")
    p.add_argument("--transformers", action="store_true",
                   help="the transformer cases of cases_transformer.py instead of the zoo")
    args = p.parse_args()
    zoo = {} if args.transformers else zoo_models()
    names = args.models or list(zoo or transformer_cases())
    rows = []
    print(f"{'model':<14} {'dnnl ms':>9} {'cpu ms':>9} {'ort ms':>9} {'d/ort':>6} {'d/cpu':>6} "
          f"{'create ms':>9} {'on dnnl':>9} {'rel diff':>9}")
    for n in names:
        r = bench(n, zoo.get(n), args.runs, args.warmup, args.batch, args.threads)
        rows.append(r)
        print(f"{n:<14} {r['dnnl_ms']:>9.2f} {r['onnxrt_cpu_ms']:>9.2f} "
              f"{r['onnxruntime_ms']:>9.2f} {r['dnnl_over_ort']:>6.2f} "
              f"{r['dnnl_over_cpu']:>6.2f} {r['create_and_first_run_ms']:>9.0f} "
              f"{r['nodes_on_dnnl']:>9} {r['max_rel_diff']:>9.1e}", flush=True)
    for key in ("dnnl_over_ort", "dnnl_over_cpu"):
        geo = float(np.exp(np.mean(np.log([r[key] for r in rows]))))
        print(f"geometric mean {key}: {geo:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows}, f, indent=2)


if __name__ == "__main__":
    main()
