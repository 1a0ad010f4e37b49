"""Sparse tensors (onnxruntime.SparseTensor, OrtSparseFormat): COO, CSR(C) and block-sparse
views over NumPy buffers.

A graph input declared ``sparse_tensor(T)`` receives a SparseTensor as it is (a kernel that
takes sparse inputs reads ``values()`` and the format's indices, or ``to_dense()``); a graph
output declared sparse is returned as a COO SparseTensor of its nonzero entries.
"""

from __future__ import annotations

import enum
from typing import Any, Sequence

import numpy as np
import onnx

from onnxrt.errors import Fail, InvalidArgument
from onnxrt.framework.device import CPU_DEVICE, Device

__all__ = ["OrtSparseFormat", "SparseTensor", "SparseCooView", "SparseCsrView",
           "SparseBlockSparseView", "sparse_from_dense", "sparse_from_proto"]


class OrtSparseFormat(enum.IntEnum):
    ORT_SPARSE_UNDEFINED = 0
    ORT_SPARSE_COO = 1
    ORT_SPARSE_CSRC = 2
    ORT_SPARSE_BLOCK_SPARSE = 4


def _readonly(a: np.ndarray) -> np.ndarray:
    v = a.view()
    v.flags.writeable = False
    return v


class SparseCooView:
    def __init__(self, indices: np.ndarray) -> None:
        self._indices = indices

    def indices(self) -> np.ndarray:
        """Linear indices (1-D) or coordinates (N x rank), read-only."""
        return _readonly(self._indices)


class SparseCsrView:
    def __init__(self, inner: np.ndarray, outer: np.ndarray) -> None:
        self._inner, self._outer = inner, outer

    def inner(self) -> np.ndarray:
        return _readonly(self._inner)

    def outer(self) -> np.ndarray:
        return _readonly(self._outer)


class SparseBlockSparseView:
    def __init__(self, indices: np.ndarray) -> None:
        self._indices = indices

    def indices(self) -> np.ndarray:
        return _readonly(self._indices)


class SparseTensor:
    """A sparse tensor: its dense shape, the stored values and the format's indices."""

    def __init__(self, fmt: OrtSparseFormat, dense_shape: Sequence[int], values: np.ndarray,
                 indices: tuple[np.ndarray, ...], device: Device = CPU_DEVICE) -> None:
        self._format = OrtSparseFormat(fmt)
        self._shape = [int(d) for d in dense_shape]
        self._values = values
        self._indices = indices
        self._device = device

    # -- construction, as onnxruntime spells it -------------------------------------------
    @staticmethod
    def _host(ort_device: Any) -> Device:
        dev = ort_device.to_device() if hasattr(ort_device, "to_device") else CPU_DEVICE
        if not dev.is_host:
            raise InvalidArgument("sparse tensors are built from NumPy arrays on the CPU; "
                                  "use to_cuda() to copy one to a device")
        return dev

    @staticmethod
    def sparse_coo_from_numpy(dense_shape: Sequence[int], values: Any, coo_indices: Any,
                              ort_device: Any = None) -> "SparseTensor":
        """COO: ``coo_indices`` holds linear indices (1-D, one per value) or coordinates
        (values x rank; for a 2-D tensor also flattened to 2 x values, as onnxruntime
        accepts)."""
        dev = SparseTensor._host(ort_device)
        vals = _values(values)
        idx = np.asarray(coo_indices, dtype=np.int64)
        shape = [int(d) for d in dense_shape]
        n = vals.shape[0] if vals.ndim else 0
        if idx.ndim == 1 and len(shape) == 2 and n and idx.shape[0] == 2 * n:
            # onnxruntime also takes a 2-D tensor's coordinates flattened, row after row
            idx = idx.reshape(n, 2)
        ok = (idx.ndim == 1 and idx.shape[0] == n) or (
            idx.ndim == 2 and idx.shape == (n, len(shape)))
        if not ok:
            raise InvalidArgument(f"COO indices of shape {list(idx.shape)} do not match "
                                  f"{n} values in a tensor of rank {len(shape)}: expected "
                                  f"[{n}] (linear) or [{n}, {len(shape)}]")
        size = int(np.prod(shape)) if shape else 1
        lin = idx if idx.ndim == 1 else (np.ravel_multi_index(idx.T, shape) if n else idx[:, 0])
        if n and (lin.min() < 0 or lin.max() >= size):
            raise InvalidArgument(f"COO indices out of range for dense shape {shape}")
        return SparseTensor(OrtSparseFormat.ORT_SPARSE_COO, shape, vals, (idx,), dev)

    @staticmethod
    def sparse_csr_from_numpy(dense_shape: Sequence[int], values: Any, inner_indices: Any,
                              outer_indices: Any, ort_device: Any = None) -> "SparseTensor":
        """CSR of a 2-D tensor: ``inner_indices`` are column indices (one per value),
        ``outer_indices`` the row starts (rows + 1 entries)."""
        dev = SparseTensor._host(ort_device)
        vals = _values(values)
        inner = np.asarray(inner_indices, dtype=np.int64)
        outer = np.asarray(outer_indices, dtype=np.int64)
        shape = [int(d) for d in dense_shape]
        if len(shape) != 2:
            raise InvalidArgument(f"CSR needs a 2-D dense shape, got {shape}")
        n = vals.shape[0]
        if inner.shape != (n,) or outer.shape != (shape[0] + 1,):
            raise InvalidArgument(f"CSR: {n} values need {n} inner indices (got "
                                  f"{inner.shape[0] if inner.ndim else 0}) and "
                                  f"{shape[0] + 1} outer indices (got "
                                  f"{outer.shape[0] if outer.ndim else 0})")
        if n and (inner.min() < 0 or inner.max() >= shape[1]):
            raise InvalidArgument(f"CSR inner indices out of range for {shape[1]} columns")
        if outer[0] != 0 or outer[-1] != n or np.any(np.diff(outer) < 0):
            raise InvalidArgument("CSR outer indices must rise from 0 to the number of values")
        return SparseTensor(OrtSparseFormat.ORT_SPARSE_CSRC, shape, vals, (inner, outer), dev)

    # -- inspection -----------------------------------------------------------------------
    def format(self) -> OrtSparseFormat:
        return self._format

    def dense_shape(self) -> list[int]:
        return list(self._shape)

    def values(self) -> np.ndarray:
        if not self._device.is_host:
            raise Fail("values() of a sparse tensor on a device: copy it to the CPU first")
        return _readonly(self._values)

    def as_coo_view(self) -> SparseCooView:
        self._expect(OrtSparseFormat.ORT_SPARSE_COO)
        return SparseCooView(self._indices[0])

    def as_csrc_view(self) -> SparseCsrView:
        self._expect(OrtSparseFormat.ORT_SPARSE_CSRC)
        return SparseCsrView(self._indices[0], self._indices[1])

    def as_blocksparse_view(self) -> SparseBlockSparseView:
        self._expect(OrtSparseFormat.ORT_SPARSE_BLOCK_SPARSE)
        return SparseBlockSparseView(self._indices[0])

    def _expect(self, fmt: OrtSparseFormat) -> None:
        if self._format != fmt:
            raise Fail(f"the sparse tensor is in {self._format.name}, not {fmt.name}")

    def element_type(self) -> int:
        from onnxrt.ir.dtypes import onnx_elem_type

        return onnx_elem_type(self._values.dtype)

    def data_type(self) -> str:
        from onnxrt.ir.dtypes import elem_type_name

        return f"sparse_tensor({elem_type_name(self.element_type())})"

    def device_name(self) -> str:
        return self._device.type

    def device(self) -> Device:
        return self._device

    def to_dense(self) -> np.ndarray:
        """The dense array (host only)."""
        if not self._device.is_host:
            raise Fail("to_dense() of a sparse tensor on a device: copy it to the CPU first")
        vals = self._values
        out = np.zeros(self._shape, dtype=vals.dtype) if vals.dtype != object else \
            np.full(self._shape, "", dtype=object)
        flat = out.reshape(-1)
        if self._format == OrtSparseFormat.ORT_SPARSE_COO:
            idx = self._indices[0]
            lin = idx if idx.ndim == 1 else np.ravel_multi_index(idx.T, self._shape)
            flat[lin] = vals
        elif self._format == OrtSparseFormat.ORT_SPARSE_CSRC:
            inner, outer = self._indices
            rows = np.repeat(np.arange(self._shape[0]), np.diff(outer))
            out[rows, inner] = vals
        else:
            raise Fail("to_dense() of a block-sparse tensor is not supported")
        return out

    def to_cuda(self, ort_device: Any) -> "SparseTensor":
        """A copy on a CUDA device, through an available provider on that device."""
        dev = ort_device.to_device() if hasattr(ort_device, "to_device") else Device(
            str(ort_device))
        if not self._device.is_host:
            raise Fail("to_cuda(): the sparse tensor is already on a device; onnxrt copies "
                       "only from the CPU")
        if self._values.dtype == object:
            raise Fail("to_cuda(): string sparse tensors cannot live on a device")
        from onnxrt.framework.registry import transfer_to_device

        try:
            moved = [transfer_to_device(a, dev).value() for a in (self._values,
                                                                   *self._indices)]
        except InvalidArgument as e:
            raise Fail(f"to_cuda(): {e}") from None
        return SparseTensor(self._format, self._shape, moved[0], tuple(moved[1:]), dev)

    def __repr__(self) -> str:
        return (f"SparseTensor({self._format.name}, dense_shape={self._shape}, "
                f"nnz={len(self._values)}, {self.data_type()})")


def _values(values: Any) -> np.ndarray:
    vals = np.asarray(values)
    if vals.dtype.kind in "US":
        vals = vals.astype(object)
    if vals.ndim != 1:
        raise InvalidArgument(f"sparse values must be 1-D, got shape {list(vals.shape)}")
    return vals


def sparse_from_dense(arr: np.ndarray) -> SparseTensor:
    """COO (linear indices) of the nonzero entries of ``arr``."""
    flat = np.asarray(arr).reshape(-1)
    lin = np.flatnonzero(flat if flat.dtype != object else flat != "")
    return SparseTensor(OrtSparseFormat.ORT_SPARSE_COO, list(np.shape(arr)), flat[lin].copy(),
                        (lin.astype(np.int64),))


def sparse_from_proto(sp: onnx.SparseTensorProto) -> SparseTensor:
    from onnx import numpy_helper

    vals = numpy_helper.to_array(sp.values).reshape(-1)
    idx = numpy_helper.to_array(sp.indices).astype(np.int64)
    return SparseTensor.sparse_coo_from_numpy(list(sp.dims), vals, idx)
