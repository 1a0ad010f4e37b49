"""The gRPC front end: the protocol's ``inference.GRPCInferenceService``, served from the
message and service modules that tritonclient ships, generated from Triton's
grpc_service.proto (KServe's v2 gRPC protocol is the subset of it with the same package,
service and core RPCs): no stub is written here. RPCs not implemented below keep the
generated base class's answer, UNIMPLEMENTED."""

from __future__ import annotations

from typing import Any

import grpc
from google.protobuf import json_format
from tritonclient.grpc import model_config_pb2, service_pb2, service_pb2_grpc

from onnxrt.serve.core import InferenceServer
from onnxrt.serve.datatypes import DataType, by_name
from onnxrt.serve.errors import ServeError, bad_request
from onnxrt.serve.request import (InferInput, InferRequest, RequestedOutput,
                                  check_parameters)
from onnxrt.serve.tensors import check_shape, from_json, from_raw, to_raw

__all__ = ["InferenceServicer", "start_grpc"]

# where each datatype's values go in InferTensorContents (FP16 and BF16: raw bytes only)
_CONTENTS = {"BOOL": "bool_contents", "INT8": "int_contents", "INT16": "int_contents",
             "INT32": "int_contents", "INT64": "int64_contents", "UINT8": "uint_contents",
             "UINT16": "uint_contents", "UINT32": "uint_contents",
             "UINT64": "uint64_contents", "FP32": "fp32_contents", "FP64": "fp64_contents",
             "BYTES": "bytes_contents"}


def _params(params: Any) -> dict[str, Any]:
    return {k: getattr(v, v.WhichOneof("parameter_choice"))
            for k, v in params.items() if v.WhichOneof("parameter_choice")}


def _contents(what: str, dt: DataType, shape: tuple[int, ...], contents: Any) -> Any:
    field = _CONTENTS.get(dt.name)
    if field is None:
        raise bad_request(f"{what}: {dt.name} data travels in raw_input_contents only")
    values = list(getattr(contents, field))
    if dt.name == "BYTES":
        try:
            values = [v.decode("utf-8") for v in values]
        except UnicodeDecodeError:
            raise bad_request(f"{what}: a BYTES element is not UTF-8 (ONNX strings are "
                              "UTF-8)") from None
    return from_json(what, dt, shape, values)


def decode_request(request: Any) -> InferRequest:
    check_parameters("request", _params(request.parameters), ())
    raw = request.raw_input_contents
    if raw and len(raw) != len(request.inputs):
        raise bad_request(f"raw_input_contents holds {len(raw)} tensor(s) for "
                          f"{len(request.inputs)} input(s)")
    inputs = []
    for i, t in enumerate(request.inputs):
        what = f"input '{t.name}'"
        dt = by_name(t.datatype, what)
        shape = check_shape(what, list(t.shape))
        check_parameters(what, _params(t.parameters), ())
        if raw:
            if t.HasField("contents"):
                raise bad_request(f"{what}: both contents and raw_input_contents are given")
            arr = from_raw(what, dt, shape, raw[i])
        else:
            arr = _contents(what, dt, shape, t.contents)
        inputs.append(InferInput(t.name, dt, shape, arr))
    outputs = None
    if request.outputs:
        outputs = []
        for o in request.outputs:
            check_parameters(f"output '{o.name}'", _params(o.parameters), ())
            outputs.append(RequestedOutput(o.name))
    return InferRequest(inputs, outputs, request.id)


class InferenceServicer(service_pb2_grpc.GRPCInferenceServiceServicer):
    def __init__(self, server: InferenceServer) -> None:
        self.server = server

    async def _fail(self, context: Any, e: ServeError, name: str | None = None,
                    version: str | None = None) -> None:
        self.server.count_error(e.status, name, version)
        await context.abort(getattr(grpc.StatusCode, e.grpc_code), e.message)

    async def ServerLive(self, request: Any, context: Any) -> Any:
        return service_pb2.ServerLiveResponse(live=True)

    async def ServerReady(self, request: Any, context: Any) -> Any:
        return service_pb2.ServerReadyResponse(ready=self.server.ready)

    async def ModelReady(self, request: Any, context: Any) -> Any:
        try:
            ready = self.server.model(request.name, request.version or None).ready
        except ServeError:
            ready = False
        return service_pb2.ModelReadyResponse(ready=ready)

    async def ServerMetadata(self, request: Any, context: Any) -> Any:
        return service_pb2.ServerMetadataResponse(**self.server.server_metadata())

    async def ModelMetadata(self, request: Any, context: Any) -> Any:
        try:
            md = self.server.model_metadata(request.name, request.version or None)
        except ServeError as e:
            await self._fail(context, e, request.name, request.version)
        tensors = service_pb2.ModelMetadataResponse.TensorMetadata
        return service_pb2.ModelMetadataResponse(
            name=md["name"], versions=md["versions"], platform=md["platform"],
            inputs=[tensors(**t) for t in md["inputs"]],
            outputs=[tensors(**t) for t in md["outputs"]])

    async def ModelConfig(self, request: Any, context: Any) -> Any:
        try:
            cfg = self.server.model_config(request.name, request.version or None)
        except ServeError as e:
            await self._fail(context, e, request.name, request.version)
        return service_pb2.ModelConfigResponse(
            config=json_format.ParseDict(cfg, model_config_pb2.ModelConfig()))

    async def RepositoryIndex(self, request: Any, context: Any) -> Any:
        if request.repository_name:
            await self._fail(context, bad_request(
                "this server has one repository: leave repository_name empty"))
        index = self.server.repository.index()
        if request.ready:
            index = [m for m in index if m["state"] == "READY"]
        entry = service_pb2.RepositoryIndexResponse.ModelIndex
        return service_pb2.RepositoryIndexResponse(models=[entry(**m) for m in index])

    async def ModelInfer(self, request: Any, context: Any) -> Any:
        name, version = request.model_name, request.model_version or None
        try:
            self.server.model(name, version).check_ready()
            resp = await self.server.infer(name, version, decode_request(request))
        except ServeError as e:
            await self._fail(context, e, name, version)
        out = service_pb2.ModelInferResponse(model_name=resp.model_name,
                                             model_version=resp.model_version, id=resp.id)
        for o in resp.outputs:
            out.outputs.add(name=o.name, datatype=o.datatype.name, shape=list(o.array.shape))
            out.raw_output_contents.append(to_raw(o.array, o.datatype))
        return out


async def start_grpc(server: InferenceServer, host: str, port: int, max_message_bytes: int
                     ) -> tuple[Any, int]:
    """Starts the gRPC server on the running loop; returns it and the bound port."""
    g = grpc.aio.server(options=[("grpc.max_receive_message_length", max_message_bytes),
                                 ("grpc.max_send_message_length", -1)])
    service_pb2_grpc.add_GRPCInferenceServiceServicer_to_server(InferenceServicer(server), g)
    bound = g.add_insecure_port(f"{host}:{port}")
    if not bound:
        raise OSError(f"gRPC: cannot listen on {host}:{port}")
    await g.start()
    return g, bound
