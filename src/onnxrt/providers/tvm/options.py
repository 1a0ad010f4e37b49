"""The TVM provider's options: onnxruntime's TVM provider names, where they make sense for
Relax on a CPU; an option this provider cannot act on is refused with the reason."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from onnxrt.errors import InvalidArgument

__all__ = ["DEFAULTS", "Settings", "parse_options"]

DEFAULTS: dict[str, Any] = {
    "target": "llvm",            # llvm: this CPU ({"kind": "llvm", "mcpu": <host cpu>})
    "target_host": "",
    "opt_level": 3,
    "executor": "vm",
    "tuning_type": "MetaSchedule",
    "tuning_file_path": "",
    "so_folder": "",             # where compiled modules are kept (default ~/.cache/onnxrt/tvm)
}


@dataclass(frozen=True)
class Settings:
    target: dict[str, Any]       # TVM target config, mcpu filled in
    opt_level: int
    tuning_dir: str              # a MetaSchedule database folder, or ""
    cache_dir: str

    def target_key(self) -> str:
        return json.dumps(self.target, sort_keys=True)


def _target(text: str, host_cpu: str) -> dict[str, Any]:
    """``llvm``, ``llvm -mcpu=znver3 -mattr=+avx2`` or a JSON target config, as a dict with
    the CPU named (TVM would otherwise compile for a generic x86-64)."""
    text = text.strip()
    if text.startswith("{"):
        try:
            cfg = json.loads(text)
        except ValueError as e:
            raise InvalidArgument(f"TVMExecutionProvider: target {text!r} is not valid JSON "
                                  f"({e})") from None
    else:
        parts = text.split()
        if not parts:
            raise InvalidArgument("TVMExecutionProvider: target is empty")
        cfg = {"kind": parts[0]}
        for p in parts[1:]:
            if not p.startswith("-") or "=" not in p:
                raise InvalidArgument(f"TVMExecutionProvider: target option {p!r} is not "
                                      f"-key=value")
            k, v = p.lstrip("-").split("=", 1)
            cfg[k] = v.split(",") if k == "mattr" else v
    if cfg.get("kind") != "llvm":
        raise InvalidArgument(f"TVMExecutionProvider: target kind {cfg.get('kind')!r} is not "
                              f"supported: this provider compiles for the host CPU ('llvm')")
    if cfg.get("mcpu") in (None, "", "native"):
        cfg["mcpu"] = host_cpu
    return cfg


def parse_options(opts: dict[str, Any], host_cpu: str) -> Settings:
    target = _target(str(opts["target"]), host_cpu)
    th = str(opts["target_host"]).strip()
    if th and th != str(opts["target"]).strip() and th != "llvm":
        raise InvalidArgument(f"TVMExecutionProvider: target_host {th!r}: on the CPU the "
                              f"target is its own host; leave target_host empty")
    try:
        level = int(opts["opt_level"])
    except (TypeError, ValueError):
        level = -1
    if not 0 <= level <= 3:
        raise InvalidArgument(f"TVMExecutionProvider: opt_level {opts['opt_level']!r} must be "
                              f"0, 1, 2 or 3")
    if str(opts["executor"]) != "vm":
        raise InvalidArgument(f"TVMExecutionProvider: executor {opts['executor']!r} is not "
                              f"available: TVM's Relax compiles for its virtual machine ('vm'); "
                              f"the graph executor belonged to Relay, which TVM removed")
    if str(opts["tuning_type"]) != "MetaSchedule":
        raise InvalidArgument(f"TVMExecutionProvider: tuning_type {opts['tuning_type']!r} is "
                              f"not available: Relax applies MetaSchedule databases only "
                              f"(AutoTVM and Ansor logs belonged to Relay)")
    tuning = str(opts["tuning_file_path"])
    if tuning:
        need = ("database_workload.json", "database_tuning_record.json")
        missing = [n for n in need if not os.path.isfile(os.path.join(tuning, n))]
        if missing:
            raise InvalidArgument(f"TVMExecutionProvider: tuning_file_path {tuning!r} must be a "
                                  f"MetaSchedule database folder; it lacks "
                                  f"{', '.join(missing)}")
        tuning = os.path.abspath(tuning)
    cache = str(opts["so_folder"]) or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "onnxrt", "tvm")
    return Settings(target, level, tuning, cache)
