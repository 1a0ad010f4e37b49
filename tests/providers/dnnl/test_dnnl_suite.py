"""The ONNX backend node suite through the oneDNN provider.

A representative case per op family DNNL takes runs by default; ONNXRT_DNNL_FULL_SUITE=1
runs every case of the suite. Whether DNNL took a node or declined it, the outputs must
match the stored ones within the case's tolerances; the representative cases must have
nodes on DNNL, and a group oneDNN cannot build is a failure (``error_on_failure``), not a
quiet run on the CPU provider.
"""

from __future__ import annotations

import os

import pytest

from dnnlhelpers import dnnl_session, needs_dnnl, nodes_on
from providers.node_suite import check_node_case, missing_cases, node_cases

pytestmark = needs_dnnl

# one case per op family DNNL takes in the suite (case names without "test_"); the suite's
# Conv, Gemm and BatchNormalization cases feed their weights as inputs, which DNNL declines
REPRESENTATIVE = [
    "abs", "add_bcast", "attention_4d_expanded", "averagepool_2d_pads",
    "averagepool_3d_dilations_small", "averagepool_2d_ceil", "clip_default_inbounds",
    "div_bcast", "elu", "exp", "gelu_default_1_expanded", "gelu_tanh_2",
    "globalaveragepool", "globalmaxpool", "hardsigmoid", "hardswish", "leakyrelu", "log",
    "logsoftmax_axis_1", "lrn", "matmul_3d", "matmul_bcast", "max_two_inputs",
    "maxpool_2d_same_upper", "maxpool_3d_dilations", "min_two_inputs", "mish", "mul_bcast",
    "neg", "relu", "rms_normalization_2d_axis1_expanded", "sigmoid", "softmax_axis_1",
    "softmax_large_number", "sqrt", "sub_bcast", "sum_two_inputs", "swish_expanded", "tanh",
]

# cases whose nodes DNNL leaves to the CPU provider, with the words of the reason
DECLINED: dict[str, str] = {
    "softplus": "soft_relu loses the negative tail",
    "mish_expanded": "soft_relu loses the negative tail",
    "basic_conv_with_padding": "its weights or bias are not constants",
    "batchnorm_epsilon": "scale, bias, mean or variance not constant",
    "gemm_all_attributes": "transA 1",
    "layer_normalization_2d_axis0": "its Mean or InvStdDev output",
    "maxpool_with_argmax_2d_precomputed_pads": "output 'z' is tensor(int64)",
    "hannwindow_expanded": "a 0-d constant divided by a 0-d value",
    "cast_FLOAT_to_DOUBLE": "Cast is not among the ops it maps to oneDNN primitives",
}

FULL = os.environ.get("ONNXRT_DNNL_FULL_SUITE") == "1"


@pytest.mark.parametrize("case", list(node_cases(REPRESENTATIVE, DECLINED, FULL)))
def test_node_case_through_dnnl(case):
    sess = dnnl_session(case.model)
    sess.disable_fallback()     # else run() retries a failed build on the CPU provider alone
    check_node_case(case, sess, REPRESENTATIVE, DECLINED, nodes_on)


def test_every_representative_case_exists():
    assert not missing_cases(REPRESENTATIVE, DECLINED)
