"""Session-scoped thread resources: each session's intra_op_num_threads holds for its own
runs while another session runs beside it, BLAS's process-wide count never exceeds the
budget of a run in flight, use_per_session_threads and the global pools, the pool's life."""

from __future__ import annotations

import gc
import threading

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper

import onnxrt as ort
from onnxrt.framework import blas_threads
from onnxrt.framework.parallel import ThreadPool
from onnxrt.providers.cpu.nn import jit


def _model(layers: int = 4, n: int = 256) -> bytes:
    """MatMul (big enough for the kernels' own split) -> LayerNormalization, repeated."""
    rng = np.random.default_rng(3)
    nodes, inits, x = [], [], "x"
    for i in range(layers):
        inits += [numpy_helper.from_array((rng.standard_normal((n, n)) / 16).astype(np.float32),
                                          f"w{i}"),
                  numpy_helper.from_array(np.ones(n, np.float32), f"g{i}")]
        nodes += [h.make_node("MatMul", [x, f"w{i}"], [f"m{i}"]),
                  h.make_node("LayerNormalization", [f"m{i}", f"g{i}"], [f"y{i}"])]
        x = f"y{i}"
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("x", T.FLOAT, [n, n])],
                     [h.make_tensor_value_info(x, T.FLOAT, None)], inits)
    return h.make_model(g, ir_version=8, opset_imports=[h.make_opsetid("", 17)]
                        ).SerializeToString()


def _session(data: bytes, threads: int) -> ort.InferenceSession:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    return ort.InferenceSession(data, so)


def _blas_count() -> int:
    return max((lib.get_num_threads() for lib in blas_threads.blas_libraries()), default=0)


@pytest.mark.skipif(not jit.available(), reason="numba is not installed: no kernel splits")
def test_two_sessions_with_different_budgets_keep_their_own_side_by_side(monkeypatch):
    """A one-thread and a two-thread session run at once on two Python threads: every split
    a kernel of either asks for sees its own session's budget, and BLAS never runs with
    more threads than the budget of the run that calls it (the count in force is checked
    after every node of both). Before the pools were per session, the budget and BLAS's
    count were process-wide globals that each run overwrote."""
    if not blas_threads.blas_libraries():
        pytest.skip("threadpoolctl sees no BLAS of numpy's here: no thread count to watch")
    # 512 x 512 rows: LayerNormalization's rows are enough to ask the pool (smaller ones run
    # on the calling thread without it)
    data = _model(4, 512)
    one, two = _session(data, 1), _session(data, 2)
    seen: dict[int, list[int]] = {id(one._thread_pool): [], id(two._thread_pool): []}
    for name in ("for_ranges", "native_ranges", "parallel_for"):
        real = getattr(ThreadPool, name)

        def spy(self, *a, _real=real, **k):
            seen.setdefault(id(self), []).append(self.threads)
            return _real(self, *a, **k)
        monkeypatch.setattr(ThreadPool, name, spy)
    blas_seen: dict[str, list[int]] = {"one": [], "two": []}

    class Hook:                     # called after every node of a run
        def __init__(self, key: str) -> None:
            self.key = key

        def node_event(self, step, args, outs, t0, plan=None):
            blas_seen[self.key].append(_blas_count())

    one._hook, two._hook = Hook("one"), Hook("two")
    x = np.random.default_rng(4).standard_normal((512, 512)).astype(np.float32)
    want = one.run(None, {"x": x})[0]
    for v in blas_seen.values():
        v.clear()
    for v in seen.values():
        v.clear()
    start = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(s: ort.InferenceSession) -> None:
        try:
            start.wait(10)
            for _ in range(15):
                np.testing.assert_allclose(s.run(None, {"x": x})[0], want, rtol=1e-4,
                                           atol=1e-4)
        except BaseException as e:      # reported by the main thread
            errors.append(e)

    ts = [threading.Thread(target=work, args=(s,)) for s in (one, two)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
    assert not errors, errors
    a, b = seen[id(one._thread_pool)], seen[id(two._thread_pool)]
    assert a and set(a) == {1}, a           # LayerNormalization asks in both sessions
    assert b and set(b) == {2}, b           # and the two-thread session's MatMul splits
    assert blas_seen["one"] and set(blas_seen["one"]) == {1}, blas_seen["one"]
    assert blas_seen["two"] and max(blas_seen["two"]) <= 2, blas_seen["two"]


def test_blas_count_is_the_smallest_bound_in_flight_and_comes_back():
    """request/release: the count in force is the smallest bound asked for by the runs and
    single-threaded blocks open now; the counts found before come back after the last."""
    libs = blas_threads.blas_libraries()
    if not libs:
        pytest.skip("threadpoolctl sees no BLAS of numpy's here: no thread count to watch")
    before = [lib.get_num_threads() for lib in libs]
    blas_threads.request(3)
    assert _blas_count() == 3
    blas_threads.request(2)
    assert _blas_count() == 2
    with blas_threads.single_blas():
        assert _blas_count() == 1
    assert _blas_count() == 2
    blas_threads.release(2)
    assert _blas_count() == 3
    blas_threads.release(3)
    assert [lib.get_num_threads() for lib in libs] == before
    assert blas_threads.current_bound() == 0


def test_a_session_pool_ends_with_its_session():
    """The workers of a session's pool end when the session is collected (a process that
    makes many sessions does not keep their threads)."""
    data = _model(1, 64)
    s = _session(data, 2)
    pool = s._thread_pool
    pool.parallel_for(2, lambda i: None)
    assert not pool.closed
    del s
    gc.collect()
    assert pool.closed and pool.threads == 1


def test_use_per_session_threads_and_the_global_pools(monkeypatch):
    """onnxruntime's rules: use_per_session_threads = False needs the global pools
    (set_global_thread_pool_sizes) and then shares them; once they exist a session asking
    for its own fails."""
    from onnxrt import session_threads

    monkeypatch.setattr(session_threads, "_GLOBAL", [])
    data = _model(1, 64)
    x = np.ones((64, 64), np.float32)
    so = ort.SessionOptions()
    so.use_per_session_threads = False
    with pytest.raises(RuntimeError, match="per session threadpools"):
        ort.InferenceSession(data, so)
    ort.set_global_thread_pool_sizes(1, 2)
    try:
        a = ort.InferenceSession(data, so)
        b = ort.InferenceSession(data, so)
        assert a._thread_pool is b._thread_pool and a._thread_pool.budget == 1
        assert a.run(None, {"x": x})[0].shape == (64, 64)
        with pytest.raises(RuntimeError, match="use_per_session_threads must be false"):
            ort.InferenceSession(data)
    finally:
        session_threads._GLOBAL[0][0].close()


def test_fallback_switch_rebuilds_on_cpu_after_a_provider_failure():
    """enable_fallback (the default): a run failing with EPFail in a provider rebuilds the
    session on the CPU provider and runs again, once; disable_fallback: the error is
    raised. (Both methods did nothing before.)"""
    from onnxrt.framework.kernel import KernelRegistry
    from onnxrt.framework.provider import ExecutionProvider

    class Broken(ExecutionProvider):
        name = "BrokenReluExecutionProvider"
        kernels = KernelRegistry("BrokenReluExecutionProvider")

    @Broken.kernels.kernel("Relu", since=1)
    def relu(x):
        raise ort.EPFail("the device went away")

    g = h.make_graph([h.make_node("Relu", ["x"], ["y"])], "g",
                     [h.make_tensor_value_info("x", T.FLOAT, [3])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    data = h.make_model(g, ir_version=8, opset_imports=[h.make_opsetid("", 17)]
                        ).SerializeToString()
    x = np.array([-1, 0, 2], np.float32)
    s = ort.InferenceSession(data, providers=[Broken(), "CPUExecutionProvider"])
    s.disable_fallback()
    with pytest.raises(ort.EPFail):
        s.run(None, {"x": x})
    s.enable_fallback()
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], np.maximum(x, 0))
    assert s.get_providers() == ["CPUExecutionProvider"]


@pytest.mark.skipif(not jit.available(), reason="numba is not installed: no kernel splits")
@pytest.mark.parametrize("op", ["MatMulInteger", "ConvInteger"])
def test_compiled_quantized_kernels_split_over_their_sessions_pool(monkeypatch, op):
    """The compiled 8-bit products (providers/cpu/quant/igemm.py) take their session's
    pool from the run context: a three-thread session's splits see three threads, and the
    result is NumPy's exact integer product."""
    rng = np.random.default_rng(5)
    if op == "MatMulInteger":
        w = rng.integers(-128, 128, (256, 256), dtype=np.int8)
        x = rng.integers(0, 256, (256, 256), dtype=np.uint8)
        want = x.astype(np.int32) @ w.astype(np.int32)
        node = h.make_node(op, ["x", "w"], ["y"])
    else:
        w = rng.integers(-128, 128, (32, 16, 3, 3), dtype=np.int8)
        x = rng.integers(0, 256, (2, 16, 32, 32), dtype=np.uint8)
        xi, wi = x.astype(np.int64), w.astype(np.int64)
        want = np.zeros((2, 32, 30, 30), np.int64)
        for i in range(3):
            for j in range(3):
                want += np.einsum("nchw,mc->nmhw", xi[:, :, i:i + 30, j:j + 30],
                                  wi[:, :, i, j])
        want = want.astype(np.int32)
        node = h.make_node(op, ["x", "w"], ["y"])
    g = h.make_graph([node], "g",
                     [h.make_tensor_value_info("x", T.UINT8, list(x.shape))],
                     [h.make_tensor_value_info("y", T.INT32, None)],
                     [numpy_helper.from_array(w, "w")])
    data = h.make_model(g, ir_version=8, opset_imports=[h.make_opsetid("", 17)]
                        ).SerializeToString()
    s = _session(data, 3)
    seen: list[tuple[int, int]] = []
    real = ThreadPool.for_ranges

    def spy(self, *a, **k):
        seen.append((id(self), self.threads))
        return real(self, *a, **k)
    monkeypatch.setattr(ThreadPool, "for_ranges", spy)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], want)
    assert seen and set(seen) == {(id(s._thread_pool), 3)}, seen
