"""oneDNN's C API through ctypes: the library, found once per process, and thin wrappers
that turn its status codes into exceptions.

Either PyPI package provides ``libdnnl.so.3`` in the environment's ``lib/`` folder:
``onednn-cpu-gomp`` (oneDNN 3.2, OpenMP) or ``onednn`` (the oneAPI SYCL build, whose CPU
engine runs through the OpenCL ICD loader: ``OCL_ICD_FILENAMES`` must name the
environment's ``libintelocl.so``; set here when unset and that file is present). A system
install found by the dynamic loader works too. Nothing is compiled at install time.

oneDNN 3.x keeps memory descriptors, attributes and post-ops behind opaque handles, so
every call here passes pointers and integers only (no struct layouts to restate).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import re
import sys
import threading
from typing import Any, Sequence

import numpy as np

__all__ = ["Dnnl", "DnnlError", "load", "import_error"]

# enum values of oneDNN 3.x (dnnl_types.h, dnnl_common_types.h)
F32 = 3
FORMAT_ANY = 1
FORWARD_INFERENCE = 96
CONV_DIRECT = 0x1
DECONV_DIRECT = 0xA
ELTWISE = {name: 0x20 + i for i, name in enumerate(
    ["relu", "tanh", "elu", "square", "abs", "sqrt", "linear", "soft_relu", "hardsigmoid",
     "logistic", "exp", "gelu_tanh", "swish", "log", "clip", "clip_v2", "pow", "gelu_erf",
     "round", "mish", "hardswish"])}
POOL_MAX, POOL_AVG_INCLUDE, POOL_AVG_EXCLUDE = 0x1FF, 0x2FF, 0x3FF
LRN_ACROSS = 0xAFF
BINARY = {name: 0x1FFF0 + i for i, name in enumerate(
    ["add", "mul", "max", "min", "div", "sub"])}
SOFTMAX_ACCURATE, SOFTMAX_LOG = 0x30000, 0x30001
USE_GLOBAL_STATS, USE_SCALE, USE_SHIFT, FUSE_NORM_RELU = 0x1, 0x2, 0x4, 0x8
Q_IMPL_INFO_STR = 8
Q_SRC_MD, Q_WEIGHTS_MD, Q_DST_MD, Q_WORKSPACE_MD, Q_EXEC_ARG_MD = 129, 131, 133, 135, 255
ARG_SRC, ARG_SRC_1, ARG_DST, ARG_WEIGHTS, ARG_BIAS, ARG_WORKSPACE = 1, 2, 17, 33, 41, 64
ARG_MEAN, ARG_VARIANCE, ARG_SCALE, ARG_SHIFT = 49, 50, 51, 52
ARG_MULTIPLE_SRC = 1024
ARG_FROM, ARG_TO = 1, 17


def ARG_POST_OP_SRC1(i: int) -> int:
    # DNNL_ARG_ATTR_MULTIPLE_POST_OP(i) | DNNL_ARG_SRC_1
    return (32768 * (i + 1)) | ARG_SRC_1


_STATUS = {1: "out_of_memory", 2: "invalid_arguments", 3: "unimplemented",
           4: "last_impl_reached", 5: "runtime_error", 6: "not_required",
           7: "invalid_graph", 8: "invalid_graph_op", 9: "invalid_shape",
           10: "invalid_data_type"}
_RUNTIMES = {0: "none", 1: "sequential", 2: "OpenMP", 4: "TBB", 8: "threadpool",
             256: "OpenCL", 512: "SYCL"}
MEMORY_ALLOCATE = ctypes.c_void_p(2 ** 64 - 1)
MAX_NDIMS = 12

Dims = ctypes.c_int64 * MAX_NDIMS


class DnnlError(RuntimeError):
    """A oneDNN call failed: ``status`` is oneDNN's name for why (``unimplemented``...)."""

    def __init__(self, func: str, status: int) -> None:
        self.status = _STATUS.get(status, str(status))
        super().__init__(f"oneDNN {func} failed: {self.status}")


class _Version(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("patch", ctypes.c_int),
                ("hash", ctypes.c_char_p), ("cpu_runtime", ctypes.c_uint),
                ("gpu_runtime", ctypes.c_uint)]


class ExecArg(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_int), ("memory", ctypes.c_void_p)]


def dims(values: Sequence[int]) -> Any:
    d = Dims()
    for i, v in enumerate(values):
        d[i] = int(v)
    return d


def _candidates() -> list[str]:
    """``libdnnl.so.3`` first, then the versioned names (``libdnnl.so.3.2``...), per folder.

    Both wheels install ``lib/libdnnl.so.3``: with both in one environment that name holds
    the build installed last and the other survives only under its versioned name, tried
    when the first fails. Wheels cannot hold symlinks, so a folder's names are often copies
    of one file: one path per distinct size is kept (one error per build, not per copy)."""
    out = []
    for prefix in dict.fromkeys([sys.prefix, sys.base_prefix, os.path.dirname(
            os.path.dirname(sys.executable))]):
        seen: set[int] = set()
        for path in sorted(glob.glob(os.path.join(prefix, "lib", "libdnnl.so.3*"))):
            try:
                size = os.path.getsize(path)
            except OSError:
                continue
            if size not in seen:
                seen.add(size)
                out.append(path)
    found = ctypes.util.find_library("dnnl")
    if found:
        out.append(found)
    return out


def _sycl_cpu_env(path: str) -> None:
    """The SYCL build's CPU engine needs the OpenCL CPU runtime named to the ICD loader."""
    if os.environ.get("OCL_ICD_FILENAMES"):
        return
    ocl = glob.glob(os.path.join(os.path.dirname(path), "libintelocl.so*"))
    if ocl:
        os.environ["OCL_ICD_FILENAMES"] = sorted(ocl)[0]


def _no_sycl_cpu(path: str) -> str:
    """Why the SYCL build found no CPU device, in terms a user can act on."""
    named = os.environ.get("OCL_ICD_FILENAMES", "")
    if not named:     # _sycl_cpu_env found no libintelocl.so beside it either
        cause = ("OCL_ICD_FILENAMES is unset and there is no libintelocl.so (the "
                 "intel-opencl-rt package's OpenCL CPU runtime) beside it")
    elif not os.path.exists(named):
        cause = f"OCL_ICD_FILENAMES names {named}, which does not exist"
    else:
        cause = (f"the OpenCL runtime OCL_ICD_FILENAMES names ({named}) offers no CPU "
                 f"device to SYCL on this machine")
    return (f"{path} is oneDNN's SYCL build and its CPU engine found no SYCL CPU device: "
            f"{cause}; the onednn-cpu-gomp package (OpenMP) needs no OpenCL")


_dlopen = ctypes.CDLL
_MISSING = re.compile(r"^(\S+): cannot open shared object file")


def _open(path: str, depth: int = 0) -> ctypes.CDLL:
    """``path`` opened with the libraries it needs from its own folder loaded first: the
    wheels put libdnnl's dependencies (the SYCL build's libtbb, libsycl, libsvml...) beside
    it without a RUNPATH, and the environment's ``lib/`` is not on the loader's path."""
    folder = os.path.dirname(path)
    for _ in range(64):
        try:
            return _dlopen(path)
        except OSError as e:
            m = _MISSING.match(str(e))
            dep = os.path.join(folder, m.group(1)) if m else ""
            if not dep or not os.path.exists(dep) or depth > 8:
                raise
            _open(dep, depth + 1)   # once loaded, its soname satisfies ``path``'s need
    raise OSError(f"{path}: too many missing libraries")


class Dnnl:
    """One loaded libdnnl with a CPU engine and an in-order stream."""

    def __init__(self, path: str) -> None:
        lib = _open(path)
        self.lib, self.path = lib, path
        lib.dnnl_version.restype = ctypes.POINTER(_Version)
        v = lib.dnnl_version().contents
        self.version = f"{v.major}.{v.minor}.{v.patch}"
        self.cpu_runtime = _RUNTIMES.get(v.cpu_runtime, str(v.cpu_runtime))
        if v.major != 3:
            # enum values and argument lists here are oneDNN 3.x's (its ABI); 4.x may differ
            raise RuntimeError(f"{path} is oneDNN {self.version}; onnxrt needs oneDNN 3.x")
        if self.cpu_runtime == "SYCL":
            _sycl_cpu_env(path)
            if lib.dnnl_engine_get_count(1) == 0:
                raise RuntimeError(_no_sycl_cpu(path))
        lib.dnnl_memory_desc_get_size.restype = ctypes.c_size_t
        lib.dnnl_memory_desc_equal.restype = ctypes.c_int
        self.engine = ctypes.c_void_p()
        self.call("dnnl_engine_create", ctypes.byref(self.engine), 1, 0)
        self.stream = ctypes.c_void_p()
        self.call("dnnl_stream_create", ctypes.byref(self.stream), self.engine, 1)
        self._execute = lib.dnnl_primitive_execute
        self._execute.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int,
                                  ctypes.POINTER(ExecArg)]
        self._set_handle = lib.dnnl_memory_set_data_handle
        self._set_handle.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        self._wait = lib.dnnl_stream_wait
        self.omp_set_num_threads = _omp_setter() if self.cpu_runtime == "OpenMP" else None

    def call(self, func: str, *args: Any) -> None:
        st = getattr(self.lib, func)(*args)
        if st != 0:
            raise DnnlError(func, st)

    # -- memory descriptors --------------------------------------------------------------
    def md_strided(self, shape: Sequence[int], strides: Sequence[int] | None = None) -> Any:
        shape = list(shape) or [1]
        if strides is None:
            strides = list(np.cumprod([1] + list(shape[:0:-1]))[::-1])
        md = ctypes.c_void_p()
        self.call("dnnl_memory_desc_create_with_strides", ctypes.byref(md), len(shape),
                  dims(shape), F32, dims(strides))
        return md

    def md_sub(self, parent: Any, shape: Sequence[int], offsets: Sequence[int]) -> Any:
        """A descriptor of the block ``shape`` at ``offsets`` inside ``parent``'s layout."""
        md = ctypes.c_void_p()
        self.call("dnnl_memory_desc_create_submemory", ctypes.byref(md), parent, dims(shape),
                  dims(offsets))
        return md

    def md_any(self, shape: Sequence[int]) -> Any:
        md = ctypes.c_void_p()
        self.call("dnnl_memory_desc_create_with_tag", ctypes.byref(md), len(shape),
                  dims(shape), F32, FORMAT_ANY)
        return md

    def md_size(self, md: Any) -> int:
        return int(self.lib.dnnl_memory_desc_get_size(md))

    def md_equal(self, a: Any, b: Any) -> bool:
        return bool(self.lib.dnnl_memory_desc_equal(a, b))

    def query_md(self, pd: Any, what: int, index: int = 0) -> Any:
        """A copy (owned by the caller) of a primitive descriptor's memory descriptor."""
        q = self.lib.dnnl_primitive_desc_query_md
        q.restype = ctypes.c_void_p
        q.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
        ref = q(pd, what, index)
        if not ref:
            return None
        md = ctypes.c_void_p()
        self.call("dnnl_memory_desc_clone", ctypes.byref(md), ctypes.c_void_p(ref))
        return md

    # -- memory, primitives, execution ----------------------------------------------------
    def memory(self, md: Any, handle: Any = MEMORY_ALLOCATE) -> Any:
        """A memory object over ``handle``; by default oneDNN allocates its buffer, and
        ``None`` makes one without a buffer (its pointer is set before each run)."""
        mem = ctypes.c_void_p()
        self.call("dnnl_memory_create", ctypes.byref(mem), md, self.engine,
                  handle if handle is not None else ctypes.c_void_p(0))
        return mem

    def set_handle(self, mem: Any, ptr: int) -> None:
        st = self._set_handle(mem, ptr)
        if st != 0:
            raise DnnlError("dnnl_memory_set_data_handle", st)

    def primitive(self, pd: Any) -> Any:
        prim = ctypes.c_void_p()
        self.call("dnnl_primitive_create", ctypes.byref(prim), pd)
        return prim

    def execute(self, prim: Any, nargs: int, args: Any) -> None:
        st = self._execute(prim, self.stream, nargs, args)
        if st != 0:
            raise DnnlError("dnnl_primitive_execute", st)

    def wait(self) -> None:
        st = self._wait(self.stream)
        if st != 0:
            raise DnnlError("dnnl_stream_wait", st)

    def impl(self, pd: Any) -> str:
        """The name of the implementation oneDNN picked (``jit:avx2``, ``ref:any``...)."""
        name = ctypes.c_char_p()
        st = self.lib.dnnl_primitive_desc_query(pd, Q_IMPL_INFO_STR, 0, ctypes.byref(name))
        return (name.value or b"").decode() if st == 0 else ""

    def reorder_pd(self, src_md: Any, dst_md: Any) -> Any:
        pd = ctypes.c_void_p()
        self.call("dnnl_reorder_primitive_desc_create", ctypes.byref(pd), src_md, self.engine,
                  dst_md, self.engine, None)
        return pd

    def attr(self, post_ops: list[tuple[Any, ...]]) -> Any:
        """Primitive attributes with post-ops: ("eltwise", alg, alpha, beta) or
        ("binary", alg, src1_md)."""
        attr = ctypes.c_void_p()
        self.call("dnnl_primitive_attr_create", ctypes.byref(attr))
        if post_ops:
            po = ctypes.c_void_p()
            self.call("dnnl_post_ops_create", ctypes.byref(po))
            for p in post_ops:
                if p[0] == "eltwise":
                    self.call("dnnl_post_ops_append_eltwise", po, p[1],
                              ctypes.c_float(p[2]), ctypes.c_float(p[3]))
                else:
                    self.call("dnnl_post_ops_append_binary", po, p[1], p[2])
            self.call("dnnl_primitive_attr_set_post_ops", attr, po)
            self.call("dnnl_post_ops_destroy", po)
        return attr


def _omp_setter() -> Any:
    try:
        gomp = ctypes.CDLL("libgomp.so.1")
        fn = gomp.omp_set_num_threads
        fn.argtypes = [ctypes.c_int]
        return fn
    except OSError:
        return None


_LOCK = threading.Lock()
_STATE: dict[str, Any] = {}


def _load() -> None:
    if _STATE:
        return
    with _LOCK:
        if _STATE:
            return
        errors = []
        for path in _candidates():
            try:
                _STATE["lib"] = Dnnl(path)
                return
            except Exception as e:     # a broken or too old library: try the next one
                errors.append(f"{path}: {type(e).__name__}: {e}")
        _STATE["error"] = ("; ".join(errors) if errors else
                           "no libdnnl.so.3 in this environment's lib/ folder nor on the "
                           "loader's path")


def import_error() -> str:
    """Why oneDNN cannot be used here ("" when it can)."""
    _load()
    return _STATE.get("error", "")


def load() -> Dnnl:
    _load()
    if "lib" not in _STATE:
        raise RuntimeError(f"oneDNN is not available: {_STATE['error']}; install it with "
                           f"pip install onnxrt[dnnl]")
    return _STATE["lib"]
