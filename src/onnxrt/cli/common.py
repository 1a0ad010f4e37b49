"""What the subcommands share: opening a session from a path or zoo name, providers."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["providers_arg", "open_session", "make_feeds", "summary", "CliError",
           "compile_note"]


class CliError(Exception):
    """A user error: printed as one line, exit status 2."""


def providers_arg(arg: str | None) -> list[str] | None:
    return [p.strip() for p in arg.split(",") if p.strip()] if arg else None


def open_session(model: str, providers: str | None, threads: int = 0,
                 level: str | None = None, profile: bool = False,
                 optimized_path: str = "", batch: int | None = None
                 ) -> tuple[Any, str, float]:
    """The session, the model's path and the creation time. A zoo model asked for at
    another batch than 1 gets its batch dimension freed first (the zoo files fix it to 1)."""
    import time

    import onnxrt as ort
    from onnxrt.zoo import free_batch, resolve_model

    path = resolve_model(model)
    src: Any = path
    if batch is not None and batch != 1 and path != model:
        import onnx
        src = free_batch(onnx.load(path)).SerializeToString()
    so = ort.SessionOptions()
    if threads:
        so.intra_op_num_threads = threads
    if level:
        so.graph_optimization_level = level_value(level)
    if profile:
        so.enable_profiling = True
        so.profile_file_prefix = "onnxrt_profile"
    if optimized_path:
        so.optimized_model_filepath = optimized_path
    t = time.perf_counter()
    sess = ort.InferenceSession(src, so, providers=providers_arg(providers))
    return sess, path, time.perf_counter() - t


def compile_note() -> str:
    """A line for stderr while the CPU kernels compile in the background (the first use on
    a machine, framework/warmup.py), else ""."""
    from onnxrt.framework import warmup

    if warmup.status() == "compiling":
        return ("note: the CPU kernels are compiling in the background (first use on this "
                "machine); these runs took the slower NumPy kernels")
    return ""


def level_value(level: str) -> Any:
    import onnxrt as ort

    names = {"disable": "ORT_DISABLE_ALL", "none": "ORT_DISABLE_ALL", "basic": "ORT_ENABLE_BASIC",
             "extended": "ORT_ENABLE_EXTENDED", "layout": "ORT_ENABLE_LAYOUT",
             "all": "ORT_ENABLE_ALL"}
    key = names.get(level.lower(), level.upper())
    if not hasattr(ort.GraphOptimizationLevel, key):
        raise CliError(f"unknown optimization level {level!r}; choose from "
                       f"{', '.join(names)}")
    return getattr(ort.GraphOptimizationLevel, key)


def make_feeds(sess: Any, input_specs: list[str] | None, dim_specs: list[str] | None,
               batch: int | None = None, seed: int = 0) -> dict[str, Any]:
    from onnxrt.cli.inputs import generate, load_inputs, parse_dims

    try:
        dims = parse_dims(dim_specs or [])
        feeds = load_inputs(input_specs or [])
    except ValueError as e:
        raise CliError(str(e)) from None
    known = {a.name for a in sess.get_inputs()}
    for name in feeds:
        if name not in known:
            raise CliError(f"--input {name}: the model has no input of that name "
                           f"(inputs: {', '.join(sorted(known))})")
    for i, a in enumerate(sess.get_inputs()):
        if a.name not in feeds:
            feeds[a.name] = generate(a, dims, batch, seed + i)
    return feeds


def summary(v: Any) -> str:
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
