"""Op schema lookups through onnx.defs, cached."""

from __future__ import annotations

from functools import lru_cache

import onnx
import onnx.defs

__all__ = ["get_schema", "normalize_domain", "function_body"]


def normalize_domain(domain: str) -> str:
    return "" if domain == "ai.onnx" else domain


@lru_cache(maxsize=None)
def get_schema(op_type: str, opset: int, domain: str) -> onnx.defs.OpSchema | None:
    """The schema in force for ``domain::op_type`` at ``opset``, or None if there is none."""
    try:
        return onnx.defs.get_schema(op_type, opset, normalize_domain(domain))
    except onnx.defs.SchemaError:
        return None


@lru_cache(maxsize=None)
def known_op(op_type: str, domain: str) -> bool:
    """Whether the installed onnx defines ``domain::op_type`` at any version."""
    try:
        onnx.defs.get_schema(op_type, normalize_domain(domain))
        return True
    except onnx.defs.SchemaError:
        return False


def function_body(schema: onnx.defs.OpSchema, opset: int, node: onnx.NodeProto,
                  input_types: list[onnx.TypeProto] | None) -> onnx.FunctionProto | None:
    """The schema's function body for this node at ``opset``, if the spec defines one.

    Context-dependent bodies need the node's input types; pass None when they are unknown
    and only a plain body is wanted.
    """
    versions = [v for v in schema.function_opset_versions if v <= opset]
    if versions:
        raw = schema.get_function_with_opset_version(max(versions))
        if raw:
            f = onnx.FunctionProto()
            f.ParseFromString(raw if isinstance(raw, bytes) else raw.SerializeToString())
            return f
    if input_types is not None and schema.has_context_dependent_function:
        versions = [v for v in schema.context_dependent_function_opset_versions if v <= opset]
        if versions:
            raw = schema.get_context_dependent_function_with_opset_version(
                max(versions), node.SerializeToString(),
                [t.SerializeToString() for t in input_types])
            if raw:
                f = onnx.FunctionProto()
                f.ParseFromString(raw)
                return f
    return None


def has_context_dependent_body(schema: onnx.defs.OpSchema, opset: int) -> bool:
    return schema.has_context_dependent_function and any(
        v <= opset for v in schema.context_dependent_function_opset_versions)
