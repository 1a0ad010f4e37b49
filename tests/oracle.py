"""Helpers shared by the tests: compare outputs the way the ONNX backend suite does."""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np
import onnx
from onnx import numpy_helper


def normalize(item: Any) -> Any:
    if isinstance(item, onnx.TensorProto):
        return numpy_helper.to_array(item)
    return item


def assert_similar(ref: Any, out: Any, rtol: float, atol: float, where: str = "") -> None:
    """The backend suite's comparison: same structure, shape, dtype; allclose for numbers."""
    if isinstance(ref, (list, tuple)):
        assert isinstance(out, (list, tuple)), f"{where}: expected a sequence, got {type(out)}"
        assert len(out) == len(ref), f"{where}: sequence length {len(out)} != {len(ref)}"
        for j, (r, o) in enumerate(zip(ref, out)):
            assert_similar(r, o, rtol, atol, f"{where}[{j}]")
        return
    if isinstance(ref, dict):
        assert isinstance(out, dict), f"{where}: expected a map, got {type(out)}"
        assert set(ref) == set(out), f"{where}: map keys differ"
        for k in ref:
            assert_similar(ref[k], out[k], rtol, atol, f"{where}[{k!r}]")
        return
    if ref is None:
        assert out is None, f"{where}: expected an empty optional, got {type(out)}"
        return
    ref = np.asarray(ref)
    assert isinstance(out, (np.ndarray, np.generic)), f"{where}: got {type(out)}"
    out = np.asarray(out)
    np.testing.assert_array_equal(out.shape, ref.shape, err_msg=f"{where}: shape")
    if ref.dtype == object:
        np.testing.assert_array_equal(out, ref, err_msg=where)
        return
    np.testing.assert_equal(out.dtype, ref.dtype, err_msg=f"{where}: dtype")
    r = rtol
    if out.dtype.name == "bfloat16":
        r = max(rtol, 2 ** -6)
    if out.dtype.kind not in "biufc" or out.dtype.name == "bfloat16":
        out = out.astype(np.float32)
        ref = ref.astype(np.float32)
    np.testing.assert_allclose(out, ref, rtol=r, atol=atol, err_msg=where)


def assert_all_similar(refs: Sequence[Any], outs: Sequence[Any], rtol: float, atol: float,
                       names: Sequence[str] = ()) -> None:
    assert len(outs) == len(refs), f"{len(outs)} outputs, expected {len(refs)}"
    for i, (r, o) in enumerate(zip(refs, outs)):
        name = names[i] if i < len(names) else f"output {i}"
        assert_similar(normalize(r), o, rtol, atol, name)


def assert_outputs_close(ref: Sequence[Any], got: Sequence[np.ndarray], rtol: float,
                         atol: float) -> None:
    """A run's outputs against the oracle's (arrays, or what np.asarray makes one of): as
    many, same dtype and shape, values close (compared in float64)."""
    assert len(ref) == len(got)
    for r, o in zip(ref, got):
        r = np.asarray(r)
        assert o.dtype == r.dtype and o.shape == r.shape, (o.dtype, r.dtype, o.shape, r.shape)
        np.testing.assert_allclose(o.astype(np.float64), r.astype(np.float64), rtol=rtol,
                                   atol=atol)
