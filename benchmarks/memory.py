"""Peak resident memory and session creation of one engine on one model, each measured in a
fresh child process that imports only that engine (and NumPy), so neither engine's
libraries nor the benchmark's own model building count against the other.

    peak_rss(model_bytes, feeds, "onnxrt" | "onnxruntime", threads) -> dict

The child reports the process's resident set after the import (``base_mb``), the time to
create the session (``create_s``), and the peak resident set (``VmHWM``) after creating
the session and running it once on ``feeds`` (``peak_mb``; without feeds, after creation
only)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from typing import Any

import numpy as np

_CHILD = r"""
import json, os, sys, time
engine, model_path, feeds_path, threads = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
import numpy as np
def status_mb(key):
    # VmHWM, not ru_maxrss: the latter keeps the forking parent's peak across exec
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(key + " missing from /proc/self/status")
def rss_mb():
    return status_mb("VmRSS")
if engine == "onnxruntime":
    import onnxruntime as rt
    so = rt.SessionOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    kw = {"providers": ["CPUExecutionProvider"]}
else:
    import onnxrt as rt
    so = rt.SessionOptions()
    kw = {"providers": ["CPUExecutionProvider"]}
so.intra_op_num_threads = threads
with open(model_path, "rb") as f:
    data = f.read()
base = rss_mb()
t = time.perf_counter()
sess = rt.InferenceSession(data, so, **kw)
create = time.perf_counter() - t
del data
if feeds_path:
    feeds = dict(np.load(feeds_path))
    sess.run(None, feeds)
peak = status_mb("VmHWM")
print("RESULT " + json.dumps({"base_mb": base, "create_s": create, "peak_mb": peak,
                              "end_mb": rss_mb()}))
"""


def peak_rss(model: bytes, feeds: dict[str, np.ndarray] | None, engine: str,
             threads: int = 2, timeout: float = 900) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as d:
        mp = os.path.join(d, "model.onnx")
        with open(mp, "wb") as f:
            f.write(model)
        fp = ""
        if feeds is not None:
            fp = os.path.join(d, "feeds.npz")
            np.savez(fp, **{k: np.asarray(v) for k, v in feeds.items()})
        r = subprocess.run([sys.executable, "-c", _CHILD, engine, mp, fp, str(threads)],
                           capture_output=True, text=True, timeout=timeout)
    line = [ln for ln in r.stdout.splitlines() if ln.startswith("RESULT ")]
    if r.returncode != 0 or not line:
        tail = (r.stderr.strip().splitlines() or ["?"])[-1]
        raise RuntimeError(f"{engine}: the memory child failed ({tail})")
    return json.loads(line[-1][len("RESULT "):])


def both(model: bytes, feeds: dict[str, np.ndarray] | None,
         threads: int = 2) -> dict[str, float]:
    """onnxrt's and onnxruntime's peak RSS (MB) and creation (s), and their ratios."""
    ours = peak_rss(model, feeds, "onnxrt", threads)
    ref = peak_rss(model, feeds, "onnxruntime", threads)
    return {"rss_onnxrt_mb": ours["peak_mb"], "rss_onnxruntime_mb": ref["peak_mb"],
            "rss_ratio": ours["peak_mb"] / ref["peak_mb"],
            "base_onnxrt_mb": ours["base_mb"], "base_onnxruntime_mb": ref["base_mb"],
            "create_child_onnxrt_s": ours["create_s"],
            "create_child_onnxruntime_s": ref["create_s"],
            "create_child_ratio": ours["create_s"] / ref["create_s"]}
