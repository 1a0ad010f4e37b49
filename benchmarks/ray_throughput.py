"""Throughput of Ray Data batch inference with onnxrt, 1 and 2 actors, against one
in-process session with 1 and 2 threads.

    python benchmarks/ray_throughput.py [--model squeezenet] [--rows 384] [--batch 16]
        [--address ADDRESS]

Each actor makes one session with 1 intra-op thread and asks Ray for 1 CPU. Rows/s is
measured inside the actors, from the first batch's start to the last batch's end (actor
start-up and session creation left out; the wall time with them is printed too).
``--address`` connects to a running cluster (``ray start --head`` on one machine,
``ray start --address=HEAD:6379`` on the others) instead of starting a local one.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np


class TimedPredictor:
    """OnnxPredictor that notes when each batch started and ended, and where it ran."""

    def __init__(self, **kw):
        from onnxrt.integrations.ray import OnnxPredictor

        self.inner = OnnxPredictor(**kw)

    def __call__(self, batch):
        t0 = time.time()
        out = self.inner(batch)
        n = len(next(iter(out.values())))
        out.pop("data", None)
        out["t0"] = np.full(n, t0)
        out["t1"] = np.full(n, time.time())
        out["pid"] = np.full(n, os.getpid())
        return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="squeezenet")
    ap.add_argument("--rows", type=int, default=384)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--actors", default="1,2")
    ap.add_argument("--address", default=None)
    args = ap.parse_args()

    import onnx
    import ray
    from ray import cloudpickle

    import onnxrt as ort
    from onnxrt.zoo import free_batch, resolve_model

    cloudpickle.register_pickle_by_value(__import__(__name__))
    path = resolve_model(args.model)
    m = onnx.load(path)
    model = (free_batch(m) if path != args.model else m).SerializeToString()
    so = ort.SessionOptions()
    inp = ort.InferenceSession(model, so).get_inputs()[0]
    shape = [d if isinstance(d, int) else 1 for d in inp.shape[1:]]
    x = np.random.default_rng(0).standard_normal((args.rows, *shape)).astype(np.float32)

    for threads in (1, 2):
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        sess = ort.InferenceSession(model, so)
        sess.run(None, {inp.name: x[:args.batch]})
        t = time.perf_counter()
        for i in range(0, args.rows, args.batch):
            sess.run(None, {inp.name: x[i:i + args.batch]})
        dt = time.perf_counter() - t
        print(f"in-process session, {threads} thread(s): {args.rows / dt:.1f} rows/s")

    if args.address:
        ray.init(address=args.address, log_to_driver=False)
    else:
        ray.init(address="local", num_cpus=4, include_dashboard=False, log_to_driver=False,
                 object_store_memory=1 << 30)
    ray.data.DataContext.get_current().enable_progress_bars = False
    print(f"cluster: {len(ray.nodes())} node(s), {ray.cluster_resources().get('CPU')} CPUs")
    blocks = np.array_split(x, max(4, args.rows // (2 * args.batch)))
    for actors in (int(a) for a in args.actors.split(",")):
        ds = ray.data.from_numpy(blocks)
        t = time.perf_counter()
        rows = ds.map_batches(TimedPredictor, fn_constructor_kwargs={
            "model": model, "input_columns": {inp.name: "data"}, "threads": 1},
            concurrency=actors, num_cpus=1, batch_size=args.batch).take_all()
        wall = time.perf_counter() - t
        t0 = min(r["t0"] for r in rows)
        t1 = max(r["t1"] for r in rows)
        pids = {r["pid"] for r in rows}
        print(f"ray, {actors} actor(s) x 1 thread: {len(rows) / (t1 - t0):.1f} rows/s "
              f"(processes used: {len(pids)}; wall with start-up {wall:.1f} s)", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
