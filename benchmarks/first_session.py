"""A new user's first session: creation time of one model in a child process whose compile
caches are empty (numba's and onnxrt's, fresh temporary folders), against onnxruntime's
creation in a child process, alternating; the median of ``--repeat`` rounds each.

    python benchmarks/first_session.py [MODEL.onnx] [--repeat 3]

The default model is the one ``onnxrt run resnet50`` runs (onnx's light ResNet-50). The
background compiler that onnxrt's first session starts (framework/warmup.py) is stopped as
soon as the session exists, so that it does not load the machine for the next round. Take
timings under the machine's CPU lock."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

_CHILD = r"""
import json, os, signal, sys, time
t0 = time.perf_counter()
if sys.argv[1] == "onnxrt":
    import onnxrt as rt
else:
    import onnxruntime as rt
t1 = time.perf_counter()
s = rt.InferenceSession(sys.argv[2], providers=["CPUExecutionProvider"])
t2 = time.perf_counter()
out = {"import_s": t1 - t0, "create_s": t2 - t1}
if sys.argv[1] == "onnxrt":
    from onnxrt.framework import warmup
    child = warmup._STATE.get("child")
    if child is not None:
        os.killpg(child.pid, signal.SIGTERM)
print(json.dumps(out))
"""


def _default_model() -> str:
    import onnx.backend.test

    return os.path.join(os.path.dirname(onnx.backend.test.__file__), "data", "light",
                        "light_resnet50.onnx")


def _once(engine: str, model: str) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, NUMBA_CACHE_DIR=os.path.join(d, "numba"),
                   ONNXRT_CACHE_DIR=os.path.join(d, "onnxrt"))
        env.pop("ONNXRT_JIT", None)         # the default (background) mode a user gets
        r = subprocess.run([sys.executable, "-c", _CHILD, engine, model], env=env,
                           capture_output=True, text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("model", nargs="?", default=None)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    model = args.model or _default_model()
    rows: dict[str, list[dict[str, float]]] = {"onnxrt": [], "onnxruntime": []}
    for _ in range(args.repeat):
        for engine in rows:
            rows[engine].append(_once(engine, model))
    med = {}
    for engine, rs in rows.items():
        med[engine] = statistics.median(r["create_s"] for r in rs)
        imp = statistics.median(r["import_s"] for r in rs)
        runs = ", ".join(f"{r['create_s'] * 1000:.0f}" for r in rs)
        print(f"{engine:12s} creation {med[engine] * 1000:7.0f} ms  import {imp * 1000:5.0f} ms"
              f"  (runs: {runs})")
    print(f"creation ratio onnxrt/onnxruntime: {med['onnxrt'] / med['onnxruntime']:.2f}")


if __name__ == "__main__":
    main()
