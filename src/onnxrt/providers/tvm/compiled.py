"""One fused group compiled by TVM: the group's ONNX model through the Relax frontend, built
for the target, exported as a shared library into the cache folder under a key made of the
model's bytes, the TVM version, the target, the opt level and the tuning database, so a
later session (in this process or another) loads the library instead of compiling."""

from __future__ import annotations

import hashlib
import os
import tempfile
import threading
import time
import warnings
from typing import Any, Callable

import numpy as np
import onnx

from onnxrt.providers.tvm import legalize, runtime
from onnxrt.providers.tvm.options import Settings

__all__ = ["cache_key", "build_runner"]


def cache_key(model: onnx.ModelProto, s: Settings) -> str:
    h = hashlib.sha256()
    h.update(model.SerializeToString(deterministic=True))
    h.update(runtime.version().encode())
    h.update(s.target_key().encode())
    h.update(str(s.opt_level).encode())
    h.update(legalize.VERSION.encode())
    if s.tuning_dir:
        for n in ("database_workload.json", "database_tuning_record.json"):
            with open(os.path.join(s.tuning_dir, n), "rb") as f:
                h.update(f.read())
    return h.hexdigest()[:40]


def _compile(model: onnx.ModelProto, s: Settings) -> Any:
    tvm = runtime.tvm()
    from tvm import relax
    from tvm.relax.frontend.onnx import from_onnx

    from onnxrt.providers.tvm.support import _dtypes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = from_onnx(model, dtype_dict=_dtypes(model), keep_params_in_input=False)
    mod = legalize.apply(mod)
    target = tvm.target.Target(s.target)
    with tvm.transform.PassContext(opt_level=s.opt_level):
        if s.tuning_dir:
            # the tuning pipeline with no trials: apply the database's schedules, tune nothing
            mod = relax.pipeline.static_shape_tuning_pipeline(
                total_trials=0, target=target, work_dir=s.tuning_dir)(mod)
        return tvm.compile(mod, target=target)


def build_runner(model: onnx.ModelProto, s: Settings, count: Callable[[str, float], None]
                 ) -> Callable[..., Any]:
    """The callable running ``model``: loaded from the cache, else compiled and stored."""
    tvm = runtime.tvm()
    os.makedirs(s.cache_dir, exist_ok=True)
    path = os.path.join(s.cache_dir, cache_key(model, s) + ".so")
    t0 = time.perf_counter()
    lib = None
    if os.path.isfile(path):
        try:
            lib = tvm.runtime.load_module(path)
            count("cache_loads", time.perf_counter() - t0)
        except Exception:
            lib = None      # a truncated or foreign file: compile again over it
    if lib is None:
        ex = _compile(model, s)
        fd, tmp = tempfile.mkstemp(suffix=".so", dir=s.cache_dir)
        os.close(fd)
        try:
            ex.export_library(tmp)
            os.replace(tmp, path)       # atomic: a concurrent session sees all or nothing
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        lib = tvm.runtime.load_module(path)
        count("compilations", time.perf_counter() - t0)
    return _Runner(lib, [onnx.helper.tensor_dtype_to_np_dtype(o.type.tensor_type.elem_type)
                         if o.type.tensor_type.elem_type else np.dtype(np.float32)
                         for o in model.graph.output])


def _numpy(value: Any, dtype: np.dtype) -> np.ndarray:
    if hasattr(value, "numpy"):
        return value.numpy()
    if isinstance(value, (int, float, np.number)) or hasattr(value, "value"):
        # a Relax scalar value (a PrimValue: what the frontend makes of arithmetic on shape
        # values, ViT's attention scale) as the 0-d array the graph declares
        return np.array(getattr(value, "value", value), dtype=dtype)
    # a Relax shape value: what a group's Shape node hands out when it is a group output
    return np.array([int(d) for d in value], dtype=np.int64)


def _is_shape(value: Any) -> bool:
    """A Relax shape value (its dimensions are integers), as opposed to a tuple of
    outputs."""
    try:
        return all(isinstance(d, (int, np.integer)) or type(d).__name__ == "IntImm"
                   for d in value)
    except TypeError:
        return False


class _Runner:
    """Calls the module's ``main`` on a virtual machine of the calling thread (a VM keeps
    its registers between calls, so threads must not share one)."""

    def __init__(self, lib: Any, dtypes: list[np.dtype]) -> None:
        self.lib = lib
        self.dtypes = dtypes
        self.n_out = len(dtypes)
        self.local = threading.local()

    def _main(self) -> Any:
        fn = getattr(self.local, "main", None)
        if fn is None:
            tvm = runtime.tvm()
            from tvm import relax

            vm = relax.VirtualMachine(self.lib, tvm.cpu())
            fn = self.local.main = vm["main"]
            self.local.vm = vm
        return fn

    def __call__(self, *args: Any) -> list[np.ndarray]:
        tvm = runtime.tvm()
        # (np.ascontiguousarray would make a 0-d array 1-d)
        res = self._main()(*[tvm.runtime.tensor(np.asarray(a) if np.asarray(a).flags.c_contiguous
                                                else np.array(a, order="C")) for a in args])
        if hasattr(res, "numpy"):
            outs = [res.numpy()]
        elif self.n_out == 1 and _is_shape(res):
            # one output that is a shape value, not a tuple of outputs
            outs = [_numpy(res, self.dtypes[0])]
        elif not hasattr(res, "__iter__"):
            outs = [_numpy(res, self.dtypes[0])]
        else:
            outs = [_numpy(r, dt) for r, dt in zip(res, self.dtypes)] \
                if len(res) == self.n_out else [_numpy(r, np.dtype(np.float32)) for r in res]
        if len(outs) != self.n_out:
            raise RuntimeError(f"the TVM module returned {len(outs)} outputs, expected "
                               f"{self.n_out}")
        return outs
