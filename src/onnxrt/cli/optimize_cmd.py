"""onnxrt optimize: write the model after the graph passes of a level."""

from __future__ import annotations

import argparse
import os
from typing import Any

from onnxrt.cli.common import open_session


def add_parser(sub: Any) -> None:
    o = sub.add_parser("optimize", help="write the optimized model")
    o.add_argument("model")
    o.add_argument("-o", "--output", required=True, metavar="OUT.onnx")
    o.add_argument("--level", default="all",
                   help="disable, basic, extended, layout or all (default)")
    o.set_defaults(func=cmd_optimize)


def cmd_optimize(args: argparse.Namespace) -> int:
    import onnx

    from onnxrt.zoo import resolve_model

    before = onnx.load(resolve_model(args.model), load_external_data=False)
    sess, path, created = open_session(args.model, None, level=args.level,
                                       optimized_path=args.output)
    after = onnx.load(args.output, load_external_data=False)
    applied = getattr(sess, "_passes_applied", [])
    print(f"model: {path}")
    print(f"level: {args.level}; passes that changed the model: "
          f"{', '.join(applied) if applied else 'none'}")
    print(f"nodes: {len(before.graph.node)} -> {len(after.graph.node)}")
    print(f"written: {args.output} ({os.path.getsize(args.output) / 2**10:.1f} KiB)")
    return 0
