"""onnxrt compare: two provider lists, node by node; the first diverging node."""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from onnxrt.cli.common import CliError, make_feeds, open_session


def add_parser(sub: Any) -> None:
    c = sub.add_parser("compare", help="run two provider lists and find the first node whose "
                                       "output diverges")
    c.add_argument("model")
    c.add_argument("--providers", metavar="A,B", required=True,
                   help="the providers under test")
    c.add_argument("--against", metavar="C,D", default="CPUExecutionProvider",
                   help="the reference providers (default: CPU)")
    c.add_argument("--rtol", type=float, default=1e-3)
    c.add_argument("--atol", type=float, default=1e-5)
    c.add_argument("--input", action="append", metavar="NAME=FILE.npy")
    c.add_argument("--dim", action="append", metavar="NAME=N")
    c.add_argument("--batch", type=int, default=None)
    c.add_argument("--level", default="basic",
                   help="optimization level of both sessions (default basic: fusions would "
                        "hide the intermediate values to compare)")
    c.set_defaults(func=cmd_compare)


def _stats(v: Any) -> str:
    if not isinstance(v, (np.ndarray, np.generic)):
        return type(v).__name__
    a = np.asarray(v)
    if a.size == 0 or a.dtype.kind not in "biuf":
        return f"shape {list(a.shape)} {a.dtype}"
    f = a.astype(np.float64)
    return (f"shape {list(a.shape)} {a.dtype} min {f.min():.4g} max {f.max():.4g} "
            f"mean {f.mean():.4g}")


def _diverges(a: Any, b: Any, rtol: float, atol: float) -> tuple[bool, str]:
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
            return True, "sequences differ in length"
        for k, (x, y) in enumerate(zip(a, b)):
            bad, why = _diverges(x, y, rtol, atol)
            if bad:
                return True, f"element {k}: {why}"
        return False, ""
    x, y = np.asarray(a), np.asarray(b)
    if x.shape != y.shape:
        return True, f"shape {list(x.shape)} vs {list(y.shape)}"
    if x.dtype != y.dtype:
        return True, f"dtype {x.dtype} vs {y.dtype}"
    if x.dtype.kind not in "biufc":
        eq = bool(np.array_equal(x, y))
        return (not eq, "" if eq else "values differ")
    xf, yf = x.astype(np.float64), y.astype(np.float64)
    err = np.abs(xf - yf)
    with np.errstate(invalid="ignore"):
        bad = ~(np.isclose(xf, yf, rtol=rtol, atol=atol, equal_nan=True))
    if not bad.any():
        return False, ""
    rel = err / np.maximum(np.abs(yf), 1e-30)
    idx = np.unravel_index(int(np.argmax(np.where(bad, err, -1))), x.shape)
    return True, (f"max |diff| {np.nanmax(err):.4g}, max rel diff {np.nanmax(rel):.4g}, "
                  f"{int(bad.sum())} of {x.size} elements outside rtol {rtol} atol {atol}; "
                  f"worst at {list(map(int, idx))}: {xf[idx]:.6g} vs {yf[idx]:.6g}")


def cmd_compare(args: argparse.Namespace) -> int:
    test, path, _ = open_session(args.model, args.providers, level=args.level,
                                 batch=args.batch)
    ref, _, _ = open_session(args.model, args.against, level=args.level, batch=args.batch)
    feeds = make_feeds(ref, args.input, args.dim, args.batch)
    got = test.record_values(feeds)
    want = ref.record_values(feeds)
    order = [n for n in test._model.graph.node]  # topological order of the optimized graph
    compared = 0
    print(f"model: {path}")
    print(f"under test: {', '.join(test.get_providers())}; "
          f"reference: {', '.join(ref.get_providers())}")
    placement = _placement(test)
    for node in order:
        for name in node.output:
            if not name or name not in got or name not in want:
                continue
            compared += 1
            bad, why = _diverges(got[name], want[name], args.rtol, args.atol)
            if bad:
                print(f"first diverging node: {node.name or '<unnamed>'} ({node.op_type}) "
                      f"on {placement.get(node.name, '?')}, output {name!r}")
                print(f"  error: {why}")
                for i in node.input:
                    if i and i in want:
                        print(f"  input {i!r}: {_stats(want[i])}")
                print(f"  output under test: {_stats(got[name])}")
                print(f"  output reference:  {_stats(want[name])}")
                print(f"{compared} value(s) compared before it")
                return 1
    if compared == 0:
        raise CliError("the two runs share no intermediate value to compare")
    print(f"all {compared} values both runs computed match within rtol {args.rtol} "
          f"atol {args.atol}")
    return 0


def _placement(sess: Any) -> dict[str, str]:
    out = {}
    for sg in sess.get_provider_graph_assignment_info():
        for n in sg.get_nodes():
            out[n.name] = sg.ep_name
    return out
