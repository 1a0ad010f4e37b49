"""onnxrt inspect: inputs, outputs, opsets, op histogram, placement, parameters."""

from __future__ import annotations

import argparse
import collections
from typing import Any

import numpy as np

from onnxrt.cli.common import open_session


def add_parser(sub: Any) -> None:
    i = sub.add_parser("inspect", help="describe a model and where its nodes run")
    i.add_argument("model")
    i.add_argument("--providers", metavar="A,B")
    i.set_defaults(func=cmd_inspect)


def _params(model: Any) -> tuple[int, int]:
    from onnxrt.ir.load import iter_graphs

    count = size = 0
    for g in iter_graphs(model.graph):
        for t in g.initializer:
            n = int(np.prod(t.dims)) if len(t.dims) else 1
            count += n
            size += len(t.raw_data) if t.raw_data else n * _itemsize(t.data_type)
    return count, size


def _itemsize(elem: int) -> int:
    from onnxrt.ir.dtypes import np_dtype

    try:
        return np_dtype(elem).itemsize
    except Exception:
        return 0


def cmd_inspect(args: argparse.Namespace) -> int:
    import onnx

    from onnxrt.ir.load import iter_graphs
    from onnxrt.zoo import resolve_model

    path = resolve_model(args.model)
    original = onnx.load(path)
    sess, _, created = open_session(args.model, args.providers)
    print(f"model: {path}")
    print(f"ir_version {original.ir_version}, producer {original.producer_name or '-'} "
          f"{original.producer_version}".rstrip())
    print("opsets: " + ", ".join(f"{imp.domain or 'ai.onnx'} {imp.version}"
                                 for imp in original.opset_import))
    print("inputs:")
    for a in sess.get_inputs():
        print(f"  {a.name}: {a.type} {a.shape}")
    print("outputs:")
    for a in sess.get_outputs():
        print(f"  {a.name}: {a.type} {a.shape}")
    hist: collections.Counter[str] = collections.Counter()
    for g in iter_graphs(original.graph):
        for n in g.node:
            hist[(n.domain + "::" if n.domain else "") + n.op_type] += 1
    print(f"ops ({sum(hist.values())} nodes): " +
          ", ".join(f"{op} {k}" for op, k in hist.most_common()))
    # the session's own graph: after the passes and partitioning (fused nodes, copies)
    ran: collections.Counter[str] = collections.Counter(
        (n.domain + "::" if n.domain else "") + n.op_type for n in sess._graph.nodes)
    print(f"ops as the session runs them ({sum(ran.values())} nodes, main graph): " +
          ", ".join(f"{op} {k}" for op, k in ran.most_common()))
    count, size = _params(original)
    print(f"parameters: {count:,} in initializers ({size / 2**20:.1f} MB)")
    print(f"session created in {created * 1e3:.0f} ms")
    print()
    print(sess.placement_report())
    return 0
