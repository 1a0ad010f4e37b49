"""tools/ort_api_suite.py on a slice of onnxruntime's own API tests (the whole run, both
ways, is the README's table: ``python tools/ort_api_suite.py PATH_TO_ONNXRUNTIME_CHECKOUT``).

Needs an onnxruntime source checkout: ONNXRUNTIME_SOURCE, or /work/ortsrc where this
project's machines keep one."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CHECKOUT = Path(os.environ.get("ONNXRUNTIME_SOURCE", "/work/ortsrc"))
pytestmark = pytest.mark.skipif(
    not (CHECKOUT / "onnxruntime" / "test" / "python" / "onnxruntime_test_python.py").is_file(),
    reason=f"no onnxruntime source checkout at {CHECKOUT} (set ONNXRUNTIME_SOURCE)")

# one test per feature family of the upstream files, both ways
SLICE = ("test_ort_memory_info or test_create_allocator or test_sparse_tensor_coo_format or "
         "test_run_with_adapter or test_session_options_add_initializer or test_input_void or "
         "test_bind_onnx_types_supported_by_numpy or test_run_sparse_output_only or "
         "test_check_and_normalize_provider_args or test_loading_session_options_from_model")


def test_upstream_slice_passes_on_onnxrt():
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "ort_api_suite.py"),
                          str(CHECKOUT), "-k", SLICE], capture_output=True, text=True,
                         timeout=600)
    score = re.search(r"onnxrt: (\d+)/(\d+) of the tests that pass on onnxruntime pass",
                      out.stdout)
    assert score is not None, out.stdout[-3000:] + out.stderr[-3000:]
    # all of the slice's tests pass on onnxruntime here, and all of them on onnxrt
    assert int(score.group(2)) >= 10 and score.group(1) == score.group(2), out.stdout[-3000:]
    assert out.returncode == 0


def test_ep_device_files_pass_on_onnxrt():
    """The EP-device API's upstream files (``--set ep``): the compatibility tests pass both
    ways; the autoep tests skip on onnxruntime off Windows and are not counted (onnxrt's own
    tests/framework/test_selection.py and test_ep_libraries.py cover what they check)."""
    out = subprocess.run([sys.executable, str(ROOT / "tools" / "ort_api_suite.py"),
                          str(CHECKOUT), "--set", "ep"], capture_output=True, text=True,
                         timeout=600)
    assert "onnxruntime_test_python_ep_compatibility.py: 2/2" in out.stdout, \
        out.stdout[-3000:] + out.stderr[-3000:]
    assert "onnxrt: 2/2 of the tests that pass on onnxruntime pass" in out.stdout
    assert out.returncode == 0
