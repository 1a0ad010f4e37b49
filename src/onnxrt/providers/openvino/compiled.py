"""Running a fused group on OpenVINO: compile its ONNX model once (or once per input shape
when dynamic shapes are off), then infer through a pool of infer requests so concurrent
``run`` calls never share one."""

from __future__ import annotations

import hashlib
import os
import queue
import threading
from typing import Any, Callable

import ml_dtypes
import numpy as np
import onnx

from onnxrt.ir.dtypes import np_dtype, onnx_elem_type
from onnxrt.providers.openvino import runtime

__all__ = ["build_runner"]


class _Runner:
    """One compiled model: inputs in the fused group's order, outputs as numpy arrays of the
    ONNX element types."""

    __slots__ = ("compiled", "in_index", "in_conv", "out_index", "out_dtypes", "_idle")

    def __init__(self, compiled: Any, in_names: list[str], out_names: list[str],
                 out_dtypes: list[np.dtype | None]) -> None:
        self.compiled = compiled
        self.in_index = _port_order(compiled.inputs, in_names, "input")
        self.out_index = _port_order(compiled.outputs, out_names, "output")
        self.in_conv = [_to_ov(compiled.inputs[p]) for p in self.in_index]
        ov = runtime.openvino()
        self.out_dtypes = [_BF16 if compiled.outputs[p].get_element_type() == ov.Type.bf16
                           else dt for p, dt in zip(self.out_index, out_dtypes)]
        self._idle: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._idle.put(compiled.create_infer_request())

    def __call__(self, *args: Any) -> list[np.ndarray]:
        feeds = [None] * len(self.in_index)
        for k, pos in enumerate(self.in_index):
            conv = self.in_conv[k]
            feeds[pos] = _host(args[k]) if conv is None else conv(args[k])
        try:
            req = self._idle.get_nowait()
        except queue.Empty:  # another thread holds the idle one: requests are cheap
            req = self.compiled.create_infer_request()
        try:
            # outputs are copied out of the request (share_outputs=False), so the request can
            # go back to the pool at once
            res = req.infer(feeds, share_inputs=True, share_outputs=False).to_tuple()
        finally:
            self._idle.put(req)
        outs = []
        for pos, dt in zip(self.out_index, self.out_dtypes):
            a = res[pos]
            if dt is not None and a.dtype != dt:
                # OpenVINO hands bfloat16 bits out as float16: reinterpret, never convert
                a = a.view(dt) if a.dtype == np.float16 and dt == _BF16 else a.astype(dt)
            outs.append(a)
        return outs


_BF16 = np.dtype(ml_dtypes.bfloat16)


def _to_ov(port: Any) -> Callable[[Any], Any] | None:
    """A converter for inputs numpy cannot hand to OpenVINO as they are (bfloat16, whose
    ml_dtypes arrays OpenVINO does not recognize); None for the rest."""
    ov = runtime.openvino()
    if port.get_element_type() != ov.Type.bf16:
        return None

    def conv(a: Any) -> Any:
        a = np.asarray(a, dtype=_BF16)
        if not a.flags.c_contiguous:
            a = a.copy()  # (np.ascontiguousarray would turn a scalar into shape (1,))
        return ov.Tensor(a.view(np.uint16), ov.Shape(list(a.shape)), ov.Type.bf16)

    return conv


def _host(a: Any) -> Any:
    if isinstance(a, np.ndarray):
        return a if a.flags.c_contiguous else a.copy()
    return np.asarray(a)


def _port_order(ports: Any, names: list[str], what: str) -> list[int]:
    """Position of each ONNX value among the compiled model's ports."""
    where: dict[str, int] = {}
    for k, p in enumerate(ports):
        for nm in p.get_names():
            where.setdefault(nm, k)
    order = []
    for k, n in enumerate(names):
        if n in where:
            order.append(where[n])
        elif len(ports) == len(names):
            order.append(k)  # names lost in conversion: OpenVINO keeps the ONNX order
        else:
            raise RuntimeError(f"OpenVINO's compiled model has no {what} named {n!r}")
    return order


class _PerShape:
    """Compiles again for every new combination of input shapes (dynamic shapes off)."""

    def __init__(self, ov_model: Any, make: Callable[[Any], _Runner],
                 in_names: list[str]) -> None:
        self.ov_model = ov_model
        self.make = make
        self.in_names = in_names
        self.cache: dict[tuple[tuple[int, ...], ...], _Runner] = {}
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> list[np.ndarray]:
        key = tuple(tuple(np.shape(a)) for a in args)
        fn = self.cache.get(key)
        if fn is None:
            with self.lock:
                fn = self.cache.get(key)
                if fn is None:
                    ov = runtime.openvino()
                    m = self.ov_model.clone()
                    shapes = {}
                    for p in m.inputs:
                        names = p.get_names()
                        k = next(i for i, n in enumerate(self.in_names) if n in names)
                        shapes[p] = ov.PartialShape(list(key[k]))
                    m.reshape(shapes)
                    fn = self.make(m)
                    self.cache[key] = fn
        return fn(*args)


def _dtype(tp: onnx.TypeProto | None) -> np.dtype | None:
    if tp is None or not tp.HasField("tensor_type") or not tp.tensor_type.elem_type:
        return None
    try:
        return np_dtype(tp.tensor_type.elem_type)
    except Exception:
        return None


def _is_static(model: onnx.ModelProto) -> bool:
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        if not tt.HasField("shape"):
            return False
        if any(not d.HasField("dim_value") for d in tt.shape.dim):
            return False
    return True


def build_runner(model: onnx.ModelProto, in_names: list[str], out_names: list[str],
                 settings: Any, on_compile: Callable[[], None] = lambda: None,
                 ) -> Callable[..., list[np.ndarray]]:
    """Compile ``model`` (a fused group's standalone model) for ``settings`` and return the
    callable that runs it; ``on_compile`` is called for every OpenVINO compilation."""
    if any(not vi.type.tensor_type.elem_type for vi in model.graph.input):
        return _Untyped(model, in_names, out_names, settings, on_compile)
    core = runtime.core()
    config = settings.compile_config()
    device = settings.device
    out_types = {vi.name: vi.type for vi in model.graph.output}
    out_dtypes = [_dtype(out_types.get(n)) for n in out_names]
    data = model.SerializeToString()

    def make(ov_model: Any) -> _Runner:
        on_compile()
        return _Runner(core.compile_model(ov_model, device, config), in_names, out_names,
                       out_dtypes)

    static = _is_static(model)
    if settings.cache_dir and (static or settings.dynamic):
        # compiling from a file named by its content lets OpenVINO's cache skip reading and
        # converting the ONNX model entirely on the next session
        path = _cached_model_file(data, settings.cache_dir)
        on_compile()
        compiled = core.compile_model(path, device, config)
        return _Runner(compiled, in_names, out_names, out_dtypes)
    ov_model = core.read_model(data, b"")
    if static or settings.dynamic:
        return make(ov_model)
    return _PerShape(ov_model, make, in_names)


class _Untyped:
    """A group reading a value whose type onnxrt could not infer (produced outside the group
    by an op shape inference does not know): compiled at the first run, typed from the
    arrays it receives, once per combination of element types."""

    def __init__(self, model: onnx.ModelProto, in_names: list[str], out_names: list[str],
                 settings: Any, on_compile: Callable[[], None]) -> None:
        self.model = model
        self.args = (in_names, out_names, settings, on_compile)
        self.cache: dict[tuple[Any, ...], Callable[..., list[np.ndarray]]] = {}
        self.lock = threading.Lock()

    def __call__(self, *args: Any) -> list[np.ndarray]:
        key = tuple((np.asarray(a).dtype, np.ndim(a)) for a in args)
        fn = self.cache.get(key)
        if fn is None:
            with self.lock:
                fn = self.cache.get(key)
                if fn is None:
                    fn = build_runner(self._typed(args), *self.args)
                    self.cache[key] = fn
        return fn(*args)

    def _typed(self, args: tuple[Any, ...]) -> onnx.ModelProto:
        m = onnx.ModelProto()
        m.CopyFrom(self.model)
        for vi, a in zip(m.graph.input, args):
            tt = vi.type.tensor_type
            if tt.elem_type:
                continue
            tt.elem_type = onnx_elem_type(np.asarray(a).dtype)
            tt.ClearField("shape")
            for _ in range(np.ndim(a)):
                tt.shape.dim.add()  # rank known, sizes left dynamic
        return m


def _cached_model_file(data: bytes, cache_dir: str) -> str:
    h = hashlib.sha256(data).hexdigest()[:32]
    path = os.path.join(cache_dir, f"onnxrt-ov-{h}.onnx")
    if not os.path.exists(path):
        os.makedirs(cache_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, path)
    return path
