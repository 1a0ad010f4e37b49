"""An inference request and response as the front ends (HTTP, gRPC, Ray Serve) hand them
to the server core: decoded arrays, no wire format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from onnxrt.serve.datatypes import DataType
from onnxrt.serve.errors import bad_request

__all__ = ["InferInput", "RequestedOutput", "InferRequest", "InferOutput",
           "check_parameters"]


@dataclass
class InferInput:
    name: str
    datatype: DataType
    shape: tuple[int, ...]
    array: np.ndarray


@dataclass
class RequestedOutput:
    name: str
    binary: bool = False    # HTTP only: send as raw bytes after the JSON header


@dataclass
class InferRequest:
    inputs: list[InferInput]
    outputs: list[RequestedOutput] | None = None    # None: every output of the model
    id: str = ""
    binary_outputs: bool = False    # HTTP 'binary_data_output': the default for outputs


@dataclass
class InferOutput:
    name: str
    datatype: DataType
    array: np.ndarray
    binary: bool = False


@dataclass
class InferResponse:
    model_name: str
    model_version: str
    outputs: list[InferOutput] = field(default_factory=list)
    id: str = ""


# Parameters of the protocol and of Triton's extensions that the server does not act on:
# refused by name, so that a client never believes it got what it asked for.
_REFUSED = {
    "sequence_id": "sequence batching", "sequence_start": "sequence batching",
    "sequence_end": "sequence batching", "priority": "request priorities",
    "timeout": "request timeouts", "classification": "the classification extension",
    "shared_memory_region": "the shared-memory extension",
    "shared_memory_byte_size": "the shared-memory extension",
    "shared_memory_offset": "the shared-memory extension",
}


def check_parameters(what: str, params: Any, allowed: tuple[str, ...]) -> dict[str, Any]:
    """``params`` as a dict with only ``allowed`` keys; anything else is a 400 naming it."""
    if params is None:
        return {}
    if not isinstance(params, dict):
        raise bad_request(f"{what}: 'parameters' must be an object")
    for key, value in params.items():
        if key in allowed:
            continue
        if key in _REFUSED and not (key == "priority" and value == 0):
            raise bad_request(f"{what}: parameter {key!r}: {_REFUSED[key]} is not supported "
                              "by this server")
        if key not in _REFUSED:
            raise bad_request(f"{what}: unknown parameter {key!r} (supported here: "
                              f"{', '.join(allowed) or 'none'})")
    return dict(params)
