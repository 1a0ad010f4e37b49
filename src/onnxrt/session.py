"""InferenceSession: chains load -> passes -> partition -> plan -> execute."""

from __future__ import annotations

import concurrent.futures
import logging
import os
import threading
import time
import weakref
from typing import Any, Callable, Sequence

import numpy as np

from onnxrt.errors import EPFail, InvalidArgument, InvalidProviderError
from onnxrt.execute.checks import OutputChecker
from onnxrt.execute.executor import RunContext, execute_plan
from onnxrt.execute.parallel import execute_plan_parallel, parallel_info
from onnxrt.execute.profiler import Profiler
from onnxrt.execute.quiet import quiet
from onnxrt.execute.feeds import InputSpec, host_output, prepare_feeds
from onnxrt.framework import blas_threads
from onnxrt.framework.blas_threads import default_threads, rescan_libraries
from onnxrt.framework.registry import (_entry_name, default_providers, resolve_providers,
                                       session_providers)
from onnxrt.compile.session_config import context_load, dump_context_model
from onnxrt.ir.load import load_model
from onnxrt.ir.graph import Graph
from onnxrt.ir.shapes import typed_graph
from onnxrt.passes import QDQ_RULES, optimize_graph
from onnxrt.options import (ExecutionMode, GraphOptimizationLevel, RunOptions, SessionOptions,
                            check_session_options)
from onnxrt.framework.kernel_lookup import KernelLookup
from onnxrt.partition.partitioner import partition_model
from onnxrt.partition.report import AssignedSubgraph, assignment_info, placement_report
from onnxrt.plan.planner import Planner
from onnxrt.framework.device import CPU_DEVICE, Device
from onnxrt.validate import check_model
from onnxrt.values import IOBinding, ModelMetadata, NodeArg, OrtValue
from onnxrt.model_options import (check_user_initializers, config_from_model,
                                  override_free_dims, save_optimized_model, user_initializers)
from onnxrt.run_support import CSession, apply_arena, feed_ids, shrink, with_adapters
from onnxrt.session_threads import global_inter_op_threads, session_pool

__all__ = ["InferenceSession"]


class InferenceSession:
    """Runs an ONNX model (onnxruntime.InferenceSession)."""

    def __init__(self, path_or_bytes: Any, sess_options: SessionOptions | None = None,
                 providers: Sequence[Any] | None = None,
                 provider_options: Sequence[dict[str, Any]] | None = None,
                 disabled_optimizers: Sequence[str] | None = None, **kwargs: Any) -> None:
        t_start = time.perf_counter_ns()
        self._sess_options = sess_options if sess_options is not None else SessionOptions()
        check_session_options(self._sess_options)
        self._profiler = None
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._thread_pool: Any = None
        self._owns_pool = False
        self._enable_fallback = True
        if self._sess_options._load_cancelled:
            from onnxrt.errors import ModelLoadCanceled

            raise ModelLoadCanceled("session creation was cancelled through "
                                    "SessionOptions.set_load_cancellation_flag")
        given = user_initializers(self._sess_options)
        self._loaded, self._base_dir = load_model(path_or_bytes,
                                                 memory_files=self._sess_options._memory_files,
                                                 initializers=given)
        check_user_initializers(self._loaded, given)
        # where EPContext blob files are read from: the model's folder (None: given as bytes)
        self._model_path = os.fspath(path_or_bytes) if isinstance(path_or_bytes,
                                                                  (str, os.PathLike)) else None
        self._sess_options = config_from_model(self._loaded, self._sess_options)
        so = self._sess_options
        self._loaded = override_free_dims(self._loaded, so._free_dims_by_name,
                                          so._free_dims_by_denotation)
        # attributes and declared shapes against the spec, before any pass or kernel
        check_model(self._loaded)
        t_loaded = time.perf_counter_ns()
        self._profiling_start_ns = 0
        if self._sess_options.enable_profiling:
            self._profiler = Profiler(self._sess_options.profile_file_prefix)
            self._profiler.t0 = t_start
            self._profiling_start_ns = time.time_ns() - (time.perf_counter_ns() - t_start)
            self._profiler.session_event("model_loading_uri", t_start, t_loaded)
        self._disabled_optimizers = frozenset(disabled_optimizers or ())
        self._build(providers, provider_options)
        if self._profiler is not None:
            self._profiler.session_event("session_initialization", t_loaded,
                                         time.perf_counter_ns())

    # -- building -------------------------------------------------------------------------
    def _optimize(self, eps: list[Any]) -> tuple[Graph, list[str]]:
        """The session's graph (built from the loaded model, typed by one shape inference)
        rewritten by the graph passes of its optimization level; the result is what
        partitioning sees.

        Fusions produce com.microsoft ops that only the CPU provider has kernels for, so the
        level is capped by what the session's other providers accept
        (``max_graph_optimization_level``): fusing nodes they could have run would take
        those nodes away from them.
        """
        so = self._sess_options
        level = int(so.graph_optimization_level)
        for ep in eps:
            level = min(level, int(getattr(ep, "max_graph_optimization_level", 99)))
        graph = typed_graph(self._loaded)
        disabled = self._disabled_optimizers
        if so._config.get("session.disable_quant_qdq", "0") == "1":
            # onnxruntime's switch: no QDQ fusion, and DequantizeLinear folds like any node
            disabled = disabled | QDQ_RULES
            graph.fold_dequantize = True
        applied = optimize_graph(graph, level, disabled, KernelLookup(eps))
        if so.optimized_model_filepath:
            save_optimized_model(graph.to_model(), so)
        return graph, applied

    def _build(self, providers: Sequence[Any] | None,
               provider_options: Sequence[dict[str, Any]] | None) -> None:
        so = self._sess_options
        cfg = so._config
        if providers is None and so.has_providers():
            providers = session_providers(so, self._loaded)
        use_defaults = cfg.get("session.use_default_providers", "1") != "0"
        eps = resolve_providers(providers, provider_options,
                                cfg.get("session.provider_fallback", "warn"),
                                default_providers() if use_defaults else ())
        cpu_requested = any(_entry_name(p) == "CPUExecutionProvider"
                            for p in (providers or []))
        graph, applied = self._optimize(eps)
        opsets = dict(graph.opsets)
        functions = {(f.domain, f.name): f for f in self._loaded.functions}
        lookup = KernelLookup(eps)
        part = partition_model(
            graph, eps, opsets, lookup,
            disable_cpu_fallback=cfg.get("session.disable_cpu_ep_fallback", "0") == "1",
            cpu_requested=cpu_requested, contexts=context_load(cfg, self._model_path))
        planner = Planner(opsets, functions, lookup, execute=execute_plan, graph=graph,
                          providers=eps, ir_version=self._loaded.ir_version,
                          reuse_memory=bool(so.enable_mem_reuse))
        plan = planner.plan_graph(graph, is_main=True)
        if cfg.get("ep.context_enable", "0") == "1":
            dump_context_model(graph, cfg, self._model_path)
        # state swapped in only once everything succeeded: a failed rebuild keeps the old one
        self._graph = graph
        self._model_proto = None
        self._passes_applied = applied
        self._providers = eps
        self._partition = part
        self._planner = planner
        self._plan = plan
        self._plan_blas = blas_threads.plan_needs_bound(plan.steps)
        used = set(part.providers_used()) | {st.provider for st in plan.steps}
        self._active = [ep for ep in eps if ep.name in used]
        self._const_ids = frozenset(id(v) for v in plan.initial if isinstance(v, np.ndarray))
        g = self._loaded.graph     # the interface is the model's as loaded
        init_names = {t.name for t in g.initializer}
        free = so._free_dims_by_name
        self._inputs = [NodeArg.from_value_info(vi.name, vi.type) for vi in g.input
                        if vi.name not in init_names]
        self._overridable = [NodeArg.from_value_info(vi.name, vi.type) for vi in g.input
                             if vi.name in init_names and self._loaded.ir_version >= 4]
        self._outputs = [NodeArg.from_value_info(vi.name, vi.type) for vi in g.output]
        self._sparse_outputs = frozenset(vi.name for vi in g.output
                                         if vi.type.WhichOneof("value") == "sparse_tensor_type")
        self._specs = {vi.name: InputSpec(vi.name, vi.type if vi.HasField("type") else None,
                                          free) for vi in g.input}
        self._required = [a.name for a in self._inputs
                          if not self._specs[a.name].optional]
        self._input_index = {n: i for i, n in enumerate(plan.input_names)}
        overridable = {a.name for a in self._overridable}
        self._init_slots = {name: i for i, name in enumerate(plan.slot_names)
                            if name in overridable}
        self._specs = {n: sp for n, sp in self._specs.items()
                       if n not in init_names or n in overridable}
        self._output_index = {n: i for i, n in enumerate(plan.output_names)}
        self._direct_inputs = _direct_inputs(plan)
        debug = (cfg.get("session.debug_checks") == "1" or os.environ.get("ONNXRT_DEBUG") == "1")
        self._debug = debug
        # onnxruntime's key: idle intra-op workers spin while a run is on
        # (framework/hotpool.py)
        self._spin = cfg.get("session.intra_op.allow_spinning", "1") != "0"
        self._set_thread_pool(so)
        # the thread limit reaches every BLAS loaded by now (the kernels just prepared may
        # have loaded one, other packages another since the last session)
        rescan_libraries()
        apply_arena(so, eps)
        if so.execution_mode == ExecutionMode.ORT_PARALLEL and plan.steps:
            inter = so.inter_op_num_threads if so.use_per_session_threads else \
                global_inter_op_threads()
            workers = int(inter or 0) or default_threads()
            if self._pool is None or self._pool._max_workers != workers:
                self._pool = concurrent.futures.ThreadPoolExecutor(
                    max_workers=workers, thread_name_prefix="onnxrt-inter-op")
            self._pinfo = parallel_info(plan)
        else:
            self._pinfo = None
        if self._profiler is not None:
            self._profiler.set_plan(plan)
        self._refresh_hook()
        if so.log_severity_level == 0 or (so.log_severity_level == -1 and _LOG.isEnabledFor(
                logging.DEBUG)):
            _verbose_logging()
            _LOG.info("%s", self.placement_report())

    def _set_thread_pool(self, so: SessionOptions) -> None:
        """The intra-op thread pool of this session's runs (session_threads.py): its own,
        ended with the session, or the process-wide one."""
        old = self._thread_pool
        pool, bound, owned = session_pool(so, self._spin, old if self._owns_pool else None)
        if pool is not old:
            if old is not None and self._owns_pool:
                self._pool_finalizer()      # the rebuilt session's pool: ended now
            if owned:
                self._pool_finalizer = weakref.finalize(self, pool.close)
        self._thread_pool, self._blas_bound, self._owns_pool = pool, bound, owned

    # -- placement ------------------------------------------------------------------------
    def get_provider_graph_assignment_info(self) -> list[AssignedSubgraph]:
        """Which provider runs which nodes (onnxruntime 1.31's name; always recorded here)."""
        return assignment_info(self._partition)

    def placement_report(self) -> str:
        """A readable account of where every node runs, why the providers ranked above it
        declined it, the number of partitions, and every device copy."""
        from onnxrt.framework.selection import selection_note

        return selection_note(self._providers) + placement_report(
            self._partition, self._plan.steps, self._partition.copies, self._graph.folded,
            self._graph.name)

    def get_provider_stats(self) -> dict[str, dict[str, int]]:
        """Per provider: runs seen, device copies and bytes moved."""
        return {ep.name: ep.allocation_stats() for ep in self._providers}

    # -- metadata -------------------------------------------------------------------------
    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return list(self._overridable)

    def get_modelmeta(self) -> ModelMetadata:
        return ModelMetadata(self._loaded)

    def get_providers(self) -> list[str]:
        return [ep.name for ep in self._providers]

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        return {ep.name: ep.get_provider_options() for ep in self._providers}

    def get_session_options(self) -> SessionOptions:
        return self._sess_options

    def get_input_memory_infos(self) -> list[Any]:
        """Where each input is read from (OrtMemoryInfo): the device of the provider whose
        nodes read it straight from there, else the CPU."""
        from onnxrt.framework.allocators import OrtMemoryInfo

        return [OrtMemoryInfo.for_device(self._direct_inputs.get(a.name, CPU_DEVICE))
                for a in self._inputs]

    def get_output_memory_infos(self) -> list[Any]:
        """Where each output is produced (OrtMemoryInfo)."""
        from onnxrt.framework.allocators import OrtMemoryInfo

        devs = self._plan.output_devices
        return [OrtMemoryInfo.for_device(devs[self._output_index[a.name]])
                for a in self._outputs]

    def get_input_epdevices(self) -> list[Any]:
        """Per input, the OrtEpDevice of the provider on whose device it is read: the
        provider that reads it straight from its own device, else the CPU provider."""
        from onnxrt.framework.ep_devices import ep_device_for

        out = []
        for a in self._inputs:
            dev = self._direct_inputs.get(a.name, CPU_DEVICE)
            ep = next((e for e in self._providers if e.device == dev), None)
            out.append(ep_device_for(ep) if ep is not None else None)
        return out

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, in ns since the epoch (0 when profiling is off)."""
        return self._profiling_start_ns

    @property
    def _sess(self) -> "CSession":
        """onnxruntime's C-level session object, as its own tests reach it."""
        return CSession(self)

    @property
    def _model(self) -> Any:
        """The session's graph as a ModelProto (the optimized model), serialized when asked."""
        if self._model_proto is None:
            self._model_proto = self._graph.to_model()
        return self._model_proto

    @property
    def _model_bytes(self) -> bytes:
        return self._model.SerializeToString()

    def set_providers(self, providers: Sequence[Any] | None = None,
                      provider_options: Sequence[dict[str, Any]] | None = None) -> None:
        """Rebuild the session on other providers; on failure the old session stays."""
        try:
            self._build(providers, provider_options)
        except InvalidArgument as e:
            if "Unknown Provider Type" not in str(e):
                raise
            # onnxruntime raises a plain RuntimeError here
            raise InvalidProviderError(str(e)) from None

    def disable_fallback(self) -> None:
        """A run that fails in a provider (EPFail) raises (onnxruntime's switch)."""
        self._enable_fallback = False

    def enable_fallback(self) -> None:
        """A run that fails in a provider (EPFail) rebuilds the session on the CPU provider
        alone and runs again, once (onnxruntime's behaviour, on by default)."""
        self._enable_fallback = True

    def end_profiling(self) -> str:
        """Stop profiling and write the trace; its path ("" when profiling is off)."""
        prof = self._profiler
        if prof is None or not prof.active:
            return ""
        path = prof.end()
        self._refresh_hook()
        return path

    def _refresh_hook(self) -> None:
        """The node-event hook of runs: debug checks and/or the active profiler."""
        prof = self._profiler if self._profiler is not None and self._profiler.active else None
        self._hook = OutputChecker(prof) if self._debug else prof

    # -- running --------------------------------------------------------------------------
    def run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
            run_options: RunOptions | None = None) -> list[Any]:
        try:
            outs = self._run(output_names, input_feed, run_options)
        except EPFail as e:
            if not self._enable_fallback or self.get_providers() == ["CPUExecutionProvider"]:
                raise
            _LOG.warning("onnxrt: EP Error %s when using %s; falling back to "
                         "['CPUExecutionProvider'] and retrying.", e, self.get_providers())
            self.set_providers(["CPUExecutionProvider"])
            self._enable_fallback = False       # once, as onnxruntime
            outs = self._run(output_names, input_feed, run_options)
        const_ids = self._const_ids | feed_ids(input_feed)
        names = output_names or self._plan.output_names
        return [self._host_result(v, dev, n, const_ids) for (v, dev), n in zip(outs, names)]

    def _host_result(self, v: Any, dev: Device, name: str, const_ids: frozenset[int]) -> Any:
        """An output on the host, never aliasing a feed or a constant; outputs declared
        sparse become COO SparseTensors of their nonzero entries."""
        v = host_output(self._to_host(v, dev), const_ids)
        if name in self._sparse_outputs and isinstance(v, np.ndarray):
            from onnxrt.framework.sparse import sparse_from_dense

            return sparse_from_dense(v)
        return v

    def _to_host(self, v: Any, dev: Device) -> Any:
        if dev.is_host:
            return v
        ep = next(ep for ep in self._providers if ep.device == dev)
        return ep.transfer().to_host(v)

    def _to_device(self, v: Any, dev: Device) -> Any:
        ep = next((ep for ep in self._providers if ep.device == dev), None)
        if ep is None or ep.transfer() is None:
            raise InvalidArgument(f"no provider of this session lives on device {dev}")
        return ep.transfer().to_device(v, dev)

    def _device_feed(self, name: str, v: OrtValue) -> Any:
        """A feed bound on a device: passed as it is when the plan only copies that input to
        the same device (no round trip through the host), else brought to the host."""
        if self._direct_inputs.get(name) == v.device():
            return v.value()
        host = v.numpy()
        return self._specs[name].convert(host)

    def record_values(self, input_feed: dict[str, Any],
                      run_options: RunOptions | None = None) -> dict[str, Any]:
        """Run once and return every value the main graph computed, by name, on the host
        (inputs included). Fused nodes contribute their outputs only."""
        from onnxrt.execute.recorder import ValueRecorder

        to_host = {ep.name: ep.transfer().to_host for ep in self._providers
                   if not ep.device.is_host and ep.transfer() is not None}
        rec = ValueRecorder(to_host)
        rec.main_plan = self._plan
        self._run(None, input_feed, run_options, hook=rec)
        values = {n: np.asarray(v) if isinstance(v, np.generic) else v
                  for n, v in input_feed.items()}
        values.update(rec.values)
        return values

    def _run(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
             run_options: RunOptions | None, hook: Any = None) -> list[Any]:
        plan = self._plan
        if run_options is not None and run_options._adapters:
            input_feed = with_adapters(input_feed, run_options._adapters)
        feeds = prepare_feeds(self._specs, self._required, input_feed)
        idx = self._output_index
        if output_names:
            bad = [n for n in output_names if n not in idx]
            if bad:
                raise InvalidArgument(f"Invalid output name(s): {bad}. Valid output names: "
                                      f"{list(idx)}")
        values = [None] * len(plan.input_names)
        for name, v in list(feeds.items()):
            if isinstance(v, OrtValue):  # bound on a device: the plan reads host inputs
                feeds[name] = v = self._device_feed(name, v)
            i = self._input_index.get(name)
            if i is not None:
                values[i] = v
        if self._init_slots and any(n in self._init_slots for n in feeds):
            plan = _with_overrides(plan, {n: feeds[n] for n in feeds if n in self._init_slots},
                                   self._init_slots)
        pool = self._thread_pool
        ctx = RunContext(run_options, self._hook if hook is None else hook, 0, pool)
        if run_options is not None and run_options.terminate:
            from onnxrt.errors import RunCanceled

            raise RunCanceled("Exiting due to terminate flag being set to true.")
        active = self._active
        for ep in active:
            ep.runs += 1
            ep.on_run_start(run_options)
        prof = self._profiler
        bound = self._blas_bound if self._plan_blas else 0
        t0 = time.perf_counter_ns()
        try:
            # BLAS's thread count is process-wide: a run bounds it by its budget while it
            # runs (framework/blas_threads.py); numpy's floating-point warnings (log(0),
            # 0/0...) are results, not errors, in ONNX: onnxruntime does not warn either
            if bound:
                blas_threads.request(bound)
            try:
                with quiet():
                    if self._pinfo is not None and plan is self._plan:
                        results = execute_plan_parallel(plan, values, None, ctx, self._pool,
                                                        self._pinfo)
                    else:
                        results = execute_plan(plan, values, None, ctx)
            finally:
                if bound:
                    blas_threads.release(bound)
                if pool._hot is not None:       # spinning workers park at the run's end
                    pool._hot.park()
        finally:
            for ep in active:
                ep.on_run_end(run_options)
            if run_options is not None and run_options._config.get(
                    "memory.enable_memory_arena_shrinkage"):
                shrink(run_options._config["memory.enable_memory_arena_shrinkage"])
            if prof is not None and prof.active:
                t1 = time.perf_counter_ns()
                prof.session_event("SequentialExecutor::Execute", t0, t1)
                prof.session_event("model_run", t0, t1)
        if output_names:
            return [(results[idx[n]], plan.output_devices[idx[n]]) for n in output_names]
        return list(zip(results, plan.output_devices))

    def run_with_ort_values(self, output_names: Sequence[str] | None,
                            input_dict_ort_values: dict[str, OrtValue],
                            run_options: RunOptions | None = None) -> list[OrtValue]:
        outs = self._run(output_names, input_dict_ort_values, run_options)
        const_ids = self._const_ids | feed_ids(input_dict_ort_values)
        names = output_names or self._plan.output_names
        res = []
        for (v, dev), n in zip(outs, names):
            v = self._host_result(v, dev, n, const_ids)
            res.append(OrtValue.ort_value_from_sparse_tensor(v) if n in self._sparse_outputs
                       and not isinstance(v, np.ndarray) else OrtValue(v))
        return res

    def run_async(self, output_names: Sequence[str] | None, input_feed: dict[str, Any],
                  callback: Callable[[Any, Any, str], None], user_data: Any,
                  run_options: RunOptions | None = None) -> None:
        """Run on a worker thread; ``callback(outputs, user_data, error_message)`` at the end."""

        def work() -> None:
            try:
                res = self.run(output_names, input_feed, run_options)
            except Exception as e:  # reported through the callback, as onnxruntime does
                callback(None, user_data, f"{type(e).__name__}: {e}")
                return
            callback(res, user_data, "")

        _async_pool().submit(work)

    def io_binding(self) -> IOBinding:
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None
                           ) -> None:
        feeds = dict(iobinding._inputs)
        names = list(iobinding._output_order) or [o.name for o in self._outputs]
        outs = self._run(names, feeds, run_options)
        const_ids = self._const_ids | feed_ids(feeds)
        results = []
        for name, (v, dev) in zip(names, outs):
            want, pre = iobinding._outputs.get(name, (CPU_DEVICE, None))
            if want.is_host:
                v = host_output(self._to_host(v, dev), const_ids)
                if pre is not None:
                    target = pre.value()
                    if target.shape != np.shape(v):
                        raise InvalidArgument(f"output '{name}': the bound buffer has shape "
                                              f"{target.shape}, the result has {np.shape(v)}")
                    np.copyto(target, v)
                    results.append(pre)
                else:
                    results.append(OrtValue(v))
                continue
            if dev != want:
                v = self._to_device(self._to_host(v, dev), want)
            ep = next(ep for ep in self._providers if ep.device == want)
            results.append(OrtValue(v, want, ep.transfer().to_host))
        iobinding._results = results


def _direct_inputs(plan: Any) -> dict[str, Device]:
    """Inputs whose every reader is a copy to one device: a value already on that device
    can be fed as it is (the copy passes device values through)."""
    inputs = set(plan.input_slots)
    readers: dict[int, list[Any]] = {}
    for st in plan.steps:
        for s in st.ins:
            if s in inputs:
                readers.setdefault(s, []).append(st)
    out = {}
    for name, slot in zip(plan.input_names, plan.input_slots):
        steps = readers.get(slot, [])
        if not steps or any(st.provider != "copy" or st.node.op_type != "MemcpyFromHost"
                            for st in steps):
            continue
        devices = {st.node.name.rsplit("->", 1)[-1] for st in steps}
        if len(devices) == 1:
            out[name] = Device(devices.pop())
    return out


_LOG = logging.getLogger("onnxrt")


def _verbose_logging() -> None:
    """log_severity_level=0 asks for verbose logs: make sure they reach stderr."""
    if not _LOG.handlers:
        h = logging.StreamHandler()
        h.setFormatter(logging.Formatter("onnxrt: %(message)s"))
        _LOG.addHandler(h)
    if _LOG.level == logging.NOTSET or _LOG.level > logging.INFO:
        _LOG.setLevel(logging.INFO)


_POOL: concurrent.futures.ThreadPoolExecutor | None = None
_POOL_LOCK = threading.Lock()


def _async_pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = concurrent.futures.ThreadPoolExecutor(max_workers=4,
                                                          thread_name_prefix="onnxrt-async")
        return _POOL


def _with_overrides(plan: Any, overrides: dict[str, Any], slots: dict[str, int]) -> Any:
    import copy

    p = copy.copy(plan)
    p.initial = list(plan.initial)
    for n, v in overrides.items():
        p.initial[slots[n]] = v
    return p
