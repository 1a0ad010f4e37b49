"""Load test of `onnxrt serve`: throughput and latency percentiles with and without dynamic
batching, from an asyncio client (tritonclient.http.aio) on the same machine.

    python benchmarks/serve_load.py [--model squeezenet] [--concurrency 1,8]
        [--requests 300] [--max-batch 8] [--timeout-ms 2] [--threads 2] [--json out.json]

The model is a zoo model (its batch dimension freed) or a path; each request is one
sample (batch 1) sent as binary tensors. For each server configuration a fresh
`onnxrt serve` subprocess on 127.0.0.1; for each concurrency level, that many client
tasks send requests back to back. The client shares the cores with the server: the
numbers are for this machine as a whole, the ratios between rows are what to read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import tempfile
import time
import urllib.request

import numpy as np


def make_repo(model: str, root: str) -> tuple[str, str]:
    import onnx

    from onnxrt.zoo import free_batch, resolve_model

    path = resolve_model(model)
    m = onnx.load(path)
    if path != model:
        m = free_batch(m)
    name = "model"
    os.makedirs(os.path.join(root, name, "1"))
    onnx.save(m, os.path.join(root, name, "1", "model.onnx"))
    return root, name


def start(repo: str, args: list[str]) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "onnxrt.cli.main", "serve", repo, "--port",
                             "0", "--no-grpc", "--log-level", "warning", *args],
                            stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    m = re.search(r"http://([\d.]+:\d+)", line)
    if not m:
        proc.kill()
        raise RuntimeError(f"server did not start: {line!r}")
    url = m.group(1)
    for _ in range(600):
        try:
            with urllib.request.urlopen(f"http://{url}/v2/health/ready", timeout=5):
                return proc, url
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("server not ready")


def batch_stats(url: str, name: str) -> tuple[float, float]:
    text = urllib.request.urlopen(f"http://{url}/metrics").read().decode()
    def value(metric: str) -> float:
        m = re.search(rf'^{metric}\{{model="{name}",version="1"\}} (\S+)', text, re.M)
        return float(m.group(1)) if m else 0.0
    return value("onnxrt_batch_size_count"), value("onnxrt_batch_size_sum")


async def drive(url: str, name: str, sample: np.ndarray, input_name: str, datatype: str,
                concurrency: int, requests: int) -> tuple[float, list[float]]:
    import tritonclient.http.aio as aio
    import tritonclient.http as th

    client = aio.InferenceServerClient(url, conn_limit=concurrency)
    latencies: list[float] = []
    left = requests

    async def one() -> None:
        t = th.InferInput(input_name, list(sample.shape), datatype)
        t.set_data_from_numpy(sample)
        t0 = time.perf_counter()
        await client.infer(name, [t])
        latencies.append(time.perf_counter() - t0)

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await one()

    try:
        for _ in range(max(4, concurrency)):       # warm-up: connections, first runs
            await one()
        latencies.clear()
        t = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - t
    finally:
        await client.close()
    return wall, latencies


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--concurrency", default="1,8")
    ap.add_argument("--requests", type=int, default=300)
    ap.add_argument("--max-batch", type=int, default=8)
    ap.add_argument("--timeout-ms", type=float, default=2.0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", default="")
    args = ap.parse_args()

    import onnxrt as ort

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        repo, name = make_repo(args.model, tmp)
        sess = ort.InferenceSession(os.path.join(repo, name, "1", "model.onnx"))
        inp = sess.get_inputs()[0]
        shape = [1] + [d if isinstance(d, int) else 1 for d in inp.shape[1:]]
        sample = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
        # the session alone, for scale: batch 1 and batch max_batch, per sample
        for b in (1, args.max_batch):
            feeds = {inp.name: np.repeat(sample, b, axis=0)}
            for _ in range(3):
                sess.run(None, feeds)
            t = time.perf_counter()
            n = max(5, 40 // b)
            for _ in range(n):
                sess.run(None, feeds)
            per = (time.perf_counter() - t) / n
            print(f"in-process session, batch {b}: {per * 1e3:.2f} ms a run, "
                  f"{b / per:.1f} samples/s")
        del sess
        configs = [("no batching", []),
                   (f"--max-batch {args.max_batch} --batch-timeout-ms {args.timeout_ms:g}",
                    ["--max-batch", str(args.max_batch), "--batch-timeout-ms",
                     str(args.timeout_ms)])]
        for label, extra in configs:
            proc, url = start(repo, ["--threads", str(args.threads), *extra])
            try:
                for c in (int(v) for v in args.concurrency.split(",")):
                    runs0, rows0 = batch_stats(url, name)
                    wall, lat = asyncio.run(drive(url, name, sample, inp.name, "FP32", c,
                                                  args.requests))
                    runs1, rows1 = batch_stats(url, name)
                    lat_ms = np.array(lat) * 1e3
                    row = {"server": label, "concurrency": c, "requests": len(lat),
                           "throughput_rps": len(lat) / wall,
                           "p50_ms": float(np.percentile(lat_ms, 50)),
                           "p99_ms": float(np.percentile(lat_ms, 99)),
                           "mean_batch": (rows1 - rows0) / max(1.0, runs1 - runs0)}
                    rows.append(row)
                    print(f"{label:<36} concurrency {c:>3}: {row['throughput_rps']:7.1f} req/s"
                          f"  p50 {row['p50_ms']:7.2f} ms  p99 {row['p99_ms']:7.2f} ms"
                          f"  mean batch {row['mean_batch']:.2f}", flush=True)
            finally:
                proc.terminate()
                proc.wait(30)
    print()
    print("| server | concurrency | throughput req/s | p50 ms | p99 ms | mean batch |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['server']} | {r['concurrency']} | {r['throughput_rps']:.1f} | "
              f"{r['p50_ms']:.1f} | {r['p99_ms']:.1f} | {r['mean_batch']:.2f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
