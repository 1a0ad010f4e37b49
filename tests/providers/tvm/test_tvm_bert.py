"""A 2-layer BERT (benchmarks/transformer_models.py, sequence 128) through the TVM provider:
apache-tvm 0.27 converts the shape arithmetic feeding the computed Reshapes node by node but
cannot build it as one group ("shape_of expects a tensor input"), so that group runs on the
host at those shapes, and the placement report and the stats say so; the outputs match
onnxruntime's. About 16 s of compiling and running on 2 cores (under the lock):
ONNXRT_TVM_BERT=1 runs it (the fast slice of the same path, a group TVM cannot build, is
test_tvm_provider.py::test_compile_failure_falls_back_or_fails)."""

from __future__ import annotations

import os
import sys
import warnings

import numpy as np
import pytest

from providers.tvm.tvmhelpers import TVM, fresh_cache, needs_tvm, tvm_session

pytestmark = [needs_tvm, pytest.mark.skipif(
    os.environ.get("ONNXRT_TVM_BERT") != "1",
    reason="about 16 s on 2 cores: set ONNXRT_TVM_BERT=1 (the fast slice is "
           "test_compile_failure_falls_back_or_fails)")]


def test_bert_shape_group_runs_on_the_host_and_the_report_says_so():
    ort_rt = pytest.importorskip("onnxruntime")
    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "..",
                                    "benchmarks"))
    import transformer_models as tm

    model, feeds = tm.bert(layers=2), tm.bert_inputs(1)
    sess = tvm_session(model, so_folder=fresh_cache())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        outs = sess.run(None, feeds)
    ref = ort_rt.InferenceSession(model.SerializeToString(),
                                  providers=["CPUExecutionProvider"]).run(None, feeds)
    for a, b in zip(outs, ref):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4)
    report = sess.placement_report()
    assert (f"(28 nodes): {TVM} could not compile it at input shapes input_ids[1, 128], "
            f"token_type_ids[1, 128]: ran on CPUExecutionProvider: TVM failed for") in report
    stats = sess.get_provider_stats()[TVM]
    assert stats["host_fallback_groups"] == 1 and stats["host_fallback_shapes"] == 1
