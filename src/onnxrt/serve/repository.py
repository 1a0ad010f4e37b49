"""The models a server serves: one .onnx file (or a zoo name), or a repository folder in
Triton's layout, ``REPO/NAME/VERSION/model.onnx`` with integer versions."""

from __future__ import annotations

import os
from typing import Any, Mapping

from onnxrt.serve.errors import not_found
from onnxrt.serve.model import ServedModel, SessionConfig

__all__ = ["ModelRepository", "MODEL_FILE"]

MODEL_FILE = "model.onnx"


class ModelRepository:
    """Model name -> version -> ServedModel. A request without a version gets the highest."""

    def __init__(self, models: Mapping[str, Mapping[str, ServedModel]]) -> None:
        if not models:
            raise ValueError("no models to serve")
        self._models = {n: dict(sorted(v.items(), key=lambda kv: int(kv[0])))
                        for n, v in sorted(models.items())}

    @classmethod
    def from_path(cls, path: str, config: SessionConfig | None = None) -> "ModelRepository":
        """A model file, a zoo model's name, or a repository folder."""
        config = config or SessionConfig()
        if os.path.isdir(path):
            return cls(_scan(path, config))
        if not os.path.exists(path):
            from onnxrt.zoo import resolve_model

            resolved = resolve_model(path)   # FileNotFoundError naming the zoo models
            return cls({path: {"1": ServedModel(path, "1", resolved, config)}})
        name = os.path.splitext(os.path.basename(path))[0]
        return cls({name: {"1": ServedModel(name, "1", path, config)}})

    @classmethod
    def from_sources(cls, sources: Mapping[str, Any], config: SessionConfig | None = None
                     ) -> "ModelRepository":
        """Models given as ``{name: path or bytes}`` (version 1) or
        ``{name: {version: path or bytes}}``."""
        config = config or SessionConfig()
        models: dict[str, dict[str, ServedModel]] = {}
        for name, src in sources.items():
            versions = src if isinstance(src, Mapping) else {"1": src}
            models[name] = {}
            for v, s in versions.items():
                _check_version(str(v), f"model {name!r}")
                models[name][str(v)] = ServedModel(name, str(v), s, config)
        return cls(models)

    def names(self) -> list[str]:
        return list(self._models)

    def versions(self, name: str) -> list[str]:
        return list(self._models[name])

    def all(self) -> list[ServedModel]:
        return [m for versions in self._models.values() for m in versions.values()]

    def get(self, name: str, version: str | None = None) -> ServedModel:
        versions = self._models.get(name)
        if versions is None:
            raise not_found(f"unknown model '{name}' (models: {', '.join(self._models)})")
        if not version:
            return versions[next(reversed(versions))]
        if version not in versions:
            raise not_found(f"model '{name}' has no version {version!r} (versions: "
                            f"{', '.join(versions)})")
        return versions[version]

    def load_all(self) -> None:
        for m in self.all():
            m.load()

    @property
    def ready(self) -> bool:
        return all(m.ready for m in self.all())

    def index(self) -> list[dict[str, str]]:
        """Triton's repository index: every model version, its state and why."""
        return [{"name": m.name, "version": m.version, "state": m.state,
                 "reason": m.reason} for m in self.all()]


def _check_version(v: str, what: str) -> None:
    if not (v.isdigit() and int(v) > 0):
        raise ValueError(f"{what}: version {v!r} must be a positive integer")


def _scan(root: str, config: SessionConfig) -> dict[str, dict[str, ServedModel]]:
    models: dict[str, dict[str, ServedModel]] = {}
    problems: list[str] = []
    for name in sorted(os.listdir(root)):
        mdir = os.path.join(root, name)
        if name.startswith(".") or not os.path.isdir(mdir):
            continue
        versions = {}
        for v in os.listdir(mdir):
            f = os.path.join(mdir, v, MODEL_FILE)
            if v.isdigit() and int(v) > 0 and os.path.isfile(f):
                versions[str(int(v))] = ServedModel(name, str(int(v)), f, config)
        if versions:
            models[name] = versions
        else:
            problems.append(f"{mdir}: no version folder holding {MODEL_FILE} (expected "
                            f"{os.path.join(mdir, '1', MODEL_FILE)})")
    if problems:
        raise ValueError("model repository " + root + ": " + "; ".join(problems))
    if not models:
        raise ValueError(f"model repository {root}: no models (expected "
                         f"{os.path.join(root, 'NAME', '1', MODEL_FILE)})")
    return models
