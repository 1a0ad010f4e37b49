"""Prometheus metrics of one server, in a registry of its own (several servers, or a
server and a test, can live in one process)."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

__all__ = ["ServeMetrics", "CONTENT_TYPE_LATEST"]

_LATENCY_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
                    2.5, 5.0, 10.0)
_BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


class ServeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "onnxrt_inference_requests", "Inference requests by model, version and outcome",
            ["model", "version", "outcome"], registry=r)
        self.latency = Histogram(
            "onnxrt_request_duration_seconds",
            "Time of an inference request from its decoded inputs to its outputs, "
            "queueing and batching included",
            ["model", "version"], buckets=_LATENCY_BUCKETS, registry=r)
        self.compute = Histogram(
            "onnxrt_inference_duration_seconds", "Time of one session run (one batch)",
            ["model", "version"], buckets=_LATENCY_BUCKETS, registry=r)
        self.batch_size = Histogram(
            "onnxrt_batch_size", "Rows along the batch dimension of each session run",
            ["model", "version"], buckets=_BATCH_BUCKETS, registry=r)
        self.errors = Counter(
            "onnxrt_request_errors", "Requests answered with an error, by status; model is "
            "empty where the request named no served model", ["model", "status"], registry=r)

    def error(self, status: int, model: str = "") -> None:
        self.errors.labels(model, str(status)).inc()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
