"""A run while another process keeps one core busy: the MLP case (784-512-512-10 at batch
64) on 1 and 2 threads, alone and beside a busy loop pinned to the last core, onnxrt and
onnxruntime alternating in one process. A split whose worker cannot run must not stall the
run (framework/hotpool.py takes unclaimed items back).

    python benchmarks/busy_core.py [--runs 300] [--model mlp|tiny_cnn|mobilenet_v3]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import onnxruntime as ort_ref  # noqa: E402

import onnxrt  # noqa: E402
import torch_models as tmod  # noqa: E402

_BUSY = "import os, sys; os.sched_setaffinity(0, {int(sys.argv[1])})\nwhile True: pass"


def _median_ms(run, runs: int) -> float:
    for _ in range(10):
        run()
    t = []
    for _ in range(runs):
        s = time.perf_counter()
        run()
        t.append(time.perf_counter() - s)
    return statistics.median(t) * 1e3


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--runs", type=int, default=300)
    p.add_argument("--model", default="mlp")
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    data = tmod.image_model(args.model)
    feeds = tmod.image_input(args.model, args.batch)
    from onnxrt.providers.cpu.nn import jit
    getattr(jit, "wait_compiled", lambda: None)()     # (absent before the background compile)
    sessions = {}
    for t in (1, 2):
        so = onnxrt.SessionOptions()
        so.intra_op_num_threads = t
        sessions[f"onnxrt {t}t"] = onnxrt.InferenceSession(data, so)
        ro = ort_ref.SessionOptions()
        ro.intra_op_num_threads = t
        ro.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sessions[f"onnxruntime {t}t"] = ort_ref.InferenceSession(
            data, ro, providers=["CPUExecutionProvider"])
    last = (os.cpu_count() or 2) - 1
    for busy in (False, True):
        child = None
        if busy:
            child = subprocess.Popen([sys.executable, "-c", _BUSY, str(last)])
            time.sleep(0.5)
        try:
            for name, s in sessions.items():
                ms = _median_ms(lambda s=s: s.run(None, feeds), args.runs)
                print(f"{args.model} b{args.batch} {name:<15} "
                      f"{'busy core' if busy else 'idle':<9} {ms:8.3f} ms", flush=True)
        finally:
            if child is not None:
                child.kill()
                child.wait()


if __name__ == "__main__":
    main()
