"""Sequence and classic-ML cases on onnxrt and onnxruntime in one process, alternating.

    python benchmarks/seqml_compare.py [--quick] [--only lstm,knn] [--threads 2]
        [--category sequence] [--budget 1.0] [--json out.json]

Both engines get ``--threads`` intra-op threads (onnxruntime without spinning, as in
benchmarks/run.py). Per case: the median time of one run of each engine (for a streaming
case one chunk: a call of its ``stream`` divided by its number of chunks), the
ratio onnxrt / onnxruntime, and the largest difference between their outputs (ZipMap's
dictionaries compared value by value); then the geometric mean of the ratios per category.
Runs alternate between the engines, the first of each round rotating, until each has spent
about ``--budget`` seconds on the case (at least 5 rounds). Cases come from
benchmarks/cases_sequence.py and benchmarks/cases_classic_ml.py.
"""

from __future__ import annotations

import os

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from typing import Any, Callable  # noqa: E402

import numpy as np  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def _sessions(data: bytes, threads: int) -> tuple[Any, Any]:
    import onnxruntime as ort_ref

    import onnxrt

    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = threads
    ours = onnxrt.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    ro = ort_ref.SessionOptions()
    ro.intra_op_num_threads = threads
    ro.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ro.add_session_config_entry("session.inter_op.allow_spinning", "0")
    ro.log_severity_level = 3   # converters declare label shapes [1]: ort warns every run
    ref = ort_ref.InferenceSession(data, ro, providers=["CPUExecutionProvider"])
    return ours, ref


def _diff(a: Any, b: Any) -> float:
    """Largest absolute difference between two outputs (arrays, lists of dicts)."""
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return float("inf")
        return max((_diff(x, y) for x, y in zip(a, b)), default=0.0)
    if isinstance(a, dict) and isinstance(b, dict):
        if set(a) != set(b):
            return float("inf")
        return max((abs(float(a[k]) - float(b[k])) for k in a), default=0.0)
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return float("inf")
    if a.dtype.kind in "OUS" or b.dtype.kind in "OUS":
        return 0.0 if np.array_equal(a, b) else float("inf")
    if a.size == 0:
        return 0.0
    return float(np.max(np.abs(a.astype(np.float64) - b.astype(np.float64))))


def _label_mismatch(a: Any, b: Any) -> int:
    """How many integer/string labels differ (a tie near a threshold may flip a few)."""
    if isinstance(a, list) or isinstance(b, list):     # ZipMap's dictionaries: no labels
        return 0
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape or a.dtype.kind not in "iuOUS":
        return 0
    return int(np.count_nonzero(a != b))


def run_case(case: dict[str, Any], threads: int, budget: float) -> dict[str, Any]:
    ours, ref = _sessions(case["model"], threads)
    feeds = case["feeds"]
    stream = case.get("stream")
    chunks = int(case.get("chunks", 1))
    if stream is not None:
        def call(sess: Any) -> Callable[[], Any]:
            return lambda: stream(lambda f: sess.run(None, f))
        per = chunks
    else:
        def call(sess: Any) -> Callable[[], Any]:
            return lambda: sess.run(None, feeds)
        per = 1
    engines = [("onnxrt", call(ours), []), ("onnxruntime", call(ref), [])]
    for _, fn, _t in engines:   # warm-up
        fn()
    spent = 0.0
    rounds = 0
    while rounds < 5 or (spent < 2 * budget and rounds < 2000):
        order = engines[rounds % 2:] + engines[:rounds % 2]
        for _, fn, times in order:
            t = time.perf_counter()
            fn()
            dt = time.perf_counter() - t
            times.append(dt)
            spent += dt
        rounds += 1
    a = ours.run(None, feeds)
    b = ref.run(None, feeds)
    t_ours = statistics.median(engines[0][2]) / per
    t_ref = statistics.median(engines[1][2]) / per
    return {"name": case["name"], "category": case["category"],
            "onnxrt_ms": t_ours * 1e3, "onnxruntime_ms": t_ref * 1e3,
            "ratio": t_ours / t_ref, "rounds": rounds,
            "max_abs_diff": max((_diff(x, y) for x, y in zip(a, b)), default=0.0),
            "label_mismatch": sum(_label_mismatch(x, y) for x, y in zip(a, b))}


def _geo(vals: list[float]) -> float:
    return float(np.exp(np.mean(np.log(vals)))) if vals else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="smaller models, shorter sequences")
    p.add_argument("--only", default="", help="comma-separated substrings of case names")
    p.add_argument("--category", default="", help="sequence or classic_ml")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--budget", type=float, default=1.0, help="seconds per engine per case")
    p.add_argument("--json", default="")
    args = p.parse_args()
    import cases_classic_ml
    import cases_sequence

    from onnxrt.framework import warmup

    # the kernels compile in the background on a new machine (or after an edit of the
    # sources): time the compiled ones, not the NumPy fallbacks
    if warmup.status() not in ("ready", "off"):
        print("waiting for onnxrt's kernels to compile...", flush=True)
    if not warmup.wait(1800):
        print(f"compiled kernels unavailable ({warmup.status()}): the NumPy kernels run")
    only = [s.strip() for s in args.only.split(",") if s.strip()]
    rows: list[dict[str, Any]] = []
    print(f"{'case':<28} {'onnxrt ms':>10} {'ort ms':>9} {'ratio':>6} {'max|diff|':>9} "
          f"{'labels':>6}", flush=True)
    for mod in (cases_sequence, cases_classic_ml):
        if args.category and mod.CATEGORY != args.category:
            continue
        for case in mod.cases(args.quick):
            if only and not any(s in case["name"] for s in only):
                continue
            try:
                r = run_case(case, args.threads, args.budget)
            except Exception as e:      # a case one engine cannot run is reported, not fatal
                msg = str(e).splitlines()[0][:110] if str(e) else ""
                print(f"{case['name']:<28} failed: {type(e).__name__}: {msg}", flush=True)
                rows.append({"name": case["name"], "category": case["category"],
                             "error": f"{type(e).__name__}: {e}"})
                continue
            rows.append(r)
            print(f"{r['name']:<28} {r['onnxrt_ms']:>10.3f} {r['onnxruntime_ms']:>9.3f} "
                  f"{r['ratio']:>6.2f} {r['max_abs_diff']:>9.2e} {r['label_mismatch']:>6}",
                  flush=True)
    cats = sorted({r["category"] for r in rows})
    summary = {}
    for c in cats:
        ok = [r for r in rows if r["category"] == c and "ratio" in r]
        if not ok:
            continue
        worst = max(ok, key=lambda r: r["ratio"])
        summary[c] = _geo([r["ratio"] for r in ok])
        print(f"{c}: geometric mean {summary[c]:.2f} over {len(ok)} cases; worst "
              f"{worst['name']} {worst['ratio']:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"rows": rows, "geomean": summary, "threads": args.threads}, f,
                      indent=2)
        print(f"written: {args.json}")


if __name__ == "__main__":
    main()
