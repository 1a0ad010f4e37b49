"""onnxruntime's ``onnxruntime.capi._pybind_state``: the binding module's names."""

from __future__ import annotations

from onnxrt.capi.onnxruntime_pybind11_state import *  # noqa: F401,F403 - the same names
from onnxrt.capi.onnxruntime_pybind11_state import __all__  # noqa: F401
