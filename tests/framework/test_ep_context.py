"""Compiled models through the provider hooks (``export_context`` / ``load_context``), with a
compile-based provider written here as a third party would: EPContext round trips, blobs
refused when stale, damaged, foreign or outside the model's folder, the session config
entries, and ModelCompiler's flags, outputs and initializer placement."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxrt as ort
from onnxrt.capi.onnxruntime_pybind11_state import get_compatibility_info_from_model
from onnxrt.framework.ep_context import ContextBlob, StaleContext
from models import model, rand

CPU = "CPUExecutionProvider"
W = np.array([1.0, 2.0, 3.0], np.float32)


def vi(name, shape=(2, 3)):
    return h.make_tensor_value_info(name, T.FLOAT, list(shape))


class BlobEP(ort.ExecutionProvider):
    """Fuses Mul/Relu/Exp; its "compiled" blob is the fused model, run by onnx.reference.
    Counts compilations and loads per object."""

    name = "BlobExecutionProvider"
    VERSION = "blob-1.0"
    SUPPORTED = {"Mul", "Relu", "Exp"}

    made: list = []    # every object, newest last (sessions made from SessionOptions)

    def __init__(self, **options):
        super().__init__(**options)
        type(self).made.append(self)
        self.compiles = 0
        self.loads = 0
        self.calls = 0

    def get_capability(self, graph):
        return ort.group_nodes(graph, lambda n: n.op_type in self.SUPPORTED)

    def _runner(self, data, inputs):
        ref = ReferenceEvaluator(onnx.load_from_string(data))

        def run(*args):
            self.calls += 1
            return ref.run(None, dict(zip(inputs, args)))

        run.blob = data
        return run

    def compile(self, fused):
        self.compiles += 1
        return self._runner(fused.model.SerializeToString(), list(fused.inputs))

    def export_context(self, fused, compiled):
        return ContextBlob(compiled.blob, self.VERSION, "toy", {"k": 1},
                           compatibility=f"v={self.VERSION}")

    def load_context(self, ctx, fused):
        if ctx.sdk_version != self.VERSION:
            raise StaleContext(f"EPContext node {ctx.name!r} was made by {ctx.sdk_version}, "
                               f"this is {self.VERSION}")
        data = ctx.blob()
        self.loads += 1
        return self._runner(data, list(fused.inputs))


class NoExportEP(BlobEP):
    name = "NoExportExecutionProvider"
    made: list = []

    def export_context(self, fused, compiled):
        return None


def mixed_model():
    """y = exp(relu(x) * w) -> Sigmoid (not fused) -> * w: two groups around a CPU node."""
    w = numpy_helper.from_array(W, "w")
    return model([h.make_node("Relu", ["x"], ["a"], name="relu"),
                  h.make_node("Mul", ["a", "w"], ["b"], name="mul"),
                  h.make_node("Exp", ["b"], ["c"], name="exp"),
                  h.make_node("Sigmoid", ["c"], ["d"], name="sigmoid"),
                  h.make_node("Mul", ["d", "w"], ["y"], name="mul2")],
                 [vi("x")], [vi("y")], [w])


def expected(x):
    return 1 / (1 + np.exp(-np.exp(np.maximum(x, 0) * W))) * W


@pytest.fixture
def model_path(tmp_path):
    p = tmp_path / "m.onnx"
    onnx.save(mixed_model(), p)
    return str(p)


@pytest.fixture(autouse=True, scope="module")
def registered():
    ort.register_execution_provider(BlobEP)
    ort.register_execution_provider(NoExportEP)


def opts(ep_cls):
    """SessionOptions naming the provider, as an application adds one."""
    so = ort.SessionOptions()
    so.add_provider(ep_cls.name, {})
    return so


def compiled_with(ep_cls, model_path, out, **kw):
    ort.ModelCompiler(opts(ep_cls), model_path, **kw).compile_to_file(out)
    return ep_cls.made[-1]


def ops(path):
    return [(n.domain, n.op_type) for n in onnx.load(path).graph.node]


@pytest.mark.parametrize("embed", [True, False])
def test_round_trip_loads_without_compiling(model_path, tmp_path, embed):
    out = str(tmp_path / "m_ctx.onnx")
    first = compiled_with(BlobEP, model_path, out, embed_compiled_data_into_model=embed)
    assert first.compiles == 2
    assert ops(out) == [("com.microsoft", "EPContext"), ("", "Sigmoid"),
                        ("com.microsoft", "EPContext")]
    blobs = sorted(f for f in os.listdir(tmp_path) if f.endswith(".bin"))
    assert len(blobs) == (0 if embed else 2)
    ep = BlobEP()
    s = ort.InferenceSession(out, providers=[ep, CPU])
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    assert (ep.compiles, ep.loads, ep.calls) == (0, 2, 2)
    nodes = {n.name: sg.ep_name for sg in s.get_provider_graph_assignment_info()
             for n in sg.get_nodes()}
    assert sorted(nodes.values()).count("BlobExecutionProvider") == 2
    info = get_compatibility_info_from_model(out, "BlobExecutionProvider")
    assert info == "v=blob-1.0"


def test_a_group_the_provider_cannot_export_is_written_as_its_nodes(model_path, tmp_path):
    out = str(tmp_path / "m_ctx.onnx")
    compiled_with(NoExportEP, model_path, out, embed_compiled_data_into_model=True)
    assert ("com.microsoft", "EPContext") not in ops(out)
    ep = NoExportEP()
    s = ort.InferenceSession(out, providers=[ep, CPU])
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    assert ep.compiles == 2 and ep.loads == 0


def _edit_context(path, **attrs):
    m = onnx.load(path)
    n = next(n for n in m.graph.node if n.op_type == "EPContext")
    for a in n.attribute:
        if a.name in attrs:
            v = attrs[a.name]
            if isinstance(v, int):
                a.i = v
            else:
                a.s = v if isinstance(v, bytes) else v.encode()
    onnx.save(m, path)


def test_stale_blob_is_refused_never_run(model_path, tmp_path):
    out = str(tmp_path / "m_ctx.onnx")
    compiled_with(BlobEP, model_path, out, embed_compiled_data_into_model=True)
    _edit_context(out, ep_sdk_version="blob-0.9")
    ep = BlobEP()
    with pytest.raises(StaleContext, match="blob-0.9"):
        ort.InferenceSession(out, providers=[ep, CPU])
    assert ep.calls == 0 and ep.loads == 0


def test_damaged_blob_is_refused(model_path, tmp_path):
    out = str(tmp_path / "m_ctx.onnx")
    compiled_with(BlobEP, model_path, out, embed_compiled_data_into_model=True)
    m = onnx.load(out)
    n = next(n for n in m.graph.node if n.op_type == "EPContext")
    a = next(a for a in n.attribute if a.name == "ep_cache_context")
    a.s = a.s[:-1] + bytes([a.s[-1] ^ 1])
    onnx.save(m, out)
    with pytest.raises(StaleContext, match="digest"):
        ort.InferenceSession(out, providers=[BlobEP(), CPU])


def test_a_session_without_the_compiling_provider_refuses_clearly(model_path, tmp_path):
    out = str(tmp_path / "m_ctx.onnx")
    compiled_with(BlobEP, model_path, out, embed_compiled_data_into_model=True)
    with pytest.raises(ort.EPFail, match="compiled by BlobExecutionProvider, which this "
                                         "session does not use"):
        ort.InferenceSession(out, providers=[CPU])


@pytest.mark.parametrize("where", ["dotdot", "absolute", "link"])
def test_blob_paths_out_of_the_model_folder_are_refused(model_path, tmp_path, where):
    folder = tmp_path / "model"
    folder.mkdir()
    out = str(folder / "m_ctx.onnx")
    compiled_with(BlobEP, model_path, out, embed_compiled_data_into_model=False)
    blob = next(f for f in os.listdir(folder) if f.endswith(".bin"))
    outside = tmp_path / "outside.bin"
    outside.write_bytes((folder / blob).read_bytes())
    if where == "dotdot":
        name = "../outside.bin"
    elif where == "absolute":
        name = str(outside)
    else:
        os.symlink(outside, folder / "link.bin")
        name = "link.bin"
    _edit_context(out, ep_cache_context=name)
    ep = BlobEP()
    with pytest.raises(ort.EPFail, match="out of the model's folder|must be relative"):
        ort.InferenceSession(out, providers=[ep, CPU])
    assert ep.loads == 0


def test_blob_file_of_a_model_given_as_bytes_needs_a_folder(model_path, tmp_path):
    out = str(tmp_path / "m_ctx.onnx")
    compiled_with(BlobEP, model_path, out, embed_compiled_data_into_model=False)
    data = open(out, "rb").read()
    with pytest.raises(ort.EPFail, match="given as bytes"):
        ort.InferenceSession(data, providers=[BlobEP(), CPU])
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.context_file_path", out)
    s = ort.InferenceSession(data, so, providers=[BlobEP(), CPU])
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)


@pytest.mark.parametrize("mode", ["0", "1"])
def test_session_config_entries_write_the_compiled_model(model_path, tmp_path, mode):
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", mode)
    ort.InferenceSession(model_path, so, providers=[BlobEP(), CPU])
    out = str(tmp_path / "m_ctx.onnx")    # onnxruntime's default name
    assert ops(out).count(("com.microsoft", "EPContext")) == 2
    m = onnx.load(out)
    modes = {h.get_attribute_value(a) for n in m.graph.node if n.op_type == "EPContext"
             for a in n.attribute if a.name == "embed_mode"}
    assert modes == {int(mode)}
    ep = BlobEP()
    s = ort.InferenceSession(out, providers=[ep, CPU])
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    assert ep.compiles == 0
    so2 = ort.SessionOptions()
    so2.add_session_config_entry("ep.context_enable", "1")
    so2.add_session_config_entry("ep.context_file_path", str(tmp_path / "other.onnx"))
    ort.InferenceSession(open(model_path, "rb").read(), so2, providers=[BlobEP(), CPU])
    assert os.path.exists(tmp_path / "other.onnx")
    so3 = ort.SessionOptions()
    so3.add_session_config_entry("ep.context_enable", "1")
    with pytest.raises(ort.InvalidArgument, match="ep.context_file_path"):
        ort.InferenceSession(open(model_path, "rb").read(), so3, providers=[BlobEP(), CPU])


def test_disable_model_compile(model_path, tmp_path):
    so = ort.SessionOptions()
    so.add_session_config_entry("session.disable_model_compile", "1")
    with pytest.raises(ort.ModelRequiresCompilation, match="needs to compile"):
        ort.InferenceSession(model_path, so, providers=[BlobEP(), CPU])
    out = str(tmp_path / "m_ctx.onnx")
    so.add_provider(BlobEP.name, {})
    ort.ModelCompiler(so, model_path, embed_compiled_data_into_model=True).compile_to_file(out)
    s = ort.InferenceSession(out, so, providers=[BlobEP(), CPU])
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)


def test_cpu_only_writes_the_model_without_ep_context(model_path, tmp_path):
    out = str(tmp_path / "cpu.onnx")
    ort.ModelCompiler(ort.SessionOptions(), model_path).compile_to_file(out)
    assert ops(out) == [(n.domain, n.op_type) for n in mixed_model().graph.node]
    x = rand(2, 3)
    np.testing.assert_allclose(ort.InferenceSession(out, providers=[CPU]).run(
        None, {"x": x})[0], expected(x), rtol=1e-5)


def test_flags(model_path, tmp_path):
    F = ort.OrtCompileApiFlags
    out = str(tmp_path / "c.onnx")
    with pytest.raises(ort.Fail, match="Unable to compile any nodes"):
        ort.ModelCompiler(ort.SessionOptions(), model_path,
                          flags=F.ERROR_IF_NO_NODES_COMPILED).compile_to_file(out)
    assert not os.path.exists(out)
    ort.ModelCompiler(opts(BlobEP), model_path,
                      flags=F.ERROR_IF_NO_NODES_COMPILED).compile_to_file(out)
    assert os.path.exists(out)
    c = ort.ModelCompiler(ort.SessionOptions(), model_path,
                          flags=F.ERROR_IF_OUTPUT_FILE_EXISTS)
    with pytest.raises(ort.Fail, match="exists already"):
        c.compile_to_file(out)
    c.compile_to_file(str(tmp_path / "new.onnx"))


def test_outputs_bytes_stream_and_their_errors(model_path, tmp_path):
    c = ort.ModelCompiler(opts(BlobEP), model_path, embed_compiled_data_into_model=True)
    data = c.compile_to_bytes()
    pieces = []
    c.compile_to_stream(pieces.append)
    assert b"".join(pieces) == data
    assert onnx.load_from_string(data).graph.node[0].op_type == "EPContext"

    def boom(buf):
        raise OSError("disk full")

    with pytest.raises(ort.Fail, match="disk full"):
        c.compile_to_stream(boom)
    with pytest.raises(ort.InvalidArgument, match="embed"):
        ort.ModelCompiler(opts(BlobEP), model_path).compile_to_bytes()
    with pytest.raises(ValueError, match="both"):
        ort.ModelCompiler(ort.SessionOptions(), model_path,
                          external_initializers_file_path="w.bin",
                          get_initializer_location_func=lambda *a: None)
    with pytest.raises(TypeError):
        ort.ModelCompiler(ort.SessionOptions(), 42)
    # the default output name, as onnxruntime makes it
    ort.ModelCompiler(ort.SessionOptions(), model_path).compile_to_file()
    assert os.path.exists(tmp_path / "m_ctx.onnx")


def big_model():
    w = numpy_helper.from_array(np.arange(600, dtype=np.float32).reshape(2, 300), "big")
    s = numpy_helper.from_array(np.array([2.0], np.float32), "small")
    return model([h.make_node("MatMul", ["x", "big"], ["a"], name="mm"),
                  h.make_node("Mul", ["a", "small"], ["y"], name="mul")],
                 [vi("x", (3, 2))], [vi("y", (3, 300))], [w, s])


def test_external_initializers_file_and_callback(tmp_path):
    src = str(tmp_path / "big.onnx")
    onnx.save(big_model(), src)
    x = rand(3, 2)
    want = x @ np.arange(600, dtype=np.float32).reshape(2, 300) * 2
    out = str(tmp_path / "big_ctx.onnx")
    ort.ModelCompiler(ort.SessionOptions(), src, external_initializers_file_path="w.bin",
                      external_initializers_size_threshold=100).compile_to_file(out)
    m = onnx.load(out, load_external_data=False)
    where = {t.name: t.data_location for t in m.graph.initializer}
    assert where == {"big": T.EXTERNAL, "small": T.DEFAULT}
    assert os.path.getsize(tmp_path / "w.bin") == 2400
    np.testing.assert_allclose(ort.InferenceSession(out).run(None, {"x": x})[0], want,
                               rtol=1e-5)
    with pytest.raises(ort.InvalidArgument, match="out of"):
        ort.ModelCompiler(ort.SessionOptions(), src,
                          external_initializers_file_path="../w.bin").compile_to_file(out)

    seen = []
    data_path = str(tmp_path / "cb.bin")
    with open(data_path, "wb") as f:
        def place(name, value, info):
            seen.append((name, value.tensor_size_in_bytes(), info))
            if value.tensor_size_in_bytes() < 64:
                return None
            off = f.tell()
            f.write(value.numpy().tobytes())
            return ort.OrtExternalInitializerInfo(data_path, off,
                                                  value.tensor_size_in_bytes())

        out2 = str(tmp_path / "cb_ctx.onnx")
        ort.ModelCompiler(ort.SessionOptions(), src,
                          get_initializer_location_func=place).compile_to_file(out2)
    assert sorted(seen) == [("big", 2400, None), ("small", 4, None)]
    m = onnx.load(out2, load_external_data=False)
    big = next(t for t in m.graph.initializer if t.name == "big")
    assert {e.key: e.value for e in big.external_data}["location"] == "cb.bin"
    np.testing.assert_allclose(ort.InferenceSession(out2).run(None, {"x": x})[0], want,
                               rtol=1e-5)


def test_binary_information_places_blob_files_of_a_model_compiled_to_bytes(model_path,
                                                                           tmp_path):
    """onnxruntime's SetEpContextBinaryInformation: the blob files of a model compiled to
    memory go into the given folder, named after the given model; a session loads them."""
    blobs = tmp_path / "blobs"
    blobs.mkdir()
    c = ort.ModelCompiler(opts(BlobEP), model_path)
    c.set_ep_context_binary_information(str(blobs), "net.onnx")
    data = c.compile_to_bytes()
    files = sorted(os.listdir(blobs))
    assert len(files) == 2 and all(f.startswith("net_") and f.endswith(".bin") for f in files)
    names = sorted(h.get_attribute_value(a).decode()
                   for n in onnx.load_from_string(data).graph.node if n.op_type == "EPContext"
                   for a in n.attribute if a.name == "ep_cache_context")
    assert names == files
    pieces = []
    c.compile_to_stream(pieces.append)
    assert b"".join(pieces) == data
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.context_file_path", str(blobs / "net_ctx.onnx"))
    ep = BlobEP()
    s = ort.InferenceSession(data, so, providers=[ep, CPU])
    assert ep.compiles == 0 and ep.loads == 2
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    with pytest.raises(ort.InvalidArgument, match="output_directory .* not an existing"):
        c.set_ep_context_binary_information(str(tmp_path / "nowhere"), "net.onnx")
    with pytest.raises(ort.InvalidArgument, match="model_name"):
        c.set_ep_context_binary_information(str(blobs), "")


@pytest.mark.parametrize("key", ["ep.share_ep_contexts", "ep.stop_share_ep_contexts"])
def test_sharing_ep_contexts_is_refused_not_ignored(model_path, tmp_path, key):
    so = opts(BlobEP)
    so.add_session_config_entry(key, "1")
    with pytest.raises(ort.InvalidArgument, match=f"{key}='1' is not supported"):
        ort.ModelCompiler(so, model_path, embed_compiled_data_into_model=True
                          ).compile_to_bytes()
    with pytest.raises(ort.InvalidArgument, match=key):
        ort.InferenceSession(model_path, so, providers=[BlobEP(), CPU])
    so.add_session_config_entry(key, "0")      # the default value is accepted
    ort.InferenceSession(model_path, so, providers=[BlobEP(), CPU])
