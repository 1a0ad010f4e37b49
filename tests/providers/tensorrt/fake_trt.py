"""A stand-in for TensorRT: a parser that supports a chosen set of ops, a "builder" that
records what it was asked and packs the ONNX model as the engine (serialized back as the
same bytes, as TensorRT's ``ICudaEngine.serialize`` gives what ``deserialize_cuda_engine``
takes), and engines that run on a simulated device through onnxrt's CPU provider.
Everything above the backend (claims, grouping, options, profiles, cache keys and files,
EPContext export and load) runs for real."""

from __future__ import annotations

import threading
import time

import numpy as np
import onnx

import onnxrt as ort
from onnxrt.providers.tensorrt import Backend, Engine, GpuInfo

MAGIC = b"FAKE-TRT-ENGINE\0"


class FakeTensor:
    """A value in the fake GPU's memory: reading it as a numpy array fails loudly."""

    __slots__ = ("data", "shape", "dtype")

    def __init__(self, data):
        self.data = np.array(data)
        self.shape = self.data.shape
        self.dtype = self.data.dtype

    def __array__(self, *a, **k):
        raise TypeError("FakeTensor lives on the fake GPU: copy it to the host first")


class FakeTransfer(ort.DataTransfer):
    def _to_device(self, array, device):
        assert device.type == "cuda"
        return FakeTensor(array)

    def _to_host(self, value):
        assert isinstance(value, FakeTensor), type(value)
        return value.data.copy()


class FakeEngine(Engine):
    def __init__(self, backend, data, inputs, outputs):
        self.backend = backend
        self.data = data
        model_bytes = data[len(MAGIC):]
        self.sess = ort.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])
        self.inputs = list(inputs)
        self.outputs = list(outputs)

    def run(self, inputs, profile=0):
        for x in inputs:
            assert isinstance(x, FakeTensor), f"engine got a host {type(x).__name__}"
        self.backend.runs.append(([tuple(x.shape) for x in inputs], profile))
        res = self.sess.run(self.outputs, {n: x.data for n, x in zip(self.inputs, inputs)})
        return [FakeTensor(r) for r in res]


class FakeBackend(Backend):
    """``ops``: op types the parser supports. ``lump``: answer with all supported nodes as
    one subgraph (as a parser may, whatever our cycle rules say). ``min_nodes``: ops that the
    parser accepts only inside a model of at least that many nodes (context-dependent
    support, which the per-group re-check must catch)."""

    def __init__(self, ops=("Relu", "Add", "Mul", "Exp"), *, version="10.3.0",
                 gpu=GpuInfo("NVIDIA Fake H100", (9, 0)), devices=1, lump=False,
                 min_nodes=None, build_delay=0.0):
        self.ops = set(ops)
        self._version = version
        self._gpu = gpu
        self.devices = devices
        self.lump = lump
        self.min_nodes = dict(min_nodes or {})
        self.build_delay = build_delay
        self.queries: list[list[str]] = []
        self.builds = []
        self.loads = 0
        self.serialized = 0
        self.runs = []
        self.active = 0
        self.max_active = 0
        self._lock = threading.Lock()

    def version(self):
        return self._version

    def device_count(self):
        return self.devices

    def gpu(self, device_id):
        return self._gpu

    def _ok(self, node, n_nodes):
        if node.op_type not in self.ops:
            return False
        return n_nodes >= self.min_nodes.get(node.op_type, 0)

    def supported_subgraphs(self, model):
        m = onnx.load_from_string(model)
        nodes = list(m.graph.node)
        self.queries.append([n.op_type for n in nodes])
        good = [i for i, n in enumerate(nodes) if self._ok(n, len(nodes))]
        if self.lump:
            return [good] if good else []
        runs, cur = [], []
        for i in range(len(nodes)):
            if i in good:
                cur.append(i)
            elif cur:
                runs.append(cur)
                cur = []
        return runs + ([cur] if cur else [])

    def build(self, request):
        with self._lock:
            self.active += 1
            self.max_active = max(self.max_active, self.active)
        try:
            if self.build_delay:
                time.sleep(self.build_delay)
            self.builds.append(request)
            onnx.checker.check_model(onnx.load_from_string(request.model))
            timing = None if request.timing_cache is None else request.timing_cache + b"t"
            return MAGIC + request.model, timing
        finally:
            with self._lock:
                self.active -= 1

    def load(self, engine, device_id, inputs, outputs, output_types):
        if not engine.startswith(MAGIC):
            raise RuntimeError("not an engine")
        self.loads += 1
        return FakeEngine(self, bytes(engine), inputs, outputs)

    def serialize(self, engine):
        assert isinstance(engine, FakeEngine) and engine.backend is self, \
            "serialize got an engine of another backend"
        self.serialized += 1
        return engine.data

    def data_transfer(self, device_id):
        return FakeTransfer()
