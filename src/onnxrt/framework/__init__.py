"""The execution provider framework: kernels, providers, devices, provider registry."""
