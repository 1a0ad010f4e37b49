"""Session creation against node count: onnxrt and onnxruntime on chains of N small
element-wise nodes (Relu, Neg, Abs, Sigmoid and an Add of a constant on a 1x4 float
tensor), each engine's session created in turn in one process, the best of ``--repeat``
kept. Prints seconds and the ratio per size; the ratio should not grow with N.

    python benchmarks/load_scale.py [--sizes 1000,10000,100000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from onnx import TensorProto, helper, numpy_helper


def chain(n: int) -> bytes:
    ops = ["Relu", "Neg", "Abs", "Sigmoid"]
    nodes, prev = [], "x"
    for i in range(n):
        out = f"v{i}"
        if i % 5 == 4:
            nodes.append(helper.make_node("Add", [prev, "c"], [out], name=f"n{i}"))
        else:
            nodes.append(helper.make_node(ops[i % 4], [prev], [out], name=f"n{i}"))
        prev = out
    g = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                        [1, 4])],
                          [helper.make_tensor_value_info(prev, TensorProto.FLOAT, [1, 4])],
                          [numpy_helper.from_array(np.ones((1, 4), np.float32), "c")])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    import onnxruntime

    import onnxrt

    print(f"{'nodes':>8} {'onnxrt s':>9} {'onnxruntime s':>14} {'ratio':>6}")
    for n in (int(v) for v in args.sizes.split(",")):
        data = chain(n)
        best = {"onnxrt": float("inf"), "onnxruntime": float("inf")}
        for _ in range(args.repeat):
            for name, mod in (("onnxruntime", onnxruntime), ("onnxrt", onnxrt)):
                t = time.perf_counter()
                s = mod.InferenceSession(data, providers=["CPUExecutionProvider"])
                best[name] = min(best[name], time.perf_counter() - t)
                s.run(None, {"x": np.ones((1, 4), np.float32)})
                del s
        print(f"{n:>8} {best['onnxrt']:>9.2f} {best['onnxruntime']:>14.2f} "
              f"{best['onnxrt'] / best['onnxruntime']:>6.2f}", flush=True)


if __name__ == "__main__":
    main()
