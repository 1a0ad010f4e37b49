"""The execution provider base class."""

from __future__ import annotations

from typing import Any, Callable, ClassVar

from onnxrt.errors import InvalidArgument
from onnxrt.framework.device import CPU_DEVICE, Device
from onnxrt.framework.kernel import KernelRegistry

__all__ = ["ExecutionProvider"]


class ExecutionProvider:
    """Base class of every execution provider.

    Kernel-based providers set ``kernels`` (a KernelRegistry): by default they claim every
    node for which a kernel exists. Compile-based providers override ``get_capability`` and
    ``compile``. ``options`` declares the accepted options and their defaults.
    """

    name: ClassVar[str] = ""
    kernels: ClassVar[KernelRegistry | None] = None
    device: Device = CPU_DEVICE
    options: ClassVar[dict[str, Any]] = {}

    def __init__(self, **options: Any) -> None:
        unknown = sorted(set(options) - set(self.options))
        if unknown:
            valid = ", ".join(sorted(self.options)) or "(none)"
            raise InvalidArgument(
                f"{self.name}: unknown provider option(s) {', '.join(unknown)}; "
                f"valid options: {valid}")
        merged = dict(self.options)
        merged.update(options)
        self.provider_options: dict[str, Any] = merged

    @classmethod
    def is_available(cls) -> bool:
        return True

    def get_provider_options(self) -> dict[str, str]:
        """Options as onnxruntime reports them: every value a string."""
        return {k: _opt_str(v) for k, v in self.provider_options.items()}

    def data_transfer(self) -> Any | None:
        return None

    def compile(self, fused: Any) -> Callable[..., Any]:
        raise NotImplementedError(f"{self.name} is not a compile-based provider")

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.provider_options!r})"


def _opt_str(v: Any) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    return str(v)
