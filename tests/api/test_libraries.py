"""Real libraries that ship ONNX models and call onnxruntime, run unchanged on onnxrt through
``python -m onnxrt.run_as_onnxruntime`` and compared with the same program on onnxruntime.

The light ones (magika, silero-vad) come with the ``test`` extra; the heavier ones (OCR,
layout detection, content detection) run in ``tools/check_libraries.py``, whose output is in
the README."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tools"))
import check_libraries  # noqa: E402


@pytest.mark.parametrize("name", ["magika", "silero-vad"])
def test_library_runs_unchanged_and_matches_onnxruntime(name):
    module = check_libraries.PROGRAMS[name]["module"]
    if importlib.util.find_spec(module) is None:
        pytest.skip(f"{name} is not installed (it comes with the test extra)")
    ref, _, err_ref = check_libraries.run_program(name, on_onnxrt=False)
    assert ref is not None, f"{name} failed on onnxruntime: {err_ref}"
    got, _, err = check_libraries.run_program(name, on_onnxrt=True)
    assert got is not None, f"{name} failed on onnxrt: {err}"
    assert check_libraries.differences(ref, got) == []
    if name == "magika":  # the detections themselves are right, not only equal
        assert {k: v["label"] for k, v in got.items()} == {
            "python": "python", "json": "json", "html": "html", "c": "c", "csv": "csv",
            "png": "png", "shell": "shell"}
    else:  # speech found inside the voiced stretch (0.8-2.2 s) and nowhere else
        assert got["timestamps"] and all(8000 <= t["start"] and t["end"] <= 40000
                                         for t in got["timestamps"])
