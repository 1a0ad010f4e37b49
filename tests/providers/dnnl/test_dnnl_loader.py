"""The loader's paths for libraries other than the test extra's OpenMP build, without them:
the dynamic loader and the library's C functions are replaced by fakes that answer as the
oneAPI SYCL build (``onednn``, 2.2 GB, not installed in CI) and a future oneDNN 4 do."""

from __future__ import annotations

import ctypes
import os
from typing import Any

import pytest

from onnxrt.providers.dnnl import library
from onnxrt.providers.dnnl.provider import DnnlExecutionProvider

NOT_FOUND = "{}: cannot open shared object file: No such file or directory"
SYCL, OPENMP = 512, 2


class FakeFn:
    def __init__(self, result: Any) -> None:
        self.result = result

    def __call__(self, *args: Any) -> Any:
        return self.result() if callable(self.result) else self.result


class FakeLib:
    """Answers as a libdnnl whose version, runtime and CPU device count are given."""

    def __init__(self, major: int, runtime: int, cpu_devices: int) -> None:
        self.version = library._Version(major, 13, 2, b"", runtime, runtime)
        create_status = 0 if cpu_devices else 2      # invalid_arguments, as 3.13 answers
        self.fns = {"dnnl_version": FakeFn(lambda: ctypes.pointer(self.version)),
                    "dnnl_engine_get_count": FakeFn(cpu_devices),
                    "dnnl_engine_create": FakeFn(create_status)}

    def __getattr__(self, name: str) -> FakeFn:
        return self.__dict__["fns"].setdefault(name, FakeFn(0))


@pytest.fixture
def fake_loader(monkeypatch, tmp_path):
    """A lib/ folder holding libdnnl.so.3 (and what a test adds); opening a file there
    gives ``state["lib"]`` unless one of ``state["needs"]`` is not open yet."""
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    (lib_dir / "libdnnl.so.3").write_bytes(b"\0" * 64)
    state: dict[str, Any] = {"opened": [], "needs": [], "lib": FakeLib(3, SYCL, 1)}

    def dlopen(path: str) -> Any:
        name = os.path.basename(path)
        if name.startswith("libdnnl"):
            for dep in state["needs"]:
                if dep not in state["opened"]:
                    raise OSError(NOT_FOUND.format(dep))
        state["opened"].append(name)
        return state["lib"] if name.startswith("libdnnl") else object()

    monkeypatch.setattr(library, "_dlopen", dlopen, raising=False)
    monkeypatch.setattr(library.ctypes, "CDLL", dlopen)
    monkeypatch.setattr(library, "_candidates", lambda: [str(lib_dir / "libdnnl.so.3")])
    monkeypatch.setattr(library, "_STATE", {})
    monkeypatch.setenv("OCL_ICD_FILENAMES", "")      # restored after the test
    state["dir"] = lib_dir
    return state


def test_dependencies_beside_the_library_are_opened_first(fake_loader):
    """The SYCL wheel's libdnnl needs libtbb and libsycl from its own folder, which is not
    on the loader's path (no RUNPATH): they are opened from there, then libdnnl."""
    for dep in ("libtbb.so.12", "libsycl.so.9"):
        (fake_loader["dir"] / dep).write_bytes(b"")
    (fake_loader["dir"] / "libintelocl.so").write_bytes(b"")
    fake_loader["needs"] = ["libtbb.so.12", "libsycl.so.9"]
    assert library.import_error() == ""
    assert fake_loader["opened"] == ["libtbb.so.12", "libsycl.so.9", "libdnnl.so.3"]
    assert library.load().cpu_runtime == "SYCL"
    assert os.environ["OCL_ICD_FILENAMES"] == str(fake_loader["dir"] / "libintelocl.so")


def test_a_dependency_missing_everywhere_is_named(fake_loader):
    fake_loader["needs"] = ["libsycl.so.9"]
    assert "libsycl.so.9: cannot open shared object file" in library.import_error()


def test_sycl_build_without_the_opencl_cpu_runtime_says_so(fake_loader):
    fake_loader["lib"] = FakeLib(3, SYCL, cpu_devices=0)
    why = DnnlExecutionProvider.unavailable_reason()
    assert "SYCL build" in why and "no SYCL CPU device" in why, why
    assert "OCL_ICD_FILENAMES is unset and there is no libintelocl.so" in why, why
    assert "onednn-cpu-gomp" in why


def test_sycl_build_whose_opencl_runtime_offers_no_cpu_says_so(fake_loader):
    (fake_loader["dir"] / "libintelocl.so").write_bytes(b"")
    fake_loader["lib"] = FakeLib(3, SYCL, cpu_devices=0)
    why = DnnlExecutionProvider.unavailable_reason()
    ocl = str(fake_loader["dir"] / "libintelocl.so")
    assert f"the OpenCL runtime OCL_ICD_FILENAMES names ({ocl}) offers no CPU device" in why


def test_sycl_build_with_a_wrong_icd_path_says_so(fake_loader, monkeypatch):
    monkeypatch.setenv("OCL_ICD_FILENAMES", "/nowhere/libintelocl.so")
    fake_loader["lib"] = FakeLib(3, SYCL, cpu_devices=0)
    why = DnnlExecutionProvider.unavailable_reason()
    assert "OCL_ICD_FILENAMES names /nowhere/libintelocl.so, which does not exist" in why


def test_onednn_4_is_refused(fake_loader):
    """The enum values and argument lists called here are oneDNN 3.x's."""
    fake_loader["lib"] = FakeLib(4, OPENMP, 1)
    assert "is oneDNN 4.13.2; onnxrt needs oneDNN 3.x" in library.import_error()


def test_copies_of_one_library_are_tried_once(monkeypatch, tmp_path):
    """Wheels hold copies, not symlinks: libdnnl.so.3 and libdnnl.so.3.2 are one build;
    another build's versioned file (both packages in one environment) is still tried."""
    lib_dir = tmp_path / "lib"
    lib_dir.mkdir()
    for name in ("libdnnl.so.3", "libdnnl.so.3.2"):
        (lib_dir / name).write_bytes(b"\0" * 64)
    (lib_dir / "libdnnl.so.3.13").write_bytes(b"\0" * 96)
    monkeypatch.setattr(library.sys, "prefix", str(tmp_path))
    monkeypatch.setattr(library.sys, "base_prefix", str(tmp_path))
    monkeypatch.setattr(library.sys, "executable", str(tmp_path / "bin" / "python"))
    monkeypatch.setattr(library.ctypes.util, "find_library", lambda name: None)
    assert library._candidates() == [str(lib_dir / "libdnnl.so.3"),
                                      str(lib_dir / "libdnnl.so.3.13")]
