"""onnxrt serve: a model file, zoo model or Triton-style repository over the Open
Inference Protocol (HTTP/REST and gRPC), with optional dynamic batching."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from onnxrt.cli.common import CliError, providers_arg

__all__ = ["add_parser", "cmd_serve"]

_DEFAULT_TIMEOUT_MS = 2.0


def add_parser(sub: Any) -> None:
    s = sub.add_parser(
        "serve", help="serve models over the Open Inference Protocol (KServe v2, Triton)",
        description="Serve a model file, a zoo model, or a model repository folder in "
        "Triton's layout (REPO/NAME/VERSION/model.onnx) over HTTP/REST and gRPC.")
    s.add_argument("model", metavar="MODEL_OR_DIR",
                   help="a .onnx file, a zoo model name, or a repository folder")
    s.add_argument("--host", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1; 0.0.0.0 for all)")
    s.add_argument("--port", type=int, default=8000, help="HTTP port (0: any free port)")
    s.add_argument("--grpc-port", type=int, default=None,
                   help="gRPC port (default 8001; 0: any free port)")
    s.add_argument("--no-grpc", action="store_true", help="serve HTTP only")
    s.add_argument("--providers", metavar="A,B", help="provider names in priority order")
    s.add_argument("--threads", type=int, default=0,
                   help="intra-op threads of each session (0: onnxrt's default)")
    s.add_argument("--max-batch", type=int, default=0, metavar="N",
                   help="join concurrent requests into batches of up to N rows (models "
                   "whose inputs and outputs have a free first dimension)")
    s.add_argument("--batch-timeout-ms", type=float, default=None, metavar="T",
                   help=f"how long a request waits for others to join it (default "
                   f"{_DEFAULT_TIMEOUT_MS:g} ms; needs --max-batch)")
    s.add_argument("--instances", type=int, default=1,
                   help="session runs of one model in flight at once (default 1)")
    s.add_argument("--max-body-mb", type=float, default=64.0,
                   help="largest request body in MiB (default 64); larger ones get 413")
    s.add_argument("--log-level", default="info",
                   choices=["critical", "error", "warning", "info", "debug"])
    s.set_defaults(func=cmd_serve)


def cmd_serve(args: argparse.Namespace) -> int:
    try:
        from onnxrt.serve import (BatchingConfig, InferenceServer, ModelRepository,
                                  SessionConfig)
        from onnxrt.serve.runner import ServeOptions, grpc_unavailable_reason, run_server
    except ImportError as e:
        raise CliError(f"onnxrt serve needs the serve extra (pip install 'onnxrt[serve]'): "
                       f"{e}") from None
    if args.batch_timeout_ms is not None and args.max_batch <= 1:
        raise CliError("--batch-timeout-ms needs --max-batch N with N > 1")
    if args.no_grpc and args.grpc_port is not None:
        raise CliError("--grpc-port and --no-grpc contradict each other")
    for flag, value, low in (("--port", args.port, 0), ("--threads", args.threads, 0),
                             ("--max-batch", args.max_batch, 0),
                             ("--instances", args.instances, 1)):
        if value < low:
            raise CliError(f"{flag} must be >= {low}, got {value}")
    if args.max_body_mb <= 0:
        raise CliError(f"--max-body-mb must be > 0, got {args.max_body_mb:g}")
    grpc_port: int | None = None
    if not args.no_grpc:
        reason = grpc_unavailable_reason()
        if reason is None:
            grpc_port = 8001 if args.grpc_port is None else args.grpc_port
        elif args.grpc_port is not None:
            raise CliError(f"--grpc-port: gRPC cannot be served here ({reason}); "
                           "pip install 'onnxrt[serve]'")
        else:
            print(f"onnxrt serve: gRPC off ({reason})", file=sys.stderr)
    timeout = args.batch_timeout_ms if args.batch_timeout_ms is not None else (
        _DEFAULT_TIMEOUT_MS if args.max_batch > 1 else 0.0)
    try:
        repo = ModelRepository.from_path(
            args.model, SessionConfig(tuple(providers_arg(args.providers) or ()) or None,
                                      args.threads))
    except (ValueError, FileNotFoundError) as e:
        raise CliError(str(e)) from None
    server = InferenceServer(repo, BatchingConfig(args.max_batch, timeout, args.instances))
    opts = ServeOptions(args.host, args.port, grpc_port, int(args.max_body_mb * (1 << 20)),
                        args.log_level)
    run_server(server, opts)
    return 0
