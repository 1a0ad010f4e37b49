"""The one error a request can get: an HTTP status and the message of the protocol's
error JSON (``{"error": "..."}``); the gRPC front end maps the status to a gRPC code."""

from __future__ import annotations

__all__ = ["ServeError", "bad_request", "not_found", "unavailable"]

# HTTP status -> grpc.StatusCode name (the gRPC front end looks the names up)
_GRPC_CODES = {400: "INVALID_ARGUMENT", 404: "NOT_FOUND", 413: "RESOURCE_EXHAUSTED",
               415: "INVALID_ARGUMENT", 500: "INTERNAL", 503: "UNAVAILABLE"}


class ServeError(Exception):
    """A request refused or failed: ``status`` is its HTTP status, ``str(e)`` the message."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status

    @property
    def message(self) -> str:
        return str(self)

    @property
    def grpc_code(self) -> str:
        return _GRPC_CODES.get(self.status, "INVALID_ARGUMENT" if self.status < 500
                               else "INTERNAL")


def bad_request(message: str) -> ServeError:
    return ServeError(400, message)


def not_found(message: str) -> ServeError:
    return ServeError(404, message)


def unavailable(message: str) -> ServeError:
    return ServeError(503, message)
