"""The ONNX backend node suite, generated in memory from the installed onnx package."""

from __future__ import annotations

import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from onnx.backend.test.loader import load_node_model_tests

    CASES = load_node_model_tests()

import onnxrt as ort
from conformance.exclusions import EXCLUDED, NOT_STRICT
from oracle import assert_all_similar, normalize


def _params():
    for case in CASES:
        marks = []
        if case.name in EXCLUDED:
            marks.append(pytest.mark.xfail(reason=EXCLUDED[case.name],
                                             strict=case.name not in NOT_STRICT))
        yield pytest.param(case, id=case.name, marks=marks)


@pytest.mark.parametrize("case", list(_params()))
def test_node(case):
    sess = ort.InferenceSession(case.model.SerializeToString())
    names = [i.name for i in case.model.graph.input]
    out_names = [o.name for o in case.model.graph.output]
    for inputs, refs in case.data_sets:
        feeds = {n: normalize(v) for n, v in zip(names, inputs)}
        outs = sess.run(None, feeds)
        assert_all_similar(refs, outs, case.rtol, case.atol, out_names)
