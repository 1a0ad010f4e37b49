"""EPContext nodes: a compile-based provider's compiled subgraph kept in the model.

A compiled model (``ModelCompiler``, or a session with ``ep.context_enable=1``) holds each
fused group as one ``com.microsoft`` ``EPContext`` node, the node onnxruntime's providers
write: the compiled blob in its ``ep_cache_context`` attribute (``embed_mode=1``) or a file
beside the model named there (``embed_mode=0``), the provider in ``source``, the engine's
version in ``ep_sdk_version``, the device in ``hardware_architecture``. A later session hands
the node to that provider's ``load_context`` instead of compiling.

The blob is untrusted input like the rest of the model: a file it names is read only from
inside the model's folder, its digest (written in ``notes``) is checked before any engine
sees it, and the provider refuses a blob made by another engine version or for another
device (``StaleContext``) rather than run it.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import helper

from onnxrt.errors import EPFail, InvalidGraph

__all__ = ["EP_CONTEXT_OP", "EP_CONTEXT_DOMAIN", "ContextBlob", "EPContext", "StaleContext",
           "is_ep_context", "parse_ep_context", "make_ep_context_node", "read_blob"]

EP_CONTEXT_OP = "EPContext"
EP_CONTEXT_DOMAIN = "com.microsoft"
# version of what onnxrt writes in ``notes``: a reader refuses a newer one it cannot read
NOTES_FORMAT = 1


class StaleContext(EPFail):
    """An EPContext blob this provider must not run here: made by another engine version,
    for another device or another provider, or damaged."""


@dataclass
class ContextBlob:
    """What a provider's ``export_context`` returns for one compiled group: the blob and the
    facts a later session checks before loading it. ``notes`` holds whatever else the
    provider wants back (its settings' key, a device name), as JSON-able values."""

    data: bytes
    sdk_version: str
    hardware: str
    notes: dict[str, Any] = field(default_factory=dict)
    # written in the model's metadata as ep_compatibility_info.<provider> ("" : none), what
    # the provider's compiled_model_compatibility later judges
    compatibility: str = ""


@dataclass
class EPContext:
    """An EPContext node as read from a model, its blob not yet read."""

    node: onnx.NodeProto
    source: str
    embed_mode: int
    sdk_version: str
    hardware: str
    partition_name: str
    notes: dict[str, Any]
    cache_context: bytes     # the blob (embed_mode 1) or the file name (embed_mode 0)
    base_dir: str | None

    @property
    def name(self) -> str:
        return self.node.name or self.partition_name or "<unnamed EPContext>"

    def blob(self) -> bytes:
        """The compiled blob, read from the file beside the model for ``embed_mode`` 0,
        checked against the digest it was written with."""
        if self.embed_mode == 1:
            data = self.cache_context
        else:
            data = read_blob(self.cache_context.decode("utf-8", "replace"), self.base_dir,
                             self.name)
        want = self.notes.get("sha256")
        if want and hashlib.sha256(data).hexdigest() != want:
            raise StaleContext(f"EPContext node {self.name!r}: its compiled blob does not "
                               f"match the digest written with it (damaged or replaced); "
                               f"compile the model again")
        return data


def is_ep_context(node: onnx.NodeProto) -> bool:
    return node.op_type == EP_CONTEXT_OP and node.domain == EP_CONTEXT_DOMAIN


def parse_ep_context(node: onnx.NodeProto, base_dir: str | None) -> EPContext:
    """The fields of an EPContext node; a malformed one is an InvalidGraph naming it."""
    a = {at.name: helper.get_attribute_value(at) for at in node.attribute}
    name = node.name or "<unnamed EPContext>"
    embed = int(a.get("embed_mode", 1))
    if embed not in (0, 1):
        raise InvalidGraph(f"EPContext node {name!r}: embed_mode must be 0 or 1, got {embed}")
    if int(a.get("main_context", 1)) != 1:
        raise InvalidGraph(f"EPContext node {name!r}: main_context=0 (a context shared with "
                           f"another node) is not supported")
    ctx = a.get("ep_cache_context")
    if not isinstance(ctx, bytes) or not ctx:
        raise InvalidGraph(f"EPContext node {name!r} has no ep_cache_context")
    notes: dict[str, Any] = {}
    raw = a.get("notes", b"")
    if raw:
        try:
            notes = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            notes = {"text": raw.decode("utf-8", "replace")}
        if not isinstance(notes, dict):
            notes = {"text": str(notes)}
    return EPContext(node=node, source=_text(a.get("source")), embed_mode=embed,
                     sdk_version=_text(a.get("ep_sdk_version")),
                     hardware=_text(a.get("hardware_architecture")),
                     partition_name=_text(a.get("partition_name")), notes=notes,
                     cache_context=ctx, base_dir=base_dir)


def _text(v: Any) -> str:
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else ("" if v is None else
                                                                       str(v))


def make_ep_context_node(name: str, provider: str, inputs: list[str], outputs: list[str],
                         blob: ContextBlob, cache_context: bytes, embed_mode: int
                         ) -> onnx.NodeProto:
    """An EPContext node for a compiled group; ``cache_context`` is the blob itself
    (``embed_mode`` 1) or the name of its file, relative to the model (0)."""
    notes = dict(blob.notes)
    notes["format"] = NOTES_FORMAT
    notes["sha256"] = hashlib.sha256(blob.data).hexdigest()
    return helper.make_node(
        EP_CONTEXT_OP, inputs, outputs, name=name, domain=EP_CONTEXT_DOMAIN,
        main_context=1, embed_mode=int(embed_mode), ep_cache_context=cache_context,
        ep_sdk_version=blob.sdk_version, hardware_architecture=blob.hardware,
        partition_name=name, source=provider,
        notes=json.dumps(notes, sort_keys=True))


def read_blob(rel: str, base_dir: str | None, node: str) -> bytes:
    """A blob file named by an EPContext node: relative to the model's folder and inside
    it (an absolute path, ``..`` or a link out of the folder is refused)."""
    if base_dir is None:
        raise EPFail(f"EPContext node {node!r} keeps its blob in the file {rel!r}, but the "
                     f"model was given as bytes: load it from its file, or set the session "
                     f"config entry ep.context_file_path to where it lies")
    if not rel or os.path.isabs(rel) or rel.startswith(("/", "\\")) or ":" in rel:
        raise EPFail(f"EPContext node {node!r}: its blob path {rel!r} must be relative to "
                     f"the model's folder")
    base = os.path.realpath(base_dir)
    path = os.path.realpath(os.path.join(base, rel))
    if os.path.commonpath([base, path]) != base:
        raise EPFail(f"EPContext node {node!r}: its blob path {rel!r} leads out of the "
                     f"model's folder {base_dir}; refused")
    if not os.path.isfile(path):
        raise EPFail(f"EPContext node {node!r}: its blob file {rel!r} does not exist in "
                     f"{base_dir}")
    with open(path, "rb") as f:
        return f.read()
