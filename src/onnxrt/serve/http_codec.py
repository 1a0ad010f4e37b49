"""The HTTP/REST form of inference requests and responses: a JSON document, optionally
followed by raw tensor bytes (the binary-tensor extension: the JSON part's length is in
the ``Inference-Header-Content-Length`` header), optionally compressed."""

from __future__ import annotations

import gzip
import json
import zlib
from typing import Any

from onnxrt.serve.datatypes import by_name
from onnxrt.serve.errors import ServeError, bad_request
from onnxrt.serve.request import (InferInput, InferRequest, InferResponse, RequestedOutput,
                                  check_parameters)
from onnxrt.serve.tensors import check_shape, from_json, from_raw, to_json, to_raw

__all__ = ["HEADER_LENGTH", "decode_request", "encode_response", "decompress",
           "compress", "dumps"]

HEADER_LENGTH = "Inference-Header-Content-Length"


def dumps(doc: Any) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


def decompress(body: bytes, encoding: str | None, limit: int) -> bytes:
    """The body as sent before ``Content-Encoding``; never more than ``limit`` bytes."""
    enc = (encoding or "identity").strip().lower()
    if enc == "identity":
        return body
    if enc not in ("gzip", "deflate"):
        raise ServeError(415, f"Content-Encoding {encoding!r} is not supported (gzip, "
                              "deflate, identity)")
    d = zlib.decompressobj(31 if enc == "gzip" else 15)
    try:
        out = d.decompress(body, limit + 1)
    except zlib.error as e:
        raise bad_request(f"the {enc} body does not decompress: {e}") from None
    if len(out) > limit:
        raise ServeError(413, f"the request body decompresses to more than the server's "
                              f"limit of {limit} bytes")
    if not d.eof:
        raise bad_request(f"the {enc} body is truncated")
    return out


def compress(body: bytes, accept_encoding: str | None) -> tuple[bytes, str | None]:
    """The body compressed as the client accepts (its first of gzip, deflate)."""
    for token in (accept_encoding or "").split(","):
        enc, _, q = token.strip().partition(";")
        enc = enc.strip().lower()
        if q.strip().replace(" ", "") in ("q=0", "q=0.0"):
            continue
        if enc == "gzip":
            return gzip.compress(body, compresslevel=6), "gzip"
        if enc == "deflate":
            return zlib.compress(body, 6), "deflate"
    return body, None


def _header_split(body: bytes, header_length: str | None) -> tuple[bytes, memoryview]:
    if header_length is None:
        return body, memoryview(b"")
    try:
        n = int(header_length)
    except ValueError:
        raise bad_request(f"{HEADER_LENGTH} {header_length!r} is not an integer") from None
    if not 0 <= n <= len(body):
        raise bad_request(f"{HEADER_LENGTH} {n} is outside the body's {len(body)} bytes")
    return body[:n], memoryview(body)[n:]


def decode_request(body: bytes, header_length: str | None) -> InferRequest:
    head, binary = _header_split(body, header_length)
    try:
        doc = json.loads(head)
    except (ValueError, UnicodeDecodeError) as e:
        raise bad_request(f"malformed JSON in the request: {e}") from None
    if not isinstance(doc, dict):
        raise bad_request("the request must be a JSON object")
    rid = doc.get("id", "")
    if not isinstance(rid, str):
        raise bad_request("'id' must be a string")
    params = check_parameters("request", doc.get("parameters"), ("binary_data_output",))
    binary_outputs = params.get("binary_data_output", False)
    if not isinstance(binary_outputs, bool):
        raise bad_request("parameter 'binary_data_output' must be true or false")
    raw_inputs = doc.get("inputs")
    if not isinstance(raw_inputs, list) or not all(isinstance(t, dict) for t in raw_inputs):
        raise bad_request("'inputs' must be a list of tensor objects")
    inputs = []
    offset = 0
    for i, t in enumerate(raw_inputs):
        name = t.get("name")
        if not isinstance(name, str):
            raise bad_request(f"input #{i}: 'name' must be a string")
        what = f"input '{name}'"
        dt = by_name(t.get("datatype"), what)
        shape = check_shape(what, t.get("shape"))
        tparams = check_parameters(what, t.get("parameters"), ("binary_data_size",))
        if "binary_data_size" in tparams:
            size = tparams["binary_data_size"]
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise bad_request(f"{what}: binary_data_size must be a non-negative integer")
            if "data" in t:
                raise bad_request(f"{what}: both 'data' and binary_data_size are given")
            if offset + size > len(binary):
                raise bad_request(f"{what}: binary_data_size {size} goes past the binary "
                                  f"part of the body ({len(binary) - offset} bytes left)")
            arr = from_raw(what, dt, shape, binary[offset:offset + size])
            offset += size
        elif "data" in t:
            arr = from_json(what, dt, shape, t["data"])
        else:
            raise bad_request(f"{what}: neither 'data' nor parameter binary_data_size")
        inputs.append(InferInput(name, dt, shape, arr))
    if offset != len(binary):
        raise bad_request(f"{len(binary) - offset} byte(s) of binary data after the last "
                          "input's (the inputs' binary_data_size add up to "
                          f"{offset})")
    outputs = None
    if "outputs" in doc:
        raw_outputs = doc["outputs"]
        if not isinstance(raw_outputs, list) or not all(isinstance(o, dict)
                                                        for o in raw_outputs):
            raise bad_request("'outputs' must be a list of objects")
        outputs = []
        for i, o in enumerate(raw_outputs):
            name = o.get("name")
            if not isinstance(name, str):
                raise bad_request(f"output #{i}: 'name' must be a string")
            oparams = check_parameters(f"output '{name}'", o.get("parameters"),
                                       ("binary_data",))
            binary_flag = oparams.get("binary_data", binary_outputs)
            if not isinstance(binary_flag, bool):
                raise bad_request(f"output '{name}': binary_data must be true or false")
            outputs.append(RequestedOutput(name, binary_flag))
    return InferRequest(inputs, outputs, rid, binary_outputs)


def encode_response(resp: InferResponse) -> tuple[bytes, int | None]:
    """The body and, when binary outputs follow the JSON, the JSON part's length."""
    outs = []
    blobs = []
    for o in resp.outputs:
        d: dict[str, Any] = {"name": o.name, "datatype": o.datatype.name,
                             "shape": list(o.array.shape)}
        if o.binary:
            raw = to_raw(o.array, o.datatype)
            d["parameters"] = {"binary_data_size": len(raw)}
            blobs.append(raw)
        else:
            d["data"] = to_json(o.array, o.datatype)
        outs.append(d)
    doc: dict[str, Any] = {"model_name": resp.model_name, "model_version": resp.model_version}
    if resp.id:
        doc["id"] = resp.id
    doc["outputs"] = outs
    head = dumps(doc)
    if not blobs:
        return head, None
    return b"".join([head, *blobs]), len(head)
