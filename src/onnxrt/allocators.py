"""OrtDevice, OrtMemoryInfo, OrtArenaCfg and the shared allocators, as onnxruntime's Python
API names them; defined in ``framework/allocators.py`` (the bottom layer: OrtValue and the
EP devices describe memory with them)."""

from __future__ import annotations

from onnxrt.framework.allocators import *  # noqa: F401,F403
from onnxrt.framework.allocators import __all__  # noqa: F401
