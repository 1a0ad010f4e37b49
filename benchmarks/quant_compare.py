"""onnxrt against onnxruntime on the quantized, LLM and batched-MatMul cases
(cases_quantized.py, cases_llm.py, cases_matmul.py), in one process, alternating runs, both
engines at the same thread count (2 by default, onnxruntime's spinning off as in run.py).

    python benchmarks/quant_compare.py [--quick] [--only NAME,CATEGORY,...] [--runs N]
                                       [--threads N] [--no-rss] [--json OUT]

Per case: each engine's median, the ratio onnxrt / onnxruntime (for a stream case, one
stream: an LLM's decode steps, its tokens/s printed too), session creation of each (in this
process, warm), the largest output difference; then, in a fresh child process per engine
(memory.py, skipped with ``--no-rss``), the peak resident memory of creating the session and
running it once (a stream case: creating it only) and the creation time there. Last, the
geometric mean of the ratios per category. Run it under the machine's CPU lock: timings of
a loaded machine mean little."""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import importlib  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402
import onnxruntime as ort_ref  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import memory  # noqa: E402
import onnxrt as ort  # noqa: E402

MODULES = ("cases_quantized", "cases_llm", "cases_matmul")


def _sessions(data: bytes, threads: int) -> tuple[Any, float, Any, float]:
    so = ort_ref.SessionOptions()
    so.intra_op_num_threads = threads
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.add_session_config_entry("session.inter_op.allow_spinning", "0")
    t = time.perf_counter()
    ref = ort_ref.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    t_ref = time.perf_counter() - t
    mo = ort.SessionOptions()
    mo.intra_op_num_threads = threads
    t = time.perf_counter()
    ours = ort.InferenceSession(data, mo, providers=["CPUExecutionProvider"])
    return ours, time.perf_counter() - t, ref, t_ref


def _runner(sess: Any, case: dict[str, Any]) -> Callable[[], Any]:
    if "stream" in case:
        stream = case["stream"]

        def run() -> Any:
            last: list[Any] = [None]

            def one(feeds: dict[str, Any]) -> Any:
                last[0] = sess.run(None, feeds)
                return last[0]
            stream(one)
            return last[0]
        return run
    feeds = case["feeds"]
    return lambda: sess.run(None, feeds)


def _diff(a: list[Any], b: list[Any]) -> float:
    err = 0.0
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        if x.shape != y.shape:
            return float("inf")
        if x.size:
            err = max(err, float(np.max(np.abs(x.astype(np.float64) - y.astype(np.float64)))))
    return err


def bench(case: dict[str, Any], threads: int, runs: int, rss: bool = True) -> dict[str, Any]:
    data = case["model"]() if callable(case["model"]) else case["model"]
    if "feeds" in case and callable(case["feeds"]):
        case = dict(case, feeds=case["feeds"]())
    mem = memory.both(data, case.get("feeds"), threads) if rss else {}
    ours, t_ours, ref, t_ref = _sessions(data, threads)
    run_ours, run_ref = _runner(ours, case), _runner(ref, case)
    out_ours, out_ref = run_ours(), run_ref()      # warm-up, and the outputs compared
    run_ours(), run_ref()
    a, b = [], []
    for _ in range(case.get("runs", runs)):
        t = time.perf_counter()
        run_ours()
        a.append(time.perf_counter() - t)
        t = time.perf_counter()
        run_ref()
        b.append(time.perf_counter() - t)
    ma, mb = statistics.median(a), statistics.median(b)
    res = {"name": case["name"], "category": case["category"], "onnxrt_ms": ma * 1e3,
           "onnxruntime_ms": mb * 1e3, "ratio": ma / mb, "create_onnxrt_s": t_ours,
           "create_onnxruntime_s": t_ref, "max_diff": _diff(out_ours, out_ref), **mem}
    if "tokens" in case:
        res["onnxrt_tok_s"] = case["tokens"] / ma
        res["onnxruntime_tok_s"] = case["tokens"] / mb
    return res


def collect(quick: bool, only: set[str]) -> list[dict[str, Any]]:
    out = []
    for mod_name in MODULES:
        try:
            mod = importlib.import_module(mod_name)
        except ImportError as e:
            print(f"{mod_name}: skipped ({e}; pip install -e '.[bench]')")
            continue
        for c in mod.cases(quick):
            if not only or c["name"] in only or c["category"] in only:
                out.append(c)
    return out


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true")
    p.add_argument("--only", default="")
    p.add_argument("--runs", type=int, default=10)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--no-rss", action="store_true",
                   help="skip the peak-RSS and creation children")
    p.add_argument("--json", default="")
    args = p.parse_args()
    only = {s for s in args.only.split(",") if s}
    from onnxrt.framework import warmup
    if not warmup.wait(1800):   # time the compiled kernels, as a user's later sessions do
        print(f"compiled kernels unavailable ({warmup.status()}): the NumPy kernels run")
    results = []
    print(f"{'case':24} {'onnxrt ms':>10} {'ort ms':>9} {'ratio':>6} {'create':>13} "
          f"{'max diff':>9} {'peak RSS MB':>15} {'child create s':>15}")
    for case in collect(args.quick, only):
        try:
            r = bench(case, args.threads, args.runs, not args.no_rss)
        except Exception as e:      # one broken case must not hide the others
            print(f"{case['name']:24} FAILED: {type(e).__name__}: {str(e)[:200]}")
            continue
        results.append(r)
        extra = ""
        if "rss_onnxrt_mb" in r:
            extra += (f" {r['rss_onnxrt_mb']:7.0f}/{r['rss_onnxruntime_mb']:<7.0f}"
                      f" {r['create_child_onnxrt_s']:7.2f}/{r['create_child_onnxruntime_s']:<6.2f}")
        if "onnxrt_tok_s" in r:
            extra += f"  tok/s {r['onnxrt_tok_s']:.1f} vs {r['onnxruntime_tok_s']:.1f}"
        print(f"{r['name']:24} {r['onnxrt_ms']:10.2f} {r['onnxruntime_ms']:9.2f} "
              f"{r['ratio']:6.2f} {r['create_onnxrt_s']:6.2f}/{r['create_onnxruntime_s']:5.2f}s"
              f" {r['max_diff']:9.2g}{extra}", flush=True)
    for key, what in (("ratio", "time"), ("rss_ratio", "peak RSS"),
                      ("create_child_ratio", "creation (child)")):
        cats: dict[str, list[float]] = {}
        for r in results:
            if key in r:
                cats.setdefault(r["category"], []).append(r[key])
        for cat, rs in cats.items():
            g = math.exp(sum(math.log(x) for x in rs) / len(rs))
            print(f"geomean {what} {cat}: {g:.2f}x over {len(rs)} cases (max {max(rs):.2f}x)")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
