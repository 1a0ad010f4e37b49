"""Every endpoint of `onnxrt serve`, called with tritonclient (HTTP and gRPC) and plain
HTTP, against a local onnxrt session on the same inputs."""

from __future__ import annotations

import gzip
import json
import os
import urllib.error
import urllib.request
import zlib

import ml_dtypes
import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th

import onnxrt as ort
from serve.conftest import assert_same
from serve_models import TYPED

rng = np.random.default_rng(0)


def local(repo: str, name: str, version: int = 1) -> ort.InferenceSession:
    return ort.InferenceSession(os.path.join(repo, name, str(version), "model.onnx"))


def post(server, path: str, body: bytes, headers: dict | None = None):
    """Status, headers and body of a POST (an error status is returned, not raised)."""
    req = urllib.request.Request(server.url + path, data=body, headers=headers or {},
                                 method="POST")
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read()


def http_input(name, array, datatype, binary=True):
    t = th.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array, binary_data=binary)
    return t


def grpc_input(name, array, datatype):
    t = tg.InferInput(name, list(array.shape), datatype)
    t.set_data_from_numpy(array)
    return t


def test_health_and_server_metadata(plain):
    c = th.InferenceServerClient(plain.http)
    assert c.is_server_live() and c.is_server_ready()
    md = c.get_server_metadata()
    assert md["name"] == "onnxrt" and md["version"] == ort.__version__
    assert set(md["extensions"]) == {"binary_tensor_data", "model_configuration",
                                     "model_repository_index"}
    g = tg.InferenceServerClient(plain.grpc)
    assert g.is_server_live() and g.is_server_ready()
    gmd = g.get_server_metadata()
    assert gmd.name == "onnxrt" and list(gmd.extensions) == md["extensions"]


def test_model_metadata_matches_the_session(plain, repo):
    c = th.InferenceServerClient(plain.http)
    g = tg.InferenceServerClient(plain.grpc)
    sess = local(repo, "typed")
    md = c.get_model_metadata("typed")
    gmd = g.get_model_metadata("typed")
    assert md["name"] == "typed" and md["versions"] == ["1"]
    expected = [{"name": a.name, "datatype": dt, "shape": [-1, 2]}
                for a, dt in zip(sess.get_inputs(), TYPED)]
    assert md["inputs"] == expected
    assert [o["name"] for o in md["outputs"]] == [a.name for a in sess.get_outputs()]
    assert [(t.name, t.datatype, list(t.shape)) for t in gmd.inputs] == [
        (e["name"], e["datatype"], e["shape"]) for e in expected]


def test_versions_metadata_and_readiness(plain):
    c = th.InferenceServerClient(plain.http)
    g = tg.InferenceServerClient(plain.grpc)
    assert c.get_model_metadata("mlp")["versions"] == ["1", "2"]
    assert c.get_model_metadata("mlp", "1")["versions"] == ["1"]
    assert c.is_model_ready("mlp") and c.is_model_ready("mlp", "1")
    assert c.is_model_ready("mlp", "2") and not c.is_model_ready("mlp", "3")
    assert not c.is_model_ready("nope")
    assert g.is_model_ready("mlp", "2") and not g.is_model_ready("mlp", "3")
    assert not g.is_model_ready("nope")


def test_model_config_without_and_with_batching(plain, batching):
    cfg = th.InferenceServerClient(plain.http).get_model_config("mlp")
    assert cfg["max_batch_size"] == 0 and "dynamic_batching" not in cfg
    assert cfg["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [-1, 4]}]
    bcfg = th.InferenceServerClient(batching.http).get_model_config("mlp")
    assert bcfg["max_batch_size"] == 8
    assert bcfg["input"] == [{"name": "x", "data_type": "TYPE_FP32", "dims": [4]}]
    assert bcfg["dynamic_batching"] == {"max_queue_delay_microseconds": 250000}
    # a model with a fixed first dimension is never batched
    assert th.InferenceServerClient(batching.http).get_model_config("fixed")[
        "max_batch_size"] == 0
    gcfg = tg.InferenceServerClient(batching.grpc).get_model_config("mlp").config
    assert gcfg.max_batch_size == 8 and list(gcfg.input[0].dims) == [4]
    assert gcfg.dynamic_batching.max_queue_delay_microseconds == 250000


def test_repository_index(plain):
    names = {("colsum", "1"), ("fixed", "1"), ("gather", "1"), ("mlp", "1"), ("mlp", "2"),
             ("seq", "1"), ("typed", "1")}
    index = th.InferenceServerClient(plain.http).get_model_repository_index()
    assert {(m["name"], m["version"]) for m in index} == names
    assert all(m["state"] == "READY" for m in index)
    gindex = tg.InferenceServerClient(plain.grpc).get_model_repository_index()
    assert {(m.name, m.version) for m in gindex.models} == names


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_http_infer_matches_local_session(plain, repo, binary):
    c = th.InferenceServerClient(plain.http)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    outs = [th.InferRequestedOutput("y", binary_data=binary),
            th.InferRequestedOutput("s", binary_data=not binary)]
    r = c.infer("mlp", [http_input("x", x, "FP32", binary)], outputs=outs, request_id="r-1")
    y, s = local(repo, "mlp", 2).run(None, {"x": x})   # no version: the highest
    assert_same(r.as_numpy("y"), y)
    assert_same(r.as_numpy("s"), s)
    resp = r.get_response()
    assert resp["model_name"] == "mlp" and resp["model_version"] == "2"
    assert resp["id"] == "r-1"


def test_infer_a_version(plain, repo):
    c = th.InferenceServerClient(plain.http)
    g = tg.InferenceServerClient(plain.grpc)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    for v in (1, 2):
        expected = local(repo, "mlp", v).run(["y"], {"x": x})[0]
        r = c.infer("mlp", [http_input("x", x, "FP32")], model_version=str(v))
        assert_same(r.as_numpy("y"), expected)
        assert r.get_response()["model_version"] == str(v)
        gr = g.infer("mlp", [grpc_input("x", x, "FP32")], model_version=str(v))
        assert_same(gr.as_numpy("y"), expected)
    assert not np.allclose(local(repo, "mlp", 1).run(["y"], {"x": x})[0],
                           local(repo, "mlp", 2).run(["y"], {"x": x})[0])


def test_outputs_asked_for_come_in_that_order(plain, repo):
    c = th.InferenceServerClient(plain.http)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    r = c.infer("mlp", [http_input("x", x, "FP32")],
                outputs=[th.InferRequestedOutput("s"), th.InferRequestedOutput("y")])
    assert [o["name"] for o in r.get_response()["outputs"]] == ["s", "y"]
    r = c.infer("mlp", [http_input("x", x, "FP32")], outputs=[th.InferRequestedOutput("s")])
    assert [o["name"] for o in r.get_response()["outputs"]] == ["s"]
    assert r.as_numpy("y") is None
    g = tg.InferenceServerClient(plain.grpc)
    gr = g.infer("mlp", [grpc_input("x", x, "FP32")], outputs=[tg.InferRequestedOutput("s")])
    assert [o.name for o in gr.get_response().outputs] == ["s"]
    assert_same(gr.as_numpy("s"), local(repo, "mlp", 2).run(["s"], {"x": x})[0])


def typed_feeds() -> dict[str, np.ndarray]:
    feeds = {}
    for dt in TYPED:
        name = "in_" + dt.lower()
        if dt == "BYTES":
            feeds[name] = np.array([["a", "é"], ["", "long string " * 10]], dtype=object)
        elif dt == "BOOL":
            feeds[name] = np.array([[True, False], [False, True]])
        elif dt == "BF16":
            feeds[name] = np.array([[1.5, -2.0], [0.25, 3.0]], dtype=ml_dtypes.bfloat16)
        else:
            np_dt = {"FP16": np.float16, "FP32": np.float32, "FP64": np.float64}.get(dt)
            np_dt = np_dt or np.dtype(dt.lower())
            info = np.iinfo(np_dt) if np.dtype(np_dt).kind in "iu" else None
            vals = [[info.min, info.max], [0, 7]] if info else [[1.5, -2.25], [1e-3, 3e4]]
            feeds[name] = np.array(vals, dtype=np_dt)
    return feeds


def test_every_datatype_round_trips_over_http_binary_and_grpc(plain, repo):
    feeds = typed_feeds()
    expected = dict(zip([a.name for a in local(repo, "typed").get_outputs()],
                        local(repo, "typed").run(None, feeds)))
    c = th.InferenceServerClient(plain.http)
    g = tg.InferenceServerClient(plain.grpc)
    send = feeds
    r = c.infer("typed", [http_input(k, v, dt) for (k, v), dt in zip(send.items(), TYPED)])
    gr = g.infer("typed", [grpc_input(k, v, dt) for (k, v), dt in zip(send.items(), TYPED)])
    for name, e in expected.items():
        for got in (r.as_numpy(name), gr.as_numpy(name)):
            if name == "out_bytes":    # tritonclient gives BYTES back as bytes objects
                got = np.vectorize(lambda b: b.decode())(got).astype(object)
            np.testing.assert_array_equal(got, e)
            assert got.dtype == e.dtype, name


def test_every_datatype_over_json(plain, repo):
    """JSON carries every type; tritonclient refuses BF16 in JSON, so a plain request."""
    feeds = typed_feeds()
    sess = local(repo, "typed")
    expected = dict(zip([a.name for a in sess.get_outputs()], sess.run(None, feeds)))
    doc = {"inputs": [{"name": k, "datatype": dt, "shape": list(v.shape),
                       "data": (v.astype(np.float32) if dt in ("BF16", "FP16") else v).tolist()}
                      for (k, v), dt in zip(feeds.items(), TYPED)]}
    status, headers, body = post(plain, "/v2/models/typed/infer", json.dumps(doc).encode())
    assert status == 200, body
    assert headers["content-type"] == "application/json"
    outs = {o["name"]: o for o in json.loads(body)["outputs"]}
    for (name, e), dt in zip(expected.items(), TYPED):
        o = outs[name]
        assert o["datatype"] == dt and o["shape"] == [2, 2] and "parameters" not in o
        if dt == "BYTES":
            assert o["data"] == e.reshape(-1).tolist()
        else:
            np.testing.assert_array_equal(np.array(o["data"], dtype=e.dtype).reshape(2, 2), e)


def test_json_data_may_be_flat_or_nested(plain, repo):
    x = rng.standard_normal((2, 4)).astype(np.float32)
    expected = local(repo, "mlp", 2).run(["s"], {"x": x})[0]
    for data in (x.tolist(), x.reshape(-1).tolist()):
        doc = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4], "data": data}],
               "outputs": [{"name": "s"}]}
        _, _, body = post(plain, "/v2/models/mlp/infer", json.dumps(doc).encode())
        out = json.loads(body)["outputs"][0]
        assert_same(np.array(out["data"], np.float32).reshape(out["shape"]), expected)


def test_binary_request_by_hand(plain, repo):
    """The binary-tensor extension without tritonclient: JSON header, then raw bytes;
    binary_data_output asks for raw outputs."""
    x = rng.standard_normal((2, 4)).astype(np.float32)
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4],
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "parameters": {"binary_data_output": True}}).encode()
    status, headers, body = post(plain, "/v2/models/mlp/infer", head + x.tobytes(),
                                 {"Inference-Header-Content-Length": str(len(head))})
    n = int(headers["Inference-Header-Content-Length"])
    doc = json.loads(body[:n])
    sizes = [o["parameters"]["binary_data_size"] for o in doc["outputs"]]
    assert sizes == [2 * 3 * 4, 2 * 1 * 4] and len(body) == n + sum(sizes)
    y = np.frombuffer(body[n:n + sizes[0]], np.float32).reshape(2, 3)
    assert_same(y, local(repo, "mlp", 2).run(["y"], {"x": x})[0])


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_compressed_requests_and_responses(plain, repo, algorithm):
    c = th.InferenceServerClient(plain.http)
    x = rng.standard_normal((4, 4)).astype(np.float32)
    r = c.infer("mlp", [http_input("x", x, "FP32")], request_compression_algorithm=algorithm,
                response_compression_algorithm=algorithm)
    assert_same(r.as_numpy("y"), local(repo, "mlp", 2).run(["y"], {"x": x})[0])
    # the server really compressed: ask by hand and look at the header
    doc = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [4, 4],
                                  "data": x.tolist()}]}).encode()
    packed = gzip.compress(doc) if algorithm == "gzip" else zlib.compress(doc)
    _, headers, body = post(plain, "/v2/models/mlp/infer", packed,
                            {"Content-Encoding": algorithm, "Accept-Encoding": algorithm})
    assert headers["Content-Encoding"] == algorithm
    plain_body = gzip.decompress(body) if algorithm == "gzip" else zlib.decompress(body)
    assert json.loads(plain_body)["model_name"] == "mlp"


def test_grpc_typed_contents_without_raw(plain, repo):
    """A gRPC client may send values in InferTensorContents instead of raw bytes."""
    from tritonclient.grpc import service_pb2, service_pb2_grpc
    import grpc

    x = rng.standard_normal((2, 4)).astype(np.float32)
    req = service_pb2.ModelInferRequest(model_name="mlp")
    t = req.inputs.add(name="x", datatype="FP32", shape=[2, 4])
    t.contents.fp32_contents.extend(x.reshape(-1).tolist())
    with grpc.insecure_channel(plain.grpc) as ch:
        resp = service_pb2_grpc.GRPCInferenceServiceStub(ch).ModelInfer(req, timeout=30)
    y = np.frombuffer(resp.raw_output_contents[0], np.float32).reshape(2, 3)
    assert resp.outputs[0].name == "y"
    assert_same(y, local(repo, "mlp", 2).run(["y"], {"x": x})[0])


def test_metrics_count_requests_latency_and_batches(plain):
    before = plain.metric("onnxrt_inference_requests_total", model="seq", version="1",
                          outcome="success")
    runs = plain.metric("onnxrt_batch_size_count", model="seq", version="1")
    rows = plain.metric("onnxrt_batch_size_sum", model="seq", version="1")
    c = th.InferenceServerClient(plain.http)
    for n in (1, 3):
        c.infer("seq", [http_input("x", np.ones((n, 5), np.float32), "FP32")])
    assert plain.metric("onnxrt_inference_requests_total", model="seq", version="1",
                        outcome="success") == before + 2
    assert plain.metric("onnxrt_batch_size_count", model="seq", version="1") == runs + 2
    assert plain.metric("onnxrt_batch_size_sum", model="seq", version="1") == rows + 4
    assert plain.metric("onnxrt_request_duration_seconds_count", model="seq",
                        version="1") >= 2
    assert plain.metric("onnxrt_inference_duration_seconds_count", model="seq",
                        version="1") >= 2
