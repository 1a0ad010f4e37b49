"""The ONNX backend node suite through the TVM provider.

A representative case per op family TVM's frontend converts runs by default (compiling
takes 0.2-1 s a case); ONNXRT_TVM_FULL_SUITE=1 runs every case of the suite (long: hours of
compiling on 2 cores). Whether TVM took a node or declined it, the outputs must match the
stored ones within the case's tolerances; the representative cases must have nodes on TVM.
"""

from __future__ import annotations

import os
import warnings

import pytest

from providers.node_suite import check_node_case, missing_cases, node_cases
from providers.tvm.tvmhelpers import needs_tvm, nodes_on, tvm_session

pytestmark = needs_tvm

REPRESENTATIVE = [
    "abs", "add", "add_bcast", "and2d", "argmax_keepdims_random", "averagepool_2d_pads",
    "basic_conv_with_padding", "batchnorm_epsilon", "ceil", "clip",
    "conv_with_strides_padding", "convtranspose", "cos", "depthtospace_example", "div",
    "einsum_batch_matmul", "elu", "equal", "erf", "exp", "gather_elements_0",
    "gemm_all_attributes", "globalaveragepool", "greater", "hardsigmoid",
    "instancenorm_epsilon", "leakyrelu", "log", "logsoftmax_axis_1", "lrn", "matmul_2d",
    "max_example", "maxpool_2d_pads", "mean_example", "min_example", "mul", "neg", "pow",
    "prelu_example", "reciprocal", "relu", "selu", "sigmoid", "sign", "sin",
    "softmax_axis_1", "softplus", "split_equal_parts_2d", "sqrt", "sub", "sum_example",
    "tanh", "tile", "where_example", "xor2d",
]

# cases where a known TVM difference keeps a node on the CPU (support.KNOWN_WRONG),
# and groups of data movement alone (support.TRIVIAL), left on the CPU
DECLINED: dict[str, str] = {
    **{n: "moves no arithmetic" for n in (
        "cast_FLOAT_to_DOUBLE", "concat_2d_axis_1", "expand_dim_changed", "flatten_axis1",
        "gather_0", "slice", "squeeze", "transpose_default",
        "unsqueeze_axis_0")},
    # what TVM's Relax frontend refuses or gets wrong, in its own words or ours
    "reshape_reordered_all_dims": "cannot convert",   # the new shape as an input
    "layer_normalization_2d_axis0": "gives output 1 rank 0",      # Mean, InvStdDev left out
    "cumsum_1d": "non-constant axis", "reduce_mean_keepdims_example": "cannot convert",
    "reduce_sum_keepdims_example": "cannot convert",
    "resize_upsample_scales_nearest": "cannot convert",
}

FULL = os.environ.get("ONNXRT_TVM_FULL_SUITE") == "1"


def _run(sess, feeds):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        return sess.run(None, feeds)


@pytest.mark.parametrize("case", list(node_cases(REPRESENTATIVE, DECLINED, FULL)))
def test_node_case_through_tvm(case):
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)    # a compile failure is a failure here
        sess = tvm_session(case.model)
    check_node_case(case, sess, REPRESENTATIVE, DECLINED, nodes_on, _run)


def test_every_representative_case_exists():
    assert not missing_cases(REPRESENTATIVE, DECLINED)
