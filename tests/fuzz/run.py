"""The fuzzing suite's long mode: ``python tests/fuzz/run.py [--examples N] [--seed S]``
runs every fuzz test with N cases per family (default 300), then prints the figures
(cases, crashes, hangs, wrong answers, unclear errors, and how each difference from
onnxruntime was settled). Run it under the shared CPU lock; it takes ~N/10 minutes."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--examples", type=int, default=300)
    ap.add_argument("--seed", type=int, default=20261125)
    args = ap.parse_args()
    report = os.path.join(tempfile.mkdtemp(prefix="onnxrt-fuzz-"), "report.json")
    env = dict(os.environ, ONNXRT_FUZZ_EXAMPLES=str(args.examples),
               ONNXRT_FUZZ_SEED=str(args.seed), ONNXRT_FUZZ_REPORT=report)
    t0 = time.time()
    rc = subprocess.call([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          HERE], env=env, cwd=os.path.dirname(os.path.dirname(HERE)))
    took = time.time() - t0
    data = {"stats": {}, "differences": {}}
    if os.path.exists(report):
        with open(report) as f:
            data = json.load(f)
    st = data["stats"]
    print(f"\nfuzzing, seed {args.seed}, {args.examples} cases per family, {took / 60:.1f} min")
    print(f"op cases: {st.get('cases', 0)}, loader cases: {st.get('loader cases', 0)}")
    for k in ("crashes", "hangs", "wrong answers", "unclear errors"):
        print(f"  {k}: {st.get(k, 0)}")
    for k, v in sorted(st.items()):
        if k not in ("cases", "loader cases", "crashes", "hangs", "wrong answers",
                     "unclear errors"):
            print(f"  {k}: {v}")
    print("differences from onnxruntime:")
    for k, v in sorted(data["differences"].items(), key=lambda kv: -kv[1]):
        print(f"  {v:5d}  {k}")
    return rc


if __name__ == "__main__":
    sys.exit(main())
