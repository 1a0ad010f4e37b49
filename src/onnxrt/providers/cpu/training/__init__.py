"""Kernels of the ai.onnx.preview.training domain (optimizer steps; Gradient is not
implemented: it needs automatic differentiation)."""
