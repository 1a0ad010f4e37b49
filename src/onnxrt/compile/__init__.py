"""Compiled models: ``ModelCompiler`` and the session config entries that write or read
models whose compiled groups are EPContext nodes (framework/ep_context.py)."""

from __future__ import annotations

from onnxrt.compile.compiler import ModelCompiler, OrtCompileApiFlags
from onnxrt.compile.initializers import OrtExternalInitializerInfo

__all__ = ["ModelCompiler", "OrtCompileApiFlags", "OrtExternalInitializerInfo"]
