"""onnxrt bench: latency percentiles, throughput, session creation, peak memory."""

from __future__ import annotations

import argparse
import collections
import json
import os
import resource
import sys
import time
import tracemalloc
from typing import Any

import numpy as np

from onnxrt.cli.common import CliError, make_feeds, open_session


def add_parser(sub: Any) -> None:
    b = sub.add_parser("bench", help="measure latency, throughput and memory")
    b.add_argument("model")
    b.add_argument("--providers", metavar="A,B")
    b.add_argument("--runs", type=int, default=50)
    b.add_argument("--warmup", type=int, default=5)
    b.add_argument("--threads", type=int, default=0)
    b.add_argument("--batch", type=int, default=None)
    b.add_argument("--dim", action="append", metavar="NAME=N")
    b.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    b.add_argument("--json", action="store_true", help="print the results as JSON")
    b.add_argument("--profile", action="store_true", help="also print the top ops by time")
    b.add_argument("--plot", metavar="OUT.png", help="with --profile: draw time per op type "
                                                     "and per provider")
    b.set_defaults(func=cmd_bench)


def _progress(total: int, desc: str, quiet: bool) -> Any:
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, file=sys.stderr, disable=quiet, leave=False, unit="run")


def cmd_bench(args: argparse.Namespace) -> int:
    if args.plot and not args.profile:
        raise CliError("--plot needs --profile")
    sess, path, created = open_session(args.model, args.providers, args.threads,
                                       profile=args.profile, batch=args.batch)
    from onnxrt.framework import warmup
    if warmup.status() == "compiling":
        # a benchmark of the NumPy kernels would mislead: wait (once per machine), then
        # time a session made with the compiled ones
        t = time.perf_counter()
        print("waiting for the CPU kernels to compile (first use on this machine)...",
              file=sys.stderr, flush=True)
        warmup.wait()
        print(f"compiled in {time.perf_counter() - t:.1f} s", file=sys.stderr)
        sess, path, _ = open_session(args.model, args.providers, args.threads,
                                     profile=args.profile, batch=args.batch)
    feeds = make_feeds(sess, args.input, args.dim, args.batch)
    batch = args.batch or _batch_of(feeds)
    bar = _progress(args.warmup + args.runs, "bench", args.json)
    for _ in range(args.warmup):
        sess.run(None, feeds)
        bar.update(1)
    times = []
    for _ in range(args.runs):
        t = time.perf_counter()
        sess.run(None, feeds)
        times.append(time.perf_counter() - t)
        bar.update(1)
    bar.close()
    trace = sess.end_profiling() if args.profile else ""
    tracemalloc.start()
    sess.run(None, feeds)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    ms = np.array(times) * 1e3
    res = {
        "model": path, "providers": sess.get_providers(), "runs": args.runs,
        "warmup": args.warmup, "batch": batch,
        "latency_ms": {"mean": float(ms.mean()), "p50": float(np.percentile(ms, 50)),
                       "p90": float(np.percentile(ms, 90)), "p99": float(np.percentile(ms, 99)),
                       "min": float(ms.min()), "max": float(ms.max())},
        "throughput_per_s": float(batch * len(ms) / (ms.sum() / 1e3)),
        "session_creation_ms": created * 1e3,
        "peak_run_allocations_mb": traced_peak / 2**20,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    if trace:
        res["profile"] = os.path.abspath(trace)
        res["top_ops"] = top_ops(trace)
    if args.json:
        print(json.dumps(res, indent=2))
    else:
        lat = res["latency_ms"]
        print(f"model: {path}")
        print(f"providers: {', '.join(res['providers'])}")
        print(f"latency ms: p50 {lat['p50']:.2f}  p90 {lat['p90']:.2f}  p99 {lat['p99']:.2f}  "
              f"mean {lat['mean']:.2f}  ({args.runs} runs after {args.warmup} warm-up)")
        print(f"throughput: {res['throughput_per_s']:.1f} samples/s (batch {batch})")
        print(f"session creation: {res['session_creation_ms']:.0f} ms")
        print(f"peak memory: {res['peak_run_allocations_mb']:.1f} MB allocated during one run, "
              f"{res['peak_rss_mb']:.0f} MB peak RSS of the process")
        if trace:
            print(f"profile: {trace}")
            print(f"top ops by total time (all {args.warmup + args.runs} profiled runs):")
            for row in res["top_ops"][:10]:
                print(f"  {row['op']:<24} {row['provider']:<28} {row['per_run_ms']:9.2f} ms/run "
                      f"{row['share']:6.1%}  ({row['count']} calls)")
    if args.plot:
        plot(trace, args.plot)
        if not args.json:
            print(f"plot: {args.plot}")
    return 0


def _batch_of(feeds: dict[str, Any]) -> int:
    for v in feeds.values():
        shape = np.shape(v)
        if shape:
            return int(shape[0])
    return 1


def _node_events(trace: str) -> list[dict[str, Any]]:
    with open(trace) as f:
        events = json.load(f)
    return [e for e in events if e.get("cat") == "Node" and e["args"].get("top_level", True)]


def top_ops(trace: str) -> list[dict[str, Any]]:
    """Time per (op type, provider) over the profiled runs, and per run on average."""
    tot: collections.Counter[tuple[str, str]] = collections.Counter()
    cnt: collections.Counter[tuple[str, str]] = collections.Counter()
    for e in _node_events(trace):
        key = (e["args"]["op_name"], e["args"]["provider"])
        tot[key] += e["dur"]
        cnt[key] += 1
    with open(trace) as f:
        runs = max(1, sum(1 for e in json.load(f) if e.get("name") == "model_run"))
    total = sum(tot.values()) or 1
    return [{"op": op, "provider": prov, "total_ms": us / 1e3, "per_run_ms": us / 1e3 / runs,
             "share": us / total, "count": cnt[(op, prov)]} for (op, prov), us in tot.most_common()]


def plot(trace: str, out: str) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise CliError("--plot needs matplotlib: pip install 'onnxrt[plot]'") from None
    rows = top_ops(trace)
    by_op: collections.Counter[str] = collections.Counter()
    by_prov: collections.Counter[str] = collections.Counter()
    for r in rows:
        by_op[r["op"]] += r["total_ms"]
        by_prov[r["provider"]] += r["total_ms"]
    fig, (a, b) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 1]})
    ops = by_op.most_common(15)
    a.barh([k for k, _ in ops][::-1], [v for _, v in ops][::-1], color="tab:blue")
    a.set_xlabel("total time (ms)")
    a.set_title("time per op type")
    provs = by_prov.most_common()
    b.bar([k.replace("ExecutionProvider", "") for k, _ in provs], [v for _, v in provs],
          color="tab:orange")
    b.set_ylabel("total time (ms)")
    b.set_title("time per provider")
    fig.tight_layout()
    fig.savefig(out, dpi=100)
    plt.close(fig)
