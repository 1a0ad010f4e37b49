"""onnxruntime's ``capi`` module paths, for code that imports from them
(``onnxruntime.capi.onnxruntime_pybind11_state``, ``_pybind_state``,
``onnxruntime_inference_collection``). They re-export onnxrt's own classes: there is no
separate C layer, so ``C.OrtValue`` and ``onnxrt.OrtValue`` are one class."""
