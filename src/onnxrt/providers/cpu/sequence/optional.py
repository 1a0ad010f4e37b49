"""Optional values: an empty optional is None; a full one is its element itself."""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU


@CPU.kernel("Optional", since=15)
def optional(x: Any = None, *, type: Any = None) -> Any:  # noqa: A002 - the attribute's name
    if x is None and type is None:
        raise ValueError("Optional with no input needs the 'type' attribute")
    return x


@CPU.kernel("OptionalHasElement", since=15)
def optional_has_element(x: Any = None) -> np.ndarray:
    return np.array(x is not None)


@CPU.kernel("OptionalGetElement", since=15)
def optional_get_element(x: Any) -> Any:
    if x is None:
        raise ValueError("OptionalGetElement on an empty optional")
    return x
