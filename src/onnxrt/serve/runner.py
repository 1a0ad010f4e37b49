"""Running a server: HTTP (uvicorn) and gRPC on one event loop, until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import logging
import socket
import sys
from dataclasses import dataclass
from typing import Any

from onnxrt.serve.core import InferenceServer
from onnxrt.serve.http_app import DEFAULT_MAX_BODY, create_app

__all__ = ["ServeOptions", "run_server", "grpc_unavailable_reason"]

log = logging.getLogger("onnxrt.serve")


@dataclass(frozen=True)
class ServeOptions:
    host: str = "127.0.0.1"
    port: int = 8000            # 0: any free port (printed at startup)
    grpc_port: int | None = 8001    # None: no gRPC
    max_body_bytes: int = DEFAULT_MAX_BODY
    log_level: str = "info"


def grpc_unavailable_reason() -> str | None:
    """Why the gRPC front end cannot run here, or None."""
    try:
        import onnxrt.serve.grpc_app  # noqa: F401
    except Exception as e:  # ImportError, or the generated modules refusing the runtime
        return f"{type(e).__name__}: {e}"
    return None


def _listen(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # accepted connections inherit it: without it every response (headers and body are
    # two writes) waited for the client's delayed ACK, 44 ms a request on this machine
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((host, port))
    return sock


async def _serve(server: InferenceServer, opts: ServeOptions) -> None:
    import uvicorn

    sock = _listen(opts.host, opts.port)
    app = create_app(server, max_body_bytes=opts.max_body_bytes)
    config = uvicorn.Config(app, log_level=opts.log_level, access_log=False,
                            lifespan="on", timeout_graceful_shutdown=5)
    http = uvicorn.Server(config)
    grpc_server: Any = None
    port = sock.getsockname()[1]
    print(f"onnxrt serve: HTTP on http://{_url_host(opts.host)}:{port}", flush=True)
    if opts.grpc_port is not None:
        from onnxrt.serve.grpc_app import start_grpc

        grpc_server, gport = await start_grpc(server, opts.host, opts.grpc_port,
                                              opts.max_body_bytes)
        print(f"onnxrt serve: gRPC on {_url_host(opts.host)}:{gport}", flush=True)
    try:
        await http.serve(sockets=[sock])
    finally:
        if grpc_server is not None:
            await grpc_server.stop(grace=1.0)


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def run_server(server: InferenceServer, opts: ServeOptions) -> None:
    """Serves until interrupted; the models load in the background (live before ready)."""
    logging.basicConfig(stream=sys.stderr, level=opts.log_level.upper(),
                        format="%(asctime)s %(name)s %(levelname)s: %(message)s")
    asyncio.run(_serve(server, opts))
