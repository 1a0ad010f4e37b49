"""Bad requests get the protocol's error JSON ({"error": "..."}) with a 4xx status that
names what was wrong, they are counted in /metrics, and the server keeps serving."""

from __future__ import annotations

import gzip
import http.client
import json
import urllib.request

import numpy as np
import pytest
import tritonclient.grpc as tg
import tritonclient.http as th
from tritonclient.utils import InferenceServerException

from serve.test_protocol import grpc_input, http_input, post

X = np.ones((2, 4), np.float32)


def infer_json(server, doc, model="mlp", headers=None):
    body = doc if isinstance(doc, bytes) else json.dumps(doc).encode()
    status, _, out = post(server, f"/v2/models/{model}/infer", body, headers)
    return status, json.loads(out)


def x_input(**kw):
    return {"name": "x", "datatype": "FP32", "shape": [2, 4], "data": X.tolist(), **kw}


def http_error(fn) -> InferenceServerException:
    with pytest.raises(InferenceServerException) as e:
        fn()
    return e.value


@pytest.fixture
def client(plain):
    return th.InferenceServerClient(plain.http)


def test_unknown_model_and_version_are_404(plain, client):
    e = http_error(lambda: client.infer("nope", [http_input("x", X, "FP32")]))
    assert e.status() == "404" and "unknown model 'nope'" in e.message()
    assert "mlp" in e.message()      # the models it could have meant
    e = http_error(lambda: client.infer("mlp", [http_input("x", X, "FP32")],
                                        model_version="9"))
    assert e.status() == "404" and "has no version '9' (versions: 1, 2)" in e.message()
    for call in (lambda: client.get_model_metadata("nope"),
                 lambda: client.get_model_config("mlp", "9")):
        assert http_error(call).status() == "404"


@pytest.mark.parametrize("doc, status, message", [
    ({"inputs": [x_input(datatype="FP64")]}, 400,
     "input 'x': datatype FP64, the model expects FP32"),
    ({"inputs": [x_input(datatype="FLOAT")]}, 400, "input 'x': unknown datatype 'FLOAT'"),
    ({"inputs": [x_input(shape=[2, 5], data=[0.0] * 10)]}, 400,
     "input 'x': shape [2, 5], the model expects [-1, 4]"),
    ({"inputs": [x_input(shape=[8])]}, 400, "input 'x': shape [8], the model expects"),
    ({"inputs": [x_input(shape=[3, 4])]}, 400, "needs 12 element(s), 'data' has 8"),
    ({"inputs": [x_input(shape=[2, -4])]}, 400, "shape must be a list of non-negative"),
    ({"inputs": [x_input(data=[[1, 2, 3, 4], [5, 6, 7]])]}, 400, "ragged"),
    ({"inputs": [x_input(data=[["a"] * 4] * 2)]}, 400, "FP32 data must be numbers"),
    ({"inputs": [x_input(data=[[True] * 4] * 2)]}, 400, "FP32 data must be numbers"),
    ({"inputs": [x_input(data=7)]}, 400, "'data' must be a list"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4]}]}, 400,
     "neither 'data' nor parameter binary_data_size"),
    ({"inputs": []}, 400, "missing input(s) x"),
    ({"inputs": [x_input(), {**x_input(), "name": "extra"}]}, 400,
     "has no input 'extra' (inputs: x)"),
    ({"inputs": [x_input(), x_input()]}, 400, "input 'x' is given twice"),
    ({"inputs": [x_input()], "outputs": [{"name": "zz"}]}, 400,
     "has no output 'zz' (outputs: y, s)"),
    ({"inputs": [x_input()], "outputs": [{"name": "y"}, {"name": "y"}]}, 400,
     "requested twice"),
    ({"inputs": {"x": 1}}, 400, "'inputs' must be a list"),
    ({"inputs": [x_input()], "id": 5}, 400, "'id' must be a string"),
    ({"inputs": [x_input()], "parameters": {"priority": 3}}, 400,
     "request priorities is not supported"),
    ({"inputs": [x_input()], "parameters": {"sequence_id": 3}}, 400,
     "sequence batching is not supported"),
    ({"inputs": [x_input()], "parameters": {"my_flag": 1}}, 400, "unknown parameter 'my_flag'"),
    ({"inputs": [x_input()], "outputs": [{"name": "y", "parameters": {"classification": 2}}]},
     400, "the classification extension is not supported"),
    ({"inputs": [x_input(parameters={"shared_memory_region": "r"})]}, 400,
     "the shared-memory extension is not supported"),
    ([1, 2], 400, "the request must be a JSON object"),
])
def test_bad_json_requests(plain, doc, status, message):
    got_status, err = infer_json(plain, doc)
    assert got_status == status and set(err) == {"error"}
    assert message in err["error"]


@pytest.mark.parametrize("doc, model, message", [
    ({"inputs": [{"name": "in_int8", "datatype": "INT8", "shape": [1, 2], "data": [1, 300]}]},
     "typed", "value 300 is out of range for INT8"),
    ({"inputs": [{"name": "in_uint64", "datatype": "UINT64", "shape": [1, 2],
                  "data": [-1, 2**64 - 1]}]}, "typed", "value -1 is out of range for UINT64"),
    ({"inputs": [{"name": "in_int32", "datatype": "INT32", "shape": [1, 2],
                  "data": [1.5, 2]}]}, "typed", "INT32 data must be integers"),
    ({"inputs": [{"name": "in_bool", "datatype": "BOOL", "shape": [1, 2], "data": [1, 0]}]},
     "typed", "BOOL data must be true/false"),
    ({"inputs": [{"name": "in_bytes", "datatype": "BYTES", "shape": [1, 2], "data": [1, 2]}]},
     "typed", "BYTES data must be strings"),
    ({"inputs": [{"name": "x", "datatype": "FP32", "shape": [3, 3], "data": [0.0] * 9}]},
     "fixed", "shape [3, 3], the model expects [2, 3]"),
])
def test_bad_values_for_the_datatype(plain, doc, model, message):
    status, err = infer_json(plain, doc, model)
    assert status == 400 and message in err["error"]


def test_malformed_json(plain):
    for body in (b"{bad", b"", b"\xff\xfe", b'{"inputs": [}'):
        status, err = infer_json(plain, body)
        assert status == 400 and err["error"].startswith("malformed JSON in the request")


def binary_body(size: int | None = None, extra: bytes = b""):
    raw = X.tobytes()
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 4],
                                   "parameters": {"binary_data_size": size or len(raw)}}]}
                      ).encode()
    return head, raw + extra


@pytest.mark.parametrize("case, message", [
    ("header_not_int", "Inference-Header-Content-Length 'abc' is not an integer"),
    ("header_too_long", "is outside the body's"),
    ("size_past_end", "binary_data_size 64 goes past the binary part of the body (32 bytes"),
    ("size_not_shape", "input 'x': shape [2, 4] of FP32 takes 32 bytes, got 28"),
    ("trailing_bytes", "3 byte(s) of binary data after the last input's"),
    ("header_cuts_json", "malformed JSON"),
])
def test_bad_binary_requests(plain, case, message):
    head, raw = binary_body()
    length = str(len(head))
    if case == "header_not_int":
        length = "abc"
    elif case == "header_too_long":
        length = str(len(head) + len(raw) + 1)
    elif case == "size_past_end":
        head, raw = binary_body(64)
    elif case == "size_not_shape":
        head, raw = binary_body(28)
        raw = raw[:28]
    elif case == "trailing_bytes":
        raw += b"abc"
    elif case == "header_cuts_json":
        length = str(len(head) - 3)
    status, err = infer_json(plain, head + raw,
                             headers={"Inference-Header-Content-Length": length})
    assert status == 400 and message in err["error"], err


def test_bytes_that_are_not_utf8_or_cut_short(plain):
    def send(raw: bytes):
        head = json.dumps({"inputs": [{"name": "in_bytes", "datatype": "BYTES",
                                       "shape": [1, 2],
                                       "parameters": {"binary_data_size": len(raw)}}]})
        return infer_json(plain, head.encode() + raw, "typed",
                          {"Inference-Header-Content-Length": str(len(head))})

    def item(b: bytes) -> bytes:
        return len(b).to_bytes(4, "little") + b

    status, err = send(item(b"\xff\xfe") + item(b"a"))
    assert status == 400 and "BYTES element 0 is not UTF-8" in err["error"]
    status, err = send((9).to_bytes(4, "little") + b"ab")
    assert status == 400 and "BYTES element 0 claims 9 bytes, 2 left" in err["error"]
    status, err = send(item(b"a") + b"\x01\x00")
    assert status == 400 and "ends inside an element's 4-byte length" in err["error"]
    status, err = send(item(b"a"))
    assert status == 400 and "needs 2 element(s), the BYTES data holds 1" in err["error"]


def test_oversized_bodies_get_413(plain):
    """The test server's limit is 1 MiB: refused before reading when the length is
    declared, while reading when it is not, and after inflating a compressed body."""
    big = np.zeros((70000, 4), np.float32)        # 1.07 MiB
    client = th.InferenceServerClient(plain.http)
    e = http_error(lambda: client.infer("mlp", [http_input("x", big, "FP32")]))
    assert e.status() == "413" and "over the server's limit of 1048576 bytes" in e.message()
    # chunked: no Content-Length
    conn = http.client.HTTPConnection(plain.http, timeout=30)
    conn.request("POST", "/v2/models/mlp/infer", body=iter([b" " * 65536] * 20),
                 encode_chunked=True, headers={"Transfer-Encoding": "chunked"})
    r = conn.getresponse()
    assert r.status == 413 and "over the server's limit" in json.loads(r.read())["error"]
    conn.close()
    # a small gzip body that inflates past the limit
    bomb = gzip.compress(b" " * (4 << 20))
    status, err = infer_json(plain, bomb, headers={"Content-Encoding": "gzip"})
    assert status == 413 and "decompresses to more than" in err["error"]


def test_bad_content_encoding(plain):
    status, err = infer_json(plain, b"{}", headers={"Content-Encoding": "br"})
    assert status == 415 and "Content-Encoding 'br' is not supported" in err["error"]
    status, err = infer_json(plain, b"\x1f\x8b not gzip", headers={"Content-Encoding": "gzip"})
    assert status == 400 and "does not decompress" in err["error"]


def test_unknown_endpoint_and_method(plain):
    status, _, body = post(plain, "/v2/models/mlp/explain", b"{}")
    assert status == 404 and json.loads(body) == {"error": "no endpoint /v2/models/mlp/explain"}
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(plain.url + "/v2/models/mlp/infer", timeout=10)
    assert e.value.code == 405
    assert json.loads(e.value.read()) == {"error": "GET is not allowed on /v2/models/mlp/infer"}


def test_a_failing_run_is_an_error_answer(plain):
    """An index out of the table's range: onnxrt raises inside the run."""
    client = th.InferenceServerClient(plain.http)
    e = http_error(lambda: client.infer(
        "gather", [http_input("i", np.array([0, 7], np.int64), "INT64")]))
    # onnxrt raises Fail (a RuntimeError) from the kernel: the server cannot tell a bad
    # value from a fault of its own, so 500, with the node and op named
    assert e.status() == "500" and "model 'gather'" in e.message()
    assert "Gather" in e.message() and "index 7 is out of range" in e.message()
    r = client.infer("gather", [http_input("i", np.array([4, 0], np.int64), "INT64")])
    np.testing.assert_array_equal(r.as_numpy("y"), [[8, 9], [0, 1]])


def test_grpc_errors(plain):
    g = tg.InferenceServerClient(plain.grpc)

    def grpc_error(fn) -> InferenceServerException:
        with pytest.raises(InferenceServerException) as e:
            fn()
        return e.value

    e = grpc_error(lambda: g.infer("nope", [grpc_input("x", X, "FP32")]))
    assert e.status() == "StatusCode.NOT_FOUND" and "unknown model 'nope'" in e.message()
    e = grpc_error(lambda: g.infer("mlp", [grpc_input("x", X.astype(np.float64), "FP64")]))
    assert e.status() == "StatusCode.INVALID_ARGUMENT"
    assert "datatype FP64, the model expects FP32" in e.message()
    e = grpc_error(lambda: g.infer("mlp", [grpc_input("x", X[:, :3].copy(), "FP32")]))
    assert "shape [2, 3], the model expects [-1, 4]" in e.message()
    e = grpc_error(lambda: g.get_model_metadata("mlp", "9"))
    assert e.status() == "StatusCode.NOT_FOUND"
    e = grpc_error(lambda: g.infer("mlp", [grpc_input("x", X, "FP32")],
                                   outputs=[tg.InferRequestedOutput("y", class_count=2)]))
    assert "classification extension is not supported" in e.message()
    big = np.zeros((70000, 4), np.float32)   # past the 1 MiB message limit
    e = grpc_error(lambda: g.infer("mlp", [grpc_input("x", big, "FP32")]))
    assert e.status() == "StatusCode.RESOURCE_EXHAUSTED"


def test_grpc_raw_contents_must_match_the_inputs(plain):
    import grpc
    from tritonclient.grpc import service_pb2, service_pb2_grpc

    req = service_pb2.ModelInferRequest(model_name="mlp")
    req.inputs.add(name="x", datatype="FP32", shape=[2, 4])
    req.raw_input_contents.extend([X.tobytes(), X.tobytes()])
    half = service_pb2.ModelInferRequest(model_name="typed")
    t = half.inputs.add(name="in_fp16", datatype="FP16", shape=[1, 2])
    t.contents.fp32_contents.extend([1.0, 2.0])
    with grpc.insecure_channel(plain.grpc) as ch:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(ch)
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(req, timeout=30)
        assert e.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "raw_input_contents holds 2 tensor(s) for 1 input(s)" in e.value.details()
        with pytest.raises(grpc.RpcError) as e:
            stub.ModelInfer(half, timeout=30)
        assert "FP16 data travels in raw_input_contents only" in e.value.details()


def test_errors_are_counted_and_the_server_keeps_serving(plain):
    before_404 = plain.metric("onnxrt_request_errors_total", model="", status="404")
    before_400 = plain.metric("onnxrt_request_errors_total", model="mlp", status="400")
    failed = plain.metric("onnxrt_inference_requests_total", model="mlp", version="2",
                          outcome="failure")
    infer_json(plain, {"inputs": []}, model="no_such_model")
    infer_json(plain, {"inputs": [x_input(datatype="INT8")]})
    assert plain.metric("onnxrt_request_errors_total", model="", status="404") == before_404 + 1
    assert plain.metric("onnxrt_request_errors_total", model="mlp",
                        status="400") == before_400 + 1
    assert plain.metric("onnxrt_inference_requests_total", model="mlp", version="2",
                        outcome="failure") == failed + 1
    client = th.InferenceServerClient(plain.http)
    assert client.is_server_live() and client.is_server_ready()
    r = client.infer("mlp", [http_input("x", X, "FP32")])
    assert r.as_numpy("y").shape == (2, 3)
    assert plain.proc.poll() is None
