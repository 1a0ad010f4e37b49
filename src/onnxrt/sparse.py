"""SparseTensor and its views, as onnxruntime's Python API names them; defined in
``framework/sparse.py`` (the bottom layer: OrtValue and the kernels hold them)."""

from __future__ import annotations

from onnxrt.framework.sparse import *  # noqa: F401,F403
from onnxrt.framework.sparse import __all__  # noqa: F401
