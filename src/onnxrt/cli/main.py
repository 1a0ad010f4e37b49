"""The onnxrt command: run, bench, inspect, compare, optimize, serve, zoo."""

from __future__ import annotations

import argparse
import sys
from typing import Sequence

from onnxrt.cli import bench, compare, inspect_cmd, optimize_cmd, run, serve_cmd

__all__ = ["main", "build_parser"]


def cmd_zoo(args: argparse.Namespace) -> int:
    from onnxrt.zoo import zoo_models

    for name, path in zoo_models().items():
        print(f"{name:<16} {path}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="onnxrt", description="Run, measure, inspect and compare ONNX models with onnxrt. "
        "MODEL is a path or a name from the zoo shipped inside the onnx package.")
    sub = p.add_subparsers(dest="command", required=True)
    run.add_parser(sub)
    bench.add_parser(sub)
    inspect_cmd.add_parser(sub)
    compare.add_parser(sub)
    optimize_cmd.add_parser(sub)
    serve_cmd.add_parser(sub)
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
        from onnxrt.cli.common import CliError

        msg = str(e).strip().splitlines()[0] if str(e).strip() else ""
        kind = "" if isinstance(e, CliError) else f"{type(e).__name__}: "
        print(f"onnxrt: error: {kind}{msg}", file=sys.stderr)
        return 2 if isinstance(e, CliError) else 1


if __name__ == "__main__":
    sys.exit(main())
