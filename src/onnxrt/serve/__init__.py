"""``onnxrt serve``: an Open Inference Protocol (KServe v2, as Triton speaks it) server for
onnxrt sessions, over HTTP/REST and gRPC, with dynamic batching and Prometheus metrics.
Needs the ``serve`` extra: ``pip install 'onnxrt[serve]'``.

    from onnxrt.serve import InferenceServer, ModelRepository, create_app
    app = create_app(InferenceServer(ModelRepository.from_path("models/")))
"""

from __future__ import annotations

from onnxrt.serve.core import BatchingConfig, InferenceServer
from onnxrt.serve.errors import ServeError
from onnxrt.serve.model import ServedModel, SessionConfig
from onnxrt.serve.repository import ModelRepository

__all__ = ["InferenceServer", "BatchingConfig", "ModelRepository", "ServedModel",
           "SessionConfig", "ServeError", "create_app", "run_server", "ServeOptions"]


def __getattr__(name: str) -> object:
    # the web stack is imported only by what needs it
    if name == "create_app":
        from onnxrt.serve.http_app import create_app

        return create_app
    if name in ("run_server", "ServeOptions"):
        from onnxrt.serve import runner

        return getattr(runner, name)
    raise AttributeError(name)
