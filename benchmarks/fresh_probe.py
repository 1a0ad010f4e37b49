"""What one session costs a fresh process, stage by stage: resident memory (VmRSS, VmHWM)
and time after importing the engine, creating the session and its first two runs, and
whether numba, llvmlite and scipy.linalg were loaded. Run it once per engine, each in its
own process (this script is that process):

    python benchmarks/fresh_probe.py MODEL.onnx [--engine onnxrt|onnxruntime]
                                                [--threads N] [--modules]

Inputs are random (float) or ones (integer), symbolic dims set to 1; ``--modules`` lists
the onnxrt modules the session creation imported. Take timings under the machine's CPU
lock; the megabytes do not depend on load."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any


def _status_mb(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"{key} missing from /proc/self/status")


def _mark(what: str, t0: float) -> None:
    print(f"{what:10} rss {_status_mb('VmRSS'):6.0f} MB  peak {_status_mb('VmHWM'):6.0f} MB"
          f"  {time.perf_counter() - t0:7.3f} s", flush=True)


def _loaded() -> str:
    return ", ".join(f"{m} {'yes' if m in sys.modules else 'no'}"
                     for m in ("numba", "llvmlite", "scipy.linalg"))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("model")
    p.add_argument("--engine", default="onnxrt", choices=("onnxrt", "onnxruntime"))
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--modules", action="store_true")
    args = p.parse_args()
    t = time.perf_counter()
    import numpy as np
    _mark("numpy", t)
    t = time.perf_counter()
    rt: Any
    if args.engine == "onnxruntime":
        import onnxruntime as rt
    else:
        import onnxrt as rt
    _mark("import", t)
    before = set(sys.modules)
    with open(args.model, "rb") as f:
        data = f.read()
    so = rt.SessionOptions()
    so.intra_op_num_threads = args.threads
    if args.engine == "onnxruntime":
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    t = time.perf_counter()
    sess = rt.InferenceSession(data, so, providers=["CPUExecutionProvider"])
    _mark("create", t)
    del data
    print(f"           loaded: {_loaded()}")
    ints = {"tensor(int64)": np.int64, "tensor(int32)": np.int32}
    feeds = {}
    for i in sess.get_inputs():
        shape = [d if isinstance(d, int) else 1 for d in i.shape]
        if i.type in ints:
            feeds[i.name] = np.ones(shape, ints[i.type])
        else:
            feeds[i.name] = np.random.default_rng(0).random(shape).astype(np.float32)
    for k in (1, 2):
        t = time.perf_counter()
        sess.run(None, feeds)
        _mark(f"run {k}", t)
    print(f"           loaded: {_loaded()}")
    if args.modules:
        print("\n".join(sorted(m for m in set(sys.modules) - before
                               if m.startswith("onnxrt"))))


if __name__ == "__main__":
    main()
