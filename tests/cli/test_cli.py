"""The onnxrt command, driven as a user would: subprocesses, outputs and exit codes."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import onnx
import pytest
from onnx import TensorProto as T
from onnx import helper as h

from models import model


def onnxrt(*args, cwd=None):
    return subprocess.run([sys.executable, "-m", "onnxrt.cli.main", *args],
                          capture_output=True, text=True, cwd=cwd, timeout=600)


@pytest.fixture
def relu_model(tmp_path):
    m = model([h.make_node("MatMul", ["x", "w"], ["a"], name="mm"),
               h.make_node("Relu", ["a"], ["b"], name="the_relu"),
               h.make_node("Add", ["b", "b"], ["y"], name="add")],
              [h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])],
              [h.make_tensor_value_info("y", T.FLOAT, ["batch", 3])],
              [h.make_tensor("w", T.FLOAT, [4, 3],
                             np.random.default_rng(0).standard_normal(12))])
    p = tmp_path / "relu.onnx"
    onnx.save(m, p)
    return str(p)


def test_run_zoo_model_prints_outputs_and_time():
    r = onnxrt("run", "squeezenet", "--runs", "2", "--warmup", "1")
    assert r.returncode == 0, r.stderr
    assert "output softmaxout_1: shape [1, 1000, 1, 1] dtype float32" in r.stdout
    assert "top:" in r.stdout and "time: median" in r.stdout


def test_run_zoo_model_at_another_batch():
    """The zoo files fix the batch to 1; --batch frees it for a zoo name."""
    r = onnxrt("run", "squeezenet", "--batch", "3", "--runs", "1", "--warmup", "0")
    assert r.returncode == 0, r.stderr
    assert "output softmaxout_1: shape [3, 1000, 1, 1] dtype float32" in r.stdout


def test_run_with_input_file_dims_and_output_dir(relu_model, tmp_path):
    x = np.random.default_rng(1).standard_normal((5, 4)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out"
    r = onnxrt("run", relu_model, "--input", f"x={tmp_path / 'x.npy'}", "--output-dir", str(out),
               "--runs", "1")
    assert r.returncode == 0, r.stderr
    assert "shape [5, 3]" in r.stdout
    w = np.asarray(onnx.load(relu_model).graph.initializer[0].float_data,
                   np.float32).reshape(4, 3)
    np.testing.assert_allclose(np.load(out / "y.npy"), 2 * np.maximum(x @ w, 0), rtol=1e-5)
    r = onnxrt("run", relu_model, "--dim", "batch=7", "--runs", "1")
    assert r.returncode == 0 and "shape [7, 3]" in r.stdout


@pytest.mark.parametrize("args, words", [
    (["run", "/no/such/model.onnx"], ["neither a file nor a zoo model"]),
    (["run", "NOPE"], ["zoo"]),
    (["run", "squeezenet", "--providers", "NopeExecutionProvider"], ["Unknown Provider"]),
    (["run", "squeezenet", "--input", "data_0=/no/such.npy"], ["not found"]),
    (["run", "squeezenet", "--input", "bogus=/no/such.npy"], ["not found"]),
    (["run", "squeezenet", "--dim", "N"], ["NAME=INT"]),
    (["compare", "squeezenet", "--providers", "NopeExecutionProvider"], ["Unknown Provider"]),
    (["bench", "squeezenet", "--plot", "x.png"], ["--plot needs --profile"]),
    (["optimize", "squeezenet", "-o", "/tmp/x.onnx", "--level", "turbo"], ["turbo"]),
])
def test_errors_are_one_line_with_nonzero_status(args, words):
    r = onnxrt(*args)
    assert r.returncode != 0
    lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("onnxrt: error:"), r.stderr
    for w in words:
        assert w in lines[0], (w, lines[0])


def test_bad_input_file(tmp_path):
    bad = tmp_path / "bad.npy"
    bad.write_bytes(b"not a numpy file")
    r = onnxrt("run", "squeezenet", "--input", f"data_0={bad}")
    assert r.returncode != 0 and "cannot read" in r.stderr
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((2, 2), np.float64))
    r = onnxrt("run", "squeezenet", "--input", f"data_0={wrong}")
    assert r.returncode != 0 and "data_0" in r.stderr


def test_bench_json_and_profile(tmp_path):
    r = onnxrt("bench", "squeezenet", "--runs", "3", "--warmup", "1", "--json", "--profile",
               "--plot", str(tmp_path / "p.png"), cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    lat = res["latency_ms"]
    assert lat["p50"] <= lat["p90"] <= lat["p99"]
    assert res["throughput_per_s"] > 0 and res["session_creation_ms"] > 0
    assert res["peak_run_allocations_mb"] > 0 and res["peak_rss_mb"] > 0
    assert "Conv" in res["top_ops"][0]["op"]  # Conv, or FusedConv after the fusions
    assert os.path.getsize(tmp_path / "p.png") > 1000
    assert os.path.exists(res["profile"])


def test_bench_text_output():
    r = onnxrt("bench", "squeezenet", "--runs", "3", "--warmup", "0")
    assert r.returncode == 0, r.stderr
    for word in ("latency ms: p50", "p90", "p99", "throughput", "session creation",
                 "peak memory"):
        assert word in r.stdout


def test_inspect_shows_everything():
    r = onnxrt("inspect", "squeezenet")
    assert r.returncode == 0, r.stderr
    for word in ("inputs:", "data_0: tensor(float) [1, 3, 224, 224]", "outputs:", "opsets:",
                 "ai.onnx 9", "ops (105 nodes):", "Conv 26", "parameters:",
                 "placement of model", "CPUExecutionProvider", "device copies",
                 "ops as the session runs them", "com.microsoft::FusedConv"):
        assert word in r.stdout, word


def test_inspect_with_a_provider_shows_reasons(relu_model):
    r = onnxrt("inspect", relu_model, "--providers",
               "TestPluginExecutionProvider,CPUExecutionProvider")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if ln.startswith("mm "))
    assert "TestPluginExecutionProvider: no kernel for ai.onnx::MatMul-13" in line


def test_compare_names_the_planted_divergence(relu_model):
    r = onnxrt("compare", relu_model, "--providers",
               "WrongReluExecutionProvider,CPUExecutionProvider",
               "--against", "CPUExecutionProvider")
    assert r.returncode == 1, r.stdout + r.stderr
    assert "first diverging node: the_relu (Relu) on WrongReluExecutionProvider" in r.stdout
    assert "max |diff|" in r.stdout and "input 'a'" in r.stdout


def test_compare_agreeing_providers(relu_model):
    r = onnxrt("compare", relu_model, "--providers",
               "TestPluginExecutionProvider,CPUExecutionProvider")
    assert r.returncode == 0, r.stdout + r.stderr
    assert "match" in r.stdout


def test_optimize_writes_a_loadable_model(tmp_path):
    out = tmp_path / "opt.onnx"
    r = onnxrt("optimize", "squeezenet", "-o", str(out), "--level", "extended")
    assert r.returncode == 0, r.stderr
    onnx.checker.check_model(onnx.load(out))
    assert "written" in r.stdout


def test_zoo_lists_the_nine_models():
    r = onnxrt("zoo")
    assert r.returncode == 0
    names = [ln.split()[0] for ln in r.stdout.splitlines()]
    assert len(names) == 9 and "resnet50" in names and "vgg19" in names
