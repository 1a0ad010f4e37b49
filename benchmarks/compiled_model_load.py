"""Session creation with the OpenVINO provider on a compiled model (EPContext nodes written by
``ModelCompiler``, loaded with OpenVINO's import_model) against creating a session on the
original model, which compiles again; in one process, alternating, repeated. Also checks that
the two sessions agree and that the compiled model's session compiled nothing.

    python benchmarks/compiled_model_load.py [resnet50] [bert] [--repeat 3] [--embed 0|1]
                                             [--bert-layers 12]

Prints, per model: the median creation time of each session, their ratio, the time
``ModelCompiler`` took, the compiled model's size and the largest output difference.
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import sys
import tempfile
import time
import warnings

import numpy as np
import onnx

import onnxrt as ort
from onnxrt.cli.inputs import generate
from onnxrt.zoo import zoo_models

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from transformer_models import bert, bert_inputs  # noqa: E402

OV = "OpenVINOExecutionProvider"
CPU = "CPUExecutionProvider"


def _session(path: str) -> ort.InferenceSession:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ort.InferenceSession(path, providers=[OV, CPU])


def _timed(path: str) -> tuple[float, ort.InferenceSession]:
    gc.collect()
    t = time.perf_counter()
    s = _session(path)
    return time.perf_counter() - t, s


def bench(name: str, path: str, feeds_for, repeat: int, embed: bool, folder: str) -> dict:
    ctx = os.path.join(folder, f"{name}_ctx.onnx")
    so = ort.SessionOptions()
    so.add_provider(OV, {})
    t = time.perf_counter()
    ort.ModelCompiler(so, path, embed_compiled_data_into_model=embed).compile_to_file(ctx)
    t_compile = time.perf_counter() - t
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder)
               if f.startswith(f"{name}_ctx"))
    again, loaded = [], []
    for k in range(repeat):
        for which in ((0, 1) if k % 2 == 0 else (1, 0)):
            dt, s = _timed(path if which == 0 else ctx)
            (again if which == 0 else loaded).append(dt)
            st = s.get_provider_stats()[OV]
            if which == 1:
                assert st["compilations"] == 0 and st["loaded_contexts"] >= 1, st
                s_loaded = s
            else:
                s_again = s
        if k < repeat - 1:
            del s_again, s_loaded
    feeds = feeds_for(s_again)
    a = s_again.run(None, feeds)
    b = s_loaded.run(None, feeds)
    diff = max(float(np.max(np.abs(np.asarray(x, np.float64) - np.asarray(y, np.float64))))
               for x, y in zip(a, b))
    on_ov = sum(len(sg.get_nodes()) for sg in s_again.get_provider_graph_assignment_info()
                if sg.ep_name == OV)
    ma, ml = statistics.median(again), statistics.median(loaded)
    return {"model": name, "compile_again_ms": ma * 1e3, "compiled_model_ms": ml * 1e3,
            "ratio": ml / ma, "model_compiler_ms": t_compile * 1e3, "ctx_mb": size / 2**20,
            "nodes_on_openvino": on_ov, "max_abs_diff": diff, "runs": repeat}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("models", nargs="*", default=["resnet50", "bert"])
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--embed", type=int, default=0)
    p.add_argument("--bert-layers", type=int, default=12)
    args = p.parse_args()
    print(f"{'model':<10} {'compile again ms':>16} {'compiled model ms':>17} {'ratio':>6} "
          f"{'ModelCompiler ms':>16} {'ctx MB':>7} {'on OV':>6} {'max|diff|':>9}")
    with tempfile.TemporaryDirectory(prefix="onnxrt-ctx-") as folder:
        for name in args.models:
            if name == "bert":
                path = os.path.join(folder, "bert.onnx")
                onnx.save(bert(layers=args.bert_layers), path)
                feeds_for = (lambda s: bert_inputs(1))  # noqa: E731
            else:
                path = zoo_models()[name]
                feeds_for = (lambda s: {a.name: generate(a, {}, None)  # noqa: E731
                                        for a in s.get_inputs()})
            r = bench(name, path, feeds_for, args.repeat, bool(args.embed), folder)
            print(f"{name:<10} {r['compile_again_ms']:>16.0f} {r['compiled_model_ms']:>17.0f} "
                  f"{r['ratio']:>6.2f} {r['model_compiler_ms']:>16.0f} {r['ctx_mb']:>7.1f} "
                  f"{r['nodes_on_openvino']:>6} {r['max_abs_diff']:>9.1e}", flush=True)


if __name__ == "__main__":
    main()
