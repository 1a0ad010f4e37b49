"""com.microsoft kernels for the ops the graph fusions produce (onnxruntime's names,
inputs, attributes and semantics, so optimized models mean the same in both runtimes)."""
