"""The Azure provider's cost per remote call: one model served by `onnxrt serve` on
127.0.0.1, called (a) through an AzureTritonInvoker node in an onnxrt session, (b) with
tritonclient's own HTTP client, and run (c) locally in an onnxrt session; alternating,
medians of per-call latency. The server shares the machine's cores with the client.
A model whose input name holds a '/' cannot be called this way: onnxruntime-extensions'
invokers send the text after the last '/' of a node input's name (resnet50's gpu_0/data_0
would go as data_0).

    python benchmarks/azure_roundtrip.py [--model inception_v1] [--calls 50]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto as T
from onnx import helper as h

import onnxrt as ort
from serve_load import make_repo, start  # noqa: E402  (benchmarks/serve_load.py)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", default="inception_v1")
    p.add_argument("--calls", type=int, default=50)
    args = p.parse_args()
    import tritonclient.http as tc

    with tempfile.TemporaryDirectory() as root:
        repo, name = make_repo(args.model, root)
        proc, url = start(repo, ["--threads", "1"])
        try:
            local_path = f"{repo}/{name}/1/model.onnx"
            m = onnx.load(local_path)
            inits = {t.name for t in m.graph.initializer}
            vi_in = next(i for i in m.graph.input if i.name not in inits)
            vi_out = m.graph.output[0]
            shape = [d.dim_value or 1 for d in vi_in.type.tensor_type.shape.dim]
            x = np.random.default_rng(0).random(shape, dtype=np.float32)
            node = h.make_node("AzureTritonInvoker", ["auth_token", vi_in.name],
                               [vi_out.name], domain="com.microsoft.extensions",
                               model_uri=f"http://{url}", model_name=name)
            g = h.make_graph([node], "remote",
                             [h.make_tensor_value_info("auth_token", T.STRING, [1]),
                              h.make_tensor_value_info(vi_in.name, T.FLOAT, shape)],
                             [h.make_tensor_value_info(vi_out.name, T.FLOAT, None)])
            remote = ort.InferenceSession(
                h.make_model(g, opset_imports=[h.make_opsetid("", 17),
                                               h.make_opsetid("com.microsoft.extensions", 1)]
                             ).SerializeToString(),
                providers=["AzureExecutionProvider", "CPUExecutionProvider"])
            local = ort.InferenceSession(local_path, providers=["CPUExecutionProvider"])
            client = tc.InferenceServerClient(url)
            tok = np.array(["token"], object)

            def via_client() -> np.ndarray:
                i = tc.InferInput(vi_in.name, shape, "FP32")
                i.set_data_from_numpy(x)
                return client.infer(name, [i]).as_numpy(vi_out.name)

            calls = {"azure provider": lambda: remote.run(None, {"auth_token": tok,
                                                                  vi_in.name: x})[0],
                     "tritonclient": via_client,
                     "local session": lambda: local.run(None, {vi_in.name: x})[0]}
            times: dict[str, list[float]] = {k: [] for k in calls}
            outs = {}
            for k in calls:
                outs[k] = calls[k]()    # warm up
            for i in range(args.calls):
                for k in (list(calls) if i % 2 == 0 else list(calls)[::-1]):
                    t = time.perf_counter()
                    outs[k] = calls[k]()
                    times[k].append(time.perf_counter() - t)
            for k, v in times.items():
                diff = float(np.max(np.abs(outs[k] - outs["local session"])))
                print(f"{k:<16} {statistics.median(v) * 1e3:8.2f} ms  "
                      f"max|diff| vs local {diff:.1e}")
        finally:
            proc.terminate()
            proc.wait(30)


if __name__ == "__main__":
    main()
