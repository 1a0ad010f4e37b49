"""ModelCompiler (onnxruntime's compile API): build a session on the given providers and write
its graph as a compiled model, each compiled group an EPContext node."""

from __future__ import annotations

import copy
import enum
import os
from typing import Any, Callable

from onnxrt.compile.initializers import (OrtExternalInitializerInfo, by_callback,
                                         original_locations, to_external_file)
from onnxrt.compile.writer import CompiledModel, default_output_path, write_compiled
from onnxrt.errors import Fail, InvalidArgument
from onnxrt.options import GraphOptimizationLevel, SessionOptions

__all__ = ["ModelCompiler", "OrtCompileApiFlags", "OrtExternalInitializerInfo"]


class OrtCompileApiFlags(enum.IntFlag):
    NONE = 0
    ERROR_IF_NO_NODES_COMPILED = 1
    ERROR_IF_OUTPUT_FILE_EXISTS = 2


# session config entries that make no sense while compiling: the compiler writes the model
# itself, and compiling is what it is for
_NOT_WHILE_COMPILING = ("ep.context_enable", "session.disable_model_compile")


class ModelCompiler:
    """Compiles a model for the providers of ``sess_options`` (``add_provider``,
    ``add_provider_for_devices``, a selection policy): every group a compile-based provider
    claims is compiled once and written into the output model as an EPContext node, which a
    later session loads without compiling. With only the CPU provider the model is written
    without EPContext nodes, as the session runs it."""

    def __init__(self, sess_options: SessionOptions, input_model_path_or_bytes: Any,
                 embed_compiled_data_into_model: bool = False,
                 external_initializers_file_path: str | os.PathLike[str] | None = None,
                 external_initializers_size_threshold: int = 1024,
                 flags: int = OrtCompileApiFlags.NONE,
                 graph_optimization_level: GraphOptimizationLevel = (
                     GraphOptimizationLevel.ORT_DISABLE_ALL),
                 get_initializer_location_func: Callable[..., Any] | None = None) -> None:
        self._path: str | None = None
        self._bytes: bytes | None = None
        src = input_model_path_or_bytes
        if isinstance(src, (str, os.PathLike)):
            if not os.fspath(src):
                raise ValueError("Input model path is empty")
            self._path = os.fspath(src)
        elif isinstance(src, (bytes, bytearray)):
            if not src:
                raise ValueError("Input model bytes array is empty")
            self._bytes = bytes(src)
        else:
            raise TypeError(f"Unable to load from type '{type(src)}'")
        if external_initializers_file_path:
            if not isinstance(external_initializers_file_path, (str, os.PathLike)):
                raise TypeError(f"Output external initializer filepath is of unexpected type "
                                f"'{type(external_initializers_file_path)}'")
            ext = os.fspath(external_initializers_file_path)
        else:
            ext = ""
        if get_initializer_location_func is not None:
            if ext:
                raise ValueError("Cannot initialize ModelCompiler with both "
                                 "`external_initializers_file_path` and "
                                 "`get_initializer_location_func`")
            if not callable(get_initializer_location_func):
                raise TypeError("get_initializer_location_func must be callable")
        if not isinstance(sess_options, SessionOptions):
            raise TypeError(f"sess_options must be a SessionOptions, not "
                            f"{type(sess_options).__name__}")
        self._options = sess_options
        self._embed = bool(embed_compiled_data_into_model)
        self._ext = ext
        self._threshold = int(external_initializers_size_threshold)
        self._flags = OrtCompileApiFlags(int(flags))
        self._level = GraphOptimizationLevel(int(graph_optimization_level))
        self._init_func = get_initializer_location_func
        # set_ep_context_binary_information: (folder, file stem) of the blob files of a
        # model compiled to bytes or a stream
        self._binary_info: tuple[str, str] | None = None

    # -- compiling ---------------------------------------------------------------------
    def _compile(self, out_path: str | None) -> CompiledModel:
        from onnxrt.session import InferenceSession

        if self._path is not None and not os.path.isfile(self._path):
            raise InvalidArgument(f"Input model path does not exist: {self._path!r}")
        if not self._embed and out_path is None and self._binary_info is None:
            raise InvalidArgument("a compiled model kept in memory must embed its compiled "
                                  "data (embed_compiled_data_into_model=True), or say where "
                                  "its blob files go (set_ep_context_binary_information)")
        so = copy.copy(self._options)
        so._config = {k: v for k, v in self._options._config.items()
                      if k not in _NOT_WHILE_COMPILING}
        so.graph_optimization_level = self._level
        so.optimized_model_filepath = ""
        sess = InferenceSession(self._path if self._path is not None else self._bytes, so)
        if out_path:
            stem = os.path.splitext(os.path.basename(out_path))[0]
        elif self._binary_info is not None:
            stem = self._binary_info[1]
        else:
            stem = "model"
        out = write_compiled(sess._graph, embed=self._embed, model_stem=stem)
        if self._flags & OrtCompileApiFlags.ERROR_IF_NO_NODES_COMPILED and not out.contexts:
            raise Fail(f"Unable to compile any nodes: no provider of the session "
                       f"({', '.join(sess.get_providers())}) compiled a group into an "
                       f"EPContext node. Check that a compile-based provider was added")
        out_dir = os.path.dirname(os.path.abspath(out_path)) if out_path else None
        if self._ext:
            to_external_file(out.model, self._ext, self._threshold, out_dir)
        elif self._init_func is not None:
            by_callback(out.model, self._init_func, original_locations(self._path), out_dir)
        return out

    def compile_to_file(self, output_model_path: str | os.PathLike[str] | None = None
                        ) -> None:
        """Compile and write the model to ``output_model_path`` (default: the input's path
        with ``_ctx`` before ``.onnx``), its blob files beside it unless embedded."""
        if output_model_path:
            if not isinstance(output_model_path, (str, os.PathLike)):
                raise TypeError(f"Output model's filepath is of unexpected type "
                                f"'{type(output_model_path)}'")
            path = os.fspath(output_model_path)
        elif self._path is not None:
            path = default_output_path(self._path)
        else:
            raise InvalidArgument("the input model was given as bytes: compile_to_file needs "
                                  "an output path")
        if self._flags & OrtCompileApiFlags.ERROR_IF_OUTPUT_FILE_EXISTS and \
                os.path.exists(path):
            raise Fail(f"Output model path {path!r} exists already")
        folder = os.path.dirname(os.path.abspath(path))
        if not os.path.isdir(folder):
            raise InvalidArgument(f"open file {path!r} failed: its folder does not exist")
        if self._path is not None and os.path.abspath(path) == os.path.abspath(self._path):
            raise InvalidArgument(f"the output model path {path!r} is the input model's")
        out = self._compile(path)
        for name, data in out.files.items():
            with open(os.path.join(folder, name), "wb") as f:
                f.write(data)
        _write(out.model.SerializeToString(), path)

    def _in_memory(self) -> bytes:
        """The model compiled for bytes or a stream; its blob files, when not embedded,
        written where set_ep_context_binary_information says."""
        out = self._compile(None)
        if out.files:
            assert self._binary_info is not None
            for name, data in out.files.items():
                _write(data, os.path.join(self._binary_info[0], name))
        return out.model.SerializeToString()

    def compile_to_bytes(self) -> bytes:
        """Compile and return the serialized model (compiled data embedded, or in files
        named by set_ep_context_binary_information)."""
        return self._in_memory()

    def compile_to_stream(self, write_function: Callable[[bytes], Any]) -> None:
        """Compile and hand the serialized model to ``write_function`` in pieces; an
        exception it raises comes back as Fail."""
        data = self._in_memory()
        view = memoryview(data)
        step = 1 << 20
        for i in range(0, len(data), step):
            try:
                write_function(bytes(view[i:i + step]))
            except Exception as e:
                raise Fail(f"the write function given to compile_to_stream raised "
                           f"{type(e).__name__}: {e}") from e

    def set_ep_context_binary_information(self, output_directory: str | os.PathLike[str],
                                          model_name: str | os.PathLike[str]) -> None:
        """Where the blob files of a model compiled to bytes or a stream go (onnxruntime's
        ModelCompilationOptions_SetEpContextBinaryInformation): into ``output_directory``,
        named ``<model_name stem>_<node>.bin``. The compiled model names them relative to
        that folder, so a session loads it from a file there, or from bytes with
        ``ep.context_file_path`` in that folder. ``compile_to_file`` writes its blob files
        beside the output model whatever this says, as onnxruntime does."""
        for what, v in (("output_directory", output_directory), ("model_name", model_name)):
            if not isinstance(v, (str, os.PathLike)) or not os.fspath(v):
                raise InvalidArgument(f"set_ep_context_binary_information: {what} must be a "
                                      f"non-empty path, got {v!r}")
        folder = os.fspath(output_directory)
        if not os.path.isdir(folder):
            raise InvalidArgument(f"set_ep_context_binary_information: output_directory "
                                  f"{folder!r} is not an existing folder")
        stem = os.path.splitext(os.path.basename(os.fspath(model_name)))[0]
        if not stem:
            raise InvalidArgument(f"set_ep_context_binary_information: model_name "
                                  f"{os.fspath(model_name)!r} has no file name")
        self._binary_info = (os.path.abspath(folder), stem)


def _write(data: bytes, path: str) -> None:
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)

