"""Run an unmodified program that imports onnxruntime on onnxrt.

    python -m onnxrt.run_as_onnxruntime program.py [args...]
    python -m onnxrt.run_as_onnxruntime -m package.module [args...]
    python -m onnxrt.run_as_onnxruntime -c "code" [args...]

``onnxruntime`` and its submodules are mapped to onnxrt (see ``onnxrt.alias``) before the
program starts; the program sees the arguments after its own name, as if run directly.
"""

from __future__ import annotations

import os
import runpy
import sys

from onnxrt.alias import install_as_onnxruntime

__all__ = ["main"]

_USAGE = ("usage: python -m onnxrt.run_as_onnxruntime program.py [args...]\n"
          "       python -m onnxrt.run_as_onnxruntime -m module [args...]\n"
          "       python -m onnxrt.run_as_onnxruntime -c code [args...]")


def main(argv: list[str] | None = None) -> None:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(_USAGE, file=sys.stderr if not args else sys.stdout)
        raise SystemExit(2 if not args else 0)
    install_as_onnxruntime()
    if args[0] in ("-m", "-c") and len(args) < 2:
        raise SystemExit(_USAGE)
    if args[0] == "-c":
        sys.argv = ["-c", *args[2:]]
        sys.path.insert(0, "")
        exec(compile(args[1], "<string>", "exec"), {"__name__": "__main__"})
        return
    if args[0] == "-m":
        sys.argv = [args[1], *args[2:]]
        runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        return
    sys.argv = list(args)
    # as ``python program.py`` does: the program's folder comes first on the path
    sys.path.insert(0, os.path.dirname(os.path.abspath(args[0])))
    runpy.run_path(args[0], run_name="__main__")


if __name__ == "__main__":
    main()
