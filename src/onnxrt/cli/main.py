"""The onnxrt command."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any, Sequence

import numpy as np

__all__ = ["main"]


def _providers(arg: str | None) -> list[str] | None:
    return [p.strip() for p in arg.split(",") if p.strip()] if arg else None


def _summary(v: Any) -> str:
    if isinstance(v, list):
        return f"sequence of {len(v)}"
    if isinstance(v, dict):
        return f"map of {len(v)}"
    a = np.asarray(v)
    if a.size == 0:
        return "empty"
    if a.dtype.kind in "biuf":
        f = a.astype(np.float64)
        s = f"min {f.min():.6g}  max {f.max():.6g}  mean {f.mean():.6g}"
        flat = f.reshape(-1)
        if flat.size > 1 and a.dtype.kind == "f":
            k = min(5, flat.size)
            top = np.argsort(-flat, kind="stable")[:k]
            s += "\n      top: " + ", ".join(f"[{i}] {flat[i]:.5g}" for i in top)
        return s
    return f"first {a.reshape(-1)[:5].tolist()}"


def cmd_run(args: argparse.Namespace) -> int:
    import onnxrt as ort
    from onnxrt.cli.inputs import generate, load_inputs, parse_dims
    from onnxrt.zoo import resolve_model

    path = resolve_model(args.model)
    dims = parse_dims(args.dim or [])
    so = ort.SessionOptions()
    if args.threads:
        so.intra_op_num_threads = args.threads
    t0 = time.perf_counter()
    sess = ort.InferenceSession(path, so, providers=_providers(args.providers))
    created = time.perf_counter() - t0
    feeds = load_inputs(args.input or [])
    for a in sess.get_inputs():
        if a.name not in feeds:
            feeds[a.name] = generate(a, dims, args.batch)
    for _ in range(max(0, args.warmup)):
        sess.run(None, feeds)
    times = []
    outs: list[Any] = []
    for _ in range(max(1, args.runs)):
        t = time.perf_counter()
        outs = sess.run(None, feeds)
        times.append(time.perf_counter() - t)
    print(f"model: {path}")
    print(f"providers: {', '.join(sess.get_providers())}")
    for a, v in zip(sess.get_outputs(), outs):
        shape = list(np.shape(v)) if not isinstance(v, (list, dict)) else "-"
        dtype = getattr(np.asarray(v) if not isinstance(v, (list, dict)) else v, "dtype", "")
        print(f"output {a.name}: shape {shape} dtype {dtype}")
        print(f"      {_summary(v)}")
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        for a, v in zip(sess.get_outputs(), outs):
            if not isinstance(v, (list, dict)):
                safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in a.name)
                np.save(os.path.join(args.output_dir, f"{safe}.npy"), v)
    med = float(np.median(times)) * 1e3
    print(f"time: median {med:.2f} ms over {len(times)} run(s) after {args.warmup} warm-up; "
          f"session created in {created * 1e3:.0f} ms")
    return 0


def cmd_zoo(args: argparse.Namespace) -> int:
    from onnxrt.zoo import zoo_models

    for name, path in zoo_models().items():
        print(f"{name:<16} {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="onnxrt", description="Run ONNX models with onnxrt.")
    sub = p.add_subparsers(dest="command", required=True)
    r = sub.add_parser("run", help="run a model on given or generated inputs")
    r.add_argument("model", help="a path, or a zoo model name (see `onnxrt zoo`)")
    r.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    r.add_argument("--providers", metavar="A,B", help="provider names in priority order")
    r.add_argument("--output-dir", metavar="DIR", help="save outputs as .npy files")
    r.add_argument("--dim", action="append", metavar="NAME=N", help="a symbolic dimension")
    r.add_argument("--batch", type=int, default=None, help="the batch (first) dimension")
    r.add_argument("--runs", type=int, default=10)
    r.add_argument("--warmup", type=int, default=2)
    r.add_argument("--threads", type=int, default=0)
    r.set_defaults(func=cmd_run)
    z = sub.add_parser("zoo", help="list the models of the zoo shipped with onnx")
    z.set_defaults(func=cmd_zoo)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except KeyboardInterrupt:
        return 130
    except Exception as e:  # one clear line, non-zero status
        print(f"onnxrt: error: {type(e).__name__}: {e}".splitlines()[0], file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
