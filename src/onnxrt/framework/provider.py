"""The execution provider base class."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, ClassVar, Sequence

from onnxrt.errors import InvalidArgument
from onnxrt.framework.device import CPU_DEVICE, Device
from onnxrt.framework.kernel import KernelRegistry

if TYPE_CHECKING:
    from onnxrt.framework.devices import DeviceSupport, OrtHardwareDevice
    from onnxrt.framework.ep_context import ContextBlob, EPContext
    from onnxrt.framework.fused import FusedSubgraph
    from onnxrt.framework.transfer import DataTransfer
    from onnxrt.framework.capability import Capability
    from onnxrt.framework.graph_view import GraphView

__all__ = ["ExecutionProvider", "COMMON_OPTIONS"]

# options every provider accepts, handled by the framework
COMMON_OPTIONS: dict[str, Any] = {"error_on_failure": False}


class ExecutionProvider:
    """Base class of every execution provider.

    Kernel-based providers set ``kernels`` (a KernelRegistry): by default they claim every
    node for which they have a kernel. Compile-based providers override ``get_capability``
    (usually with ``group_nodes``) and ``compile``. ``options`` declares the accepted options
    and their defaults; an unknown option is an error listing the valid ones.
    """

    name: ClassVar[str] = ""
    kernels: ClassVar[KernelRegistry | None] = None
    device: Device = CPU_DEVICE
    options: ClassVar[dict[str, Any]] = {}
    # compile again for every new combination of input shapes (static-shape engines)
    compile_per_shape: ClassVar[bool] = False
    # the highest graph optimization level whose output this provider can still claim:
    # extended fusions emit com.microsoft ops (FusedConv, Attention...) that only the CPU
    # provider runs, so a session with other providers stops at basic unless they opt in
    max_graph_optimization_level: ClassVar[int] = 1
    # who made the provider (OrtEpDevice.ep_vendor; default: its top-level package), and the
    # PCI vendor id of the hardware it is made for (0: any): onnxruntime's selection
    # policies prefer a device of the vendor its provider is made for
    ep_vendor: ClassVar[str] = ""
    ep_vendor_id: ClassVar[int] = 0
    # on objects made by device (add_provider_for_devices, a policy): why, and the devices
    selected_by: str = ""
    ep_devices: tuple[Any, ...] = ()

    def __init__(self, **options: Any) -> None:
        valid = {**COMMON_OPTIONS, **self.options}
        unknown = sorted(set(options) - set(valid))
        if unknown:
            raise InvalidArgument(
                f"{self.name}: unknown provider option(s) {', '.join(unknown)}; "
                f"valid options: {', '.join(sorted(valid))}")
        merged = dict(self.options)
        merged.update({k: v for k, v in options.items() if k in self.options})
        self.provider_options: dict[str, Any] = merged
        self.error_on_failure = _truthy(options.get("error_on_failure", False))
        self._transfer: DataTransfer | None = None
        self.runs = 0
        # groups a per-shape provider could not compile at some shapes, run on the host
        # there (framework/fused.py HostFallback), in the order they happened
        self.host_fallbacks: list[Any] = []

    # -- the four questions --------------------------------------------------------------
    @classmethod
    def is_available(cls) -> bool:
        """Whether this provider's libraries import and its device is present here."""
        return not cls.unavailable_reason()

    @classmethod
    def unavailable_reason(cls) -> str:
        """Why the provider cannot run here ("" when it can)."""
        return ""

    def instance_unavailable_reason(self) -> str:
        """Why this provider object cannot run ("" when it can): its class's reason, unless
        the object brings what the class lacks (a provider built on an injected backend)."""
        cls = type(self)
        why = cls.unavailable_reason()
        if not why and not cls.is_available():
            why = "its device or libraries are not present"
        return why

    # -- partitioning --------------------------------------------------------------------
    def get_capability(self, graph: GraphView) -> list[Capability]:
        """Claim nodes. The default claims every node this provider has a kernel for."""
        from onnxrt.framework.capability import Capability

        lookup = getattr(graph, "kernel_lookup", None) or (
            self.kernels.lookup if self.kernels is not None else None)
        if lookup is None:
            return []
        claimed = []
        for node in graph:
            kd = lookup(node.domain, node.op_type, node.since_version)
            if kd is None:
                graph.decline(node, f"no kernel for {node.domain or 'ai.onnx'}::"
                                    f"{node.op_type}-{node.since_version}")
                continue
            if kd.dtypes is not None:
                bad = _unsupported_type(node, kd.dtypes)
                if bad:
                    graph.decline(node, f"no kernel for type {bad}")
                    continue
            claimed.append(node)
        return [Capability(claimed)] if claimed else []

    def compile(self, fused: Any) -> Callable[..., Any]:
        raise NotImplementedError(f"{self.name} is not a compile-based provider")

    @classmethod
    def is_compile_based(cls) -> bool:
        return cls.compile is not ExecutionProvider.compile

    # -- compiled models (EPContext nodes; framework/ep_context.py) ---------------------
    def export_context(self, fused: FusedSubgraph, compiled: Callable[..., Any]
                       ) -> ContextBlob | None:
        """The compiled form of a group this provider compiled (``compiled``: what its
        ``compile`` returned), for a compiled model's EPContext node. None: it cannot be
        kept (the group's nodes are written as they were and compiled again on load)."""
        return None

    def load_context(self, ctx: EPContext, fused: FusedSubgraph) -> Callable[..., Any]:
        """The callable of an EPContext node this provider wrote (``ctx.source`` is its
        name), loaded without compiling. Raise ``StaleContext`` for a blob made by another
        engine version or for another device: it must never run."""
        raise NotImplementedError(f"{self.name} does not load EPContext nodes")

    @classmethod
    def loads_contexts(cls) -> bool:
        return cls.load_context is not ExecutionProvider.load_context

    # -- devices -------------------------------------------------------------------------
    def data_transfer(self) -> DataTransfer | None:
        """Copies between the host and this provider's device (None on the host)."""
        return None

    def transfer(self) -> DataTransfer | None:
        """The provider's DataTransfer, created once."""
        if self._transfer is None and not self.device.is_host:
            self._transfer = self.data_transfer()
        return self._transfer

    # -- the hardware it runs on (get_ep_devices, selection policies) ---------------------
    @classmethod
    def supported_devices(cls, devices: Sequence[OrtHardwareDevice]) -> list[DeviceSupport]:
        """The devices among ``devices`` (what onnxrt discovered here) this provider runs
        on, each as a ``DeviceSupport`` with the options that aim it at that device. A
        provider for hardware onnxrt does not discover may return devices it found itself.
        Called only when the provider is available. Default: none (the provider is used by
        name only)."""
        return []

    @classmethod
    def options_for_devices(cls, supports: Sequence[DeviceSupport]) -> dict[str, str]:
        """The options of one provider object chosen for several of its devices at once
        (a policy or ``add_provider_for_devices`` may give it more than one). Default: one
        device at a time."""
        first = dict(supports[0].options)
        if any(dict(s.options) != first for s in supports[1:]):
            raise InvalidArgument(
                f"{cls.name} runs on one device at a time; it was given "
                + "; ".join(s.device.describe() for s in supports))
        return first

    @classmethod
    def compiled_model_compatibility(cls, info: str, devices: Sequence[OrtHardwareDevice]
                                     ) -> int:
        """An OrtCompiledModelCompatibility for a compiled model's compatibility string on
        these devices. Default: EP_NOT_APPLICABLE (0: the provider writes no compiled
        blobs)."""
        return 0

    # -- hooks and statistics ------------------------------------------------------------
    def on_run_start(self, run_options: Any) -> None:
        """Called before every run of a session in which this provider has nodes."""

    def on_run_end(self, run_options: Any) -> None:
        """Called after every run (also a failed one) of such a session."""

    def allocation_stats(self) -> dict[str, int]:
        """Device copies and bytes moved by this provider, runs seen, and for a
        compile-based provider the groups it could not compile (at some input shapes, or at
        all), which ran on the host there (``host_fallback_groups``;
        ``host_fallback_shapes``: group and input-shape combinations, a group refused at
        every shape counting once)."""
        out = {"runs": self.runs}
        t = self._transfer
        if t is not None:
            out.update(t.stats())
        if self.compile_per_shape or getattr(self, "host_fallbacks", None):
            fb = getattr(self, "host_fallbacks", [])
            out["host_fallback_shapes"] = len(fb)
            out["host_fallback_groups"] = len({f.group for f in fb})
        return out

    def get_provider_options(self) -> dict[str, str]:
        """Options as onnxruntime reports them: every value a string."""
        return {k: _opt_str(v) for k, v in self.provider_options.items()}

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.provider_options!r})"


def _unsupported_type(node: Any, dtypes: frozenset[Any]) -> str:
    from onnxrt.ir.dtypes import elem_type_name, np_dtype

    # ``dtypes`` speaks of the inputs (an op such as IsInf outputs another type)
    for vi in node.input_info:
        if vi.elem_type:
            try:
                dt = np_dtype(vi.elem_type)
            except Exception:
                return elem_type_name(vi.elem_type)
            if dt not in dtypes:
                return elem_type_name(vi.elem_type)
    return ""


def _truthy(v: Any) -> bool:
    if isinstance(v, str):
        return v.strip().lower() in ("1", "true", "yes", "on")
    return bool(v)


def _opt_str(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)
