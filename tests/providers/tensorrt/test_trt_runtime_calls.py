"""The real backend's calls into the tensorrt package, against a stand-in module that
records them: which parser query it uses per TensorRT version, how it maps the answer, and
what it sets on the builder config. (Whether TensorRT then builds is for the GPU script.)"""

from __future__ import annotations

import contextlib
import sys
import types
from unittest import mock

import pytest
from onnx import TensorProto as T
from onnx import helper as h

from onnxrt.providers.tensorrt.backend import BuildRequest


def _model_bytes(n=4):
    nodes = [h.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(n)]
    g = h.make_graph(nodes, "g", [h.make_tensor_value_info("v0", T.FLOAT, [2])],
                     [h.make_tensor_value_info(f"v{n}", T.FLOAT, [2])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17)]).SerializeToString()


class _Parser:
    mode = "v2"

    def __init__(self, network, logger):
        self.network = network
        self.calls = []

    def __getattr__(self, name):
        # hide the queries a given TensorRT version does not have
        if name == "supports_model_v2" and self.mode == "v2":
            return self._v2
        if name == "supports_model" and self.mode in ("v1", "v2"):
            return self._v1
        raise AttributeError(name)

    def _v2(self, model, path=None):
        self.calls.append("v2")
        return False

    num_subgraphs = 2

    def is_subgraph_supported(self, i):
        return i == 0

    def get_subgraph_nodes(self, i):
        return [0, 1] if i == 0 else [2, 3]

    def _v1(self, model, path=None):
        return False, [([0, 1], False), ([2, 3], True)]

    def parse(self, model, path=None):
        return self.mode == "parse-ok"

    num_errors = 1

    def get_error(self, i):
        return mock.Mock(node=lambda: 2, __str__=lambda self: "node 2: unsupported")

    def supports_operator(self, op):
        return True


def _fake_trt(version):
    trt = types.ModuleType("tensorrt")
    trt.__version__ = version
    trt.Logger = mock.Mock(VERBOSE=0, WARNING=2)
    trt.Builder = mock.Mock()
    trt.OnnxParser = _Parser
    trt.NetworkDefinitionCreationFlag = mock.Mock(EXPLICIT_BATCH=0)
    trt.MemoryPoolType = mock.Mock(WORKSPACE="WORKSPACE")
    trt.BuilderFlag = mock.Mock(FP16="FP16", INT8="INT8", GPU_FALLBACK="GPU_FALLBACK")
    trt.DeviceType = mock.Mock(DLA="DLA")
    return trt


@pytest.fixture
def backend(monkeypatch):
    def make(version="10.3.0", mode="v2"):
        monkeypatch.setitem(sys.modules, "tensorrt", _fake_trt(version))
        # a stand-in torch too: the real one takes seconds to import and needs no GPU here
        torch = types.ModuleType("torch")
        torch.cuda = types.SimpleNamespace(device=lambda i: contextlib.nullcontext())
        monkeypatch.setitem(sys.modules, "torch", torch)
        monkeypatch.setattr(_Parser, "mode", mode)
        from onnxrt.providers.tensorrt.runtime import TensorRTBackend, _Logger

        monkeypatch.setattr(_Logger, "_made", {})
        return TensorRTBackend()
    return make


@pytest.mark.parametrize("mode, expected", [("v2", [[0, 1]]), ("v1", [[2, 3]]),
                                            ("parse-ok", [[0, 1, 2, 3]]),
                                            ("parse-fails", [[0, 1, 3]])])
def test_parser_queries(backend, mode, expected):
    assert backend(mode=mode).supported_subgraphs(_model_bytes()) == expected


def test_network_flags_by_version(backend):
    be = backend("8.6.1")
    be.supported_subgraphs(_model_bytes())
    be.trt.Builder.return_value.create_network.assert_called_with(1)
    be = backend("10.3.0")
    be.supported_subgraphs(_model_bytes())
    be.trt.Builder.return_value.create_network.assert_called_with(0)


def test_build_sets_the_requested_options(backend):
    be = backend(mode="parse-ok")
    builder = be.trt.Builder.return_value
    builder.build_serialized_network.return_value = b"ENGINE"
    config = builder.create_builder_config.return_value
    config.get_timing_cache.return_value.serialize.return_value = b"TIMING"
    req = BuildRequest(model=_model_bytes(), name="g", fp16=True, int8=True,
                       dynamic_ranges={"v1": 2.0}, workspace=1 << 20, opt_level=4,
                       dla_core=1, timing_cache=b"",
                       profiles=({"v0": ((1,), (2,), (4,))},))
    network = builder.create_network.return_value
    network.num_inputs = 1
    network.num_layers = 1
    t_in, t_out = mock.Mock(), mock.Mock()
    t_in.name, t_out.name = "v0", "v1"
    network.get_input.return_value = t_in
    layer = network.get_layer.return_value
    layer.num_outputs = 1
    layer.get_output.return_value = t_out
    engine, timing = be.build(req)
    assert engine == b"ENGINE" and timing == b"TIMING"
    config.set_memory_pool_limit.assert_called_with("WORKSPACE", 1 << 20)
    assert [c.args[0] for c in config.set_flag.call_args_list] == ["FP16", "INT8",
                                                                   "GPU_FALLBACK"]
    assert config.builder_optimization_level == 4 and config.DLA_core == 1
    t_out.set_dynamic_range.assert_called_with(-2.0, 2.0)
    t_in.set_dynamic_range.assert_not_called()
    builder.create_optimization_profile.return_value.set_shape.assert_called_with(
        "v0", (1,), (2,), (4,))
    config.create_timing_cache.assert_called_with(b"")


def test_build_reports_parser_errors(backend):
    be = backend(mode="parse-fails")
    with pytest.raises(RuntimeError, match="node 2: unsupported"):
        be.build(BuildRequest(model=_model_bytes(), name="g"))


def test_engine_round_trip_uses_serialize_and_deserialize_cuda_engine(backend):
    """A compiled model's blob comes from ICudaEngine.serialize and goes back through
    IRuntime.deserialize_cuda_engine, the calls TensorRT documents for engine files."""
    be = backend()
    trt, torch = be.trt, be.torch
    for name in ("float32", "float16", "int8", "int32", "bool"):
        setattr(trt, name, f"trt.{name}")
        setattr(torch, name, f"torch.{name}")
    torch.device = lambda kind, i: (kind, i)
    trt.Runtime = mock.Mock()
    cuda_engine = trt.Runtime.return_value.deserialize_cuda_engine.return_value
    cuda_engine.get_tensor_dtype.return_value = "trt.float32"
    cuda_engine.serialize.return_value = bytearray(b"PLAN")
    engine = be.load(b"PLAN", 0, ["x"], ["y"], [T.FLOAT])
    trt.Runtime.return_value.deserialize_cuda_engine.assert_called_once_with(b"PLAN")
    assert be.serialize(engine) == b"PLAN"
    cuda_engine.serialize.assert_called_once_with()
    with pytest.raises(TypeError, match="not an engine of this backend"):
        be.serialize(object())
