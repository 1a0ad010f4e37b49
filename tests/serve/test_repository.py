"""The model repository: a file, a zoo name, Triton's folder layout and its mistakes; a
model that does not load leaves the server live but not ready; the command's options."""

from __future__ import annotations

import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import onnx
import pytest
import tritonclient.http as th
from onnx import TensorProto as T
from onnx import helper as h

from models import model
from onnxrt.serve import ModelRepository
from serve.conftest import start_server, stop_server
from serve_models import seq_model


def test_a_file_is_one_model_named_after_it(tmp_path):
    p = tmp_path / "my_model.onnx"
    onnx.save(seq_model(), p)
    repo = ModelRepository.from_path(str(p))
    assert repo.names() == ["my_model"] and repo.versions("my_model") == ["1"]


def test_a_zoo_name_is_a_model():
    repo = ModelRepository.from_path("squeezenet")
    assert repo.names() == ["squeezenet"]
    with pytest.raises(FileNotFoundError, match="neither a file nor a zoo model"):
        ModelRepository.from_path("no_such_model_anywhere")


def test_versions_are_integers_and_the_highest_is_the_default(tmp_path):
    for v in ("1", "10", "2"):
        os.makedirs(tmp_path / "m" / v)
        onnx.save(seq_model(), tmp_path / "m" / v / "model.onnx")
    os.makedirs(tmp_path / "m" / "notes")           # not a version: ignored
    (tmp_path / "README.txt").write_text("ignored")
    os.makedirs(tmp_path / ".hidden")
    repo = ModelRepository.from_path(str(tmp_path))
    assert repo.versions("m") == ["1", "2", "10"]
    assert repo.get("m").version == "10"


def test_layout_mistakes_are_named(tmp_path):
    os.makedirs(tmp_path / "a" / "1")
    onnx.save(seq_model(), tmp_path / "a" / "1" / "model.onnx")
    os.makedirs(tmp_path / "b")
    onnx.save(seq_model(), tmp_path / "b" / "model.onnx")     # no version folder
    with pytest.raises(ValueError, match=r"b: no version folder holding model.onnx "
                                         r"\(expected .*b/1/model.onnx\)"):
        ModelRepository.from_path(str(tmp_path))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no models"):
        ModelRepository.from_path(str(empty))
    with pytest.raises(ValueError, match="version '0' must be a positive integer"):
        ModelRepository.from_sources({"m": {"0": b""}})


def test_a_model_that_does_not_load_keeps_the_server_live_not_ready(tmp_path):
    for name, content in (("good", seq_model().SerializeToString()),
                          ("garbage", b"not a model"),
                          ("seqinput", model([h.make_node("SequenceLength", ["s"], ["n"])],
                                             [h.make_tensor_sequence_value_info(
                                                 "s", T.FLOAT, None)],
                                             [h.make_tensor_value_info("n", T.INT64, [])]
                                             ).SerializeToString())):
        os.makedirs(tmp_path / "repo" / name / "1")
        (tmp_path / "repo" / name / "1" / "model.onnx").write_bytes(content)
    s = start_server([str(tmp_path / "repo"), "--no-grpc"], str(tmp_path / "log"),
                     wait_ready=False)
    try:
        c = th.InferenceServerClient(s.http)
        assert c.is_server_live()
        deadline = time.monotonic() + 60
        while any(m["state"] == "LOADING" for m in c.get_model_repository_index()):
            assert time.monotonic() < deadline
            time.sleep(0.1)
        assert not c.is_server_ready()
        with pytest.raises(urllib.error.HTTPError) as e:
            urllib.request.urlopen(s.url + "/v2/health/ready", timeout=10)
        assert e.value.code == 400 and b"garbage/1 unavailable" in e.value.read()
        assert c.is_model_ready("good") and not c.is_model_ready("garbage")
        index = {m["name"]: m for m in c.get_model_repository_index()}
        assert index["good"]["state"] == "READY"
        assert index["garbage"]["state"] == "UNAVAILABLE" and index["garbage"]["reason"]
        assert "has type seq(tensor(float))" in index["seqinput"]["reason"]
        t = th.InferInput("x", [1, 2], "FP32")
        t.set_data_from_numpy(np.ones((1, 2), np.float32))
        with pytest.raises(Exception) as err:
            c.infer("garbage", [t])
        assert err.value.status() == "503" and "is not ready" in err.value.message()
        np.testing.assert_array_equal(c.infer("good", [t]).as_numpy("y"), [[2, 2]])
    finally:
        stop_server(s)


def serve_cli(*args):
    return subprocess.run([sys.executable, "-m", "onnxrt.cli.main", "serve", *args],
                          capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("args, message", [
    (["squeezenet", "--batch-timeout-ms", "5"], "--batch-timeout-ms needs --max-batch N"),
    (["squeezenet", "--no-grpc", "--grpc-port", "9"], "contradict"),
    (["squeezenet", "--instances", "0"], "--instances must be >= 1"),
    (["squeezenet", "--max-body-mb", "0"], "--max-body-mb must be > 0"),
    (["/no/such/dir"], "neither a file nor a zoo model"),
])
def test_command_line_mistakes(args, message):
    r = serve_cli(*args)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_the_listening_socket_sends_small_writes_at_once():
    """Nagle's algorithm on the server's socket held each response's body behind its
    headers until the client's delayed ACK (44 ms a request)."""
    import socket

    from onnxrt.serve.runner import _listen

    with _listen("127.0.0.1", 0) as sock:
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
