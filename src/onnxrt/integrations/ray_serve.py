"""The Open Inference Protocol server as a Ray Serve deployment: the same app, repository,
batching and metrics as ``onnxrt serve``, one server per replica::

    from ray import serve
    from onnxrt.integrations.ray import OnnxrtDeployment

    app = OnnxrtDeployment.options(num_replicas=2).bind("models/", max_batch=8)
    serve.run(app, route_prefix="/")          # tritonclient at Ray Serve's HTTP port

Ray Serve routes each request to a replica; inside it, requests that arrive together
are joined as in ``onnxrt serve`` (``max_ongoing_requests`` bounds how many one replica
holds at once, so keep it above ``max_batch``).
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ray import serve

from onnxrt.serve import BatchingConfig, InferenceServer, ModelRepository, SessionConfig
from onnxrt.serve.http_app import DEFAULT_MAX_BODY, create_app

__all__ = ["OnnxrtDeployment"]


@serve.deployment(max_ongoing_requests=64)
@serve.ingress()
class OnnxrtDeployment:
    """``models``: a model file, zoo name or repository folder (reachable on every node
    that runs a replica), or ``{name: path or bytes}`` / ``{name: {version: ...}}``."""

    def __init__(self, models: str | Mapping[str, Any], *,
                 providers: Sequence[str] | None = None, threads: int = 0,
                 max_batch: int = 0, batch_timeout_ms: float | None = None, instances: int = 1,
                 max_body_bytes: int = DEFAULT_MAX_BODY) -> None:
        if batch_timeout_ms is not None and max_batch <= 1:
            raise ValueError("batch_timeout_ms needs max_batch > 1")
        config = SessionConfig(tuple(providers) if providers else None, threads)
        repo = (ModelRepository.from_path(models, config) if isinstance(models, str)
                else ModelRepository.from_sources(models, config))
        self.server = InferenceServer(repo, BatchingConfig(
            max_batch, (2.0 if batch_timeout_ms is None else batch_timeout_ms)
            if max_batch > 1 else 0.0, instances))
        self.server.load()       # a replica is ready when its models are
        failed = [m for m in repo.index() if m["state"] != "READY"]
        if failed:
            raise RuntimeError("models not loaded: " + "; ".join(
                f"{m['name']}/{m['version']}: {m['reason']}" for m in failed))
        self.max_body_bytes = max_body_bytes

    def __serve_build_asgi_app__(self) -> Any:
        return create_app(self.server, max_body_bytes=self.max_body_bytes, load_models=False)
