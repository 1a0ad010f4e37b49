"""Servers for the protocol tests: ``onnxrt serve`` in a subprocess on 127.0.0.1, ports
chosen by the server (--port 0), models from tests/serve_models.py."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass

import numpy as np
import pytest

pytest.importorskip("starlette", reason="the serve extra is not installed")
pytest.importorskip("tritonclient.http", reason="tritonclient[http] is not installed")

from serve_models import write_repository  # noqa: E402


@dataclass
class Server:
    proc: subprocess.Popen
    http: str       # host:port
    grpc: str | None
    log: str        # path of its stderr

    @property
    def url(self) -> str:
        return "http://" + self.http

    def stderr(self) -> str:
        with open(self.log, encoding="utf-8", errors="replace") as f:
            return f.read()

    def metric(self, name: str, **labels: str) -> float:
        """A sample's value from /metrics (0 when absent)."""
        text = urllib.request.urlopen(self.url + "/metrics", timeout=10).read().decode()
        for line in text.splitlines():
            m = re.fullmatch(r"(\w+)(?:\{(.*)\})? (\S+)", line)
            if not m or m.group(1) != name:
                continue
            got = dict(re.findall(r'(\w+)="([^"]*)"', m.group(2) or ""))
            if all(got.get(k) == v for k, v in labels.items()):
                return float(m.group(3))
        return 0.0


def start_server(args: list[str], log_path: str, timeout: float = 120.0,
                 wait_ready: bool = True) -> Server:
    """Starts the server and waits until it is ready (or only live)."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    log = open(log_path, "w")
    proc = subprocess.Popen([sys.executable, "-m", "onnxrt.cli.main", "serve", *args,
                             "--port", "0", "--host", "127.0.0.1"],
                            stdout=subprocess.PIPE, stderr=log, text=True, env=env)
    lines: list[str] = []

    def read() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)

    threading.Thread(target=read, daemon=True).start()
    deadline = time.monotonic() + timeout
    http = grpc = None
    while time.monotonic() < deadline and proc.poll() is None:
        text = "".join(lines)
        http_m = re.search(r"HTTP on http://([\d.]+:\d+)", text)
        grpc_m = re.search(r"gRPC on ([\d.]+:\d+)", text)
        want_grpc = "--no-grpc" not in args
        if http_m and (grpc_m or not want_grpc):
            http, grpc = http_m.group(1), grpc_m.group(1) if grpc_m else None
            try:
                probe = "ready" if wait_ready else "live"
                with urllib.request.urlopen(f"http://{http}/v2/health/{probe}", timeout=5) as r:
                    if r.status == 200:
                        return Server(proc, http, grpc, log_path)
            except OSError:
                pass
        time.sleep(0.1)
    proc.kill()
    raise RuntimeError(f"the server did not become ready: {open(log_path).read()[-3000:]}")


def stop_server(server: Server) -> None:
    assert server.proc.poll() is None, f"the server died: {server.stderr()[-3000:]}"
    server.proc.send_signal(signal.SIGTERM)
    try:
        server.proc.wait(30)
    except subprocess.TimeoutExpired:
        server.proc.kill()
        raise


@pytest.fixture(scope="session")
def repo(tmp_path_factory) -> str:
    return write_repository(str(tmp_path_factory.mktemp("repo")))


@pytest.fixture(scope="session")
def plain(repo, tmp_path_factory):
    """No dynamic batching, gRPC on, a 1 MiB body limit."""
    s = start_server([repo, "--grpc-port", "0", "--max-body-mb", "1", "--threads", "1"],
                     str(tmp_path_factory.mktemp("log") / "plain.log"))
    yield s
    stop_server(s)


@pytest.fixture(scope="session")
def batching(repo, tmp_path_factory):
    """Dynamic batching up to 8 rows, the oldest request waiting up to 250 ms."""
    s = start_server([repo, "--grpc-port", "0", "--max-batch", "8", "--batch-timeout-ms",
                      "250", "--threads", "1"],
                     str(tmp_path_factory.mktemp("log") / "batching.log"))
    yield s
    stop_server(s)


def assert_same(actual: np.ndarray, expected: np.ndarray) -> None:
    """Equal dtype and shape; values equal, floats within 1 ulp-ish (a matrix product of
    another row count may take another BLAS path)."""
    assert actual.dtype == expected.dtype and actual.shape == expected.shape
    if expected.dtype.kind == "f":
        np.testing.assert_allclose(actual, expected, rtol=1e-6, atol=1e-6)
    else:
        np.testing.assert_array_equal(actual, expected)
