"""Property tests over single-op models of every compiled-kernel family, each case run in
worker processes (a crash or a hang is a failure): onnxrt's answer is the same at every
optimization level and thread count, and the same as onnxruntime's, or both refuse
(onnx.reference decides where onnxruntime cannot answer); every refusal is onnxruntime's
error class naming the node, never an internal error.

Seeded; ``ONNXRT_FUZZ_EXAMPLES`` cases per family (default 3: the fast slice of the
default suite), ``ONNXRT_FUZZ_SEED`` picks another seed. The long mode:
``python tests/fuzz/run.py`` (see the README).
"""

from __future__ import annotations

import os

import pytest

pytest.importorskip("hypothesis", reason="hypothesis comes with the test extra")
pytest.importorskip("onnxruntime", reason="onnxruntime is the oracle")

from hypothesis import HealthCheck, given, seed, settings  # noqa: E402

from fuzz.cases import FAMILIES, NODE, Case  # noqa: E402
from fuzz.harness import judge  # noqa: E402

EXAMPLES = int(os.environ.get("ONNXRT_FUZZ_EXAMPLES", "3"))
SEED = int(os.environ.get("ONNXRT_FUZZ_SEED", "20261125"))


def _test(family: str):
    @seed(SEED)
    @settings(max_examples=EXAMPLES, deadline=None, database=None, derandomize=False,
              suppress_health_check=list(HealthCheck), print_blob=True)
    @given(case=FAMILIES[family])
    def test(case: Case) -> None:
        why = judge(case.model, case.feeds, NODE, case.rtol, case.atol, case.label)
        assert why is None, f"{case!r}: {why}"

    test.__name__ = f"test_{family}"
    return test


for _fam in FAMILIES:
    globals()[f"test_{_fam}"] = _test(_fam)
