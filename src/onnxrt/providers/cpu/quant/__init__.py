"""Quantization kernels: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearConv,
QLinearMatMul, MatMulInteger, ConvInteger."""
