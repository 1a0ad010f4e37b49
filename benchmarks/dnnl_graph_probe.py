"""oneDNN's Graph API (``dnnl_graph_*``) against the DNNL provider's primitive chain, onnxrt's
CPU provider and onnxruntime, on the same small subgraphs, in one process, alternating.

For each case the probe builds the subgraph twice: as an ONNX model (run by the three
sessions) and as a oneDNN graph through the Graph API's C functions in the same
``libdnnl.so.3`` the provider loads (ctypes, no headers). oneDNN partitions the graph itself
(fusion policy); every partition is compiled for the case's shapes, with the graph's inputs
and outputs in plain (NCHW / row-major) layout and the tensors between partitions in the
layout oneDNN picks. Prints the partitions (which ops each took), checks the Graph API's
output against onnxruntime's, and times the four engines (median per engine and the
ratios, rounds rotating which engine runs first).

    python benchmarks/dnnl_graph_probe.py [conv3x3 conv1x1 mlp sdpa] [--runs 30]

The Graph API engine runs without a session around it (buffers allocated once, one ctypes
call per partition), so its time is the library's alone; the sessions' times include
onnxrt's / onnxruntime's per-run overhead (tens of microseconds).
"""

from __future__ import annotations

import os

# idle OpenMP threads must not spin while another engine runs
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

import argparse  # noqa: E402
import ctypes  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
import onnxruntime as ort_ref  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

import onnxrt as ort  # noqa: E402
from onnxrt.providers.cpu.nn import jit  # noqa: E402
from onnxrt.providers.dnnl import library  # noqa: E402

# enum values of oneDNN 3.2's dnnl_graph_types.h (dnnl_graph_op_kind_t, dnnl_graph_op_attr_t)
OP = {"Add": 2, "BiasAdd": 8, "Convolution": 13, "Divide": 20, "GELU": 27, "MatMul": 39,
      "Multiply": 46, "ReLU": 58, "SoftMax": 64}
OP_NAME = {v: k for k, v in OP.items()}
ATTR_S64 = {"axis": 0x30, "groups": 0x32, "dilations": 0x41, "pads_begin": 0x46,
            "pads_end": 0x47, "strides": 0x4B}
ATTR_BOOL = {"transpose_a": 0x65, "transpose_b": 0x66}
ATTR_STR = {"auto_broadcast": 0x80, "data_format": 0x83, "weights_format": 0x87}
LAYOUT_ANY, LAYOUT_STRIDED = 1, 2
VARIABLE, CONSTANT = 1, 2
POLICY_FUSION = 1
ENGINE_CPU = 1
UNKNOWN_NDIMS = -1


class LogicalTensor(ctypes.Structure):
    _fields_ = [("id", ctypes.c_size_t), ("ndims", ctypes.c_int),
                ("dims", ctypes.c_int64 * 12), ("data_type", ctypes.c_int),
                ("property", ctypes.c_int), ("layout_type", ctypes.c_int),
                ("layout", ctypes.c_int64 * 12)]


class GraphCase:
    """A oneDNN graph: ``ops`` are (kind, input ids, output ids, attrs); tensors named by id;
    ``consts`` hold the constant inputs' values, ``inputs`` the variable inputs' shapes."""

    def __init__(self, dn: library.Dnnl, ops: list[tuple], inputs: dict[int, tuple],
                 consts: dict[int, np.ndarray], outputs: dict[int, tuple]) -> None:
        self.dn, self.lib = dn, dn.lib
        self.inputs, self.consts, self.outputs = inputs, consts, outputs
        self._keep: list[Any] = []
        g = ctypes.c_void_p()
        self.call("dnnl_graph_graph_create", ctypes.byref(g), ENGINE_CPU)
        self.graph = g
        for op_id, (kind, ins, outs, attrs) in enumerate(ops):
            op = ctypes.c_void_p()
            self.call("dnnl_graph_op_create", ctypes.byref(op), ctypes.c_size_t(op_id),
                      OP[kind], f"{kind}_{op_id}".encode())
            for t in ins:
                self.call("dnnl_graph_op_add_input", op, ctypes.byref(self.declared(t)))
            for t in outs:
                self.call("dnnl_graph_op_add_output", op, ctypes.byref(self.declared(t)))
            for name, value in attrs.items():
                self.set_attr(op, name, value)
            self.call("dnnl_graph_add_op", g, op)
            self.call("dnnl_graph_op_destroy", op)
        self.call("dnnl_graph_graph_finalize", g)
        n = ctypes.c_size_t()
        self.call("dnnl_graph_graph_filter", g, POLICY_FUSION)
        self.call("dnnl_graph_graph_get_partition_num", g, ctypes.byref(n))
        parts = (ctypes.c_void_p * n.value)()
        self.call("dnnl_graph_graph_get_partitions", g, n, parts)
        self.partitions = [ctypes.c_void_p(p) for p in parts]
        self.op_kinds = {i: op[0] for i, op in enumerate(ops)}

    def call(self, func: str, *args: Any) -> None:
        st = getattr(self.lib, func)(*args)
        if st != 0:
            raise library.DnnlError(func, st)

    def strided(self, tid: int, shape: tuple, prop: int) -> LogicalTensor:
        lt = LogicalTensor()
        strides = np.cumprod([1] + list(shape[:0:-1]))[::-1] if shape else []
        self.call("dnnl_graph_logical_tensor_init_with_strides", ctypes.byref(lt),
                  ctypes.c_size_t(tid), library.F32, len(shape), library.dims(shape),
                  library.dims(strides), prop)
        return lt

    def declared(self, tid: int) -> LogicalTensor:
        """The tensor as the graph knows it: plain layout at the graph's edges, oneDNN's
        choice (and shape inference) inside."""
        if tid in self.consts:
            return self.strided(tid, self.consts[tid].shape, CONSTANT)
        if tid in self.inputs:
            return self.strided(tid, self.inputs[tid], VARIABLE)
        if tid in self.outputs:
            return self.strided(tid, self.outputs[tid], VARIABLE)
        lt = LogicalTensor()
        self.call("dnnl_graph_logical_tensor_init", ctypes.byref(lt), ctypes.c_size_t(tid),
                  library.F32, UNKNOWN_NDIMS, LAYOUT_ANY, VARIABLE)
        return lt

    def set_attr(self, op: Any, name: str, value: Any) -> None:
        if name in ATTR_STR:
            b = value.encode()
            self.call("dnnl_graph_op_set_attr_str", op, ATTR_STR[name], b, len(b))
        elif name in ATTR_BOOL:
            v = ctypes.c_uint8(int(value))
            self.call("dnnl_graph_op_set_attr_bool", op, ATTR_BOOL[name], ctypes.byref(v), 1)
        else:
            vals = list(value) if isinstance(value, (list, tuple)) else [value]
            arr = (ctypes.c_int64 * len(vals))(*vals)
            self.call("dnnl_graph_op_set_attr_s64", op, ATTR_S64[name], arr, len(vals))

    def describe(self) -> list[dict]:
        out = []
        for p in self.partitions:
            n, sup = ctypes.c_size_t(), ctypes.c_uint8()
            self.call("dnnl_graph_partition_get_op_num", p, ctypes.byref(n))
            ids = (ctypes.c_size_t * n.value)()
            self.call("dnnl_graph_partition_get_ops", p, n, ids)
            self.call("dnnl_graph_partition_is_supported", p, ctypes.byref(sup))
            out.append({"ops": [self.op_kinds[i] for i in ids], "supported": bool(sup.value)})
        return out

    def ports(self, p: Any, which: str) -> list[LogicalTensor]:
        n = ctypes.c_size_t()
        self.call(f"dnnl_graph_partition_get_{which}_ports_num", p, ctypes.byref(n))
        lts = (LogicalTensor * n.value)()
        self.call(f"dnnl_graph_partition_get_{which}_ports", p, n, lts)
        return list(lts)

    def compile(self) -> float:
        """Compiles every partition in order; returns the seconds it took."""
        t0 = time.perf_counter()
        known: dict[int, LogicalTensor] = {}   # tensors between partitions, as compiled
        self.buffers: dict[int, np.ndarray] = {k: np.ascontiguousarray(v, np.float32)
                                               for k, v in self.consts.items()}
        self.steps = []
        for p in self.partitions:
            ins = [known.get(lt.id) or self.declared(lt.id) for lt in self.ports(p, "input")]
            outs = [self.declared(lt.id) for lt in self.ports(p, "output")]
            cp = ctypes.c_void_p()
            self.call("dnnl_graph_compiled_partition_create", ctypes.byref(cp), p)
            in_ptrs = (ctypes.POINTER(LogicalTensor) * len(ins))(
                *[ctypes.pointer(x) for x in ins])
            out_ptrs = (ctypes.POINTER(LogicalTensor) * len(outs))(
                *[ctypes.pointer(x) for x in outs])
            self.call("dnnl_graph_partition_compile", p, cp, len(ins), in_ptrs, len(outs),
                      out_ptrs, self.dn.engine)
            for lt in outs:
                q = LogicalTensor()
                self.call("dnnl_graph_compiled_partition_query_logical_tensor", cp,
                          ctypes.c_size_t(lt.id), ctypes.byref(q))
                known[lt.id] = q
            tensors_in = [self.tensor(lt) for lt in ins]
            tensors_out = [self.tensor(known[lt.id]) for lt in outs]
            self.steps.append((cp, len(ins), (ctypes.c_void_p * len(ins))(*tensors_in),
                               len(outs), (ctypes.c_void_p * len(outs))(*tensors_out)))
        return time.perf_counter() - t0

    def tensor(self, lt: LogicalTensor) -> int:
        if lt.id not in self.buffers:
            size = ctypes.c_size_t()
            self.call("dnnl_graph_logical_tensor_get_mem_size", ctypes.byref(lt),
                      ctypes.byref(size))
            shape = self.inputs.get(lt.id) or self.outputs.get(lt.id)
            self.buffers[lt.id] = (np.zeros(shape, np.float32) if shape is not None
                                   else np.zeros(max(size.value // 4, 1), np.float32))
        t = ctypes.c_void_p()
        self.call("dnnl_graph_tensor_create", ctypes.byref(t), ctypes.byref(lt),
                  self.dn.engine, ctypes.c_void_p(self.buffers[lt.id].ctypes.data))
        return t.value

    def run(self, feeds: dict[int, np.ndarray]) -> list[np.ndarray]:
        for k, v in feeds.items():
            np.copyto(self.buffers[k], v)
        ex = self.lib.dnnl_graph_compiled_partition_execute
        for cp, nin, tin, nout, tout in self.steps:
            st = ex(cp, self.dn.stream, ctypes.c_size_t(nin), tin, ctypes.c_size_t(nout),
                    tout)
            if st != 0:
                raise library.DnnlError("dnnl_graph_compiled_partition_execute", st)
        self.dn.wait()
        return [self.buffers[k] for k in self.outputs]


def conv_case(rng: np.random.Generator, cin: int, cout: int, k: int, hw: int) -> dict:
    x_shape, w = (1, cin, hw, hw), (rng.standard_normal((cout, cin, k, k)) * 0.05)
    b = rng.standard_normal(cout) * 0.1
    w, b = w.astype(np.float32), b.astype(np.float32)
    pad = k // 2
    y_shape = (1, cout, hw, hw)
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[pad] * 4,
                              kernel_shape=[k, k]),
             helper.make_node("Relu", ["c"], ["y"])]
    model = _model(nodes, {"x": x_shape}, {"y": y_shape}, {"w": w, "b": b})
    conv_attrs = {"strides": [1, 1], "pads_begin": [pad, pad], "pads_end": [pad, pad],
                  "dilations": [1, 1], "groups": 1, "data_format": "NCX",
                  "weights_format": "OIX"}
    ops = [("Convolution", [0, 1], [3], conv_attrs),
           ("BiasAdd", [3, 2], [4], {"data_format": "NCX"}),
           ("ReLU", [4], [5], {})]
    return {"model": model, "feeds": {"x": _rand(rng, x_shape)}, "ops": ops,
            "inputs": {0: x_shape}, "consts": {1: w, 2: b}, "outputs": {5: y_shape},
            "feed_ids": {"x": 0}}


def mlp_case(rng: np.random.Generator, rows: int, k: int, n: int) -> dict:
    w = (rng.standard_normal((k, n)) * 0.03).astype(np.float32)
    b = (rng.standard_normal(n) * 0.1).astype(np.float32)
    nodes = [helper.make_node("MatMul", ["x", "w"], ["m"]),
             helper.make_node("Add", ["m", "b"], ["a"]),
             helper.make_node("Gelu", ["a"], ["y"])]
    model = _model(nodes, {"x": (rows, k)}, {"y": (rows, n)}, {"w": w, "b": b})
    ops = [("MatMul", [0, 1], [3], {}),
           ("Add", [3, 2], [4], {"auto_broadcast": "numpy"}),
           ("GELU", [4], [5], {})]
    return {"model": model, "feeds": {"x": _rand(rng, (rows, k))}, "ops": ops,
            "inputs": {0: (rows, k)}, "consts": {1: w, 2: b.reshape(1, n)},
            "outputs": {5: (rows, n)}, "feed_ids": {"x": 0}}


def sdpa_case(rng: np.random.Generator, heads: int, seq: int, dh: int) -> dict:
    """MatMul(Q, K^T) -> Divide(sqrt(dh)) -> Add(mask) -> SoftMax -> MatMul(V), as BERT-base
    writes it; K comes transposed already in both forms."""
    q, kt, v = (1, heads, seq, dh), (1, heads, dh, seq), (1, heads, seq, dh)
    mask = (1, 1, 1, seq)
    scale = np.array([np.sqrt(dh)], np.float32)
    nodes = [helper.make_node("MatMul", ["q", "kt"], ["s"]),
             helper.make_node("Div", ["s", "scale"], ["d"]),
             helper.make_node("Add", ["d", "mask"], ["a"]),
             helper.make_node("Softmax", ["a"], ["p"], axis=-1),
             helper.make_node("MatMul", ["p", "v"], ["y"])]
    model = _model(nodes, {"q": q, "kt": kt, "v": v, "mask": mask}, {"y": q},
                   {"scale": scale})
    ops = [("MatMul", [0, 1], [10], {}),
           ("Divide", [10, 4], [11], {"auto_broadcast": "numpy"}),
           ("Add", [11, 3], [12], {"auto_broadcast": "numpy"}),
           ("SoftMax", [12], [13], {"axis": 3}),
           ("MatMul", [13, 2], [14], {})]
    m = np.zeros(mask, np.float32)
    m[..., seq - seq // 8:] = -10000.0      # padded tail, as an attention mask writes it
    feeds = {"q": _rand(rng, q), "kt": _rand(rng, kt), "v": _rand(rng, v), "mask": m}
    return {"model": model, "feeds": feeds, "ops": ops,
            "inputs": {0: q, 1: kt, 2: v, 3: mask}, "consts": {4: scale.reshape(1, 1, 1, 1)},
            "outputs": {14: q}, "feed_ids": {"q": 0, "kt": 1, "v": 2, "mask": 3}}


def _rand(rng: np.random.Generator, shape: tuple) -> np.ndarray:
    return rng.standard_normal(shape).astype(np.float32)


def _model(nodes: list, inputs: dict, outputs: dict, inits: dict) -> bytes:
    g = helper.make_graph(
        nodes, "probe",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(s)) for k, s in inputs.items()],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, list(s))
         for k, s in outputs.items()],
        [numpy_helper.from_array(v, k) for k, v in inits.items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 20)])
    onnx.checker.check_model(m)
    return m.SerializeToString()


CASES = {
    "conv3x3": lambda rng: conv_case(rng, 64, 64, 3, 56),
    "conv1x1": lambda rng: conv_case(rng, 256, 64, 1, 56),
    "mlp": lambda rng: mlp_case(rng, 128, 768, 3072),
    "sdpa": lambda rng: sdpa_case(rng, 12, 128, 64),
}


def sessions(data: bytes, threads: int) -> dict[str, Any]:
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    opts = {"num_of_threads": threads} if library.load().cpu_runtime == "OpenMP" else {}
    dnnl = ort.InferenceSession(data, so, providers=[
        ("DnnlExecutionProvider", opts), "CPUExecutionProvider"])
    info = dnnl.get_provider_graph_assignment_info()
    on = sum(len(g.get_nodes()) for g in info if g.ep_name == "DnnlExecutionProvider")
    so2 = ort.SessionOptions()
    so2.intra_op_num_threads = threads
    cpu = ort.InferenceSession(data, so2, providers=["CPUExecutionProvider"])
    ro = ort_ref.SessionOptions()
    ro.intra_op_num_threads = threads
    ro.add_session_config_entry("session.intra_op.allow_spinning", "0")
    ref = ort_ref.InferenceSession(data, ro, providers=["CPUExecutionProvider"])
    return {"dnnl_ep": dnnl, "onnxrt_cpu": cpu, "onnxruntime": ref, "_on": on}


def probe(name: str, runs: int, threads: int) -> dict:
    rng = np.random.default_rng(0)
    case = CASES[name](rng)
    dn = library.load()
    g = GraphCase(dn, case["ops"], case["inputs"], case["consts"], case["outputs"])
    parts = g.describe()
    compile_s = g.compile()
    gfeeds = {case["feed_ids"][k]: v for k, v in case["feeds"].items()}
    s = sessions(case["model"], threads)
    on = s.pop("_on")
    feeds = case["feeds"]
    ref_out = s["onnxruntime"].run(None, feeds)[0]
    got = g.run(gfeeds)[0].copy()
    scale = float(np.max(np.abs(ref_out))) or 1.0
    err = {"graph_api": float(np.max(np.abs(got - ref_out))) / scale}
    for k in ("dnnl_ep", "onnxrt_cpu"):
        err[k] = float(np.max(np.abs(s[k].run(None, feeds)[0] - ref_out))) / scale
    engines = {"graph_api": lambda: g.run(gfeeds),
               **{k: (lambda sess=v: sess.run(None, feeds)) for k, v in s.items()}}
    names = list(engines)
    for _ in range(3):
        for n in names:
            engines[n]()
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(runs):
        for i in range(len(names)):
            n = names[(r + i) % len(names)]
            t = time.perf_counter()
            engines[n]()
            times[n].append(time.perf_counter() - t)
    med = {n: statistics.median(v) * 1e3 for n, v in times.items()}
    ratio = {n: statistics.median(a / b for a, b in zip(times[n], times["onnxruntime"]))
             for n in names}
    return {"case": name, "partitions": parts, "compile_ms": compile_s * 1e3, "ms": med,
            "over_ort": ratio, "rel_err": err, "ep_nodes": on}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("cases", nargs="*")
    p.add_argument("--runs", type=int, default=30)
    p.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    args = p.parse_args()
    jit.wait_compiled(900)
    dn = library.load()
    print(f"oneDNN {dn.version} ({dn.cpu_runtime}) from {dn.path}; {args.threads} threads, "
          f"median of {args.runs} rotated rounds")
    for name in args.cases or list(CASES):
        r = probe(name, args.runs, args.threads)
        print(f"\n{name}: {len(r['partitions'])} partition(s), compiled in "
              f"{r['compile_ms']:.1f} ms; DNNL provider took {r['ep_nodes']} node(s)")
        for i, part in enumerate(r["partitions"]):
            print(f"  partition {i}: {' + '.join(part['ops'])}"
                  f"{'' if part['supported'] else ' (not supported: no kernel)'}")
        print(f"  {'engine':<12} {'ms':>8} {'/ onnxruntime':>14} {'rel err':>9}")
        for n in r["ms"]:
            e = r["rel_err"].get(n)
            print(f"  {n:<12} {r['ms'][n]:>8.3f} {r['over_ort'][n]:>14.2f} "
                  f"{'' if e is None else f'{e:.1e}':>9}")


if __name__ == "__main__":
    main()
