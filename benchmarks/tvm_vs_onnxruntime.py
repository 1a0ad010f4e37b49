"""onnxrt with the TVM execution provider against onnxruntime's CPU provider and onnxrt's
CPU provider, in one process, alternating runs on the same inputs. Per model: the median
latency of each, the ratio TVM / onnxruntime (median of per-run ratios), the first session
(creation and first run: compiling into an empty cache folder) and a second session from
that cache (each less one run: compiling and loading), nodes on TVM, and the largest
difference from onnxruntime's outputs (the zoo's light models have constant weights: most
of their softmax outputs are ties, so tests/providers/tvm/test_tvm_zoo.py is the check).

    python benchmarks/tvm_vs_onnxruntime.py [squeezenet resnet50 bert_b1 ...] [--runs 3]

Models: the zoo's names, and the transformer cases of cases_transformer.py (bert_b1,
gpt2_s128...; --quick: their quick forms, BERT with 2 layers). Untuned TVM code is slow on
a CPU: keep --runs small.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import warnings  # noqa: E402

import numpy as np  # noqa: E402

import onnxrt as ort  # noqa: E402
from onnxrt.cli.inputs import generate  # noqa: E402
from onnxrt.zoo import zoo_models  # noqa: E402
from run import our_session, ref_session  # noqa: E402  (benchmarks/run.py)

TVM = "TVMExecutionProvider"


def tvm_session(data: bytes, cache: str, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ort.InferenceSession(data, so, providers=[(TVM, {"so_folder": cache}),
                                                         "CPUExecutionProvider"])


def load(name: str, quick: bool = False) -> tuple[bytes, dict | None]:
    zoo = zoo_models()
    if name in zoo:
        with open(zoo[name], "rb") as f:
            return f.read(), None
    import cases_transformer

    for c in cases_transformer.cases(quick=quick):
        if c["name"] == name:
            m = c["model"]()
            data = m if isinstance(m, bytes) else m.SerializeToString()
            return data, c["feeds"]()
    raise SystemExit(f"unknown model {name!r}")


def bench(name: str, runs: int, threads: int, quick: bool = False) -> dict:
    data, feeds = load(name, quick)
    with tempfile.TemporaryDirectory(prefix="onnxrt-tvm-bench-") as cache:
        t = time.perf_counter()
        ours = tvm_session(data, cache, threads)
        if feeds is None:
            feeds = {a.name: generate(a, {}, None) for a in ours.get_inputs()}
        ours.run(None, feeds)                     # compiles (one module per input shape)
        first = time.perf_counter() - t
        t = time.perf_counter()
        again = tvm_session(data, cache, threads)
        again.run(None, feeds)                    # loads the modules from the cache
        second = time.perf_counter() - t
        st = again.get_provider_stats()[TVM]
        assert st["compilations"] == 0, st
        ref = ref_session(data, threads)
        cpu = our_session(data, threads)
        ref.run(None, feeds)
        cpu.run(None, feeds)
        on = sum(len(sg.get_nodes()) for sg in ours.get_provider_graph_assignment_info()
                 if sg.ep_name == TVM)
        total = sum(len(sg.get_nodes()) for sg in ours.get_provider_graph_assignment_info())
        times: dict[str, list[float]] = {"tvm": [], "ort": [], "cpu": []}
        engines = [("tvm", ours), ("ort", ref), ("cpu", cpu)]
        outs = {}
        for k in range(runs):
            for key, s in (engines if k % 2 == 0 else engines[::-1]):
                t = time.perf_counter()
                outs[key] = s.run(None, feeds)
                times[key].append(time.perf_counter() - t)
    err = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
              for x, y in zip(outs["tvm"], outs["ort"]))
    scale = max(float(np.max(np.abs(np.asarray(y, np.float64)))) for y in outs["ort"])
    med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    ratio = statistics.median(a / b for a, b in zip(times["tvm"], times["ort"]))
    return {"model": name, "tvm_ms": med["tvm"], "onnxruntime_ms": med["ort"],
            "onnxrt_cpu_ms": med["cpu"], "ratio_tvm_ort": ratio, "first_session_s": first,
            "second_session_s": second,
            # the session times less one run: compiling, and loading from the cache
            "compile_s": first - med["tvm"] / 1e3, "load_s": second - med["tvm"] / 1e3,
            "nodes_on_tvm": f"{on}/{total}",
            "max_abs_diff": err, "max_abs_output": scale}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    p.add_argument("--json", default="")
    p.add_argument("--quick", action="store_true",
                   help="the transformer cases' quick forms (BERT with 2 layers)")
    args = p.parse_args()
    names = args.models or list(zoo_models())
    rows = []
    print(f"{'model':<14} {'tvm ms':>9} {'ort ms':>8} {'cpu ms':>8} {'tvm/ort':>7} "
          f"{'1st s':>7} {'2nd s':>6} {'compile':>7} {'load':>6} {'on tvm':>8} "
          f"{'max|diff|':>9} {'max|out|':>9}")
    for n in names:
        r = bench(n, args.runs, args.threads, args.quick)
        rows.append(r)
        print(f"{n:<14} {r['tvm_ms']:>9.1f} {r['onnxruntime_ms']:>8.1f} "
              f"{r['onnxrt_cpu_ms']:>8.1f} {r['ratio_tvm_ort']:>7.1f} "
              f"{r['first_session_s']:>7.1f} {r['second_session_s']:>6.2f} "
              f"{r['compile_s']:>7.1f} {r['load_s']:>6.2f} "
              f"{r['nodes_on_tvm']:>8} {r['max_abs_diff']:>9.2e} {r['max_abs_output']:>9.2e}",
              flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
