"""The one list of ONNX backend-suite cases onnxrt does not pass, each with its reason.

An excluded case is an expected failure. It is strict (a case that starts passing fails the
suite, so the entry must go) unless listed in NOT_STRICT, for cases whose outcome is random.
"""

from __future__ import annotations

_UNSEEDED_RANDOM = ("Bernoulli without a seed: the expected values are one draw of NumPy's "
                    "global random stream, which no implementation of the op reproduces "
                    "(the onnx case says the values are for information only; onnxruntime "
                    "excludes it too); a random match is possible, so not strict")
_SEEDED_STREAM = ("Bernoulli with seed: the expected values were drawn from NumPy's legacy "
                  "global stream seeded with 0 *after* the test drew its 10 inputs from it; "
                  "matching means replaying the test generator's stream, not implementing the op")
_GRADIENT = ("ai.onnx.preview.training::Gradient needs automatic differentiation of the "
             "graph, which onnxrt does not implement (onnxruntime's inference build neither)")

EXCLUDED: dict[str, str] = {
    "test_bernoulli": _UNSEEDED_RANDOM,
    "test_bernoulli_expanded": _UNSEEDED_RANDOM,
    "test_bernoulli_double": _UNSEEDED_RANDOM,
    "test_bernoulli_double_expanded": _UNSEEDED_RANDOM,
    "test_bernoulli_seed": _SEEDED_STREAM,
    "test_bernoulli_seed_expanded": _SEEDED_STREAM,
    "test_gradient_of_add": _GRADIENT,            # model set "simple"
    "test_gradient_of_add_and_mul": _GRADIENT,    # model set "simple"
}

NOT_STRICT = frozenset({"test_bernoulli", "test_bernoulli_expanded", "test_bernoulli_double",
                        "test_bernoulli_double_expanded"})
