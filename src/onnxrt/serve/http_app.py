"""The HTTP/REST front end: the Open Inference Protocol's endpoints, Triton's model
configuration and repository index, and Prometheus metrics, as a Starlette app."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
from typing import Any, AsyncIterator

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from onnxrt.serve.core import InferenceServer
from onnxrt.serve.errors import ServeError, bad_request
from onnxrt.serve.http_codec import (HEADER_LENGTH, compress, decode_request, decompress,
                                     dumps, encode_response)
from onnxrt.serve.metrics import CONTENT_TYPE_LATEST

__all__ = ["create_app", "DEFAULT_MAX_BODY"]

log = logging.getLogger("onnxrt.serve")

DEFAULT_MAX_BODY = 64 << 20


def _json(doc: Any, status: int = 200) -> Response:
    return Response(dumps(doc), status, media_type="application/json")


def create_app(server: InferenceServer, *, max_body_bytes: int = DEFAULT_MAX_BODY,
               load_models: bool = True) -> Starlette:
    """The app; with ``load_models`` its startup loads the models in a worker thread
    while the server already answers (live, not ready)."""

    def error(e: ServeError, request: Request) -> Response:
        p = request.path_params
        server.count_error(e.status, p.get("name"), p.get("version"))
        return _json({"error": e.message}, e.status)

    def handler(fn: Any) -> Any:
        async def wrapped(request: Request) -> Response:
            try:
                return await fn(request)
            except ServeError as e:
                return error(e, request)
        return wrapped

    def model_args(request: Request) -> tuple[str, str | None]:
        return request.path_params["name"], request.path_params.get("version")

    async def live(request: Request) -> Response:
        return _json({"live": True})

    async def ready(request: Request) -> Response:
        if server.ready:
            return _json({"ready": True})
        states = ", ".join(f"{m['name']}/{m['version']} {m['state'].lower()}"
                           for m in server.repository.index() if m["state"] != "READY")
        raise bad_request(f"not ready: {states}")

    async def server_metadata(request: Request) -> Response:
        return _json(server.server_metadata())

    async def model_metadata(request: Request) -> Response:
        return _json(server.model_metadata(*model_args(request)))

    async def model_ready(request: Request) -> Response:
        m = server.model(*model_args(request))
        if not m.ready:
            raise bad_request(f"model '{m.name}' version {m.version} is not ready "
                              f"({m.state.lower()}{': ' + m.reason if m.reason else ''})")
        return _json({"name": m.name, "version": m.version, "ready": True})

    async def model_config(request: Request) -> Response:
        return _json(server.model_config(*model_args(request)))

    async def repository_index(request: Request) -> Response:
        body = await _read_body(request, max_body_bytes)
        if body.strip():
            try:
                doc = json.loads(body)
            except ValueError as e:
                raise bad_request(f"malformed JSON in the request: {e}") from None
            if not isinstance(doc, dict) or set(doc) - {"ready"}:
                raise bad_request("the index request takes only {\"ready\": true|false}")
            if doc.get("ready"):
                return _json([m for m in server.repository.index() if m["state"] == "READY"])
        return _json(server.repository.index())

    async def infer(request: Request) -> Response:
        name, version = model_args(request)
        server.model(name, version).check_ready()
        body = await _read_body(request, max_body_bytes)
        body = decompress(body, request.headers.get("content-encoding"), max_body_bytes)
        req = decode_request(body, request.headers.get(HEADER_LENGTH))
        resp = await server.infer(name, version, req)
        payload, header_length = encode_response(resp)
        payload, encoding = compress(payload, request.headers.get("accept-encoding"))
        headers = {}
        if encoding:
            headers["Content-Encoding"] = encoding
        if header_length is not None:
            headers[HEADER_LENGTH] = str(header_length)
        media = "application/json" if header_length is None else "application/octet-stream"
        return Response(payload, 200, headers=headers, media_type=media)

    async def metrics(request: Request) -> Response:
        return Response(server.metrics.exposition(), media_type=CONTENT_TYPE_LATEST)

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, HTTPException)
        if exc.status_code == 404:
            msg = f"no endpoint {request.url.path}"
        elif exc.status_code == 405:
            msg = f"{request.method} is not allowed on {request.url.path}"
        else:
            msg = str(exc.detail)
        server.count_error(exc.status_code)
        return _json({"error": msg}, exc.status_code)

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        task = None
        if load_models:
            task = asyncio.get_running_loop().create_task(asyncio.to_thread(_load, server))
        try:
            yield
        finally:
            if task is not None and not task.done():
                task.cancel()
            server.close()

    m = "/v2/models/{name}"
    mv = "/v2/models/{name}/versions/{version}"
    routes = [
        Route("/v2/health/live", handler(live), methods=["GET"]),
        Route("/v2/health/ready", handler(ready), methods=["GET"]),
        Route("/v2", handler(server_metadata), methods=["GET"]),
        Route("/v2/repository/index", handler(repository_index), methods=["POST"]),
        Route("/metrics", handler(metrics), methods=["GET"]),
    ]
    for base in (m, mv):
        routes += [
            Route(base, handler(model_metadata), methods=["GET"]),
            Route(base + "/ready", handler(model_ready), methods=["GET"]),
            Route(base + "/config", handler(model_config), methods=["GET"]),
            Route(base + "/infer", handler(infer), methods=["POST"]),
        ]
    return Starlette(routes=routes, lifespan=lifespan,
                     exception_handlers={HTTPException: http_error})


def _load(server: InferenceServer) -> None:
    server.load()
    for m in server.repository.all():
        if m.ready:
            log.info("model '%s' version %s ready", m.name, m.version)
        else:
            log.error("model '%s' version %s not loaded: %s", m.name, m.version, m.reason)


async def _read_body(request: Request, limit: int) -> bytes:
    """The body, refused with 413 past ``limit`` bytes (before reading it when the
    client says its length)."""
    length = request.headers.get("content-length")
    if length is not None:
        try:
            n = int(length)
        except ValueError:
            raise bad_request(f"Content-Length {length!r} is not an integer") from None
        if n > limit:
            raise ServeError(413, f"the request body ({n} bytes) is over the server's limit "
                                  f"of {limit} bytes")
    chunks = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ServeError(413, f"the request body is over the server's limit of {limit} "
                                  "bytes")
        chunks.append(chunk)
    return b"".join(chunks)
