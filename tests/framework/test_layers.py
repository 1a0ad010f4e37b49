"""The import layers of docs/architecture.md, checked on every module under src/onnxrt:
a module imports its own layer and the layers below it, never above (function-level
imports included: a lazy import is still a dependency)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import onnxrt

ROOT = Path(onnxrt.__file__).parent
BOTTOM = {"errors", "ir", "framework", "validate"}

# what each layer may import besides its own package (docs/architecture.md, "Layers");
# None: the top layer, anything
ALLOWED: dict[str, set[str] | None] = {
    "errors": BOTTOM, "ir": BOTTOM, "framework": BOTTOM, "validate": BOTTOM,
    "providers": BOTTOM,
    "passes": {"ir", "framework", "validate", "errors"},
    "partition": {"ir", "framework", "errors"},
    "plan": {"ir", "framework", "validate", "errors"},
    "execute": {"plan", "framework", "ir", "errors"},
}

# imports across layers that stay, each with its reason: (module, imported module) -> why
EXCEPTIONS: dict[tuple[str, str], str] = {
    ("onnxrt/providers/cpu/nn/warm.py", "onnxrt"):
        "a program run in a child process (python -m, by framework/warmup.py), never "
        "imported: it compiles the kernels by running whole sessions",
}


def _layer(parts: tuple[str, ...]) -> str:
    """The layer of a module named by its parts below ``onnxrt``: its first package (a
    module of the top package: the top layer)."""
    return parts[0] if parts and parts[0] in ALLOWED else "top"


def _module_parts(path: Path) -> tuple[str, ...]:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts
    return parts[:-1] if parts[-1] == "__init__" else parts


def _imports(path: Path) -> list[tuple[int, tuple[str, ...]]]:
    """(line, the imported onnxrt module's parts below ``onnxrt``) of every import."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    here = _module_parts(path)
    package = here if path.name == "__init__.py" else here[:-1]
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                if a.name.split(".")[0] == "onnxrt":
                    out.append((node.lineno, tuple(a.name.split(".")[1:])))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[:len(package) - (node.level - 1)] if node.level > 1 \
                    else package
                mod = base + tuple(node.module.split(".") if node.module else ())
            elif node.module and node.module.split(".")[0] == "onnxrt":
                mod = tuple(node.module.split(".")[1:])
            else:
                continue
            for a in node.names:
                # ``from onnxrt.x import y``: y a submodule of x, or a name in x
                sub = mod + (a.name,)
                is_mod = (ROOT.joinpath(*sub).with_suffix(".py").exists()
                          or ROOT.joinpath(*sub, "__init__.py").exists())
                out.append((node.lineno, sub if is_mod else mod))
    return out


def _found() -> dict[tuple[str, str], list[str]]:
    """Every import across layers: (module, imported module) -> the lines saying so."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        here = _module_parts(path)
        layer = _layer(here)
        allowed = ALLOWED.get(layer)
        if allowed is None:
            continue
        for line, target in _imports(path):
            other = _layer(target)
            if other == layer or other in allowed:
                continue
            mod = ".".join(("onnxrt",) + target)
            key = (str(path.relative_to(ROOT.parent)), mod)
            found.setdefault(key, []).append(f"{key[0]}:{line} ({layer}) imports {mod} "
                                             f"({other})")
    return found


def violations() -> list[str]:
    return [line for key, lines in _found().items() if key not in EXCEPTIONS
            for line in dict.fromkeys(lines)]


def test_no_module_imports_across_a_forbidden_layer():
    bad = violations()
    assert not bad, "imports across layers (docs/architecture.md):\n" + "\n".join(bad)


def test_each_exception_is_still_needed():
    """An exception whose import is gone is dropped from the list, not kept as a licence."""
    stale = set(EXCEPTIONS) - set(_found())
    assert not stale, stale


@pytest.mark.parametrize("source, layer, target", [
    ("from onnxrt.providers.torch.convert import x\n", ("values",), "providers"),
    ("from onnxrt.execute import intra\n", ("providers", "cpu", "nn", "m"), "execute"),
    ("def f():\n    from onnxrt.partition import p\n", ("framework", "provider"),
     "partition"),
    ("from ..execute import executor\n", ("plan", "planner"), "execute"),
])
def test_the_check_sees_a_forbidden_import(tmp_path, monkeypatch, source, layer, target):
    """The walk finds direct, lazy and relative imports (a check that finds nothing on a
    planted violation would pass on anything)."""
    root = tmp_path / "onnxrt"
    for pkg in ("providers/cpu/nn", "framework", "plan", "execute", "partition"):
        (root / pkg).mkdir(parents=True, exist_ok=True)
        (root / pkg / "__init__.py").write_text("")
    (root / "__init__.py").write_text("")
    f = root.joinpath(*layer).with_suffix(".py")
    f.write_text(source)
    monkeypatch.setitem(globals(), "ROOT", root)
    found = violations()
    expect_bad = _layer(layer) != "top"
    assert bool(found) == expect_bad, found
    if expect_bad:
        assert f"({target})" in found[0], found
