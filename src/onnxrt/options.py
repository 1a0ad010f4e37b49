"""SessionOptions, RunOptions and the enums, with onnxruntime's names and defaults.

Every attribute onnxruntime's SessionOptions has exists here, and each is acted on, or
accepted where onnxruntime's own CPU build accepts it without effect (``LENIENT`` says
why for each of those).
"""

from __future__ import annotations

import enum
from typing import Any

from onnxrt.framework.allocators import OrtAllocatorType, OrtMemType

__all__ = ["GraphOptimizationLevel", "ExecutionMode", "ExecutionOrder", "SessionOptions",
           "RunOptions", "OrtAllocatorType", "OrtMemType", "check_session_options"]


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class SessionOptions:
    """Options of one session (onnxruntime.SessionOptions)."""

    # accepted without effect on results, as onnxruntime's CPU build accepts them
    LENIENT = {
        "enable_mem_pattern": "a hint to onnxruntime's arena planner, which onnxruntime "
                              "itself drops where shapes are dynamic; values here are NumPy "
                              "arrays (enable_mem_reuse and enable_cpu_mem_arena act)",
        "log_verbosity_level": "VLOG levels, compiled out of onnxruntime's release builds; "
                               "log_severity_level acts",
        "use_deterministic_compute": "onnxrt's CPU kernels give the same results run after "
                                     "run in every mode, as onnxruntime's CPU kernels do",
    }

    def __init__(self) -> None:
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.enable_profiling = False
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.inter_op_num_threads = 0
        self.intra_op_num_threads = 0
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.optimized_model_filepath = ""
        self.profile_file_prefix = "onnxruntime_profile_"
        self.use_deterministic_compute = False
        self.use_per_session_threads = True
        self._config: dict[str, str] = {}
        self._initializers: dict[str, Any] = {}
        self._free_dims_by_name: dict[str, int] = {}
        self._free_dims_by_denotation: dict[str, int] = {}
        # add_provider's (name, options) and add_provider_for_devices' entries, in order
        self._providers: list[Any] = []
        self._memory_files: dict[str, bytes] = {}
        self._load_cancelled = False
        self._selection_policy: Any = None
        self._selection_delegate: Any = None
        self._ep_context_read: Any = None

    def add_session_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key: str) -> str:
        if key not in self._config:
            from onnxrt.errors import ConfigKeyError

            raise ConfigKeyError(f"SessionOptions does not have configuration with key: {key}")
        return self._config[key]

    def add_initializer(self, name: str, value: Any) -> None:
        """Replace an initializer of the model by ``value`` (an OrtValue or a numpy array)."""
        self._initializers[name] = value

    def add_external_initializers(self, names: list[str], values: list[Any]) -> None:
        for n, v in zip(names, values):
            self._initializers[n] = v

    def add_external_initializers_from_files_in_memory(self, names: list[str],
                                                       buffers: list[Any],
                                                       lengths: list[int]) -> None:
        """External-data files given from memory: the loader reads them instead of disk."""
        for n, b, ln in zip(names, buffers, lengths):
            self._memory_files[str(n)] = bytes(memoryview(b).cast("B")[: int(ln)])

    def set_load_cancellation_flag(self, value: bool) -> None:
        self._load_cancelled = bool(value)

    def set_provider_selection_policy(self, policy: Any) -> None:
        """Let sessions pick their providers by an OrtExecutionProviderDevicePolicy (used when
        no provider was added; replaces a delegate set before). README "Choosing devices"."""
        from onnxrt.framework.selection import OrtExecutionProviderDevicePolicy

        if not isinstance(policy, OrtExecutionProviderDevicePolicy):
            raise TypeError(f"set_provider_selection_policy takes an "
                            f"OrtExecutionProviderDevicePolicy, not {policy!r}")
        self._selection_policy = policy
        self._selection_delegate = None

    def set_provider_selection_policy_delegate(self, delegate: Any) -> None:
        """Let ``delegate(ep_devices, model_metadata, runtime_metadata, max_selections)``
        pick the EP devices (a list of OrtEpDevice) when no provider was added; an exception
        it raises fails session creation with Fail."""
        if not callable(delegate):
            raise TypeError(f"set_provider_selection_policy_delegate takes a callable, not "
                            f"{type(delegate).__name__}")
        self._selection_delegate = delegate

    def add_provider_for_devices(self, ep_devices: Any, options: dict[str, str]) -> None:
        """Add the provider of these OrtEpDevices (all of one provider), aimed at them, with
        ``options`` over the devices' own ``ep_options``."""
        from onnxrt.framework.selection import devices_entry

        self._providers.append(devices_entry(ep_devices, options))

    def set_ep_context_data_read_func(self, read_func: Any, max_data_size: int) -> None:
        self._ep_context_read = (read_func, int(max_data_size))

    def clear_ep_context_data_read_func(self) -> None:
        self._ep_context_read = None

    def add_free_dimension_override_by_name(self, name: str, value: int) -> None:
        self._free_dims_by_name[name] = int(value)

    def add_free_dimension_override_by_denotation(self, name: str, value: int) -> None:
        self._free_dims_by_denotation[name] = int(value)

    def add_provider(self, name: str, options: dict[str, str] | None = None) -> None:
        self._providers.append((name, dict(options or {})))

    def has_providers(self) -> bool:
        """Whether providers, EP devices, a selection policy or a delegate were set."""
        return bool(self._providers) or self._selection_policy is not None or \
            self._selection_delegate is not None

    def register_custom_ops_library(self, path: str) -> None:
        from onnxrt.errors import NotImplemented as NI

        raise NI("custom op libraries are native code; onnxrt takes Python execution "
                 "providers instead (see docs/writing-an-execution-provider.md)")

    def config_entries(self) -> dict[str, str]:
        return dict(self._config)

    def __repr__(self) -> str:
        return f"SessionOptions(graph_optimization_level={self.graph_optimization_level!r})"


class RunOptions:
    """Options of one run (onnxruntime.RunOptions). Setting ``terminate`` from another thread
    cancels a run in progress: it raises RunCanceled at the next node."""

    def __init__(self) -> None:
        self.log_severity_level = -1
        self.log_verbosity_level = 0
        self.logid = ""
        self.only_execute_path_to_fetches = False
        self.terminate = False
        self._config: dict[str, str] = {}
        self._adapters: list[Any] = []

    def add_active_adapter(self, adapter: Any) -> None:
        """Apply a loaded LoraAdapter to runs with these options: its parameters are fed in
        place of the model's inputs or overridable initializers of the same names."""
        from onnxrt.errors import InvalidArgument
        from onnxrt.lora import LoraAdapter

        if not isinstance(adapter, LoraAdapter):
            raise InvalidArgument(f"add_active_adapter takes a LoraAdapter, not "
                                  f"{type(adapter).__name__}")
        adapter.parameters()  # refuses an adapter that was never loaded
        self._adapters.append(adapter)

    def add_run_config_entry(self, key: str, value: str) -> None:
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key: str) -> str:
        if key not in self._config:
            from onnxrt.errors import ConfigKeyError

            raise ConfigKeyError(f"RunOptions does not have configuration with key: {key}")
        return self._config[key]


def check_session_options(so: SessionOptions) -> None:
    """Refuse what onnxruntime's inference build refuses at session creation.

    ``execution_order``: DEFAULT and PRIORITY_BASED both run the nodes in the model's
    topological order here (onnxruntime's priorities only reorder nodes some of its own
    transformers mark; results are the same); MEMORY_EFFICIENT exists in training builds
    only, and onnxruntime's inference build fails, as this does."""
    from onnxrt.errors import Fail

    if int(so.execution_order) == ExecutionOrder.MEMORY_EFFICIENT:
        raise Fail("Memory efficient topological order is not enabled for non-training "
                   "build (SessionOptions.execution_order = MEMORY_EFFICIENT)")
