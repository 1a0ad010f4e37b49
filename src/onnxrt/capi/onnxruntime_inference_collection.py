"""onnxruntime's ``onnxruntime.capi.onnxruntime_inference_collection``: the Python-level
classes (onnxrt's own) and ``check_and_normalize_provider_args``."""

from __future__ import annotations

import collections
import collections.abc
import warnings
from typing import Any, Sequence

from onnxrt import (AdapterFormat, InferenceSession, IOBinding, OrtDevice, OrtDeviceVendorId,
                    OrtValue, SparseTensor)

__all__ = ["AdapterFormat", "InferenceSession", "IOBinding", "OrtDevice", "OrtDeviceVendorId",
           "OrtValue", "SparseTensor", "Session", "check_and_normalize_provider_args",
           "get_ort_device_type"]

Session = InferenceSession


def get_ort_device_type(device_type: str) -> int:
    """onnxruntime's device type number of a device name."""
    return OrtDevice.make(device_type, 0).device_type()


def check_and_normalize_provider_args(providers: Sequence[Any] | None,
                                      provider_options: Sequence[dict[Any, Any]] | None,
                                      available_provider_names: Sequence[str],
                                      ) -> tuple[list[str], list[dict[str, str]]]:
    """Validate ``providers`` / ``provider_options`` as onnxruntime's InferenceSession takes
    them and return (names, options with string keys and values). A name that is not in
    ``available_provider_names`` and a repeated name give a UserWarning; a repeated name
    keeps its first options. Malformed arguments raise ValueError."""
    if providers is None:
        return [], []
    chosen: collections.OrderedDict[str, dict[str, str]] = collections.OrderedDict()

    def add(name: str, options: dict[Any, Any]) -> None:
        if name not in available_provider_names:
            warnings.warn(f"Specified provider '{name}' is not in available provider names. "
                          f"Available providers: '{', '.join(available_provider_names)}'",
                          stacklevel=3)
        if name in chosen:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.", stacklevel=3)
            return
        chosen[name] = {str(k): str(v) for k, v in options.items()}

    if not isinstance(providers, collections.abc.Sequence) or isinstance(providers, str):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if "
                             "both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if "
                             "'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        for name, opts in zip(providers, provider_options):
            add(name, opts)
    else:
        for p in providers:
            if isinstance(p, str):
                add(p, {})
            elif (isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str)
                  and isinstance(p[1], dict)):
                add(p[0], p[1])
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) "
                                 "tuples.")
    return list(chosen), list(chosen.values())
