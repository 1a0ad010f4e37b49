"""The invokers onnxruntime-extensions sends through libcurl: a text body
(``AzureTextToText``) or a multipart form (``AzureAudioToText``, ``OpenAIAudioToText``) to
``model_uri`` itself, the whole answer returned as one string (shape ``[1]``)."""

from __future__ import annotations

from typing import Any

import numpy as np
import urllib3

from onnxrt.errors import InvalidArgument, InvalidGraph
from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.azure.invoker import Invoker, one_string
from onnxrt.providers.azure.provider import AZURE, DOMAIN

__all__ = ["AzureTextToText", "AzureAudioToText", "OpenAIAudioToText"]


def _answer(data: bytes) -> np.ndarray:
    return np.array([data.decode("utf-8", errors="replace")], dtype=object)


class _CurlInvoker:
    def __init__(self, node: NodeInfo) -> None:
        self.inv = Invoker(node)
        if len(node.outputs) != 1:
            raise InvalidGraph(f"{node.op_type} node {node.name!r}: expected one string "
                               f"output, the node has {len(node.outputs)}")

    def where(self) -> str:
        return self.inv.describe(self.inv.uri)

    def _check_count(self, args: tuple[Any, ...]) -> None:
        if len(args) != len(self.inv.input_names):
            raise InvalidArgument(f"{self.where()}: got {len(args)} inputs, the node names "
                                  f"{len(self.inv.input_names)}")


@AZURE.kernel("AzureTextToText", domain=DOMAIN, context=True)
class AzureTextToText(_CurlInvoker):
    """Inputs (auth_token, text): the text is POSTed as a JSON body."""

    def __init__(self, node: NodeInfo) -> None:
        super().__init__(node)
        if len(node.inputs) != 2:
            raise InvalidGraph(f"AzureTextToText node {node.name!r}: expected 2 inputs "
                               f"(auth_token, text), the node has {len(node.inputs)}")

    def __call__(self, token: Any, text: Any, ctx: Any = None) -> np.ndarray:
        inv = self.inv
        headers = inv.headers(token)
        headers["Content-Type"] = "application/json"
        body = one_string(text, f"{self.where()}: input {inv.input_names[1]!r}")
        data, _ = inv.send(inv.uri, body.encode("utf-8"), headers, ctx)
        return _answer(data)


def _form_fields(inv: Invoker, args: tuple[Any, ...], filename: str, where: str,
                 only_file: str | None = None) -> list[tuple[str, Any]]:
    """String inputs as form fields, uint8 inputs as uploaded files."""
    out: list[tuple[str, Any]] = []
    for name, field, value in zip(inv.input_names[1:], inv.fields[1:], args[1:]):
        a = np.asarray(value)
        if a.dtype.kind in "OUS":
            out.append((field, one_string(a, f"{where}: input {name!r}")))
        elif a.dtype == np.uint8:
            if only_file is not None and field != only_file:
                raise InvalidArgument(f"{where}: input {name!r} is uint8, but only the "
                                      f"{only_file!r} input may carry bytes")
            out.append((field, (filename, a.tobytes(), "application/octet-stream")))
        else:
            raise InvalidArgument(f"{where}: input {name!r} has element type {a.dtype}; "
                                  f"expected a string or uint8 (binary) tensor")
    return out


@AZURE.kernel("AzureAudioToText", domain=DOMAIN, context=True)
class AzureAudioToText(_CurlInvoker):
    """String inputs become form fields, uint8 inputs files named ``non_exist.<binary_type>``
    (the extension tells the endpoint the audio format)."""

    def __init__(self, node: NodeInfo) -> None:
        super().__init__(node)
        self.filename = "non_exist." + str(node.attrs.get("binary_type", ""))

    def __call__(self, *args: Any, ctx: Any = None) -> np.ndarray:
        self._check_count(args)
        inv = self.inv
        headers = inv.headers(args[0])
        fields = _form_fields(inv, args, self.filename, self.where())
        body, ctype = urllib3.encode_multipart_formdata(fields)
        headers["Content-Type"] = ctype
        data, _ = inv.send(inv.uri, body, headers, ctx)
        return _answer(data)


@AZURE.kernel("OpenAIAudioToText", domain=DOMAIN, context=True)
class OpenAIAudioToText(_CurlInvoker):
    """OpenAI's transcription form: a required ``file`` input (uint8 audio), the model from a
    ``model`` input or the ``model_name`` attribute, an optional ``filename`` input whose
    extension names the format (else ``audio.<audio_format>``), other string inputs as
    fields (``response_format``, ``prompt``...)."""

    def __init__(self, node: NodeInfo) -> None:
        super().__init__(node)
        inv = self.inv
        if "file" not in inv.fields:
            raise InvalidGraph(f"OpenAIAudioToText node {node.name!r}: the required 'file' "
                               f"input is missing (inputs: {inv.input_names})")
        if not inv.model and "model" not in inv.fields:
            raise InvalidGraph(f"OpenAIAudioToText node {node.name!r}: no 'model' input and "
                               f"no 'model_name' attribute")
        self.default_filename = "audio." + str(node.attrs.get("audio_format", ""))

    def __call__(self, *args: Any, ctx: Any = None) -> np.ndarray:
        self._check_count(args)
        inv = self.inv
        headers = inv.headers(args[0])
        by_field = dict(zip(inv.fields, args))
        filename = self.default_filename
        if "filename" in by_field:
            given = one_string(by_field["filename"], f"{self.where()}: input 'filename'") \
                if np.asarray(by_field["filename"]).size else ""
            # an empty or extension-less default value keeps the attribute's name
            if len(given) >= 4:
                filename = given
        fields = [f for f in _form_fields(inv, args, filename, self.where(), only_file="file")
                  if f[0] != "filename"]
        if not any(f[0] == "model" and f[1] for f in fields):
            fields = [f for f in fields if f[0] != "model"] + [("model", inv.model)]
        body, ctype = urllib3.encode_multipart_formdata(fields)
        headers["Content-Type"] = ctype
        data, _ = inv.send(inv.uri, body, headers, ctx)
        return _answer(data)
