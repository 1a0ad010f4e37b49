"""The model zoo that ships inside the onnx package (onnx/backend/test/data/light/): small
files whose weights are generated in-graph, with real CNN architectures and stored outputs."""

from __future__ import annotations

import glob
import os

import onnx

__all__ = ["zoo_dir", "zoo_models", "resolve_model"]


def zoo_dir() -> str:
    return os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")


def zoo_models() -> dict[str, str]:
    """Model name -> path, e.g. ``resnet50`` -> .../light_resnet50.onnx."""
    out = {}
    for p in sorted(glob.glob(os.path.join(zoo_dir(), "light_*.onnx"))):
        out[os.path.basename(p)[len("light_"):-len(".onnx")]] = p
    return out


def resolve_model(name_or_path: str) -> str:
    """A path as given, or the zoo model of that name."""
    if os.path.exists(name_or_path):
        return name_or_path
    zoo = zoo_models()
    key = name_or_path.lower()
    if key in zoo:
        return zoo[key]
    if key.startswith("light_") and key[6:] in zoo:
        return zoo[key[6:]]
    raise FileNotFoundError(
        f"{name_or_path!r} is neither a file nor a zoo model (zoo: {', '.join(zoo)})")
