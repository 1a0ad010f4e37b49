"""The BLAS the compiled kernels call (providers/cpu/blas.py: MKL when the optional package
is installed and measured faster on this machine, else numpy's OpenBLAS) and the float32
matrix product split over the session's threads on top of it (nn/jit.py split_matmul,
MatMul and Gemm), against NumPy in float64 and onnxruntime."""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys

import numpy as np
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
import contextlib

from onnxrt.framework import blas_threads
from onnxrt.framework.blas_threads import blas_libraries
from onnxrt.framework.parallel import ThreadPool
from onnxrt.providers.cpu import blas
from onnxrt.providers.cpu.nn import jit

needs_numba = pytest.mark.skipif(not jit.available(), reason="numba is not installed")


@contextlib.contextmanager
def _run_of(n: int):
    """What a run of a session with intra_op_num_threads = n holds: its pool, and BLAS
    bounded to n threads."""
    pool = ThreadPool(n, blas_bound=True)
    blas_threads.request(n)
    try:
        yield pool
    finally:
        blas_threads.release(n)
        pool.close()


def _have_mkl() -> bool:
    try:
        importlib.metadata.distribution("mkl")
    except importlib.metadata.PackageNotFoundError:
        return False
    return True


HAVE_MKL = _have_mkl()


@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_gemm_multiplies_like_numpy(dt):
    fn = blas.gemm(dt)
    assert fn is not None and blas.name(dt) in ("mkl", "openblas")
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 13)).astype(dt), rng.standard_normal((13, 5)).astype(dt)
    c = np.full((7, 5), np.nan, dt)
    fn(101, 111, 111, 7, 5, 13, 1.0, a.ctypes.data, 13, b.ctypes.data, 5, 0.0, c.ctypes.data, 5)
    np.testing.assert_allclose(c, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)


def _which(env: dict) -> tuple[str, str]:
    """(name, reason) of the float32 choice in a fresh process with ``env`` added."""
    code = "from onnxrt.providers.cpu import blas; print(blas.name()); print(blas.reason())"
    out = subprocess.run([sys.executable, "-c", code], env={**os.environ, **env},
                         capture_output=True, text=True, check=True).stdout.splitlines()
    return out[0].strip(), out[1].strip()


def test_choice_follows_onnxrt_blas(tmp_path):
    cache = {"ONNXRT_CACHE_DIR": str(tmp_path)}
    assert _which({**cache, "ONNXRT_BLAS": "openblas"}) == ("openblas", "ONNXRT_BLAS=openblas")
    if HAVE_MKL:
        assert _which({**cache, "ONNXRT_BLAS": "mkl"}) == ("mkl", "ONNXRT_BLAS=mkl")
    else:       # asked for but missing: numpy's BLAS
        assert _which({**cache, "ONNXRT_BLAS": "mkl"})[0] == "openblas"
    assert not os.listdir(tmp_path)      # nothing measured when told


@pytest.mark.skipif(not HAVE_MKL, reason="the choice is measured only between two libraries: "
                    "the mkl package is not installed")
def test_choice_is_measured_once_per_machine_and_kept(tmp_path):
    """Without ONNXRT_BLAS the faster library on this machine is measured in the first
    process, stored per machine, and read by the next ones (which library wins depends
    on the CPU: no test expects one)."""
    import json

    env = {"ONNXRT_CACHE_DIR": str(tmp_path), "ONNXRT_BLAS": ""}
    first, why = _which(env)
    assert first in ("mkl", "openblas") and why.startswith("measured faster on this machine:")
    stored = json.loads((tmp_path / "blas.json").read_text())
    (key, entry), = stored.items()
    assert entry["winner"] == first and entry["mkl_ms"] > 0 and entry["openblas_ms"] > 0
    again, why = _which(env)
    assert again == first and why.startswith("measured faster on this machine before")
    # the stored verdict is what decides (not the library being installed): flip it
    for forced in ("mkl", "openblas"):
        (tmp_path / "blas.json").write_text(json.dumps({key: {"winner": forced}}))
        assert _which(env)[0] == forced


@needs_numba
@pytest.mark.parametrize("m,k,n,transposed", [
    (128, 96, 512, False),      # blocks of columns
    (128, 96, 512, True),       # b given as a transposed view: read in place
    (300, 64, 40, False),       # too few columns: blocks of rows
    (1, 768, 3000, True),       # one row: numpy's gemv on column blocks
    (3, 512, 1000, False),
])
def test_split_matmul_matches_numpy(m, k, n, transposed, monkeypatch):
    monkeypatch.setattr(jit, "_MM_SPLIT_MIN", 0)
    rng = np.random.default_rng(1)
    a = rng.standard_normal((m, k)).astype(np.float32)
    b = rng.standard_normal((n, k)).astype(np.float32).T if transposed else \
        rng.standard_normal((k, n)).astype(np.float32)
    with _run_of(2) as pool:
        y = jit.split_matmul(a, b, pool)
    assert y is not None and y.shape == (m, n)
    np.testing.assert_allclose(y, a.astype(np.float64) @ b, rtol=1e-4, atol=1e-4)


@needs_numba
def test_split_matmul_declines_what_it_does_not_do():
    a = np.ones((256, 256), np.float32)
    with _run_of(2) as pool:
        assert jit.split_matmul(a.astype(np.float64), a.astype(np.float64), pool) is None
        assert jit.split_matmul(a[:8, :8], a[:8, :8], pool) is None         # too small
        assert jit.split_matmul(a, a, pool) is not None
    with _run_of(1) as pool:
        assert jit.split_matmul(a, a, pool) is None                         # one thread


def _matmul_model(k: int, n: int) -> bytes:
    w = numpy_helper.from_array(np.random.default_rng(2).standard_normal((k, n))
                                .astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 64, k])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    return helper.make_model(g, ir_version=8,
                             opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _split_calls_and_outputs(monkeypatch, mb: bytes, x: np.ndarray) -> tuple:
    """The shapes of a passed to split_matmul during a 2-thread run of the one-input model
    mb, its output and onnxruntime's."""
    calls = []
    real = jit.split_matmul
    monkeypatch.setattr(jit, "split_matmul",
                        lambda a, b, pool: calls.append(a.shape) or real(a, b, pool))
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 2
    y = onnxrt.InferenceSession(mb, so).run(None, {"x": x})[0]
    ref = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(
        None, {"x": x})[0]
    return calls, y, ref


@needs_numba
def test_matmul_node_takes_the_split_and_matches_onnxruntime(monkeypatch):
    mb = _matmul_model(256, 384)
    x = np.random.default_rng(3).standard_normal((2, 64, 256)).astype(np.float32)
    calls, y, ref = _split_calls_and_outputs(monkeypatch, mb, x)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    assert calls == [(128, 256)]        # the stack flattened into one product


def test_conv_through_openblas_matches_onnxruntime():
    """Whichever BLAS is the default here, the other path runs too: a conv model in a
    process that asks for numpy's OpenBLAS."""
    code = """
import numpy as np, onnxruntime, onnxrt
from onnx import TensorProto, helper, numpy_helper
from onnxrt.providers.cpu import blas
rng = np.random.default_rng(4)
w = numpy_helper.from_array((rng.standard_normal((16, 8, 3, 3)) * 0.3).astype(np.float32), "w")
g = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8, 20, 20])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
mb = helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])
mb = mb.SerializeToString()
x = rng.standard_normal((2, 8, 20, 20)).astype(np.float32)
y = onnxrt.InferenceSession(mb).run(None, {"x": x})[0]
r = onnxruntime.InferenceSession(mb, providers=["CPUExecutionProvider"]).run(None, {"x": x})[0]
np.testing.assert_allclose(y, r, rtol=1e-4, atol=1e-4)
print(blas.name())
"""
    out = subprocess.run([sys.executable, "-c", code],
                         env={**os.environ, "ONNXRT_BLAS": "openblas"}, capture_output=True,
                         text=True)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == "openblas"


@needs_numba
@pytest.mark.parametrize("rows", [1, 64])
def test_gemm_node_with_transposed_weight_through_the_split(rows, monkeypatch):
    """Gemm (transB=1, a bias, alpha and beta) takes the split product too: a fully
    connected layer's weight is read transposed in place."""
    monkeypatch.setattr(jit, "_MM_SPLIT_MIN", 0)
    rng = np.random.default_rng(5)
    w = numpy_helper.from_array(rng.standard_normal((384, 256)).astype(np.float32), "w")
    c = numpy_helper.from_array(rng.standard_normal(384).astype(np.float32), "c")
    node = helper.make_node("Gemm", ["x", "w", "c"], ["y"], transB=1, alpha=0.5, beta=2.0)
    g = helper.make_graph([node], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [rows, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w, c])
    mb = helper.make_model(g, ir_version=8,
                           opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x = rng.standard_normal((rows, 256)).astype(np.float32)
    calls, y, ref = _split_calls_and_outputs(monkeypatch, mb, x)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    assert calls == [(rows, 256)]


def _blas_threads_seen(monkeypatch, mb: bytes, feeds: dict) -> list[int]:
    """numpy's BLAS thread count at each np.matmul call of a 2-thread run of ``mb``."""
    seen = []
    real = np.matmul

    def spy(*a, **k):
        seen.append(max((lib.get_num_threads() for lib in blas_libraries()), default=0))
        return real(*a, **k)

    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 2
    sess = onnxrt.InferenceSession(mb, so)
    monkeypatch.setattr(np, "matmul", spy)
    sess.run(None, feeds)
    return seen


def test_small_products_never_wake_blas_threads(monkeypatch):
    """A product too small for a split runs with BLAS single-threaded: BLAS's own threads,
    once woken, spin ~0.1 s (with OPENBLAS_THREAD_TIMEOUT unset, numpy imported before
    onnxrt) and took the cores from the next run (inception_v2's final 1x1024 by 1024x1000
    Gemm made every run 4x slower). A big float64 product still gets BLAS's threads."""
    if not blas_libraries():
        pytest.skip("threadpoolctl sees no BLAS of numpy's here: no thread count to watch")
    rng = np.random.default_rng(6)
    w = numpy_helper.from_array(rng.standard_normal((1024, 1000)).astype(np.float32), "w")
    g = helper.make_graph([helper.make_node("Gemm", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1024])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [w])
    small = helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 13)])
    seen = _blas_threads_seen(monkeypatch, small.SerializeToString(),
                              {"x": rng.standard_normal((1, 1024)).astype(np.float32)})
    assert seen and set(seen) == {1}
    w = numpy_helper.from_array(rng.standard_normal((256, 256)), "w")
    g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                          [helper.make_tensor_value_info("x", TensorProto.DOUBLE, [256, 256])],
                          [helper.make_tensor_value_info("y", TensorProto.DOUBLE, None)], [w])
    big = helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 13)])
    monkeypatch.undo()
    seen = _blas_threads_seen(monkeypatch, big.SerializeToString(),
                              {"x": rng.standard_normal((256, 256))})
    assert seen == [2]


def test_row_reductions_keep_blas_single_threaded():
    """The matrix-vector row reductions (global pooling, softmax sums, norms: nn.row_dot)
    run with BLAS single-threaded whatever the session's limit: squeezenet's batch-8 global
    pool woke BLAS's threads on every run."""
    from onnxrt.providers.cpu.nn import row_dot, row_mean
    if not blas_libraries():
        pytest.skip("threadpoolctl sees no BLAS of numpy's here: no thread count to watch")
    seen = []

    class Watched(np.ndarray):
        def __array_ufunc__(self, ufunc, method, *inputs, **kw):
            seen.append(max(lib.get_num_threads() for lib in blas_libraries()))
            return getattr(ufunc, method)(*(np.asarray(a) for a in inputs), **kw)

    x = np.random.default_rng(7).standard_normal((8000, 169)).astype(np.float32)
    with _run_of(2):
        m = row_mean(x.view(Watched))
        s = row_dot(x.view(Watched), np.ones(169, np.float32))
    assert seen == [1, 1]
    np.testing.assert_allclose(m, x.astype(np.float64).mean(axis=1), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(s, x.astype(np.float64).sum(axis=1), rtol=1e-4, atol=1e-4)


def test_one_range_calls_of_blas_kernels_keep_blas_single_threaded():
    """A kernel that calls BLAS, run in one call (one item, or one thread), does so with
    BLAS single-threaded (ThreadPool._one_call); the others are not slowed by the switch."""
    if not blas_libraries():
        pytest.skip("threadpoolctl sees no BLAS of numpy's here: no thread count to watch")
    seen = []

    def kernel(lo, hi):
        seen.append(max(lib.get_num_threads() for lib in blas_libraries()))

    with _run_of(2) as pool:
        pool.for_ranges(kernel, (), 1, blas=True)
        pool.native_ranges(0, lambda ji, jf: None, kernel, (), 1, blas=True)
        pool.for_ranges(kernel, (), 1)
    assert seen == [1, 1, 2]


@pytest.mark.parametrize("ashape,bshape", [((1, 6, 197, 64), (1, 6, 64, 197)),   # scores
                                          ((2, 6, 197, 197), (2, 6, 197, 64)),  # weighted
                                          ((4, 33, 40), (40, 50)),              # 2-D b
                                          ((3, 1, 20, 30), (1, 5, 30, 40))])    # broadcast
def test_stacked_products_split_over_threads_by_items(ashape, bshape, monkeypatch):
    """A stack of products goes to the session's threads item by item (BLAS single-threaded
    in each), never to BLAS's own threads; the result is numpy's."""
    from onnxrt.providers.cpu.nn import matmul as mm

    monkeypatch.setattr(jit, "_MM_SPLIT_MIN", 0)
    monkeypatch.setattr(mm, "_STACK_SPLIT_MIN", 0)
    monkeypatch.setattr(jit, "split_matmul", lambda a, b, pool: None)    # the stack path
    calls = []
    real = ThreadPool.parallel_for
    monkeypatch.setattr(ThreadPool, "parallel_for",
                        lambda self, n, fn: calls.append(n) or real(self, n, fn))
    rng = np.random.default_rng(8)
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    with _run_of(2) as pool:
        y = mm.matmul(a, b, pool)
    np.testing.assert_allclose(y, np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
    assert calls == ([2] if len(bshape) > 2 else [])    # a 2-D b: one flattened product


@pytest.mark.parametrize("ashape,bshape", [((1, 4, 128, 64), (1, 4, 64, 128)),
                                          ((8, 128, 64), (8, 64, 128)),
                                          ((1, 12, 128, 64), (1, 12, 64, 128))])
def test_small_stacks_stay_on_one_blas_thread(ashape, bshape, monkeypatch):
    """Stacks of small products (attention exported without fusions) run as numpy's loop on
    one BLAS thread: no split over the session's threads, whose wake-ups cost more than the
    items; the result is numpy's."""
    from onnxrt.providers.cpu.nn import matmul as mm

    calls = []
    real = ThreadPool.parallel_for
    monkeypatch.setattr(ThreadPool, "parallel_for",
                        lambda self, n, fn: calls.append(n) or real(self, n, fn))
    rng = np.random.default_rng(9)
    a = rng.standard_normal(ashape).astype(np.float32)
    b = rng.standard_normal(bshape).astype(np.float32)
    with _run_of(2) as pool:
        y = mm.matmul(a, b, pool)
    np.testing.assert_allclose(y, np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
    assert calls == []


@pytest.mark.parametrize("k,n", [(512, 1024), (512, 8000), (1408, 512)])
def test_one_row_products_are_one_gemv(k, n, monkeypatch):
    """A single row times a weight (a decoder's step) is one gemv on one BLAS thread, not
    column blocks over the session's threads; the result is numpy's."""
    calls = []
    real = ThreadPool.parallel_for
    monkeypatch.setattr(ThreadPool, "parallel_for",
                        lambda self, cnt, fn: calls.append(cnt) or real(self, cnt, fn))
    rng = np.random.default_rng(10)
    a = rng.standard_normal((1, k)).astype(np.float32)
    b = rng.standard_normal((k, n)).astype(np.float32)
    with _run_of(2) as pool:
        y = jit.split_matmul(a, b, pool)
    assert y is not None
    np.testing.assert_allclose(y, np.matmul(a.astype(np.float64), b), rtol=1e-4, atol=1e-4)
    assert calls == []
