"""The compiled kernels under NUMBA_BOUNDSCHECK=1 (numba then checks every index and raises
IndexError), over generated arguments through their Python wrappers, in a process of its
own with an empty numba cache (the cached kernels were compiled without the checks).
``ONNXRT_FUZZ_EXAMPLES`` x 10 geometries (default 3 x 10)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from onnxrt.providers.cpu.nn import jit

HERE = os.path.dirname(os.path.abspath(__file__))


@pytest.mark.skipif(not jit.available(), reason="numba is not installed: no compiled kernels")
def test_compiled_kernels_stay_in_bounds(tmp_path) -> None:
    cases = int(os.environ.get("ONNXRT_FUZZ_EXAMPLES", "3")) * 10
    env = dict(os.environ, NUMBA_BOUNDSCHECK="1", NUMBA_CACHE_DIR=str(tmp_path),
               ONNXRT_JIT="sync", PYTHONPATH=os.pathsep.join(
                   [os.path.dirname(HERE), os.environ.get("PYTHONPATH", "")]))
    seed = int(os.environ.get("ONNXRT_FUZZ_SEED", "20261125"))
    r = subprocess.run([sys.executable, "-m", "fuzz.boundscheck_driver", str(cases),
                        str(seed)], env=env, capture_output=True, text=True, timeout=900)
    assert r.returncode == 0, f"rc {r.returncode}\n{r.stdout[-3000:]}\n{r.stderr[-6000:]}"
    counts = json.loads(r.stdout.strip().splitlines()[-1])
    assert counts["ran"] > cases // 2 and counts["refused"] > 0, counts
