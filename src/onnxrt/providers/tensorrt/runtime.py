"""The real backend: TensorRT's ONNX parser and builder, engines run with torch CUDA
buffers. Imported only when the provider is created on a machine that has both."""

from __future__ import annotations

import functools
import threading
from typing import Any, Sequence

import numpy as np

from onnxrt.framework.device import Device
from onnxrt.framework.transfer import DataTransfer
from onnxrt.providers.tensorrt.backend import Backend, BuildRequest, Engine, GpuInfo

__all__ = ["TensorRTBackend", "import_error", "TorchCudaTransfer"]


@functools.lru_cache(maxsize=1)
def import_error() -> str:
    """Why TensorRT cannot be used here ("" when it can): package, torch, CUDA device."""
    try:
        import tensorrt  # noqa: F401
    except Exception as e:  # ImportError, or a broken CUDA library underneath
        return (f"the tensorrt package cannot be imported ({type(e).__name__}: {e}); install "
                f"it with pip install onnxrt[tensorrt]")
    try:
        import torch
    except Exception as e:
        return (f"torch, which holds TensorRT's device buffers, cannot be imported "
                f"({type(e).__name__}: {e})")
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return "no CUDA GPU is visible (torch.cuda.is_available() is False)"
    return ""


# ONNX element type -> torch dtype name (getattr'd so older torch builds still import)
_ONNX_TO_TORCH = {1: "float32", 2: "uint8", 3: "int8", 5: "int16", 6: "int32", 7: "int64",
                  9: "bool", 10: "float16", 11: "float64", 16: "bfloat16",
                  17: "float8_e4m3fn", 19: "float8_e5m2"}
# ml_dtypes arrays reach torch through a same-width integer view
_VIEWED = {"bfloat16": ("uint16", "bfloat16"), "float8_e4m3fn": ("uint8", "float8_e4m3fn"),
           "float8_e5m2": ("uint8", "float8_e5m2")}


class TorchCudaTransfer(DataTransfer):
    """Host numpy arrays <-> torch tensors on ``cuda:N``."""

    def _to_device(self, array: np.ndarray, device: Device) -> Any:
        import torch

        dev = torch.device("cuda", device.id)
        name = array.dtype.name
        if name in _VIEWED:
            raw, target = _VIEWED[name]
            t = torch.from_numpy(np.ascontiguousarray(array).view(raw))
            return t.to(dev).view(getattr(torch, target))
        return torch.from_numpy(np.ascontiguousarray(array)).to(dev)

    def _to_host(self, value: Any) -> np.ndarray:
        import ml_dtypes

        t = value.detach()
        name = str(t.dtype).removeprefix("torch.")
        if name in _VIEWED:
            raw, _ = _VIEWED[name]
            import torch

            arr = t.view(getattr(torch, raw)).cpu().numpy()
            return arr.view(getattr(ml_dtypes, name))
        return t.cpu().numpy()


class _Logger:
    """One TensorRT logger per verbosity (TensorRT wants a logger to outlive its users)."""

    _made: dict[bool, Any] = {}

    @classmethod
    def get(cls, trt: Any, verbose: bool) -> Any:
        if verbose not in cls._made:
            cls._made[verbose] = trt.Logger(trt.Logger.VERBOSE if verbose
                                            else trt.Logger.WARNING)
        return cls._made[verbose]


class TensorRTBackend(Backend):
    def __init__(self) -> None:
        import tensorrt as trt
        import torch

        self.trt = trt
        self.torch = torch
        self._major = int(trt.__version__.split(".")[0])

    def version(self) -> str:
        return str(self.trt.__version__)

    def device_count(self) -> int:
        return int(self.torch.cuda.device_count())

    def gpu(self, device_id: int) -> GpuInfo:
        p = self.torch.cuda.get_device_properties(device_id)
        with self.torch.cuda.device(device_id):
            builder = self.trt.Builder(_Logger.get(self.trt, False))
            dla = int(getattr(builder, "num_DLA_cores", 0) or 0)
        return GpuInfo(str(p.name), (int(p.major), int(p.minor)), dla)

    def _network(self, logger: Any) -> tuple[Any, Any, Any]:
        trt = self.trt
        builder = trt.Builder(logger)
        # explicit batch is the only mode from TensorRT 10 on; earlier versions need the flag
        flags = 0 if self._major >= 10 else \
            1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
        network = builder.create_network(flags)
        parser = trt.OnnxParser(network, logger)
        return builder, network, parser

    def supported_subgraphs(self, model: bytes) -> list[list[int]]:
        # bound to locals: the builder and network must outlive the parser writing into them
        builder, network, parser = self._network(_Logger.get(self.trt, False))
        if hasattr(parser, "supports_model_v2"):          # TensorRT >= 10.1
            parser.supports_model_v2(model)
            return [list(parser.get_subgraph_nodes(i)) for i in range(parser.num_subgraphs)
                    if parser.is_subgraph_supported(i)]
        if hasattr(parser, "supports_model"):
            _, subgraphs = parser.supports_model(model)
            return [list(nodes) for nodes, ok in subgraphs if ok]
        # no support query: parse, and leave out the nodes the parser names in its errors
        # and ops it does not know; the provider's partition iterations re-ask per group
        import onnx

        proto = onnx.load_from_string(model)
        if parser.parse(model):
            return [list(range(len(proto.graph.node)))]
        bad = set()
        for i in range(parser.num_errors):
            idx = int(parser.get_error(i).node())
            if idx >= 0:
                bad.add(idx)
        bad |= {i for i, n in enumerate(proto.graph.node)
                if not parser.supports_operator(n.op_type)}
        good = [i for i in range(len(proto.graph.node)) if i not in bad]
        return [good] if good else []

    def build(self, request: BuildRequest) -> tuple[bytes, bytes | None]:
        trt = self.trt
        logger = _Logger.get(trt, request.detailed_log)
        with self.torch.cuda.device(request.device_id):
            builder, network, parser = self._network(logger)
            if not parser.parse(request.model):
                errors = "; ".join(str(parser.get_error(i)) for i in range(parser.num_errors))
                raise RuntimeError(f"TensorRT's ONNX parser rejected {request.name}: {errors}")
            config = builder.create_builder_config()
            if request.workspace:
                config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, request.workspace)
            if request.fp16:
                config.set_flag(trt.BuilderFlag.FP16)
            if request.int8:
                config.set_flag(trt.BuilderFlag.INT8)
                if request.dynamic_ranges:
                    self._set_ranges(network, request.dynamic_ranges)
            if hasattr(config, "builder_optimization_level"):
                config.builder_optimization_level = request.opt_level
            if request.dla_core is not None:
                config.default_device_type = trt.DeviceType.DLA
                config.DLA_core = request.dla_core
                config.set_flag(trt.BuilderFlag.GPU_FALLBACK)
            for prof in request.profiles:
                if not prof:
                    continue
                p = builder.create_optimization_profile()
                for name, (lo, mid, hi) in prof.items():
                    p.set_shape(name, lo, mid, hi)
                config.add_optimization_profile(p)
            if request.timing_cache is not None:
                cache = config.create_timing_cache(request.timing_cache)
                config.set_timing_cache(cache, ignore_mismatch=False)
            engine = builder.build_serialized_network(network, config)
            if engine is None:
                raise RuntimeError(f"TensorRT could not build an engine for {request.name} "
                                   f"(trt_detailed_build_log=1 shows TensorRT's log)")
            timing = None
            if request.timing_cache is not None:
                timing = bytes(memoryview(config.get_timing_cache().serialize()))
            return bytes(memoryview(engine)), timing

    @staticmethod
    def _set_ranges(network: Any, ranges: dict[str, float] | Any) -> None:
        tensors = [network.get_input(i) for i in range(network.num_inputs)]
        for i in range(network.num_layers):
            layer = network.get_layer(i)
            tensors.extend(layer.get_output(k) for k in range(layer.num_outputs))
        for t in tensors:
            r = ranges.get(t.name)
            if r is not None:
                t.set_dynamic_range(-float(r), float(r))

    def load(self, engine: bytes, device_id: int, inputs: Sequence[str],
             outputs: Sequence[str], output_types: Sequence[int]) -> Engine:
        return _TorchEngine(self, engine, device_id, inputs, outputs, output_types)

    def serialize(self, engine: Engine) -> bytes:
        if not isinstance(engine, _TorchEngine):
            raise TypeError(f"not an engine of this backend: {type(engine).__name__}")
        with self.torch.cuda.device(engine.device):
            host = engine.engine.serialize()      # ICudaEngine.serialize -> IHostMemory
        if host is None:
            raise RuntimeError("TensorRT could not serialize the engine")
        return bytes(memoryview(host))

    def data_transfer(self, device_id: int) -> DataTransfer:
        return TorchCudaTransfer()


class _TorchEngine(Engine):
    """Runs an engine with torch tensors as buffers, on torch's current CUDA stream."""

    def __init__(self, backend: TensorRTBackend, data: bytes, device_id: int,
                 inputs: Sequence[str], outputs: Sequence[str],
                 output_types: Sequence[int]) -> None:
        trt, torch = backend.trt, backend.torch
        self.torch = torch
        self.device = torch.device("cuda", device_id)
        with torch.cuda.device(device_id):
            self.runtime = trt.Runtime(_Logger.get(trt, False))
            self.engine = self.runtime.deserialize_cuda_engine(data)
        if self.engine is None:
            raise RuntimeError("TensorRT could not deserialize the engine (built by another "
                               "TensorRT version or for another GPU?)")
        self.inputs = list(inputs)
        self.outputs = list(outputs)
        dt = {trt.float32: torch.float32, trt.float16: torch.float16, trt.int8: torch.int8,
              trt.int32: torch.int32, trt.bool: torch.bool}
        for trt_name, torch_name in (("int64", "int64"), ("uint8", "uint8"),
                                     ("bf16", "bfloat16"), ("fp8", "float8_e4m3fn")):
            if hasattr(trt, trt_name) and hasattr(torch, torch_name):
                dt[getattr(trt, trt_name)] = getattr(torch, torch_name)
        self.in_dtypes = [dt[self.engine.get_tensor_dtype(n)] for n in self.inputs]
        self.out_dtypes = [dt[self.engine.get_tensor_dtype(n)] for n in self.outputs]
        self.want_dtypes = [getattr(torch, _ONNX_TO_TORCH.get(t, "float32")) for t in
                            output_types]
        self.contexts: dict[int, Any] = {}
        # an execution context holds per-run state: one run at a time per engine
        self.lock = threading.Lock()

    def _context(self, profile: int) -> Any:
        ctx = self.contexts.get(profile)
        if ctx is None:
            ctx = self.engine.create_execution_context()
            if profile:
                stream = self.torch.cuda.current_stream(self.device)
                ctx.set_optimization_profile_async(profile, stream.cuda_stream)
            self.contexts[profile] = ctx
        return ctx

    def run(self, inputs: Sequence[Any], profile: int = 0) -> list[Any]:
        torch = self.torch
        with torch.cuda.device(self.device), self.lock:
            ctx = self._context(profile)
            stream = torch.cuda.current_stream(self.device)
            keep = []
            for name, t, want in zip(self.inputs, inputs, self.in_dtypes):
                # TensorRT 8 narrows int64 inputs to int32; torch does the cast on the GPU
                t = t.to(self.device, want).contiguous()
                keep.append(t)
                ctx.set_input_shape(name, tuple(t.shape))
                ctx.set_tensor_address(name, t.data_ptr())
            outs = []
            for name, dtype in zip(self.outputs, self.out_dtypes):
                shape = tuple(ctx.get_tensor_shape(name))
                if any(d < 0 for d in shape):
                    raise RuntimeError(f"output {name!r} has a data-dependent shape {shape}, "
                                       f"which this provider cannot allocate")
                o = torch.empty(shape, dtype=dtype, device=self.device)
                ctx.set_tensor_address(name, o.data_ptr())
                outs.append(o)
            if not ctx.execute_async_v3(stream.cuda_stream):
                raise RuntimeError("TensorRT's execute_async_v3 failed")
            return [o if o.dtype == w else o.to(w) for o, w in zip(outs, self.want_dtypes)]
