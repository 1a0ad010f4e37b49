"""onnxruntime's session config entries for compiled models, as a session acts on them:
``ep.context_enable`` (write the compiled model after building), ``ep.context_file_path``
(where; for a model given as bytes also where its blob files are read from),
``ep.context_embed_mode`` (1: blobs inside the nodes; 0, the default: files beside the
model), ``session.disable_model_compile`` (a group that needs compiling is an error).
``ep.share_ep_contexts`` / ``ep.stop_share_ep_contexts`` other than "0" are refused."""

from __future__ import annotations

import os

from onnxrt.compile.writer import default_output_path, write_compiled
from onnxrt.errors import InvalidArgument
from onnxrt.ir.graph import Graph
from onnxrt.partition.ep_context import ContextLoad

__all__ = ["context_load", "dump_context_model"]


# onnxruntime's entries for sharing one EP context (and its weights) between the sessions
# of a model group (QNN's weight sharing); no onnxrt provider shares compiled state between
# sessions, so "1" is refused rather than silently doing nothing
_SHARING = ("ep.share_ep_contexts", "ep.stop_share_ep_contexts")


def context_load(cfg: dict[str, str], model_path: str | None) -> ContextLoad:
    for key in _SHARING:
        value = cfg.get(key, "0")
        if value != "0":
            raise InvalidArgument(
                f"session config entry {key}={value!r} is not supported: no onnxrt provider "
                f"shares compiled EP contexts or weights between sessions (each session "
                f"compiles or loads its own EPContext nodes); leave it unset or \"0\"")
    if model_path is not None:
        base: str | None = os.path.dirname(os.path.abspath(model_path))
    elif cfg.get("ep.context_file_path"):
        base = os.path.dirname(os.path.abspath(cfg["ep.context_file_path"]))
    else:
        base = None
    return ContextLoad(base_dir=base,
                       allow_compile=cfg.get("session.disable_model_compile", "0") != "1")


def dump_context_model(graph: Graph, cfg: dict[str, str], model_path: str | None) -> str:
    """Write the session's graph as a compiled model (``ep.context_enable=1``); its path."""
    mode = cfg.get("ep.context_embed_mode", "0")
    if mode not in ("0", "1"):
        raise InvalidArgument(f"ep.context_embed_mode must be 0 or 1, got {mode!r}")
    path = cfg.get("ep.context_file_path", "")
    if not path:
        if model_path is None:
            raise InvalidArgument("ep.context_enable is set for a model given as bytes: set "
                                  "ep.context_file_path to where the compiled model goes")
        path = default_output_path(model_path)
    if model_path is not None and os.path.abspath(path) == os.path.abspath(model_path):
        raise InvalidArgument(f"ep.context_file_path {path!r} is the input model's path")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder):
        raise InvalidArgument(f"ep.context_file_path {path!r}: its folder does not exist")
    stem = os.path.splitext(os.path.basename(path))[0]
    out = write_compiled(graph, embed=mode == "1", model_stem=stem)
    for name, data in out.files.items():
        with open(os.path.join(folder, name), "wb") as f:
            f.write(data)
    with open(path, "wb") as f:
        f.write(out.model.SerializeToString())
    return path
