"""Session-wide test settings."""

from __future__ import annotations

import os

# compiled kernels are built in the process that needs them (framework/warmup.py), as the
# tests that check which kernel ran expect; tests/api/test_first_session.py covers the
# background compile of a new machine in child processes of their own
os.environ.setdefault("ONNXRT_JIT", "sync")
