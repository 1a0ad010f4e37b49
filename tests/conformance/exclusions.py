"""The one list of ONNX backend-suite cases onnxrt does not pass, each with its reason.

An excluded case is an expected failure (strict): if it starts passing, the suite says so
and the entry must go.
"""

from __future__ import annotations

EXCLUDED: dict[str, str] = {
}
