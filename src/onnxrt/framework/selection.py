"""Choosing providers by device: ``add_provider_for_devices`` entries, the selection
policies and the selection delegate, as onnxruntime (1.22+) defines them.

A policy works on the EP devices (``get_ep_devices()``) in onnxruntime's preference order:
NPUs, then GPUs, then CPUs; within a type a discrete GPU first, then a device whose vendor
is the one its provider is made for (``ep_vendor_id``, or the same vendor name), then any
provider before onnxrt's own CPU provider, then by provider name. Then:

- ``PREFER_CPU``: the first CPU device, plus the CPU provider as the last fallback;
- ``DEFAULT``: ``PREFER_CPU`` over the CPU provider and the providers of libraries the
  application registered (``register_execution_provider_library``), as onnxruntime's default
  policy works over its CPU provider and the plugin libraries registered with it. Installed
  providers (onnxrt's OpenVINO, which runs on the CPU too; entry-point packages) are not
  registered by the application, so installing one does not change what ``DEFAULT`` runs on;
- ``PREFER_GPU``, ``MAX_PERFORMANCE``: the first GPU device (if any), then ``PREFER_CPU``;
- ``PREFER_NPU``, ``MAX_EFFICIENCY``, ``MIN_OVERALL_POWER``: the first device if it is an
  NPU, then ``PREFER_CPU`` (onnxruntime has no power model: these pick as PREFER_NPU).

The chosen devices are folded per provider (a provider given two devices runs on both where
it can, ``options_for_devices``), each provider made with the options of its devices, and
each object remembers why it was chosen (``selected_by``) for the placement report.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from onnxrt.errors import Fail, InvalidArgument
from onnxrt.framework.devices import OrtHardwareDeviceType
from onnxrt.framework.ep_devices import OrtEpDevice, get_ep_devices

__all__ = ["OrtExecutionProviderDevicePolicy", "DevicesEntry", "devices_entry", "select",
           "order_devices", "selection_note", "model_metadata", "MAX_SELECTIONS"]

# onnxruntime's limit on what a delegate may return
MAX_SELECTIONS = 8


class OrtExecutionProviderDevicePolicy(enum.IntEnum):
    DEFAULT = 0
    PREFER_CPU = 1
    PREFER_NPU = 2
    PREFER_GPU = 3
    MAX_PERFORMANCE = 4
    MAX_EFFICIENCY = 5
    MIN_OVERALL_POWER = 6


@dataclass(frozen=True)
class DevicesEntry:
    """One provider to create on some of its EP devices: what ``add_provider_for_devices``
    stores, and what a policy or a delegate chose."""

    devices: tuple[OrtEpDevice, ...]
    options: Mapping[str, str]
    reason: str
    explicit: bool

    @property
    def ep_name(self) -> str:
        return self.devices[0].ep_name

    @property
    def provider_class(self) -> Any:
        return self.devices[0].provider_class

    def provider_options(self) -> dict[str, str]:
        """The devices' options, then the user's on top (onnxruntime keeps the user's)."""
        for d in self.devices:
            d.check_usable()
        cls = self.provider_class
        merged = dict(cls.options_for_devices([d.support for d in self.devices]))
        merged.update(self.options)
        return merged


def devices_entry(ep_devices: Any, options: Any) -> DevicesEntry:
    """Check ``add_provider_for_devices``' arguments as onnxruntime does."""
    if isinstance(ep_devices, OrtEpDevice) or not isinstance(ep_devices, Sequence):
        raise TypeError(f"add_provider_for_devices: ep_devices must be a list of OrtEpDevice, "
                        f"not {type(ep_devices).__name__}")
    devs = tuple(ep_devices)
    bad = [d for d in devs if not isinstance(d, OrtEpDevice)]
    if bad:
        raise TypeError(f"add_provider_for_devices: ep_devices must hold OrtEpDevice objects "
                        f"(from get_ep_devices()), not {type(bad[0]).__name__}")
    if not devs:
        raise InvalidArgument("Must provide one or more OrtEpDevice instances.")
    names = sorted({d.ep_name for d in devs})
    if len(names) > 1:
        raise InvalidArgument(f"add_provider_for_devices: all OrtEpDevice instances must "
                              f"refer to the same execution provider; got {', '.join(names)}")
    if not isinstance(options, Mapping):
        raise TypeError(f"add_provider_for_devices: options must be a dict of str to str, "
                        f"not {type(options).__name__}")
    bad_kv = [(k, v) for k, v in options.items()
              if not isinstance(k, str) or not isinstance(v, str)]
    if bad_kv:
        raise TypeError(f"add_provider_for_devices: options must map str to str; "
                        f"{bad_kv[0][0]!r}: {bad_kv[0][1]!r} does not")
    devs = tuple(dict.fromkeys(devs))  # the same device twice is one device
    return DevicesEntry(devs, dict(options), "added with add_provider_for_devices for "
                        + _where(devs), True)


def _where(devs: Sequence[OrtEpDevice]) -> str:
    return "; ".join(d.device.describe() for d in devs)


# -- onnxruntime's preference order ---------------------------------------------------------
_TYPE_RANK = {OrtHardwareDeviceType.NPU: 0, OrtHardwareDeviceType.GPU: 1,
              OrtHardwareDeviceType.CPU: 2}


def _is_default_cpu(d: OrtEpDevice) -> bool:
    from onnxrt.framework.registry import provider_class

    return d.ep_name == "CPUExecutionProvider" and d.provider_class is provider_class(
        "CPUExecutionProvider")


def _registered_or_cpu(d: OrtEpDevice) -> bool:
    """The CPU provider, or a provider of a library the application registered at run time
    (what onnxruntime's default policy chooses among)."""
    from onnxrt.framework.libraries import registered_classes

    return _is_default_cpu(d) or d.provider_class in registered_classes()


def _vendor_match(d: OrtEpDevice) -> bool:
    want = int(getattr(d.provider_class, "ep_vendor_id", 0) or 0)
    if want and d.device.vendor_id == want:
        return True
    return bool(d.device.vendor) and d.device.vendor == d.ep_vendor


def order_devices(devices: Sequence[OrtEpDevice]) -> list[OrtEpDevice]:
    """EP devices in onnxruntime's preference order (stable within ties)."""
    def key(d: OrtEpDevice) -> tuple[Any, ...]:
        discrete = d.device.type == OrtHardwareDeviceType.GPU and \
            d.device.metadata.get("Discrete") == "1"
        return (_TYPE_RANK[d.device.type], not discrete, not _vendor_match(d),
                _is_default_cpu(d), d.ep_name)

    return sorted(devices, key=key)


def _prefer_cpu(ordered: list[OrtEpDevice], picked: list[tuple[OrtEpDevice, str]]) -> None:
    first = next((d for d in ordered if d.device.type == OrtHardwareDeviceType.CPU), None)
    if first is None:
        raise Fail("No CPU based execution providers were found.")
    picked.append((first, "the first CPU device in preference order"))
    if not _is_default_cpu(first) and _is_default_cpu(ordered[-1]):
        picked.append((ordered[-1], "the CPU provider, the final fallback"))


def _by_policy(policy: OrtExecutionProviderDevicePolicy, ordered: list[OrtEpDevice]
               ) -> list[tuple[OrtEpDevice, str]]:
    P = OrtExecutionProviderDevicePolicy
    picked: list[tuple[OrtEpDevice, str]] = []
    if policy == P.DEFAULT:
        ordered = [d for d in ordered if _registered_or_cpu(d)]
    if policy in (P.PREFER_GPU, P.MAX_PERFORMANCE):
        gpu = next((d for d in ordered if d.device.type == OrtHardwareDeviceType.GPU), None)
        if gpu is not None:
            picked.append((gpu, "the first GPU device in preference order"))
    elif policy in (P.PREFER_NPU, P.MAX_EFFICIENCY, P.MIN_OVERALL_POWER):
        if ordered and ordered[0].device.type == OrtHardwareDeviceType.NPU:
            picked.append((ordered[0], "the first NPU device in preference order"))
    _prefer_cpu(ordered, picked)
    return picked


def model_metadata(model: Any) -> dict[str, str]:
    """The model's metadata as onnxruntime gives it to a selection delegate."""
    md = {"producer_name": model.producer_name, "producer_version": model.producer_version,
          "domain": model.domain,
          # onnxruntime reports INT64_MAX for a model that sets no version
          "model_version": str(int(model.model_version) if model.HasField("model_version")
                               else 2**63 - 1),
          "doc_string": model.doc_string, "graph_name": model.graph.name,
          "graph_description": model.graph.doc_string}
    md.update({p.key: p.value for p in model.metadata_props})
    return md


def _by_delegate(delegate: Any, ordered: list[OrtEpDevice], model: Any
                 ) -> list[tuple[OrtEpDevice, str]]:
    try:
        got = delegate(list(ordered), model_metadata(model), {}, MAX_SELECTIONS)
    except Exception as e:
        raise Fail(f"EP selection delegate failed: {type(e).__name__}: {e}") from e
    if isinstance(got, OrtEpDevice) or not isinstance(got, (list, tuple)):
        raise Fail(f"EP selection delegate failed: it returned {type(got).__name__}; "
                   f"expected a list of OrtEpDevice")
    bad = [g for g in got if not isinstance(g, OrtEpDevice)]
    if bad:
        raise Fail(f"EP selection delegate failed: it returned a {type(bad[0]).__name__} "
                   f"among the devices; expected OrtEpDevice objects")
    if not got:
        raise Fail("EP selection delegate did not select anything.")
    if len(got) > MAX_SELECTIONS:
        raise Fail(f"EP selection delegate failed: selected too many EP devices ({len(got)}). "
                   f"The limit is {MAX_SELECTIONS} EP devices.")
    return [(d, "") for d in got]


def select(policy: OrtExecutionProviderDevicePolicy | None, delegate: Any, model: Any
           ) -> list[DevicesEntry]:
    """The providers a session's selection policy or delegate (which wins) picks, one entry
    per provider in the order chosen."""
    ordered = order_devices(get_ep_devices())
    if delegate is not None:
        picked = _by_delegate(delegate, ordered, model)
        name = getattr(delegate, "__qualname__", None) or type(delegate).__name__
        how = f"the provider selection delegate {name}"
    else:
        policy = OrtExecutionProviderDevicePolicy(policy or 0)
        picked = _by_policy(policy, ordered)
        how = f"the provider selection policy {policy.name}"
    folded: dict[str, list[tuple[OrtEpDevice, str]]] = {}
    for d, why in picked:
        d.check_usable()
        group = folded.setdefault(d.ep_name, [])
        if all(d is not g for g, _ in group):
            group.append((d, why))
    return [DevicesEntry(tuple(d for d, _ in group), {}, f"chosen by {how} for " + "; ".join(
                d.device.describe() + (f" ({why})" if why else "") for d, why in group), False)
            for group in folded.values()]


def selection_note(eps: Sequence[Any]) -> str:
    """Lines for the placement report: why each provider chosen by device is there."""
    lines = [f"  {ep.name}: {ep.selected_by}" for ep in eps if getattr(ep, "selected_by", "")]
    return "providers chosen by device:\n" + "\n".join(lines) + "\n" if lines else ""
