"""A smoke run of the benchmark runner (benchmarks/run.py) on a case module of its own: it
finds ``cases_*.py`` modules, runs a plain and a streaming case against onnxruntime,
reports a module that fails to import, and writes the means per category."""

from __future__ import annotations

import importlib.util
import json
import os
import textwrap

import pytest

_RUN = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks", "run.py")

_CASES = '''
import numpy as np
from onnx import TensorProto, helper

CATEGORY = "tiny"


def _model():
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "state"], ["s1"]),
         helper.make_node("Tanh", ["s1"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4]),
         helper.make_tensor_value_info("state", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(g, ir_version=8,
                             opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _stream(run):
    state = np.zeros((1, 4), np.float32)
    for k in range(5):          # chunks, the state fed back
        state = run({"x": np.full((1, 4), 0.1 * k, np.float32), "state": state})[0]


def cases(quick=False):
    x = {"x": np.ones((1, 4), np.float32), "state": np.zeros((1, 4), np.float32)}
    return [{"name": "tiny_add", "category": CATEGORY, "model": _model(), "feeds": x},
            {"name": "tiny_stream", "category": CATEGORY, "model": _model,
             "stream": _stream}]
'''


def _runner():
    spec = importlib.util.spec_from_file_location("bench_run", _RUN)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_runner_runs_cases_and_reports_means(tmp_path, capsys):
    pytest.importorskip("onnxruntime")
    (tmp_path / "cases_tiny.py").write_text(textwrap.dedent(_CASES))
    (tmp_path / "cases_broken.py").write_text("import a_package_that_is_not_there\n")
    out = tmp_path / "r.json"
    res = _runner().main(["--cases-dir", str(tmp_path), "--quick", "--no-compile",
                          "--only", "tiny", "--json", str(out)])
    rows = {r["model"]: r for r in res["rows"]}
    assert set(rows) == {"tiny_add", "tiny_stream"}
    for r in rows.values():
        assert r["category"] == "tiny" and r["ratio"] > 0 and r["max_abs_diff"] < 1e-6
        assert r["runs"] >= 3 and r["onnxrt_ms"] > 0 and r["onnxruntime_ms"] > 0
    assert set(res["categories"]) == {"tiny"} and res["geomean_ratio"] > 0
    assert any("cases_broken" in s for s in res["skipped_modules"])
    assert json.loads(out.read_text())["rows"][0]["model"] == "tiny_add"
    text = capsys.readouterr().out
    assert "module skipped: cases_broken" in text and "overall" in text
