"""Tensor manipulation on the CPU: shapes, layout, indexing, casting.

Ops that only reinterpret a shape (Reshape, Squeeze, Unsqueeze, Flatten, Transpose, Slice,
Identity) return NumPy views: they are everywhere in real models and must not copy.
"""
