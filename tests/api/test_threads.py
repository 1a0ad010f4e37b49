"""intra_op_num_threads and ORT_PARALLEL."""

from __future__ import annotations

import threading

import numpy as np
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from models import model, rand


def branches_model(n: int = 4):
    """n independent MatMul -> Relu branches joined by a Sum."""
    nodes, inits = [], []
    for k in range(n):
        inits.append(h.make_tensor(f"w{k}", T.FLOAT, [64, 64], rand(64, 64, seed=k).ravel()))
        nodes += [h.make_node("MatMul", ["x", f"w{k}"], [f"m{k}"], name=f"mm{k}"),
                  h.make_node("Relu", [f"m{k}"], [f"r{k}"], name=f"relu{k}")]
    nodes.append(h.make_node("Sum", [f"r{k}" for k in range(n)], ["y"], name="sum"))
    return model(nodes, [h.make_tensor_value_info("x", T.FLOAT, ["N", 64])],
                 [h.make_tensor_value_info("y", T.FLOAT, ["N", 64])], inits)


def expected(m, x):
    ws = [np.asarray(t.float_data, np.float32).reshape(64, 64) for t in m.graph.initializer]
    return sum(np.maximum(x @ w, 0) for w in ws)


def test_parallel_mode_matches_sequential_and_uses_several_threads():
    m = branches_model()
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    so.inter_op_num_threads = 3
    seen = set()

    class Spy:
        def node_event(self, step, args, outs, t0, plan=None):
            seen.add(threading.get_ident())

    s = ort.InferenceSession(m.SerializeToString(), so)
    x = rand(32, 64)
    for _ in range(5):
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(m, x), rtol=1e-4)
    s._hook = Spy()  # node events name the thread that ran each step
    big = rand(512, 64)
    for _ in range(20):
        # float32 sums of 64 products: how many threads BLAS splits one over (which the
        # branches running beside it decide) moves the last bits, so an atol too
        np.testing.assert_allclose(s.run(None, {"x": big})[0], expected(m, big), rtol=1e-4,
                                   atol=1e-5)
    assert len(seen) > 1


def test_parallel_mode_reports_kernel_failures_and_recovers():
    m = model([h.make_node("MatMul", ["x", "y"], ["a"], name="mm"),
               h.make_node("Relu", ["x"], ["b"], name="r"),
               h.make_node("Add", ["a", "b"], ["z"], name="add")],
              [h.make_tensor_value_info("x", T.FLOAT, None),
               h.make_tensor_value_info("y", T.FLOAT, None)],
              [h.make_tensor_value_info("z", T.FLOAT, None)])
    so = ort.SessionOptions()
    so.execution_mode = ort.ExecutionMode.ORT_PARALLEL
    s = ort.InferenceSession(m.SerializeToString(), so)
    try:
        s.run(None, {"x": rand(2, 3), "y": rand(4, 2)})
        raise AssertionError("expected a failure")
    except ort.Fail as e:
        assert "mm" in str(e) and "MatMul" in str(e)
    x = rand(3, 3)
    y = rand(3, 3, seed=2)
    np.testing.assert_allclose(s.run(None, {"x": x, "y": y})[0], x @ y + np.maximum(x, 0),
                               rtol=1e-5)


def test_intra_op_threads_limit_blas_only_while_running():
    from threadpoolctl import threadpool_info

    def blas_threads():
        return [i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"]

    before = blas_threads()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    m = branches_model(1)
    seen = []

    class Spy:
        def node_event(self, step, args, outs, t0, plan=None):
            seen.append(blas_threads())

    s = ort.InferenceSession(m.SerializeToString(), so)
    s._hook = Spy()
    x = rand(8, 64)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(m, x), rtol=1e-4)
    assert seen and all(t == [1] * len(t) for t in seen)
    assert blas_threads() == before


def test_runs_without_a_blas_op_leave_the_blas_bound_alone(monkeypatch):
    """Only a plan with a step that may reach BLAS (MatMul here; also a subgraph, a fused
    node, another provider's step) bounds BLAS's threads for its run; element-wise and
    shape steps alone do not pay for it."""
    from onnxrt.framework import blas_threads

    asked = []
    monkeypatch.setattr(blas_threads, "request", lambda n: asked.append(n))
    monkeypatch.setattr(blas_threads, "release", lambda n: None)
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    x = rand(4, 64)
    plain = model([h.make_node("Neg", ["x"], ["n"]), h.make_node("Relu", ["n"], ["y"])],
                  [h.make_tensor_value_info("x", T.FLOAT, ["N", 64])],
                  [h.make_tensor_value_info("y", T.FLOAT, ["N", 64])])
    s = ort.InferenceSession(plain.SerializeToString(), so)
    np.testing.assert_array_equal(s.run(None, {"x": x})[0], np.maximum(-x, 0))
    assert asked == []
    m = branches_model(1)
    s = ort.InferenceSession(m.SerializeToString(), so)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(m, x), rtol=1e-4)
    assert asked[:1] == [2]      # (then its kernel may ask for 1 around a small product)


def test_small_products_do_not_reset_blas_threads(monkeypatch):
    """A Gemm below OpenBLAS's own threading threshold (a classifier head at batch 1) runs
    without setting BLAS's thread count to 1 and back; a BLAS without that threshold
    (MKL) still gets its single-threaded block."""
    from onnxrt.framework import blas_threads

    asked = []
    real_request = blas_threads.request
    monkeypatch.setattr(blas_threads, "request",
                        lambda n: (asked.append(n), real_request(n))[1])
    so = ort.SessionOptions()
    so.intra_op_num_threads = 2
    w = rand(10, 64, seed=3)
    m = model([h.make_node("Gemm", ["x", "w"], ["y"], transB=1)],
              [h.make_tensor_value_info("x", T.FLOAT, [1, 64])],
              [h.make_tensor_value_info("y", T.FLOAT, [1, 10])],
              [h.make_tensor("w", T.FLOAT, [10, 64], w.ravel())])
    s = ort.InferenceSession(m.SerializeToString(), so)
    x = rand(1, 64)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], x @ w.T, rtol=1e-5)
    single = [1] if not blas_threads.blas_threads_unused(64 * 10) else []
    assert asked == [2] + single


def test_runs_ignore_numpy_errors_and_restore_the_callers_state():
    """log(0) and 0/0 are results in a run, never warnings or errors, whatever the
    caller's NumPy error state; that state is the same after the run."""
    import warnings

    m = model([h.make_node("Log", ["x"], ["l"]), h.make_node("Div", ["l", "x"], ["y"])],
              [h.make_tensor_value_info("x", T.FLOAT, [2])],
              [h.make_tensor_value_info("y", T.FLOAT, [2])])
    s = ort.InferenceSession(m.SerializeToString())
    x = np.array([0.0, 1.0], np.float32)
    for state in ({"all": "raise"}, {"all": "warn"}, {"divide": "raise", "invalid": "warn"}):
        with np.errstate(**state), warnings.catch_warnings():
            warnings.simplefilter("error")
            want = np.geterr()
            for _ in range(2):
                y = s.run(None, {"x": x})[0]
                assert np.geterr() == want
        assert np.isneginf(y[0]) and y[1] == 0


def test_a_blas_loaded_after_the_first_session_is_limited_too():
    """Libraries loaded after the first session (here scipy's own OpenBLAS) are found when
    the next session is made: its intra_op_num_threads reaches them while it runs."""
    import subprocess
    import sys

    import pytest
    code = """
import numpy as np, onnxrt, threadpoolctl
from onnx import TensorProto, helper
# (a MatMul: runs of element-wise plans leave BLAS alone)
g = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g",
                      [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
                      [helper.make_tensor("w", TensorProto.FLOAT, [2, 2], [1, 0, 0, 1])])
mb = helper.make_model(g, ir_version=8, opset_imports=[helper.make_opsetid("", 17)])
so = onnxrt.SessionOptions()
so.intra_op_num_threads = 1                       # the first limit scans the libraries
onnxrt.InferenceSession(mb.SerializeToString(), so).run(None, {"x": np.ones(2, np.float32)})
import scipy.linalg                               # loads scipy's BLAS
s = onnxrt.InferenceSession(mb.SerializeToString(), so)
seen = []
class Spy:
    def node_event(self, *a, **k):
        seen.append(sorted((i["filepath"], i["num_threads"])
                           for i in threadpoolctl.threadpool_info() if i["user_api"] == "blas"))
s._hook = Spy()
s.run(None, {"x": np.ones(2, np.float32)})
print(len(seen[0]), all(n == 1 for _, n in seen[0]))
"""
    try:
        import scipy.linalg  # noqa: F401
    except ImportError:
        pytest.skip("needs a second BLAS that loads after the first session: scipy's, "
                    "which is not installed here")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    count, limited = out.stdout.split()
    assert int(count) >= 2 and limited == "True", out.stdout


def test_parallel_for_runs_every_item_once_and_raises_item_errors():
    from onnxrt.framework import blas_threads
    from onnxrt.framework.parallel import ThreadPool, split

    pool = ThreadPool(2)
    try:
        seen: list[int] = []
        inner: list[int] = []

        def item(i):
            seen.append(i)
            inner.append(pool.threads)       # nested splits run serially

        pool.parallel_for(7, item)
        assert sorted(seen) == list(range(7)) and set(inner) == {1}
        blas = blas_threads.blas_libraries()
        before = [lib.get_num_threads() for lib in blas]

        def bad(i):
            if i == 3:
                raise ValueError("item 3 failed")

        try:
            pool.parallel_for(6, bad)
        except ValueError as e:
            assert "item 3" in str(e)
        else:
            raise AssertionError("the item's error was lost")
        # BLAS gets its thread count back after the split, failed or not
        assert [lib.get_num_threads() for lib in blas] == before
        assert pool.threads == 2
    finally:
        pool.close()
    assert split(10, 3) == [(0, 4), (4, 8), (8, 10)]
    assert split(64, 2, 8) == [(0, 32), (32, 64)]
    assert split(3, 8) == [(0, 1), (1, 2), (2, 3)]


def test_cpu_mem_arena_option_is_process_wide(tmp_path):
    """enable_cpu_mem_arena (the default) keeps freed memory in the process (glibc's malloc
    thresholds); a session with it off leaves malloc alone, constant folding's inner session
    included."""
    import platform
    import subprocess
    import sys

    m = branches_model(2)
    path = tmp_path / "m.onnx"
    path.write_bytes(m.SerializeToString())
    code = (
        "import onnxrt as ort; from onnxrt.execute import memory\n"
        "so = ort.SessionOptions(); so.enable_cpu_mem_arena = False\n"
        f"ort.InferenceSession({str(path)!r}, so); print(memory.arena_in_use())\n"
        f"ort.InferenceSession({str(path)!r}); print(memory.arena_in_use())\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout.split()
    glibc = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert out == ["False", str(glibc)]


def test_cpu_mem_arena_keeps_even_big_blocks_faulted_in():
    """With the arena, a 96 MiB block freed and taken again (a big activation, run after
    run) comes back without page faults; without it every page is faulted in again."""
    import platform
    import subprocess
    import sys

    import pytest
    if not (platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"):
        pytest.skip("the arena acts on glibc's malloc only")
    code = """
import resource, sys, numpy as np
from onnxrt.execute import memory
if sys.argv[1] == "1":
    memory.use_arena()
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
counts = []
for _ in range(3):
    f0 = faults()
    a = np.ones(24 << 20, np.float32)
    counts.append(faults() - f0)
    del a
print(counts[0], counts[2])
"""
    for arena in ("1", "0"):
        out = subprocess.run([sys.executable, "-c", code, arena], capture_output=True,
                             text=True, check=True).stdout.split()
        first, third = int(out[0]), int(out[1])
        assert first > 8, out           # the first touch faults pages in
        if arena == "1":
            assert third <= first // 4, out
        else:
            assert third >= first // 2, out


def test_hot_pool_items_errors_parking_and_allow_spinning(monkeypatch):
    """Splits into as many items as threads go to the spinning workers while a session
    runs: every item once, errors raised after all finish, workers parked after the run;
    session.intra_op.allow_spinning=0 takes the blocking pool instead."""
    import time

    from onnxrt.framework import hotpool
    from onnxrt.framework.parallel import ThreadPool

    tp = ThreadPool(2)
    pool = tp.hot_pool()
    if pool is None:
        import pytest
        pytest.skip("no compiled spin loops (numba missing)")
    t = 2
    seen: list[int] = []
    tp.parallel_for(t, seen.append)
    assert sorted(seen) == list(range(t))

    def bad(i):
        if i == t - 1:
            raise KeyError("worker item failed")

    try:
        tp.parallel_for(t, bad)
    except KeyError as e:
        assert "worker item" in str(e)
    else:
        raise AssertionError("the worker's error was lost")
    tp.park()           # the end of a run
    deadline = time.monotonic() + 5
    while not pool.ctl[:, hotpool.PARKED].all() and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.ctl[:, hotpool.PARKED].all()       # no worker left spinning
    # a parked worker wakes for the next post
    seen.clear()
    tp.parallel_for(t, seen.append)
    assert sorted(seen) == list(range(t))
    tp.close()
    deadline = time.monotonic() + 5
    while any(th.name.startswith("onnxrt-hot") and th.is_alive() and
              getattr(th, "_target", None) is not None and th._target.__self__ is pool
              for th in threading.enumerate()) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert pool.closed

    runs = []
    monkeypatch.setattr(hotpool.HotPool, "run", lambda self, n, fn: runs.append(n))
    m = branches_model(2)
    x = rand(256, 64, seed=5)
    from onnxrt.providers.cpu.nn import conv_jit
    monkeypatch.setattr(conv_jit, "_GEMM_PAR_MIN", 0)
    monkeypatch.setattr(conv_jit, "_CHANNEL_SPLIT_MIN", 0)
    for spin in ("1", "0"):
        so = ort.SessionOptions()
        so.intra_op_num_threads = t
        so.add_session_config_entry("session.intra_op.allow_spinning", spin)
        s = ort.InferenceSession(m.SerializeToString(), so)
        runs.clear()
        s._thread_pool.parallel_for(t, lambda i: None)
        assert bool(runs) == (spin == "1")
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(m, x), rtol=1e-5,
                                   atol=1e-5)
        assert s._thread_pool.spin == (spin == "1")


def test_hot_pool_native_items_errors_and_mixing_with_python_items(monkeypatch):
    """The native protocol on a pool of its own, with a serving loop written in Python to
    the contract of framework/hotpool.py: the worker gets the kind, its range and the slots;
    a failing native item is raised in the caller after the others finish, and the pool
    goes on serving native and Python items."""
    import time

    import pytest

    from onnxrt.framework import hotpool

    fns = hotpool._compiled()
    if fns is None:
        pytest.skip("no compiled spin loops (numba missing)")
    log = []

    def serve(ctl, w, done, spins, yield_fn, ints, floats):
        ctl[w, hotpool.DONE] = done
        deadline = time.monotonic() + 0.05
        while time.monotonic() < deadline:
            v = int(ctl[w, hotpool.POSTED])
            if v != done:
                if not pool.claim(ctl, w, v):     # taken back by the caller
                    done = v
                    ctl[w, hotpool.DONE] = done
                    continue
                kind = int(ctl[w, hotpool.KIND])
                if kind == 0:
                    return v
                if kind == 9:
                    raise ValueError("native item failed")
                log.append((kind, int(ctl[w, hotpool.LO]), int(ctl[w, hotpool.HI]),
                            int(ints[0]), float(floats[0])))
                done = v
                ctl[w, hotpool.DONE] = done
                continue
            if ctl[w, hotpool.PARK]:
                return -1
            time.sleep(0)
        return -1

    monkeypatch.setattr(hotpool, "_NATIVE", [(serve, ())])  # not the conv kernels' loop
    pool = hotpool.HotPool(1, fns)
    own = []

    def claimed() -> None:
        # the caller's own part lasts until the worker claimed its item: else the caller
        # takes the item back (the worker thread may not have started yet)
        deadline = time.monotonic() + 10
        while pool.ctl[0, hotpool.CLAIM] > 0 and time.monotonic() < deadline:
            time.sleep(0.001)

    pool.ints[0], pool.floats[0] = 7, 0.5
    pool.run_native(5, [(0, 3), (3, 6)], lambda lo, hi: claimed() or own.append((lo, hi)))
    assert own == [(0, 3)] and log == [(5, 3, 6, 7, 0.5)]
    with pytest.raises(ValueError, match="native item failed"):
        pool.run_native(9, [(0, 1), (1, 2)], lambda lo, hi: claimed())
    pool.run_native(6, [(0, 1), (1, 2)], lambda lo, hi: claimed())
    assert log[-1][:3] == (6, 1, 2)
    seen: list[int] = []
    pool.run(2, seen.append)                # Python items still run
    assert sorted(seen) == [0, 1]
    pool.park()


def test_items_no_worker_claimed_run_on_the_caller(monkeypatch):
    """A worker that is not running (its core busy with another process) never holds a
    run up: the caller takes back every item still unclaimed once its own is done, and
    the worker, when it comes, skips them."""
    import threading
    import time

    import pytest

    from onnxrt.framework import hotpool

    fns = hotpool._compiled()
    if fns is None:
        pytest.skip("no compiled spin loops (numba missing)")
    go = threading.Event()

    def serve(ctl, w, done, spins, yield_fn, ints, floats):
        go.wait(10)             # the worker's core is busy until the test lets it go
        return fns[0](ctl, w, done, spins, yield_fn)

    # installed before the worker starts (else it may read the usual loop first)
    monkeypatch.setattr(hotpool, "_NATIVE", [(serve, ())])
    pool = hotpool.HotPool(1, fns)
    pool.native = False
    ran: list[tuple[int, threading.Thread]] = []
    t = time.monotonic()
    pool.run(2, lambda i: ran.append((i, threading.current_thread())))
    own: list[tuple[int, int]] = []
    pool.run_native(3, [(0, 2), (2, 5)], lambda lo, hi: own.append((lo, hi)))
    assert time.monotonic() - t < 5
    me = threading.current_thread()
    assert ran == [(0, me), (1, me)] and own == [(0, 2), (2, 5)]
    go.set()                    # the worker comes: it skips both and serves the next
    seen: list[threading.Thread] = []
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and pool.ctl[0, hotpool.DONE] != pool.seq[0]:
        time.sleep(0.001)
    assert pool.ctl[0, hotpool.DONE] == pool.seq[0]      # marked done, not run
    pool.run(2, lambda i: seen.append(threading.current_thread()) or time.sleep(0.05))
    assert len(seen) == 2
    pool.park()


def test_split_kernels_work_in_a_forked_child():
    """A child forked after the intra-op pools started makes its own (the parent's threads
    do not exist there): a conv split over threads finishes in the child."""
    import os
    import sys

    import pytest
    if not hasattr(os, "fork") or sys.platform == "darwin":
        pytest.skip("fork is not available or not safe here")
    from onnxrt.framework.parallel import ThreadPool

    pool = ThreadPool(2)
    pool.parallel_for(2, lambda i: None)      # the pools exist in the parent
    pool.parallel_for(5, lambda i: None)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:       # the child: run a split and report
        code = 1
        try:
            if True:
                seen = []
                pool.parallel_for(2, seen.append)
                pool.parallel_for(5, seen.append)
            code = 0 if sorted(seen) == [0, 0, 1, 1, 2, 3, 4] else 2
        finally:
            os.write(w, bytes([code]))
            os._exit(0)
    os.close(w)
    import select
    ready, _, _ = select.select([r], [], [], 60)
    assert ready, "the forked child hung in a split"
    assert os.read(r, 1) == bytes([0])
    os.waitpid(pid, 0)
    pool.close()
