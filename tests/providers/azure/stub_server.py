"""A recording HTTP endpoint for the Azure provider's tests: it keeps every request (path,
headers, body) and answers by path, so the tests can check what went over the wire and how
failures are reported. The protocol's real server is ``onnxrt serve`` (test_azure_remote)."""

from __future__ import annotations

import json
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Seen:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class Stub:
    server: ThreadingHTTPServer
    seen: list[Seen] = field(default_factory=list)

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    def last(self) -> Seen:
        return self.seen[-1]


# a KServe v2 answer in JSON: y = [[1.5, 2.5]]
CANNED = {"model_name": "echo", "outputs": [
    {"name": "y", "datatype": "FP32", "shape": [1, 2], "data": [1.5, 2.5]}]}


def start_stub() -> Stub:
    stub: Stub

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            n = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(n)
            stub.seen.append(Seen(self.path, {k.lower(): v for k, v in self.headers.items()},
                                  body))
            if self.path.startswith("/slow"):
                time.sleep(1.5)
            if self.path.startswith("/deny"):
                return self._send(401, b'{"error": "the token is not valid"}')
            if self.path.startswith("/broken"):
                return self._send(500, b"internal trouble")
            if self.path.startswith("/text"):
                return self._send(200, b"answer to " + body, "text/plain")
            if self.path.startswith("/form"):
                ctype = self.headers.get("Content-Type", "")
                return self._send(200, json.dumps(_form(ctype, body)).encode(), "text/plain")
            if self.path.startswith("/garbage"):
                return self._send(200, b"<html>not json</html>", "text/html")
            return self._send(200, json.dumps(CANNED).encode())

        def _send(self, status: int, data: bytes, ctype: str = "application/json") -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    stub = Stub(server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return stub


def _form(ctype: str, body: bytes) -> dict[str, Any]:
    """The fields of a multipart/form-data body, parsed by the standard library's email
    parser: text fields as text, files as {filename, size, first bytes}."""
    from email.parser import BytesParser
    from email.policy import HTTP

    msg = BytesParser(policy=HTTP).parsebytes(
        f"Content-Type: {ctype}\r\n\r\n".encode() + body)
    out: dict[str, Any] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        filename = part.get_filename()
        data = part.get_payload(decode=True)
        if filename is not None:
            out[name] = {"filename": filename, "size": len(data), "head": list(data[:4])}
        else:
            out[name] = data.decode()
    return out
