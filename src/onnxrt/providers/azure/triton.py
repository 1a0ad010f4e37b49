"""AzureTritonInvoker: the node's inputs (after ``auth_token``) become one Open Inference
Protocol (KServe v2 / Triton) request to ``{model_uri}/v2/models/{model_name}[/versions/
{model_version}]/infer``; the outputs of the answer named like the node's outputs become the
node's outputs. Tensors travel in Triton's binary extension (``binary_data`` attribute 1,
the default, as onnxruntime-extensions sends them) or as JSON (``binary_data=0``).

tritonclient writes and reads the protocol's bodies; the request goes through the
provider's own connection pool (transport.py), which is thread-safe and bounded in time.
"""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import numpy as np
import onnx

from onnxrt.errors import Fail, InvalidArgument, InvalidGraph
from onnxrt.framework.kernel import NodeInfo
from onnxrt.providers.azure.invoker import Invoker
from onnxrt.providers.azure.provider import AZURE, DOMAIN
from onnxrt.providers.azure.transport import RemoteError

import tritonclient.http as tc
from tritonclient.utils import np_to_triton_dtype, triton_to_np_dtype

__all__ = ["AzureTritonInvoker"]

_HEADER_LENGTH = "Inference-Header-Content-Length"


@AZURE.kernel("AzureTritonInvoker", domain=DOMAIN, context=True)
class AzureTritonInvoker:
    def __init__(self, node: NodeInfo) -> None:
        self.inv = inv = Invoker(node)
        if not inv.model:
            raise InvalidGraph(f"AzureTritonInvoker node {node.name!r}: the attribute "
                               f"'model_name' is required (the endpoint serves models by name)")
        path = f"/v2/models/{quote(inv.model, safe='')}"
        # onnxruntime-extensions' default version "0" means "whatever the server serves"
        if inv.version not in ("", "0"):
            path += f"/versions/{quote(inv.version, safe='')}"
        self.url = inv.uri + path + "/infer"
        self.binary = int(node.attrs.get("binary_data", 1)) != 0
        self.multi = len(node.outputs) > 1
        self.expected = [_declared_dtype(t) for t in node.output_types] + \
            [None] * (len(node.outputs) - len(node.output_types))

    def __call__(self, *args: Any, ctx: Any = None) -> Any:
        inv = self.inv
        if len(args) != len(inv.input_names):
            raise InvalidArgument(f"{inv.describe(self.url)}: got {len(args)} inputs, the node "
                                  f"names {len(inv.input_names)}")
        headers = inv.headers(args[0])
        inputs = []
        for name, value in zip(inv.fields[1:], args[1:]):
            a = _wire_array(value)
            try:
                dt = np_to_triton_dtype(a.dtype)
            except Exception:
                dt = None
            if dt is None:
                raise InvalidArgument(f"{inv.describe(self.url)}: input {name!r} has element "
                                      f"type {a.dtype}, which the protocol cannot carry")
            t = tc.InferInput(name, list(a.shape), dt)
            t.set_data_from_numpy(a, binary_data=self.binary or dt == "BF16")
            inputs.append(t)
        outputs = [tc.InferRequestedOutput(n, binary_data=self.binary)
                   for n in inv.output_names]
        body, json_size = tc.InferenceServerClient.generate_request_body(inputs, outputs)
        if isinstance(body, str):
            body = body.encode("utf-8")
        headers["Content-Type"] = "application/octet-stream" if json_size is not None \
            else "application/json"
        if json_size is not None:
            headers[_HEADER_LENGTH] = str(json_size)
        data, rheaders = inv.send(self.url, body, headers, ctx)
        hl = rheaders.get(_HEADER_LENGTH)
        try:
            result = tc.InferResult.from_response_body(
                data, header_length=int(hl) if hl is not None else None,
                content_encoding=rheaders.get("Content-Encoding"))
        except Exception as e:
            raise RemoteError(f"{inv.describe(self.url)}: the answer is not an inference "
                              f"response ({type(e).__name__}: {e})") from e
        got = [self._output(result, i) for i in range(len(inv.output_names))]
        return tuple(got) if self.multi else got[0]

    def _output(self, result: Any, i: int) -> np.ndarray:
        inv = self.inv
        name = inv.output_names[i]
        a = result.as_numpy(name)
        if a is None:
            have = [o.get("name") for o in result.get_response().get("outputs", [])]
            raise RemoteError(f"{inv.describe(self.url)}: the answer has no output {name!r} "
                              f"(it has {have})")
        if a.dtype.kind in "SO":    # BYTES: onnxrt's string tensors hold str
            a = np.array([v.decode("utf-8", errors="replace") if isinstance(v, bytes) else v
                          for v in a.reshape(-1)], dtype=object).reshape(a.shape)
        want = self.expected[i]
        if want is not None and a.dtype != want:
            raise Fail(f"{inv.describe(self.url)}: output {name!r} came back as "
                       f"{a.dtype}, the model declares {want}")
        return np.ascontiguousarray(a)


def _wire_array(value: Any) -> np.ndarray:
    a = np.asarray(value)
    if a.dtype.kind == "U":     # str arrays travel as BYTES, as object arrays of str
        a = a.astype(object)
    return np.ascontiguousarray(a)


def _declared_dtype(tp: Any) -> np.dtype | None:
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.elem_type:
        return None
    et = tp.tensor_type.elem_type
    if et == onnx.TensorProto.STRING:
        return np.dtype(object)
    try:
        return np.dtype(triton_to_np_dtype(np_to_triton_dtype(
            onnx.helper.tensor_dtype_to_np_dtype(et))))
    except Exception:
        return None
