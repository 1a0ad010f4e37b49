"""onnxrt in other engines: ``onnxrt.integrations.ray`` (Ray Data batch inference, Ray Serve
deployment of the Open Inference Protocol server). Each needs its extra installed."""
