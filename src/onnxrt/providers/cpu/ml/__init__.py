"""Kernels of the ai.onnx.ml domain (classic ML: trees, SVMs, linear models, encoders)."""
