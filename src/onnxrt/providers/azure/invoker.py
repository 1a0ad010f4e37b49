"""What every invoker node shares (onnxruntime-extensions' conventions): the endpoint in the
``model_uri`` attribute, ``model_name``/``model_version``/``verbose``, the first input named
``auth_token`` and sent as a bearer token, and request field names taken from the node's
input names (the text after the last ``/``, so ``node0/prompt`` fills ``prompt``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.errors import InvalidArgument, InvalidGraph
from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.azure.transport import post, timeout_for

__all__ = ["Invoker", "field_name", "one_string"]


def field_name(input_name: str) -> str:
    if input_name.endswith("/"):
        raise InvalidGraph(f"input name {input_name!r} ends with '/': no request field name "
                           f"follows it")
    return input_name.rsplit("/", 1)[-1]


def one_string(value: Any, what: str) -> str:
    """The text of a string tensor holding one element (an auth token, a prompt)."""
    a = np.asarray(value)
    if a.dtype.kind not in "OUS":
        raise InvalidArgument(f"{what}: expected a string tensor, got {a.dtype}")
    if a.size < 1:
        raise InvalidArgument(f"{what}: expected one string, got an empty tensor")
    v = a.reshape(-1)[0]
    return v.decode("utf-8") if isinstance(v, bytes) else str(v)


class Invoker:
    """The part of an invoker kernel prepared once per session from its node."""

    def __init__(self, node: NodeInfo) -> None:
        a = node.attrs
        self.op = node.op_type
        self.node_name = node.name
        self.uri = str(a.get("model_uri", "")).rstrip("/")
        if not self.uri:
            raise InvalidGraph(f"{node.op_type} node {node.name!r}: the required attribute "
                               f"'model_uri' is missing or empty")
        if not self.uri.startswith(("http://", "https://")):
            raise InvalidGraph(f"{node.op_type} node {node.name!r}: model_uri {self.uri!r} "
                               f"is not an http:// or https:// address")
        self.model = str(a.get("model_name", ""))
        self.version = str(a.get("model_version", "0"))
        self.verbose = str(a.get("verbose", "0")) not in ("0", "", "false", "False")
        t = a.get("timeout")
        if t is not None and not float(t) > 0:
            raise InvalidGraph(f"{node.op_type} node {node.name!r}: timeout {t!r} must be a "
                               f"positive number of seconds")
        self.timeout = float(t) if t is not None else None
        if not node.inputs or node.inputs[0] != "auth_token":
            first = node.inputs[0] if node.inputs else "(none)"
            raise InvalidGraph(f"{node.op_type} node {node.name!r}: the first input must be "
                               f"named 'auth_token' (it is {first!r})")
        self.input_names = list(node.inputs)
        self.fields = [field_name(n) for n in node.inputs]
        self.output_names = list(node.outputs)
        self.output_types = list(node.output_types)

    def describe(self, url: str) -> str:
        model = f" model {self.model!r}" if self.model else ""
        return f"{self.op} node {self.node_name!r} ({url}{model})"

    def headers(self, token: Any) -> dict[str, str]:
        t = one_string(token, f"{self.op} node {self.node_name!r}: input 'auth_token'")
        return {"Authorization": f"Bearer {t}"}

    def send(self, url: str, body: bytes, headers: dict[str, str], ctx: Any
             ) -> tuple[bytes, Any]:
        return post(url, body, headers, timeout_for(self.timeout, ctx), self.describe(url),
                    self.verbose)
