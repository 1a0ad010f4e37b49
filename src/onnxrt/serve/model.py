"""One version of one served model: its session, what it accepts, and a run."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np

from onnxrt.serve.datatypes import DataType, by_onnx_type
from onnxrt.serve.errors import ServeError, bad_request, unavailable
from onnxrt.serve.request import InferInput

__all__ = ["TensorSpec", "ServedModel", "SessionConfig"]


@dataclass(frozen=True)
class SessionConfig:
    """How every model's session is made: providers in priority order, intra-op threads."""

    providers: tuple[str, ...] | None = None
    threads: int = 0

    def session(self, model: str | bytes) -> Any:
        import onnxrt as ort

        so = ort.SessionOptions()
        if self.threads:
            so.intra_op_num_threads = self.threads
        return ort.InferenceSession(model, so, providers=list(self.providers)
                                    if self.providers else None)


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: DataType
    shape: tuple[int, ...] | None   # -1 for a free dimension; None: rank unknown

    def metadata(self) -> dict[str, Any]:
        # rank unknown: one free dimension is the closest the protocol can say
        return {"name": self.name, "datatype": self.datatype.name,
                "shape": list(self.shape) if self.shape is not None else [-1]}

    @property
    def free_leading_dim(self) -> bool:
        return bool(self.shape) and self.shape[0] == -1   # type: ignore[index]


def _spec(arg: Any, what: str) -> TensorSpec:
    dt = by_onnx_type(arg.type)
    if dt is None:
        raise ValueError(f"{what} {arg.name!r} has type {arg.type}; the Open Inference "
                         "Protocol carries tensors of bool, integers, float16, bfloat16, "
                         "float, double and string only")
    shape = None if arg.shape is None else tuple(
        d if isinstance(d, int) and d >= 0 else -1 for d in arg.shape)
    return TensorSpec(arg.name, dt, shape)


class ServedModel:
    """A model version; ``load()`` makes its session (in a worker thread at startup)."""

    def __init__(self, name: str, version: str, source: str | bytes,
                 config: SessionConfig) -> None:
        self.name = name
        self.version = version
        self.source = source
        self.config = config
        # Triton's words: LOADING (until load() has run), READY, UNAVAILABLE (and why)
        self.state = "LOADING"
        self.reason = ""
        self.inputs: list[TensorSpec] = []
        self.outputs: list[TensorSpec] = []
        self._session: Any = None
        self._lock = threading.Lock()

    @property
    def ready(self) -> bool:
        return self.state == "READY"

    def load(self) -> None:
        """Make the session; a failure leaves the model UNAVAILABLE with the reason."""
        with self._lock:
            if self.state == "READY":
                return
            self.state, self.reason = "LOADING", ""
            try:
                sess = self.config.session(self.source)
                self.inputs = [_spec(a, "input") for a in sess.get_inputs()]
                self.outputs = [_spec(a, "output") for a in sess.get_outputs()]
            except Exception as e:  # any load failure: the model says why it is not ready
                self.state, self.reason = "UNAVAILABLE", f"{type(e).__name__}: {e}"
                return
            self._session = sess
            self.state, self.reason = "READY", ""

    @property
    def batchable(self) -> bool:
        """Requests can be joined along the first dimension: every input and output has a
        free leading dimension (a model whose outputs do not then follow the batch is
        caught at run time and its requests run one by one)."""
        return bool(self.inputs) and all(s.free_leading_dim
                                         for s in self.inputs + self.outputs)

    def metadata(self, versions: Sequence[str]) -> dict[str, Any]:
        return {"name": self.name, "versions": list(versions), "platform": "onnx_onnxv1",
                "inputs": [s.metadata() for s in self.inputs],
                "outputs": [s.metadata() for s in self.outputs]}

    def check_ready(self) -> None:
        if not self.ready:
            raise unavailable(f"model '{self.name}' version {self.version} is not ready "
                              f"({self.state.lower()}{': ' + self.reason if self.reason else ''})")

    def output_spec(self, name: str) -> TensorSpec:
        for s in self.outputs:
            if s.name == name:
                return s
        raise bad_request(f"model '{self.name}' has no output {name!r} (outputs: "
                          f"{', '.join(s.name for s in self.outputs)})")

    def feeds(self, inputs: list[InferInput]) -> dict[str, np.ndarray]:
        """The session feeds of a request, checked against the model's inputs: names,
        datatypes, ranks and fixed dimensions (every mismatch is a 400 naming it)."""
        self.check_ready()
        specs = {s.name: s for s in self.inputs}
        feeds: dict[str, np.ndarray] = {}
        for t in inputs:
            spec = specs.get(t.name)
            what = f"input '{t.name}'"
            if spec is None:
                raise bad_request(f"model '{self.name}' has no input {t.name!r} (inputs: "
                                  f"{', '.join(specs)})")
            if t.name in feeds:
                raise bad_request(f"{what} is given twice")
            if t.datatype is not spec.datatype:
                raise bad_request(f"{what}: datatype {t.datatype.name}, the model expects "
                                  f"{spec.datatype.name}")
            if spec.shape is not None and (
                    len(t.shape) != len(spec.shape)
                    or any(d != -1 and d != g for d, g in zip(spec.shape, t.shape))):
                raise bad_request(f"{what}: shape {list(t.shape)}, the model expects "
                                  f"{list(spec.shape)} (-1: any size)")
            feeds[t.name] = t.array
        missing = [n for n in specs if n not in feeds]
        if missing:
            raise bad_request(f"model '{self.name}': missing input(s) {', '.join(missing)}")
        return feeds

    def run(self, feeds: dict[str, np.ndarray], outputs: list[str] | None = None
            ) -> dict[str, np.ndarray]:
        """One session run, in the calling (worker) thread; a failure is a ServeError:
        400 where onnxrt says the argument was bad, 500 otherwise."""
        names = outputs or [s.name for s in self.outputs]
        try:
            values = self._session.run(names, feeds)
        except ValueError as e:     # onnxrt's InvalidArgument and kin
            raise bad_request(f"model '{self.name}': {e}") from None
        except Exception as e:
            raise ServeError(500, f"model '{self.name}': inference failed: "
                                  f"{type(e).__name__}: {e}") from None
        return dict(zip(names, (np.asarray(v) for v in values)))
