"""AzureExecutionProvider: onnxruntime-extensions' invoker operators sending KServe v2 and
form requests. The protocol's server is ``onnxrt serve`` started on 127.0.0.1 (its models
from tests/serve_models.py, expected values by NumPy formula); a recording stub endpoint
(stub_server.py) shows the wire format, the bearer token and the failures."""

from __future__ import annotations

import json
import threading

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt
from onnxrt.providers.azure import AzureExecutionProvider

pytestmark = pytest.mark.skipif(
    bool(AzureExecutionProvider.unavailable_reason()),
    reason=f"AzureExecutionProvider: {AzureExecutionProvider.unavailable_reason()}")

from providers.azure.stub_server import start_stub  # noqa: E402
from serve_models import WEIGHTS  # noqa: E402

EXT = "com.microsoft.extensions"
PROVIDERS = ["AzureExecutionProvider", "CPUExecutionProvider"]
TOKEN = np.array(["secret-token"], dtype=object)


def mlp(x: np.ndarray, version: int) -> tuple[np.ndarray, np.ndarray]:
    """What serve_models.mlp_model computes: relu(x @ W_v + 0.5) and the row sums."""
    return np.maximum(x @ WEIGHTS[version] + np.float32(0.5), 0), x.sum(1, keepdims=True)


def triton_model(uri: str, model: str = "mlp", version: str | None = "1",
                 x_name: str = "x", outputs: tuple[str, ...] = ("y", "s"),
                 **attrs: object) -> onnx.ModelProto:
    if version is not None:
        attrs["model_version"] = version
    node = h.make_node("AzureTritonInvoker", ["auth_token", x_name], list(outputs),
                       domain=EXT, name="remote", model_uri=uri, model_name=model, **attrs)
    outs = {"y": h.make_tensor_value_info("y", T.FLOAT, ["N", 3]),
            "s": h.make_tensor_value_info("s", T.FLOAT, ["N", 1])}
    g = h.make_graph([node], "remote_mlp",
                     [h.make_tensor_value_info("auth_token", T.STRING, [1]),
                      h.make_tensor_value_info(x_name, T.FLOAT, ["N", 4])],
                     [outs.get(o) or h.make_tensor_value_info(o, T.FLOAT, None)
                      for o in outputs])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(EXT, 1)])


def session(m: onnx.ModelProto) -> onnxrt.InferenceSession:
    return onnxrt.InferenceSession(m.SerializeToString(), providers=PROVIDERS)


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    """onnxrt serve over the serve tests' repository (mlp versions 1 and 2...)."""
    from serve.conftest import start_server, stop_server
    from serve_models import write_repository

    repo = write_repository(str(tmp_path_factory.mktemp("azure_repo")))
    s = start_server([repo, "--no-grpc", "--threads", "1"],
                     str(tmp_path_factory.mktemp("azure_log") / "serve.log"))
    yield s
    stop_server(s)


@pytest.fixture(scope="module")
def stub():
    s = start_stub()
    yield s
    s.server.shutdown()


X = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)


# -- the protocol, against onnxrt serve ---------------------------------------------------

@pytest.mark.parametrize("binary", [1, 0])
def test_triton_invoker_against_serve(server, binary):
    sess = session(triton_model(server.url, binary_data=binary))
    y, s = sess.run(None, {"auth_token": TOKEN, "x": X})
    ey, es = mlp(X, 1)
    np.testing.assert_allclose(y, ey, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(s, es, rtol=1e-6, atol=1e-6)
    assert y.dtype == np.float32 and y.shape == (3, 3)


def test_model_version_and_field_name(server):
    # version 2 has other weights; the input named "edge/x" fills the remote input "x"
    sess = session(triton_model(server.url, version="2", x_name="edge/x", outputs=("y",)))
    (y,) = sess.run(None, {"auth_token": TOKEN, "edge/x": X})
    np.testing.assert_allclose(y, mlp(X, 2)[0], rtol=1e-6, atol=1e-6)


def test_http_error_names_status_endpoint_and_model(server):
    sess = session(triton_model(server.url, model="no_such_model", version=None))
    with pytest.raises(onnxrt.Fail) as e:
        sess.run(None, {"auth_token": TOKEN, "x": X})
    msg = str(e.value)
    assert "HTTP 404" in msg and "no_such_model" in msg and server.url in msg
    assert "remote" in msg      # the node


def test_server_refusal_then_session_still_works(server):
    # a wrong shape is refused by the server (HTTP 400); the next run succeeds
    m = triton_model(server.url)
    m.graph.input[1].type.tensor_type.shape.ClearField("dim")
    sess = session(m)
    with pytest.raises(onnxrt.Fail, match="HTTP 400"):
        sess.run(None, {"auth_token": TOKEN, "x": np.ones((2, 5), np.float32)})
    y, _ = sess.run(None, {"auth_token": TOKEN, "x": X})
    np.testing.assert_allclose(y, mlp(X, 1)[0], rtol=1e-6, atol=1e-6)


def test_run_async(server):
    sess = session(triton_model(server.url))
    xs = [np.full((2, 4), i, np.float32) for i in range(4)]
    done = threading.Event()
    got: dict[int, object] = {}
    lock = threading.Lock()

    def callback(outputs, i, err):
        with lock:
            got[i] = err or outputs
            if len(got) == len(xs):
                done.set()

    for i, x in enumerate(xs):
        sess.run_async(None, {"auth_token": TOKEN, "x": x}, callback, i)
    assert done.wait(60), f"only {len(got)} of {len(xs)} callbacks came"
    for i, x in enumerate(xs):
        assert not isinstance(got[i], str), got[i]
        np.testing.assert_allclose(got[i][0], mlp(x, 1)[0], rtol=1e-6, atol=1e-6)


def hybrid_model(uri: str) -> onnx.ModelProto:
    """If(use_remote): the mlp computed here (then) or by the endpoint (else)."""
    w = onnx.numpy_helper.from_array(WEIGHTS[1], "w_local")
    b = onnx.numpy_helper.from_array(np.float32(0.5).reshape(1), "b_local")
    axes = onnx.numpy_helper.from_array(np.array([1], np.int64), "axes_local")
    local = h.make_graph(
        [h.make_node("MatMul", ["x", "w_local"], ["xw"]),
         h.make_node("Add", ["xw", "b_local"], ["z"]),
         h.make_node("Relu", ["z"], ["y_local"]),
         h.make_node("ReduceSum", ["x", "axes_local"], ["s_local"], keepdims=1)],
        "local", [], [h.make_tensor_value_info("y_local", T.FLOAT, ["N", 3]),
                      h.make_tensor_value_info("s_local", T.FLOAT, ["N", 1])], [w, b, axes])
    remote = h.make_graph(
        [h.make_node("AzureTritonInvoker", ["auth_token", "x"], ["y", "s"], domain=EXT,
                     name="remote", model_uri=uri, model_name="mlp", model_version="1")],
        "remote", [], [h.make_tensor_value_info("y", T.FLOAT, ["N", 3]),
                       h.make_tensor_value_info("s", T.FLOAT, ["N", 1])])
    g = h.make_graph(
        [h.make_node("If", ["use_local"], ["Y", "S"], name="route", then_branch=local,
                     else_branch=remote)],
        "hybrid",
        [h.make_tensor_value_info("use_local", T.BOOL, []),
         h.make_tensor_value_info("auth_token", T.STRING, [1]),
         h.make_tensor_value_info("x", T.FLOAT, ["N", 4])],
        [h.make_tensor_value_info("Y", T.FLOAT, ["N", 3]),
         h.make_tensor_value_info("S", T.FLOAT, ["N", 1])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(EXT, 1)])


def test_hybrid_if_gives_the_same_numbers_both_ways(server):
    sess = session(hybrid_model(server.url))
    feeds = {"auth_token": TOKEN, "x": X}

    def served() -> float:
        return server.metric("onnxrt_batch_size_count", model="mlp", version="1")

    n0 = served()
    local = sess.run(None, {**feeds, "use_local": np.array(True)})
    assert served() == n0           # the local branch sent nothing
    remote = sess.run(None, {**feeds, "use_local": np.array(False)})
    assert served() == n0 + 1       # the remote branch was answered by the server
    ey, es = mlp(X, 1)
    for got in (local, remote):
        np.testing.assert_allclose(got[0], ey, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[1], es, rtol=1e-6, atol=1e-6)
    report = sess.placement_report()
    assert any("remote" in ln and "AzureExecutionProvider" in ln
               for ln in report.splitlines()), report


def test_placement_report_shows_claims_and_declines(server):
    m = triton_model(server.url)
    relu = h.make_node("Relu", ["y"], ["r"], name="local_relu")
    m.graph.node.append(relu)
    m.graph.output.append(h.make_tensor_value_info("r", T.FLOAT, ["N", 3]))
    sess = session(m)
    report = sess.placement_report()
    lines = {ln.split()[0]: ln for ln in report.splitlines() if ln.split()}
    assert "AzureExecutionProvider" in lines["remote"]
    assert "CPUExecutionProvider" in lines["local_relu"]
    assert "AzureExecutionProvider: no kernel for ai.onnx::Relu" in lines["local_relu"]
    by_ep = {a.ep_name: [n.name for n in a.get_nodes()]
             for a in sess.get_provider_graph_assignment_info()}
    assert by_ep == {"AzureExecutionProvider": ["remote"], "CPUExecutionProvider": ["local_relu"]}


# -- the wire, the token and failures, against the recording stub -------------------------

def _v2_request(seen) -> tuple[dict, bytes]:
    """The JSON header and binary tail of a KServe v2 request (binary extension)."""
    n = int(seen.headers.get("inference-header-content-length", len(seen.body)))
    return json.loads(seen.body[:n]), seen.body[n:]


def test_bearer_token_and_binary_wire_format(stub):
    m = triton_model(stub.url, model="echo", version=None, outputs=("y",))
    m.graph.output[0].type.tensor_type.shape.ClearField("dim")
    (y,) = session(m).run(None, {"auth_token": TOKEN, "x": X})
    np.testing.assert_array_equal(y, np.array([[1.5, 2.5]], np.float32))
    seen = stub.last()
    assert seen.path == "/v2/models/echo/infer"
    assert seen.headers["authorization"] == "Bearer secret-token"
    head, tail = _v2_request(seen)
    (inp,) = head["inputs"]
    assert inp["name"] == "x" and inp["datatype"] == "FP32" and inp["shape"] == [3, 4]
    assert inp["parameters"]["binary_data_size"] == X.nbytes
    assert tail == X.tobytes()
    assert [o["name"] for o in head["outputs"]] == ["y"]


def test_json_wire_format_and_string_inputs(stub):
    node = h.make_node("AzureTritonInvoker", ["auth_token", "words", "x"], ["y"], domain=EXT,
                       model_uri=stub.url, model_name="echo", binary_data=0)
    g = h.make_graph([node], "g", [h.make_tensor_value_info("auth_token", T.STRING, [1]),
                                   h.make_tensor_value_info("words", T.STRING, [2]),
                                   h.make_tensor_value_info("x", T.INT64, [2])],
                     [h.make_tensor_value_info("y", T.FLOAT, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(EXT, 1)])
    session(m).run(None, {"auth_token": TOKEN, "words": np.array(["a", "bé"], object),
                          "x": np.array([3, -4], np.int64)})
    seen = stub.last()
    assert "inference-header-content-length" not in seen.headers
    doc = json.loads(seen.body)
    by_name = {i["name"]: i for i in doc["inputs"]}
    assert by_name["words"]["datatype"] == "BYTES" and by_name["words"]["data"] == ["a", "bé"]
    assert by_name["x"]["datatype"] == "INT64" and by_name["x"]["data"] == [3, -4]


def test_declared_type_mismatch_is_an_error(stub):
    m = triton_model(stub.url, model="echo", version=None, outputs=("y",))
    m.graph.output[0].type.tensor_type.elem_type = T.INT32
    m.graph.output[0].type.tensor_type.shape.ClearField("dim")
    with pytest.raises(onnxrt.Fail, match="came back as float32, the model declares int32"):
        session(m).run(None, {"auth_token": TOKEN, "x": X})


@pytest.mark.parametrize("path,status,text", [("deny", 401, "the token is not valid"),
                                              ("broken", 500, "internal trouble")])
def test_http_failures_are_clear(stub, path, status, text):
    sess = session(triton_model(f"{stub.url}/{path}", model="echo", version=None))
    with pytest.raises(onnxrt.Fail) as e:
        sess.run(None, {"auth_token": TOKEN, "x": X})
    msg = str(e.value)
    assert f"HTTP {status}" in msg and text in msg and "'echo'" in msg and stub.url in msg


def test_answer_that_is_not_a_response(stub):
    sess = session(triton_model(f"{stub.url}/garbage", model="echo", version=None))
    with pytest.raises(onnxrt.Fail, match="not an inference response"):
        sess.run(None, {"auth_token": TOKEN, "x": X})


def test_timeout_from_node_and_from_run_options(stub):
    m = triton_model(f"{stub.url}/slow", model="echo", version=None, outputs=("y",),
                     timeout=0.3)
    m.graph.output[0].type.tensor_type.shape.ClearField("dim")
    sess = session(m)
    with pytest.raises(onnxrt.Fail, match=r"no answer within 0.3 s"):
        sess.run(None, {"auth_token": TOKEN, "x": X})
    ro = onnxrt.RunOptions()
    ro.add_run_config_entry("azure.timeout_s", "10")
    (y,) = sess.run(None, {"auth_token": TOKEN, "x": X}, ro)
    np.testing.assert_array_equal(y, [[1.5, 2.5]])
    ro.add_run_config_entry("azure.timeout_s", "soon")
    with pytest.raises(onnxrt.Fail, match="azure.timeout_s='soon'"):
        sess.run(None, {"auth_token": TOKEN, "x": X}, ro)


def test_unreachable_endpoint():
    import socket

    with socket.socket() as s:      # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    sess = session(triton_model(f"http://127.0.0.1:{port}", version=None))
    with pytest.raises(onnxrt.Fail, match="cannot connect"):
        sess.run(None, {"auth_token": TOKEN, "x": X})


def test_text_to_text(stub):
    node = h.make_node("AzureTextToText", ["auth_token", "text"], ["answer"], domain=EXT,
                       model_uri=f"{stub.url}/text/chat")
    g = h.make_graph([node], "g", [h.make_tensor_value_info("auth_token", T.STRING, [1]),
                                   h.make_tensor_value_info("text", T.STRING, [1])],
                     [h.make_tensor_value_info("answer", T.STRING, [1])])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(EXT, 1)])
    body = '{"prompt": "hi"}'
    (out,) = session(m).run(None, {"auth_token": TOKEN, "text": np.array([body], object)})
    assert out.shape == (1,) and out[0] == "answer to " + body
    seen = stub.last()
    assert seen.path == "/text/chat" and seen.body == body.encode()
    assert seen.headers["content-type"] == "application/json"
    assert seen.headers["authorization"] == "Bearer secret-token"


AUDIO = np.frombuffer(b"RIFF\x00\x01fake-wave", np.uint8)


def _form_model(op: str, inputs: list[tuple[str, int]], **attrs: object) -> onnx.ModelProto:
    node = h.make_node(op, [n for n, _ in inputs], ["text"], domain=EXT,
                       model_uri=stub_url[0] + "/form/audio", **attrs)
    g = h.make_graph([node], "g", [h.make_tensor_value_info(n, t, None) for n, t in inputs],
                     [h.make_tensor_value_info("text", T.STRING, [1])])
    return h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid(EXT, 1)])


stub_url: list[str] = [""]


def test_openai_audio_to_text_form(stub):
    stub_url[0] = stub.url
    m = _form_model("OpenAIAudioToText",
                    [("auth_token", T.STRING), ("transcribe0/file", T.UINT8),
                     ("transcribe0/response_format", T.STRING)],
                    model_name="whisper", audio_format="wav")
    (out,) = session(m).run(None, {"auth_token": TOKEN, "transcribe0/file": AUDIO,
                                   "transcribe0/response_format": np.array(["text"], object)})
    form = json.loads(out[0])
    assert form["file"] == {"filename": "audio.wav", "size": AUDIO.size, "head": list(b"RIFF")}
    assert form["model"] == "whisper" and form["response_format"] == "text"
    assert stub.last().headers["authorization"] == "Bearer secret-token"


def test_openai_audio_model_and_filename_inputs(stub):
    stub_url[0] = stub.url
    m = _form_model("OpenAIAudioToText",
                    [("auth_token", T.STRING), ("file", T.UINT8), ("model", T.STRING),
                     ("filename", T.STRING)])
    (out,) = session(m).run(None, {"auth_token": TOKEN, "file": AUDIO,
                                   "model": np.array(["whisper-2"], object),
                                   "filename": np.array(["speech.mp3"], object)})
    form = json.loads(out[0])
    assert form["model"] == "whisper-2" and form["file"]["filename"] == "speech.mp3"
    assert "filename" not in form


def test_azure_audio_to_text_form(stub):
    stub_url[0] = stub.url
    m = _form_model("AzureAudioToText",
                    [("auth_token", T.STRING), ("model", T.STRING), ("audio", T.UINT8)],
                    binary_type="wav")
    (out,) = session(m).run(None, {"auth_token": TOKEN, "audio": AUDIO,
                                   "model": np.array(["whisper"], object)})
    form = json.loads(out[0])
    assert form["model"] == "whisper"
    assert form["audio"] == {"filename": "non_exist.wav", "size": AUDIO.size,
                             "head": list(b"RIFF")}


# -- bad models and inputs ----------------------------------------------------------------

def test_first_input_must_be_auth_token(stub):
    m = triton_model(stub.url)
    m.graph.node[0].input[0] = "token"
    m.graph.input[0].name = "token"
    with pytest.raises(onnxrt.InvalidGraph, match="first input must be named 'auth_token'"):
        session(m)


def test_model_uri_must_be_http(stub):
    with pytest.raises(onnxrt.InvalidGraph, match="not an http"):
        session(triton_model("file:///etc/passwd"))


def test_openai_audio_needs_a_file_input(stub):
    stub_url[0] = stub.url
    m = _form_model("OpenAIAudioToText", [("auth_token", T.STRING), ("audio", T.UINT8)],
                    model_name="whisper")
    with pytest.raises(onnxrt.InvalidGraph, match="'file' input is missing"):
        session(m)


def test_auth_token_must_be_a_string(stub):
    m = triton_model(stub.url, model="echo", version=None, outputs=("y",))
    m.graph.input[0].type.tensor_type.elem_type = T.FLOAT
    m.graph.output[0].type.tensor_type.shape.ClearField("dim")
    sess = session(m)
    with pytest.raises(onnxrt.InvalidArgument, match="auth_token'.*expected a string"):
        sess.run(None, {"auth_token": np.ones(1, np.float32), "x": X})


def test_available_and_listed():
    assert "AzureExecutionProvider" in onnxrt.get_available_providers()
    assert AzureExecutionProvider.unavailable_reason() == ""
    with pytest.raises(onnxrt.InvalidArgument, match="unknown provider option"):
        onnxrt.InferenceSession(triton_model("http://127.0.0.1:9").SerializeToString(),
                                providers=[("AzureExecutionProvider", {"endpoint": "x"})],)
