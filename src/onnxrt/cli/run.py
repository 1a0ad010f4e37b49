"""onnxrt run: a model on given or generated inputs."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import numpy as np

from onnxrt.cli.common import compile_note, make_feeds, open_session, summary


def add_parser(sub: Any) -> None:
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


def cmd_run(args: argparse.Namespace) -> int:
    sess, path, created = open_session(args.model, args.providers, args.threads,
                                       batch=args.batch)
    feeds = make_feeds(sess, args.input, args.dim, args.batch)
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
        if isinstance(v, (list, dict)):
            print(f"output {a.name}: {a.type}")
        else:
            print(f"output {a.name}: shape {list(np.shape(v))} dtype {np.asarray(v).dtype}")
        print(f"      {summary(v)}")
    if args.output_dir:
        os.makedirs(args.output_dir, exist_ok=True)
        for a, v in zip(sess.get_outputs(), outs):
            if not isinstance(v, (list, dict)):
                safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in a.name)
                np.save(os.path.join(args.output_dir, f"{safe}.npy"), v)
        print(f"outputs saved in {args.output_dir}")
    med = float(np.median(times)) * 1e3
    print(f"time: median {med:.2f} ms over {len(times)} run(s) after {args.warmup} warm-up; "
          f"session created in {created * 1e3:.0f} ms")
    note = compile_note()
    if note:
        print(note, file=sys.stderr)
    return 0
