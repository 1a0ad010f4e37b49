"""The server behind every front end (HTTP, gRPC, Ray Serve): health, metadata, and
inference from a decoded request to decoded outputs, with metrics."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from onnxrt.serve.batching import ModelRunner
from onnxrt.serve.errors import ServeError, bad_request
from onnxrt.serve.metrics import ServeMetrics
from onnxrt.serve.model import ServedModel
from onnxrt.serve.repository import ModelRepository
from onnxrt.serve.request import InferOutput, InferRequest, InferResponse

__all__ = ["InferenceServer", "BatchingConfig", "SERVER_NAME", "EXTENSIONS"]

SERVER_NAME = "onnxrt"
# Triton's names for the protocol extensions served here, all of them
EXTENSIONS = ["binary_tensor_data", "model_configuration", "model_repository_index"]


@dataclass(frozen=True)
class BatchingConfig:
    """``max_batch`` > 1 turns dynamic batching on for models that allow it;
    ``timeout_ms`` is how long the oldest request waits for others; ``instances`` is how
    many session runs of one model may be in flight at once."""

    max_batch: int = 0
    timeout_ms: float = 0.0
    instances: int = 1

    def __post_init__(self) -> None:
        if self.max_batch < 0 or self.timeout_ms < 0 or self.instances < 1:
            raise ValueError(f"bad batching settings: max_batch {self.max_batch} (>= 0), "
                             f"timeout_ms {self.timeout_ms} (>= 0), "
                             f"instances {self.instances} (>= 1)")


class InferenceServer:
    def __init__(self, repository: ModelRepository,
                 batching: BatchingConfig | None = None) -> None:
        from onnxrt import __version__

        self.repository = repository
        self.batching = batching or BatchingConfig()
        self.metrics = ServeMetrics()
        self.version = __version__
        b = self.batching
        self._runners = {(m.name, m.version): ModelRunner(
            m, self.metrics, max_batch=b.max_batch, timeout_s=b.timeout_ms / 1e3,
            instances=b.instances) for m in repository.all()}

    # -- health and metadata ---------------------------------------------------------

    def load(self) -> None:
        """Makes every model's session (blocking: call it in a thread from a loop)."""
        self.repository.load_all()

    @property
    def ready(self) -> bool:
        return self.repository.ready

    def server_metadata(self) -> dict[str, Any]:
        return {"name": SERVER_NAME, "version": self.version, "extensions": EXTENSIONS}

    def model(self, name: str, version: str | None = None) -> ServedModel:
        return self.repository.get(name, version or None)

    def model_metadata(self, name: str, version: str | None = None) -> dict[str, Any]:
        m = self.model(name, version)
        m.check_ready()
        versions = [v for v in self.repository.versions(name)
                    if self.repository.get(name, v).ready]
        return m.metadata(versions if not version else [m.version])

    def model_config(self, name: str, version: str | None = None) -> dict[str, Any]:
        """Triton's model configuration: with batching on, ``max_batch_size`` > 0 and the
        dims leave out the batch dimension, as Triton's are."""
        m = self.model(name, version)
        m.check_ready()
        runner = self._runners[(m.name, m.version)]
        batched = runner.batching
        def dims(spec: Any) -> list[int]:
            shape = list(spec.shape) if spec.shape is not None else [-1]
            return shape[1:] if batched else shape
        cfg: dict[str, Any] = {
            "name": m.name, "platform": "onnxruntime_onnx", "backend": "onnxrt",
            "max_batch_size": self.batching.max_batch if batched else 0,
            "input": [{"name": s.name, "data_type": s.datatype.config_name,
                       "dims": dims(s)} for s in m.inputs],
            "output": [{"name": s.name, "data_type": s.datatype.config_name,
                        "dims": dims(s)} for s in m.outputs],
            "instance_group": [{"count": self.batching.instances, "kind": "KIND_CPU"}],
        }
        if batched:
            cfg["dynamic_batching"] = {
                "max_queue_delay_microseconds": int(self.batching.timeout_ms * 1000)}
        return cfg

    # -- inference -------------------------------------------------------------------

    async def infer(self, name: str, version: str | None, request: InferRequest
                    ) -> InferResponse:
        """Runs a decoded request; a failure is a ServeError, which the front end answers
        and counts (``count_error``)."""
        t = time.perf_counter()
        m = self.model(name, version)
        feeds = m.feeds(request.inputs)
        wanted = request.outputs
        names = [o.name for o in wanted] if wanted is not None else None
        if names is not None:
            for n in names:
                m.output_spec(n)
            if len(set(names)) != len(names):
                raise bad_request("an output is requested twice")
        values = await self._runners[(m.name, m.version)].run(feeds, names)
        outs = []
        for o in wanted if wanted is not None else m.outputs:
            binary = o.binary if wanted is not None else request.binary_outputs
            spec = m.output_spec(o.name)
            outs.append(InferOutput(spec.name, spec.datatype, values[spec.name], binary))
        self.metrics.requests.labels(m.name, m.version, "success").inc()
        self.metrics.latency.labels(m.name, m.version).observe(time.perf_counter() - t)
        return InferResponse(m.name, m.version, outs, request.id)

    def count_error(self, status: int, name: str | None = None,
                    version: str | None = None) -> None:
        """An error answer: by status, and as a failed request of its model when the
        request named a served one (names that are not served stay out of the labels)."""
        try:
            m = self.model(name, version) if name else None
        except ServeError:
            m = None
        self.metrics.error(status, m.name if m else "")
        if m is not None:
            self.metrics.requests.labels(m.name, m.version, "failure").inc()

    def close(self) -> None:
        for r in self._runners.values():
            r.close()
