"""The openvino package, imported only when the provider is used, and one shared Core.

onnxrt must import (and say why OpenVINO is unavailable) on machines without the package,
so nothing here imports openvino at module import time.
"""

from __future__ import annotations

import threading
from typing import Any

__all__ = ["openvino", "core", "version", "import_error", "available_devices",
           "onnx_frontend"]

_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def _load() -> None:
    if "ov" in _STATE or "error" in _STATE:
        return
    with _LOCK:
        if "ov" in _STATE or "error" in _STATE:
            return
        try:
            import openvino as ov

            # one Core per process: it caches loaded plugins; per-session settings travel as
            # compile/query configs, never as global properties
            _STATE["core"] = ov.Core()
            _STATE["ov"] = ov
        except Exception as e:  # missing package, or a broken install
            _STATE["error"] = f"{type(e).__name__}: {e}"


def import_error() -> str:
    """Why openvino cannot be imported ("" when it can)."""
    _load()
    return _STATE.get("error", "")


def openvino() -> Any:
    _load()
    if "ov" not in _STATE:
        raise RuntimeError(f"the openvino package cannot be imported ({_STATE['error']}); "
                           f"install it with: pip install onnxrt[openvino]")
    return _STATE["ov"]


def core() -> Any:
    openvino()
    return _STATE["core"]


def version() -> str:
    return str(openvino().__version__)


def available_devices() -> list[str]:
    """Devices the OpenVINO runtime finds here (``CPU``, ``GPU.0``...), cached."""
    if "devices" not in _STATE:
        try:
            _STATE["devices"] = list(core().available_devices)
        except Exception:
            _STATE["devices"] = []
    return list(_STATE["devices"])


def onnx_frontend() -> Any:
    """OpenVINO's ONNX frontend (reads ONNX bytes, converts partially), created once."""
    if "fe" not in _STATE:
        openvino()
        from openvino.frontend import FrontEndManager

        with _LOCK:
            if "fe" not in _STATE:
                _STATE["fe"] = FrontEndManager().load_by_framework("onnx")
    return _STATE["fe"]
