"""The ONNX backend node suite through the OpenVINO provider.

A representative case per op family OpenVINO takes runs by default (about 150 cases); set
ONNXRT_OPENVINO_FULL_SUITE=1 to run every case (about 3 minutes). In every case the outputs
must match the stored ones within the case's tolerances, whether OpenVINO took the nodes or
declined them; the representative cases must also have nodes on OpenVINO.
"""

from __future__ import annotations

import os

import pytest

from providers.node_suite import check_node_case, missing_cases, node_cases
from ovhelpers import needs_openvino, ov_session

pytestmark = needs_openvino

# one case per op family that OpenVINO runs (case names without "test_"), plus a few more for
# attributes and types (bfloat16 inputs and outputs, dynamic shapes, control-flow bodies)
REPRESENTATIVE = [
    "abs", "acos", "acosh", "add", "affine_grid_2d", "and_bcast3v1d", "and2d",
    "argmax_keepdims_random", "argmin_keepdims_random", "asin", "asinh", "atan", "atanh",
    "attention_3d", "averagepool_2d_ceil", "basic_conv_with_padding", "batchnorm_epsilon",
    "bitshift_left_uint8", "bitwise_not_2d", "blackmanwindow",
    "causal_conv_with_state_fp16_expanded", "ceil", "celu", "center_crop_pad_pad", "clip",
    "col2im", "compress_0", "constant_pad", "conv_with_autopad_same",
    "convinteger_with_padding", "convtranspose", "cos", "cosh", "cumsum_1d",
    "depthtospace_example", "dequantizelinear", "dft", "div", "dynamicquantizelinear_expanded",
    "edge_pad", "einsum_sum", "elu", "equal", "erf", "exp", "eyelike_with_dtype",
    "flexattention_prob_mod", "floor", "gather_elements_0", "gathernd_example_int32",
    "gelu_tanh_1", "gemm_beta", "globalaveragepool", "globalmaxpool", "greater", "gridsample",
    "group_normalization_epsilon", "gru_reverse", "hammingwindow", "hannwindow",
    "hardmax_axis_0", "hardsigmoid", "hardswish", "instancenorm_epsilon", "isinf", "isnan",
    "l1normalization_axis_0", "l2normalization_axis_0", "layer_normalization_2d_axis0",
    "leakyrelu", "less", "linear_attention_fp16_expanded", "log", "logsoftmax_axis_0",
    "loop11", "loop13_seq", "lpnormalization_default", "lppool_2d_pads", "lrn", "lstm_reverse",
    "matmul_2d", "matmulinteger", "max_int8", "maxpool_2d_ceil", "mean_example", "min_int8",
    "mish", "mod_uint8", "mul", "mvn", "neg", "nllloss_NC", "nonzero_example", "not_2d",
    "onehot_with_axis", "or2d", "pow", "prelu_example", "qlinearconv",
    "qlinearmatmul_2D_int8_float16", "range_float_type_positive_delta", "reciprocal",
    "reduce_l1_empty_set", "reflect_pad", "relu", "resize_upsample_sizes_cubic",
    "reversesequence_time", "rms_normalization_2d_axis0", "rnn_seq_length",
    "roialign_aligned_true", "rotary_embedding", "round", "scan_sum", "scan9_sum",
    "scatter_with_axis", "scatternd", "sce_sum", "selu", "sequence_map_add_2_sequences",
    "shrink_hard", "sigmoid", "sign", "simple_rnn_reverse", "sin", "sinh", "softmax_axis_0",
    "softplus", "softsign", "spacetodepth", "split_equal_parts_2d", "sqrt", "sub",
    "sum_example", "swiglu_expanded", "swish", "tan", "tanh", "thresholdedrelu",
    "transpose_default", "tril", "triu", "unique_length_1", "upsample_nearest",
    "where_example", "xor2d", "conv_with_strides_padding", "convtranspose_3d",
    "resize_upsample_scales_linear", "lstm_defaults", "gemm_all_attributes",
    "reduce_mean_keepdims_example", "layer_normalization_4d_axis0", "attention_4d_gqa_causal",
    "range_bfloat16_type_positive_delta_expanded", "einsum_batch_matmul_bfloat16",
]

# cases where a known OpenVINO difference keeps a node on the CPU (see rules.py)
DECLINED = {
    "top_k": "lower index first", "tile": "constant repeats",
    "maxpool_2d_ceil_output_size_reduce_by_one": "padding",
    "resize_downsample_scales_linear_antialias": "antialias",
    "nonmaxsuppression_suppress_by_IOU": "IoU", "bitshift_right_int8": "signed",
    "dft_opset19": "DFT-17", "spacetodepth_crd_mode_example": "mode",
    "reduce_max_empty_set": "empty set", "lstm_batchwise": "layout",
}

FULL = os.environ.get("ONNXRT_OPENVINO_FULL_SUITE") == "1"


@pytest.mark.parametrize("case", list(node_cases(REPRESENTATIVE, DECLINED, FULL)))
def test_node_case_through_openvino(case):
    sess, _ = ov_session(case.model)
    check_node_case(case, sess, REPRESENTATIVE, DECLINED, _claimed)


def _claimed(sess) -> int:
    """Nodes OpenVINO claimed (a group it then cannot compile runs on the CPU provider, and
    get_provider_graph_assignment_info lists it there: DFT's axis input)."""
    return sum(1 for pl in sess._partition.placement.values()
               if pl.provider.name == "OpenVINOExecutionProvider")


def test_every_representative_case_exists():
    assert not missing_cases(REPRESENTATIVE, DECLINED)
