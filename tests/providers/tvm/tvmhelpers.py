"""Shared by the TVM provider's tests: the skip when apache-tvm is absent, sessions with a
cache folder of the test run's own."""

from __future__ import annotations

import atexit
import shutil
import tempfile
from typing import Any

import pytest

import onnxrt as ort
from onnxrt.providers.tvm import TVMExecutionProvider

TVM = "TVMExecutionProvider"
CPU = "CPUExecutionProvider"

needs_tvm = pytest.mark.skipif(
    bool(TVMExecutionProvider.unavailable_reason()),
    reason=f"TVMExecutionProvider: {TVMExecutionProvider.unavailable_reason()}")

# one cache folder per test process: compiled modules are shared between its tests, never
# with the user's ~/.cache
CACHE = tempfile.mkdtemp(prefix="onnxrt-tvm-tests-")
atexit.register(shutil.rmtree, CACHE, True)     # modules hold their weights: vgg19 550 MB


def fresh_cache() -> str:
    """An empty cache folder, removed with CACHE."""
    return tempfile.mkdtemp(dir=CACHE)


def tvm_session(model: Any, **options: Any) -> ort.InferenceSession:
    options.setdefault("so_folder", CACHE)
    data = model if isinstance(model, (str, bytes)) else model.SerializeToString()
    return ort.InferenceSession(data, providers=[(TVM, options), CPU])


def nodes_on(sess: ort.InferenceSession, ep: str = TVM) -> int:
    return sum(len(sg.get_nodes()) for sg in sess.get_provider_graph_assignment_info()
               if sg.ep_name == ep)


__all__ = ["needs_tvm", "tvm_session", "nodes_on", "fresh_cache", "TVM", "CPU", "CACHE"]
