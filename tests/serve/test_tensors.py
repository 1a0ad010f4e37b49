"""The raw tensor codec on its own: alignment, byte order, BYTES framing."""

from __future__ import annotations

import numpy as np

from onnxrt.serve.datatypes import by_name
from onnxrt.serve.tensors import from_raw, to_raw


def test_raw_tensors_at_odd_offsets_come_out_aligned():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    body = b"{json header of odd length}" + x.tobytes()
    view = memoryview(body)[27:]
    arr = from_raw("input 'x'", by_name("FP32", "x"), (3, 4), view)
    assert arr.flags.aligned
    np.testing.assert_array_equal(arr, x)
    aligned = memoryview(b"1234" + x.tobytes())[4:]
    assert not from_raw("input 'x'", by_name("FP32", "x"), (3, 4), aligned).flags.owndata


def test_raw_round_trip_is_little_endian():
    x = np.array([1, 256, -2], np.int32)
    raw = to_raw(x.astype(">i4"), by_name("INT32", "x"))
    assert raw == x.astype("<i4").tobytes()
    np.testing.assert_array_equal(from_raw("x", by_name("INT32", "x"), (3,), raw), x)


def test_bytes_framing():
    s = np.array(["a", "", "é"], dtype=object)
    raw = to_raw(s, by_name("BYTES", "x"))
    assert raw == b"\x01\x00\x00\x00a" + b"\x00\x00\x00\x00" + b"\x02\x00\x00\x00\xc3\xa9"
    np.testing.assert_array_equal(from_raw("x", by_name("BYTES", "x"), (3,), raw), s)
