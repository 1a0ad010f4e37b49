"""TensorRT's engines as EPContext nodes, through the fake backend: a compiled model loads
its serialized engines without building, and an engine from another TensorRT version,
another GPU, other precision or profile settings, another provider, or with a damaged blob
is refused before it is deserialized or run."""

from __future__ import annotations

import hashlib
import json
import os

import numpy as np
import onnx
import pytest

import onnxrt as ort
from fake_trt import MAGIC, FakeBackend
from onnxrt.framework.ep_context import StaleContext, is_ep_context, parse_ep_context
from onnxrt.providers.tensorrt import GpuInfo, TensorrtExecutionProvider
from test_tensorrt import CPU, TRT, cycle_model, expected, rand

H100 = GpuInfo("NVIDIA Fake H100", (9, 0))


def write_compiled(tmp_path, m, embed, backend=None, **opts):
    """Build a session with ``ep.context_enable`` (onnxruntime's way of writing a compiled
    model at session creation); the compiled model's path and the backend that built."""
    src = tmp_path / "m.onnx"
    onnx.save(m, src)
    out = tmp_path / "m_ctx.onnx"
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "1" if embed else "0")
    so.add_session_config_entry("ep.context_file_path", str(out))
    backend = backend or FakeBackend()
    ep = TensorrtExecutionProvider(backend=backend, **opts)
    ort.InferenceSession(str(src), so, providers=[ep, CPU])
    return str(out), backend


def load(path, backend=None, **opts):
    backend = backend or FakeBackend()
    ep = TensorrtExecutionProvider(backend=backend, **opts)
    return ort.InferenceSession(path, providers=[ep, CPU]), ep, backend


def contexts(path):
    return [parse_ep_context(n, os.path.dirname(path))
            for n in onnx.load(path).graph.node if is_ep_context(n)]


@pytest.mark.parametrize("embed", [True, False])
def test_compiled_model_loads_engines_without_building(tmp_path, embed):
    path, built = write_compiled(tmp_path, cycle_model(), embed)
    assert len(built.builds) == 2 and built.serialized == 2
    ctxs = contexts(path)
    assert [c.source for c in ctxs] == [TRT, TRT]
    assert all(c.sdk_version == "10.3.0" and c.hardware == "NVIDIA Fake H100 (sm90)"
               for c in ctxs)
    assert all(c.blob().startswith(MAGIC) for c in ctxs)
    # the Sigmoid TensorRT does not take stays an ONNX node between the two engines
    assert [n.op_type for n in onnx.load(path).graph.node] == ["EPContext", "Sigmoid",
                                                                "EPContext"]
    if not embed:
        assert sorted(f for f in os.listdir(tmp_path) if f.endswith(".bin")) == \
            sorted(c.cache_context.decode() for c in ctxs)
    s, ep, be = load(path)
    assert be.builds == [] and be.loads == 2
    stats = ep.allocation_stats()
    assert stats["engines_built"] == 0 and stats["loaded_contexts"] == 2
    x = rand(2, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    assert len(be.runs) == 2


def test_group_with_engines_built_at_run_time_is_written_as_its_nodes(tmp_path):
    """Dynamic dims without profiles: the engine is built at the first run, so there is none
    to write at creation; the nodes are written and built again by the loading session."""
    path, built = write_compiled(tmp_path, cycle_model(("N", 3)), embed=True)
    assert built.builds == [] and contexts(path) == []
    s, ep, be = load(path)
    x = rand(4, 3)
    np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
    assert len(be.builds) == 2 and ep.allocation_stats()["loaded_contexts"] == 0


PROFILES = dict(trt_profile_min_shapes="x:1x3,x:9x3", trt_profile_opt_shapes="x:4x3,x:12x3",
                trt_profile_max_shapes="x:8x3,x:16x3")


def test_engine_with_explicit_profiles_round_trips_and_picks_its_profile(tmp_path):
    # the Relu group reads x (named in the profiles): one engine at creation, exported;
    # the Add/Exp/Mul group reads a and b (dynamic, unnamed): built at run time, not exported
    path, built = write_compiled(tmp_path, cycle_model(("N", 3)), True, **PROFILES)
    assert len(built.builds) == 1 and len(contexts(path)) == 1
    s, ep, be = load(path, **PROFILES)
    assert be.builds == [] and be.loads == 1
    for n, profile in ((5, 0), (12, 1)):
        x = rand(n, 3, seed=n)
        np.testing.assert_allclose(s.run(None, {"x": x})[0], expected(x), rtol=1e-5)
        relu_run = next(r for r in be.runs if r[0] == [(n, 3)])
        assert relu_run[1] == profile
    with pytest.raises(Exception, match="fit none of the TensorRT optimization profiles"):
        s.run(None, {"x": rand(20, 3)})


@pytest.mark.parametrize("backend, opts, why", [
    (FakeBackend(version="10.4.0"), {}, "built by TensorRT 10.3.0; this is TensorRT 10.4.0"),
    (FakeBackend(gpu=GpuInfo("NVIDIA Fake H100", (8, 9))), {},
     r"built for NVIDIA Fake H100 \(sm90\); this session runs on NVIDIA Fake H100 \(sm89\)"),
    (FakeBackend(gpu=GpuInfo("NVIDIA Fake L40", (9, 0))), {},
     r"this session runs on NVIDIA Fake L40 \(sm90\)"),
    (None, {"trt_fp16_enable": "1"}, "built with precision fp32; this session asks for fp16"),
    (None, dict(PROFILES), "optimization profiles"),
], ids=["version", "compute-capability", "device-name", "precision", "profiles"])
def test_stale_engine_is_refused_never_loaded(tmp_path, backend, opts, why):
    path, _ = write_compiled(tmp_path, cycle_model(), embed=False)
    be = backend or FakeBackend()
    with pytest.raises(StaleContext, match=why):
        load(path, be, **opts)
    assert be.loads == 0 and be.builds == [] and be.runs == []


def test_damaged_engine_file_is_refused(tmp_path):
    path, _ = write_compiled(tmp_path, cycle_model(), embed=False)
    blob = tmp_path / contexts(path)[0].cache_context.decode()
    blob.write_bytes(blob.read_bytes() + b"\0")
    be = FakeBackend()
    with pytest.raises(StaleContext, match="does not match the digest"):
        load(path, be)
    assert be.loads == 0


def test_engine_tensorrt_cannot_deserialize_is_refused(tmp_path):
    # a blob with a consistent digest that the runtime rejects (here: not an engine)
    path, _ = write_compiled(tmp_path, cycle_model(), embed=True)
    m = onnx.load(path)
    node = next(n for n in m.graph.node if is_ep_context(n))
    ctx = parse_ep_context(node, None)
    notes = dict(ctx.notes, sha256=hashlib.sha256(b"garbage").hexdigest())
    for a in node.attribute:
        if a.name == "ep_cache_context":
            a.s = b"garbage"
        elif a.name == "notes":
            a.s = json.dumps(notes).encode()
    with pytest.raises(StaleContext, match="TensorRT refused its engine"):
        load(m.SerializeToString())


def test_node_of_another_provider_is_refused(tmp_path):
    """The partitioner hands a node to the provider its ``source`` names; the provider
    still checks, for a node given to it directly."""
    path, _ = write_compiled(tmp_path, cycle_model(), embed=True)
    node = next(n for n in onnx.load(path).graph.node if is_ep_context(n))
    for a in node.attribute:
        if a.name == "source":
            a.s = b"OpenVINOExecutionProvider"
    ctx = parse_ep_context(node, None)
    ep = TensorrtExecutionProvider(backend=FakeBackend())

    class Fused:
        inputs, outputs, constants = list(node.input), list(node.output), {}

    with pytest.raises(StaleContext, match="compiled by OpenVINOExecutionProvider, not "
                                           "TensorrtExecutionProvider"):
        ep.load_context(ctx, Fused())
    assert ep.backend.loads == 0


def test_compiled_model_can_be_compiled_again(tmp_path):
    """A session on a compiled model writes its loaded engines back unchanged."""
    path, _ = write_compiled(tmp_path, cycle_model(), embed=True)
    out = tmp_path / "again.onnx"
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.context_enable", "1")
    so.add_session_config_entry("ep.context_embed_mode", "1")
    so.add_session_config_entry("ep.context_file_path", str(out))
    be = FakeBackend()
    ort.InferenceSession(path, so, providers=[TensorrtExecutionProvider(backend=be), CPU])
    assert be.builds == []
    assert [c.blob() for c in contexts(str(out))] == [c.blob() for c in contexts(path)]



def test_compatibility_string_is_judged_like_the_engines(tmp_path):
    from onnxrt.providers.tensorrt.context import judge_compatibility

    path, _ = write_compiled(tmp_path, cycle_model(), embed=True)
    meta = {p.key: p.value for p in onnx.load(path).metadata_props}
    info = meta["ep_compatibility_info." + TRT]
    assert json.loads(info) == {"tensorrt": "10.3.0", "gpu": "NVIDIA Fake H100",
                                "compute_capability": "90"}
    assert judge_compatibility(info, "10.3.0", [GpuInfo("NVIDIA Fake L40", (8, 9)), H100]) == 1
    assert judge_compatibility(info, "10.4.0", [H100]) == 3
    assert judge_compatibility(info, "10.3.0", [GpuInfo("NVIDIA Fake H100", (8, 9))]) == 3
    assert judge_compatibility(info, "10.3.0", []) == 3
    assert judge_compatibility("not json", "10.3.0", [H100]) == 3
    if TensorrtExecutionProvider.unavailable_reason():
        # without TensorRT no engine can load: unsupported, whatever the devices
        assert TensorrtExecutionProvider.compiled_model_compatibility(info, []) == 3
