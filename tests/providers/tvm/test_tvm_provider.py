"""TVMExecutionProvider: options, what it claims and declines, the compiled-module cache,
shapes, threads, failures. Expected values by NumPy formula."""

from __future__ import annotations

import glob
import json
import os
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from providers.tvm.tvmhelpers import CPU, TVM, fresh_cache, needs_tvm, nodes_on, tvm_session

pytestmark = needs_tvm

W = np.random.default_rng(1).standard_normal((4, 3)).astype(np.float32)


def mlp_model(extra: bool = False) -> onnx.ModelProto:
    """y = relu(x @ W + 0.25); with ``extra``: a com.microsoft Gelu on y, and a Shape ->
    Cast group that moves no arithmetic."""
    nodes = [h.make_node("MatMul", ["x", "w"], ["xw"], name="mm"),
             h.make_node("Add", ["xw", "b"], ["z"], name="add"),
             h.make_node("Relu", ["z"], ["y"], name="relu")]
    outs = [h.make_tensor_value_info("y", T.FLOAT, ["N", 3])]
    if extra:
        nodes += [h.make_node("Gelu", ["y"], ["g"], domain="com.microsoft", name="gelu"),
                  h.make_node("Shape", ["x"], ["shp"], name="shape"),
                  h.make_node("Cast", ["shp"], ["shpf"], to=T.FLOAT, name="cast")]
        outs += [h.make_tensor_value_info("g", T.FLOAT, ["N", 3]),
                 h.make_tensor_value_info("shpf", T.FLOAT, [2])]
    g = h.make_graph(nodes, "mlp", [h.make_tensor_value_info("x", T.FLOAT, ["N", 4])], outs,
                     [onnx.numpy_helper.from_array(W, "w"),
                      onnx.numpy_helper.from_array(np.float32([0.25]), "b")])
    ops = [h.make_opsetid("", 17)] + ([h.make_opsetid("com.microsoft", 1)] if extra else [])
    return h.make_model(g, opset_imports=ops)


def expected(x: np.ndarray) -> np.ndarray:
    return np.maximum(x @ W + np.float32(0.25), 0)


X = np.random.default_rng(2).standard_normal((5, 4)).astype(np.float32)


def stats(sess: ort.InferenceSession) -> dict[str, int]:
    return sess.get_provider_stats()[TVM]


def test_runs_and_matches():
    sess = tvm_session(mlp_model(), so_folder=fresh_cache())
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, expected(X), rtol=1e-5, atol=1e-6)
    assert nodes_on(sess) == 3
    assert stats(sess)["compilations"] == 1


def test_placement_report_gives_reasons():
    sess = tvm_session(mlp_model(extra=True), so_folder=fresh_cache())
    rows = {ln.split()[0]: ln for ln in sess.placement_report().splitlines() if ln.split()}
    for n in ("mm", "add", "relu"):
        assert TVM in rows[n].split()[2], rows[n]
    assert "converts only ai.onnx ops" in rows["gelu"]
    assert "moves no arithmetic" in rows["shape"] and "moves no arithmetic" in rows["cast"]
    y, g, shp = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, expected(X), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(shp, [5, 4])


def test_second_session_loads_the_cache():
    cache = fresh_cache()
    first = tvm_session(mlp_model(), so_folder=cache)
    (y1,) = first.run(None, {"x": X})
    assert stats(first)["compilations"] == 1 and stats(first)["cache_loads"] == 0
    libs = glob.glob(os.path.join(cache, "*.so"))
    assert len(libs) == 1
    second = tvm_session(mlp_model(), so_folder=cache)
    (y2,) = second.run(None, {"x": X})
    assert stats(second)["compilations"] == 0 and stats(second)["cache_loads"] == 1
    np.testing.assert_array_equal(y1, y2)
    # another opt level is another module
    third = tvm_session(mlp_model(), so_folder=cache, opt_level=1)
    third.run(None, {"x": X})
    assert stats(third)["compilations"] == 1
    assert len(glob.glob(os.path.join(cache, "*.so"))) == 2


def test_a_damaged_cache_file_is_compiled_again():
    # compile once in a child process (a library this process loaded must not be rewritten
    # under it), damage the file, then load here
    import subprocess
    import sys

    cache = fresh_cache()
    code = ("import sys; sys.path.insert(0, 'tests'); import numpy as np;"
            "from providers.tvm.test_tvm_provider import mlp_model, X, tvm_session;"
            f"tvm_session(mlp_model(), so_folder={cache!r}).run(None, {{'x': X}})")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=300)
    (lib,) = glob.glob(os.path.join(cache, "*.so"))
    with open(lib, "r+b") as f:
        f.truncate(100)
    sess = tvm_session(mlp_model(), so_folder=cache)
    (y,) = sess.run(None, {"x": X})
    assert stats(sess)["compilations"] == 1 and stats(sess)["cache_loads"] == 0
    np.testing.assert_allclose(y, expected(X), rtol=1e-5, atol=1e-6)


def test_each_new_shape_compiles_once():
    sess = tvm_session(mlp_model(), so_folder=fresh_cache())
    for n in (1, 7, 1, 7):
        x = X[:1].repeat(n, 0) + np.arange(n, dtype=np.float32)[:, None]
        (y,) = sess.run(None, {"x": x})
        np.testing.assert_allclose(y, expected(x), rtol=1e-5, atol=1e-6)
    assert stats(sess)["compilations"] == 2


def test_concurrent_runs():
    sess = tvm_session(mlp_model(), so_folder=fresh_cache())
    sess.run(None, {"x": X})
    xs = [X + i for i in range(8)]
    got: dict[int, np.ndarray] = {}
    errors: list[BaseException] = []

    def work(i: int) -> None:
        try:
            for _ in range(20):
                got[i] = sess.run(None, {"x": xs[i]})[0]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, x in enumerate(xs):
        np.testing.assert_allclose(got[i], expected(x), rtol=1e-5, atol=1e-5)


def test_tuning_database_is_applied_to_the_build(tmp_path):
    # an empty MetaSchedule database: the tuning pipeline runs and changes no schedule
    for n in ("database_workload.json", "database_tuning_record.json"):
        (tmp_path / n).write_text("")
    sess = tvm_session(mlp_model(), so_folder=fresh_cache(),
                       tuning_file_path=str(tmp_path))
    (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, expected(X), rtol=1e-5, atol=1e-6)
    assert stats(sess)["compilations"] == 1


@pytest.mark.parametrize("options,message", [
    ({"executor": "graph"}, "graph executor belonged to Relay"),
    ({"tuning_type": "Ansor"}, "MetaSchedule databases only"),
    ({"target": "cuda"}, "target kind 'cuda' is not supported"),
    ({"target": "llvm mcpu"}, "is not -key=value"),
    ({"opt_level": 7}, "opt_level 7"),
    ({"target_host": "llvm -mtriple=aarch64-linux-gnu"}, "leave target_host empty"),
    ({"tuning_file_path": "/nonexistent"}, "lacks database_workload.json"),
    ({"to_nhwc": "1"}, "unknown provider option"),
])
def test_options_refused_with_the_reason(options, message):
    with pytest.raises(ort.InvalidArgument, match=message):
        ort.InferenceSession(mlp_model().SerializeToString(), providers=[(TVM, options), CPU])


def test_options_reported():
    cache = fresh_cache()
    sess = tvm_session(mlp_model(), so_folder=cache, target="llvm -mcpu=native")
    opts = sess.get_provider_options()[TVM]
    assert opts["so_folder"] == cache and opts["opt_level"] == "3"
    from onnxrt.providers.tvm import runtime

    (ep,) = [p for p in sess._providers if p.name == TVM]
    # "native" is refused by the LLVM in TVM's wheel: the CPU's own name goes instead
    assert ep.settings.target == {"kind": "llvm", "mcpu": runtime.host_cpu()}


def test_compile_failure_falls_back_or_fails(monkeypatch):
    import onnxrt.providers.tvm.compiled as compiled

    def broken(model, settings):
        raise RuntimeError("simulated LLVM failure")

    monkeypatch.setattr(compiled, "_compile", broken)
    sess = tvm_session(mlp_model(), so_folder=fresh_cache())
    with pytest.warns(UserWarning, match="could not compile it at input shapes x.5, 4.: ran "
                                         "on CPUExecutionProvider: TVM failed.*simulated"):
        (y,) = sess.run(None, {"x": X})
    np.testing.assert_allclose(y, expected(X), rtol=1e-5, atol=1e-6)
    # the report and the stats say where the group ran
    assert ("group TVMExecutionProvider_fused_0 (3 nodes): TVMExecutionProvider could not "
            "compile it at input shapes x[5, 4]: ran on CPUExecutionProvider: TVM failed for "
            ) in sess.placement_report()
    assert stats(sess)["host_fallback_shapes"] == 1 and stats(sess)["compiled_groups"] == 0
    strict = tvm_session(mlp_model(), so_folder=fresh_cache(), error_on_failure="1")
    strict.disable_fallback()       # else run() retries an EPFail on the CPU provider alone
    with pytest.raises(ort.EPFail, match="simulated LLVM failure"):
        strict.run(None, {"x": X})
    # the session keeps working once TVM works again
    monkeypatch.undo()
    (y,) = strict.run(None, {"x": X})
    np.testing.assert_allclose(y, expected(X), rtol=1e-5, atol=1e-6)


def test_unavailable_without_a_c_compiler(monkeypatch):
    import shutil

    from onnxrt.providers.tvm import TVMExecutionProvider

    monkeypatch.delenv("CC", raising=False)
    monkeypatch.delenv("CXX", raising=False)
    monkeypatch.setattr(shutil, "which", lambda name: None)
    assert "no C compiler" in TVMExecutionProvider.unavailable_reason()
    with pytest.warns(UserWarning, match="no C compiler"):
        sess = ort.InferenceSession(mlp_model().SerializeToString(), providers=[TVM, CPU])
    assert sess.get_providers() == [CPU]


def test_listed_as_available():
    assert TVM in ort.get_available_providers()
    assert TVM in ort.get_all_providers()


def test_cache_key_names_version_and_target():
    from onnxrt.providers.tvm import runtime
    from onnxrt.providers.tvm.compiled import cache_key
    from onnxrt.providers.tvm.options import DEFAULTS, parse_options

    s = parse_options(dict(DEFAULTS, so_folder="/x"), "znver3")
    other = parse_options(dict(DEFAULTS, so_folder="/x", target="llvm -mcpu=skylake"), "znver3")
    m = mlp_model()
    assert cache_key(m, s) != cache_key(m, other)
    assert json.loads(s.target_key()) == {"kind": "llvm", "mcpu": "znver3"}
    assert runtime.version().startswith("0.")


def test_a_shape_as_group_output():
    # TVM hands a Shape node's result out as a shape value, not a tensor
    g = h.make_graph([h.make_node("Relu", ["x"], ["r"]), h.make_node("Shape", ["r"], ["s"])],
                     "g", [h.make_tensor_value_info("x", T.FLOAT, [2, 3])],
                     [h.make_tensor_value_info("r", T.FLOAT, [2, 3]),
                      h.make_tensor_value_info("s", T.INT64, [2])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17)])
    sess = tvm_session(m, so_folder=fresh_cache())
    r, s = sess.run(None, {"x": -np.ones((2, 3), np.float32)})
    assert nodes_on(sess) == 2
    np.testing.assert_array_equal(r, np.zeros((2, 3), np.float32))
    assert s.dtype == np.int64 and s.tolist() == [2, 3]
