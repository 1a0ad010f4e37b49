"""Runs fuzz cases in worker processes (fuzz/worker.py) and judges the outcomes.

Every case runs in a subprocess: a crash (a signal, an abort) or a hang of an engine is a
result of the case, and the worker is started again for the next one. onnxrt runs every
case at two optimization levels and two thread counts; the answers must agree with each
other and with onnxruntime (or both refuse). Where onnxruntime cannot answer (it has no
kernel, or crashes), onnx.reference is the oracle.

Figures go to the file named by ``ONNXRT_FUZZ_REPORT`` (JSON) when it is set.
"""

from __future__ import annotations

import atexit
import base64
import json
import os
import queue
import subprocess
import sys
import threading
from collections import Counter
from typing import Any

import numpy as np

from fuzz.worker import decode, encode

HERE = os.path.dirname(os.path.abspath(__file__))
# generous: the first case of a kernel family may compile it (an empty numba cache: a
# fresh machine), ~15-30 s on a loaded 2-core machine
TIMEOUT = float(os.environ.get("ONNXRT_FUZZ_TIMEOUT", "240"))
# onnxrt's configurations: (optimization level, threads)
CONFIGS = ((0, 1), (99, 2))
# messages that are internal errors leaking out of a kernel, never a clear refusal
INTERNAL = ("NumbaTypeError", "TypingError", "can only specify one unknown", "IndexError",
            "ZeroDivisionError", "KeyError", "AttributeError", "UnboundLocalError",
            "NoneType", "negative dimensions are not allowed", "LoweringError",
            "cannot reshape array", "object of type")


class Worker:
    """One engine in a subprocess, restarted after a crash or a hang."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.proc: subprocess.Popen | None = None
        self.lines: queue.Queue = queue.Queue()

    def _start(self) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(HERE),
                                             env.get("PYTHONPATH", "")])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "fuzz.worker", self.engine], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
        self.lines = queue.Queue()
        t = threading.Thread(target=self._read, args=(self.proc, self.lines), daemon=True)
        t.start()
        first = self.lines.get(timeout=300)
        if first is None:
            raise RuntimeError(f"fuzz worker for {self.engine} failed to start")

    @staticmethod
    def _read(proc: subprocess.Popen, q: queue.Queue) -> None:
        for line in proc.stdout:
            q.put(line)
        q.put(None)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def run(self, req: dict[str, Any], timeout: float = TIMEOUT) -> dict[str, Any]:
        if self.proc is None or self.proc.poll() is not None:
            self._start()
        assert self.proc is not None and self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(req) + "\n")
            self.proc.stdin.flush()
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            self.stop()
            return {"status": "hang"}
        except BrokenPipeError:
            line = None
        if line is None:
            rc = self.proc.wait()
            self.proc = None
            return {"status": "crash", "rc": rc}
        return json.loads(line)


_WORKERS: dict[str, Worker] = {}


def worker(engine: str) -> Worker:
    w = _WORKERS.get(engine)
    if w is None:
        w = _WORKERS[engine] = Worker(engine)
    return w


@atexit.register
def _stop_all() -> None:
    for w in _WORKERS.values():
        w.stop()


# -- figures -----------------------------------------------------------------------------

STATS: Counter = Counter()
DIFFS: Counter = Counter()


def _save_report() -> None:
    path = os.environ.get("ONNXRT_FUZZ_REPORT")
    if not path:
        return
    old: dict[str, Any] = {}
    if os.path.exists(path):
        with open(path) as f:
            old = json.load(f)
    stats = Counter(old.get("stats", {}))
    stats.update(STATS)
    diffs = Counter(old.get("differences", {}))
    diffs.update(DIFFS)
    with open(path, "w") as f:
        json.dump({"stats": dict(stats), "differences": dict(diffs)}, f, indent=1)
    STATS.clear()
    DIFFS.clear()


atexit.register(_save_report)


# -- judging -----------------------------------------------------------------------------

def request(model: bytes, feeds: dict[str, np.ndarray], **kw: Any) -> dict[str, Any]:
    return {"model": base64.b64encode(model).decode(),
            "feeds": {k: encode(v) for k, v in feeds.items()}, **kw}


def _close(a: np.ndarray, b: np.ndarray, rtol: float, atol: float) -> bool:
    a, b = np.asarray(a), np.asarray(b)
    if a.shape != b.shape:
        return False
    if a.dtype.kind in "iub" or b.dtype.kind in "iub":
        return bool(np.array_equal(a, b))
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    if not np.array_equal(np.isnan(a64), np.isnan(b64)):
        return False
    fin = ~np.isnan(a64)
    return bool(np.allclose(a64[fin], b64[fin], rtol=rtol, atol=atol, equal_nan=True))


def same(r1: dict[str, Any], r2: dict[str, Any], rtol: float, atol: float) -> bool:
    o1 = [decode(o) for o in r1["outputs"]]
    o2 = [decode(o) for o in r2["outputs"]]
    return len(o1) == len(o2) and all(_close(a, b, rtol, atol) for a, b in zip(o1, o2))


def clear_refusal(res: dict[str, Any], node: str) -> str | None:
    """Why an onnxrt error is not a clear refusal, or None when it is one: onnxruntime's
    error class, naming the node, no internal error text."""
    if "OnnxRuntimeError" not in res.get("bases", []):
        return f"not an onnxrt error class: {res.get('cls')}: {res.get('msg')}"
    msg = res.get("msg", "")
    for bad in INTERNAL:
        if bad in msg:
            return f"internal error leaked ({bad}): {msg}"
    if node and node not in msg:
        return f"the error does not name node {node!r}: {msg}"
    return None


def judge(model: bytes, feeds: dict[str, np.ndarray], node: str, rtol: float = 1e-4,
          atol: float = 1e-5, label: str = "") -> str | None:
    """Run one case everywhere; None when it passes, else what went wrong (a crash, a
    hang, a wrong answer, an unclear error)."""
    STATS["cases"] += 1
    rs = [worker("onnxrt").run(request(model, feeds, level=lv, threads=t))
          for lv, t in CONFIGS]
    for (lv, t), r in zip(CONFIGS, rs):
        if r["status"] in ("crash", "hang"):
            STATS[r["status"] + "es" if r["status"] == "crash" else "hangs"] += 1
            return f"onnxrt {r['status']} (level {lv}, {t} threads): {r}"
    st = {r["status"] for r in rs}
    if len(st) > 1:
        STATS["wrong answers"] += 1
        return f"onnxrt answers at one configuration and refuses at another: {rs}"
    if rs[0]["status"] == "ok" and not same(rs[0], rs[1], rtol, atol):
        STATS["wrong answers"] += 1
        return "onnxrt's answers differ between optimization levels / thread counts"
    if rs[0]["status"] == "error":
        why = clear_refusal(rs[0], node)
        if why:
            STATS["unclear errors"] += 1
            return why
    ort = worker("onnxruntime").run(request(model, feeds, level=99, threads=1))
    ours = rs[0]
    if ort["status"] == "ok" and ours["status"] == "ok":
        if same(ours, ort, rtol, atol):
            STATS["same answer as onnxruntime"] += 1
            return None
        if _by_definition(label, model, feeds, ours, rtol, atol, ort):
            return None
        ref = worker("reference").run(request(model, feeds))
        if ref["status"] == "ok" and same(ours, ref, rtol, atol):
            STATS["onnxruntime differs, onnx.reference agrees"] += 1
            DIFFS[f"{label}: onnxruntime's answer differs from onnx.reference's"] += 1
            return None
        STATS["wrong answers"] += 1
        return "onnxrt's answer differs from onnxruntime's (and onnx.reference's)"
    if ours["status"] == "error" and ort["status"] == "error":
        STATS["both refuse"] += 1
        return None
    if ours["status"] == "error":
        # onnxrt refuses what onnxruntime computes: only for a named spec violation
        if "is invalid" in ours["msg"]:
            STATS["onnxrt refuses, onnxruntime computes"] += 1
            what = ours["msg"].split("] ", 1)[-1].split(" = ")[0]
            DIFFS[f"{label}: refused ({what}); onnxruntime computes"] += 1
            return None
        STATS["unclear errors"] += 1
        return f"onnxrt refuses what onnxruntime computes: {ours['msg']}"
    # onnxruntime cannot answer: no kernel, a refusal, a crash or a hang
    kind = ort["status"] if ort["status"] != "error" else ort.get("cls", "error")
    if kind == "NotImplemented" and any(v.dtype == np.float64 for v in feeds.values()):
        # no float64 kernel (Conv, ConvTranspose, pools): the float32 model is the oracle
        m32, f32 = _as_float32(model, feeds)
        o32 = worker("onnxruntime").run(request(m32, f32, level=99, threads=1))
        if o32["status"] == "ok" and same(ours, o32, 1e-3, 1e-4):
            STATS["onnxruntime has no float64 kernel, its float32 answer agrees"] += 1
            DIFFS[f"{label}: no float64 kernel in onnxruntime; checked against its float32 "
                  f"answer"] += 1
            return None
    if _by_definition(label, model, feeds, ours, rtol, atol, None):
        return None
    ref = worker("reference").run(request(model, feeds))
    if ref["status"] == "ok":
        if same(ours, ref, rtol, atol):
            STATS[f"onnxruntime {kind}, onnx.reference agrees"] += 1
            DIFFS[f"{label}: onnxruntime {kind}; checked against onnx.reference"] += 1
            return None
        STATS["wrong answers"] += 1
        return f"onnxruntime {kind}; onnxrt's answer differs from onnx.reference's"
    if ort["status"] == "error" and ort.get("cls") != "NotImplemented":
        STATS["wrong answers"] += 1
        return (f"onnxrt answers what onnxruntime ({ort.get('msg', '')[:300]}) and "
                f"onnx.reference refuse")
    STATS[f"onnxrt answers, onnxruntime {kind}, onnx.reference refuses"] += 1
    DIFFS[f"{label}: onnxruntime {kind} and onnx.reference fails; onnxrt answers "
          f"(unverified)"] += 1
    return None


def _by_definition(label: str, model: bytes, feeds: dict[str, np.ndarray],
                   ours: dict[str, Any], rtol: float, atol: float,
                   ort: dict[str, Any] | None) -> bool:
    """Where the oracles are known to be wrong, the pool's definition (fuzz.cases.numpy_pool)
    decides: MaxPool over NaN (onnxruntime's kernels ignore or propagate NaN by path,
    onnx.reference ignores them), MaxPool and LpPool with SAME padding (onnxruntime's
    output shape with dilations or ceil_mode is not the spec's ceil(input / stride); a
    window of padding only is -inf, the max of nothing, where onnx.reference gives NaN),
    LpPool's float16 sums. The shape must be onnxruntime's, or with SAME padding the
    spec's."""
    if label not in ("MaxPool", "LpPool", "AveragePool"):
        return False
    import onnx

    from fuzz.cases import numpy_pool

    node_proto = onnx.load_from_string(model).graph.node[0]
    attrs = {a.name: onnx.helper.get_attribute_value(a) for a in node_proto.attribute}
    ap = attrs.get("auto_pad", b"NOTSET")
    ap = ap.decode() if isinstance(ap, bytes) else ap
    nan = any(np.isnan(v).any() for v in feeds.values())
    if label != "LpPool" and not (label == "MaxPool" and nan) and not ap.startswith("SAME"):
        return False
    y = decode(ours["outputs"][0])
    x = feeds["x"]
    strides = attrs.get("strides") or [1] * (x.ndim - 2)
    if ap.startswith("SAME"):
        shape_ok = list(y.shape[2:]) == [-(-n // s) for n, s in zip(x.shape[2:], strides)]
    else:
        shape_ok = ort is not None and ort["status"] == "ok" and \
            decode(ort["outputs"][0]).shape == y.shape
    kind = {"MaxPool": "max", "LpPool": "lp", "AveragePool": "avg"}[label]
    if not shape_ok or not _close(y, numpy_pool(x, y.shape, attrs, kind), rtol, atol):
        return False
    what = ("MaxPool over NaN: onnxruntime ignores or propagates NaN by kernel path"
            if label == "MaxPool" and nan else
            f"{label} with SAME padding and dilations: onnxruntime's output shape is not the "
            "spec's ceil(input / stride)" if label != "LpPool" else
            "LpPool: onnxruntime's answer differs (SAME padding with ceil_mode or "
            "dilations, float16 sums)")
    STATS[f"{label}: checked against the definition"] += 1
    DIFFS[f"{what}; checked against the definition"] += 1
    return True


def _as_float32(model: bytes, feeds: dict[str, np.ndarray]) -> tuple[bytes, dict]:
    """The model and feeds with every float64 tensor as float32."""
    import onnx
    from onnx import TensorProto, numpy_helper

    m = onnx.load_from_string(model)
    for vi in list(m.graph.input) + list(m.graph.output) + list(m.graph.value_info):
        if vi.type.tensor_type.elem_type == TensorProto.DOUBLE:
            vi.type.tensor_type.elem_type = TensorProto.FLOAT
    for i, t in enumerate(m.graph.initializer):
        if t.data_type == TensorProto.DOUBLE:
            m.graph.initializer[i].CopyFrom(numpy_helper.from_array(
                numpy_helper.to_array(t).astype(np.float32), t.name))
    return m.SerializeToString(), {k: v.astype(np.float32) if v.dtype == np.float64 else v
                                   for k, v in feeds.items()}
