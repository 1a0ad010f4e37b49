"""A results file of run.py as the README's markdown table, optionally beside an earlier
one (the ratio before, per case, where it has that case).

    python benchmarks/table.py results.json [--before earlier.json]
"""

from __future__ import annotations

import argparse
import json

import numpy as np


def _geo(v: list[float]) -> float:
    return float(np.exp(np.mean(np.log(v)))) if v else float("nan")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results")
    p.add_argument("--before", default="")
    args = p.parse_args()
    with open(args.results) as f:
        res = json.load(f)
    before: dict[str, float] = {}
    if args.before:
        with open(args.before) as f:
            before = {r["model"]: r["ratio"] for r in json.load(f)["rows"] if "ratio" in r}
    rows = [r for r in res["rows"] if "ratio" in r]
    print("| case | category | onnxrt ms | onnxruntime ms | ratio |"
          + (" ratio before |" if before else "") + " session creation ms (onnxrt / "
          "onnxruntime) | peak MB |")
    print("|---|---|---|---|---|" + ("---|" if before else "") + "---|---|")
    for r in rows:
        b = before.get(r["model"])
        print(f"| {r['model']} | {r['category']} | {r['onnxrt_ms']:.3g} | "
              f"{r['onnxruntime_ms']:.3g} | {r['ratio']:.2f} |"
              + ((f" {b:.2f} |" if b else " - |") if before else "")
              + f" {r['create_onnxrt_ms']:.0f} / {r['create_onnxruntime_ms']:.0f} |"
              f" {r['peak_mb']:.1f} |")
    cats: dict[str, list[float]] = {}
    for r in rows:
        cats.setdefault(r["category"], []).append(r["ratio"])
    print()
    for c, v in cats.items():
        print(f"- {c}: {_geo(v):.2f} over {len(v)} cases (worst {max(v):.2f})")
    print(f"- overall: {_geo([r['ratio'] for r in rows]):.2f} over {len(rows)} cases")
    for o in res.get("overhead") or []:
        print(f"- {o['model']}: onnxrt {o['onnxrt_us']:.1f} us, onnxruntime "
              f"{o['onnxruntime_us']:.1f} us ({o['ratio']:.2f})")


if __name__ == "__main__":
    main()
