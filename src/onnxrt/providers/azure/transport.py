"""The invokers' HTTP transport: one urllib3 connection pool per process (thread-safe, so
concurrent runs and ``run_async`` share it), bounded waits, and errors that name the
endpoint, the model and what the server said."""

from __future__ import annotations

import json
import logging
import threading
from typing import Any, Mapping

from onnxrt.errors import ConfigKeyError, Fail

__all__ = ["post", "RemoteError", "DEFAULT_TIMEOUT_S", "timeout_for"]

log = logging.getLogger("onnxrt.azure")

DEFAULT_TIMEOUT_S = 60.0
# the run config entry that sets every invoker's wait for one run
RUN_TIMEOUT_KEY = "azure.timeout_s"

_pool: Any = None
_pool_lock = threading.Lock()


class RemoteError(Fail):
    """A request to a remote endpoint failed: no answer, a timeout, or an HTTP error."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def _manager() -> Any:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                import urllib3

                # retries off: a failed inference request is reported, never sent twice
                _pool = urllib3.PoolManager(num_pools=16, maxsize=8, retries=False)
    return _pool


def timeout_for(node_timeout: float | None, ctx: Any) -> float:
    """The wait for one request: the run's ``azure.timeout_s``, else the node's ``timeout``
    attribute, else 60 s."""
    ro = getattr(ctx, "run_options", None)
    raw = None
    if ro is not None:
        try:
            raw = ro.get_run_config_entry(RUN_TIMEOUT_KEY)
        except ConfigKeyError:    # the entry is not set
            raw = None
    if raw is not None:
        try:
            t = float(raw)
        except ValueError:
            t = -1.0
        if not t > 0:
            raise Fail(f"run config entry {RUN_TIMEOUT_KEY}={raw!r}: expected a positive "
                       f"number of seconds")
        return t
    return node_timeout if node_timeout is not None else DEFAULT_TIMEOUT_S


def post(url: str, body: bytes, headers: Mapping[str, str], timeout: float, what: str,
         verbose: bool = False) -> tuple[bytes, Mapping[str, str]]:
    """POSTs ``body`` and returns the answer's body and headers; raises RemoteError naming
    ``what`` (the op, endpoint and model) on any failure."""
    import urllib3

    if verbose:
        log.info("%s: POST %s (%d bytes)", what, url, len(body))
    try:
        r = _manager().request("POST", url, body=body, headers=dict(headers),
                               timeout=urllib3.Timeout(total=timeout), redirect=False)
    except urllib3.exceptions.NewConnectionError as e:
        # before TimeoutError: urllib3 makes a refused connection a kind of connect timeout
        raise RemoteError(f"{what}: cannot connect: {_reason(e)}") from e
    except urllib3.exceptions.TimeoutError as e:
        raise RemoteError(f"{what}: no answer within {timeout:g} s ({type(e).__name__})") from e
    except urllib3.exceptions.HTTPError as e:
        raise RemoteError(f"{what}: the request failed: {_reason(e)}") from e
    if verbose:
        log.info("%s: HTTP %d (%d bytes)", what, r.status, len(r.data))
    if r.status >= 300:
        raise RemoteError(f"{what}: HTTP {r.status} {r.reason or ''}".rstrip()
                          + f": {_server_message(r.data)}", r.status)
    return r.data, r.headers


def _reason(e: Exception) -> str:
    inner = getattr(e, "reason", None)
    return f"{type(e).__name__}: {inner if inner is not None else e}"


def _server_message(data: bytes) -> str:
    """The server's own explanation: KServe's ``{"error": ...}``, else the body's start."""
    text = data[:2000].decode("utf-8", errors="replace").strip()
    try:
        doc = json.loads(text)
    except ValueError:
        return text[:500] or "(empty body)"
    if isinstance(doc, dict) and isinstance(doc.get("error"), str):
        return doc["error"]
    return text[:500]
