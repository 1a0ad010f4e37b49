"""onnxrt's version (pyproject.toml's), where the bottom layer can read it (EP devices
report it for the built-in providers)."""

from __future__ import annotations

__version__ = "0.1.0"
