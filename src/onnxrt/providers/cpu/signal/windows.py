"""Window functions (Hann, Hamming, Blackman) and MelWeightMatrix.

The spec defines the windows as functions; direct kernels skip a dozen tiny nodes per call.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.ir.dtypes import np_dtype
from onnxrt.providers.cpu import CPU

# generalized cosine windows: a0 - a1 cos(2 pi n / N) + a2 cos(4 pi n / N); the constants
# are the float32 values the spec's function bodies use
_COEFFS = {
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (float(np.float32(25 / 46)), float(np.float32(21 / 46)), 0.0),
    "BlackmanWindow": (float(np.float32(0.42)), 0.5, float(np.float32(0.08))),
}


def _size(v: Any, what: str) -> int:
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {a.shape}")
    return int(a.reshape(-1)[0])


def _window(name: str) -> Any:
    a0, a1, a2 = _COEFFS[name]

    def window(size: Any, *, periodic: int = 1, output_datatype: int = 1) -> np.ndarray:
        n = _size(size, "size")
        if n < 0:
            raise ValueError(f"size must be non-negative, got {n}")
        N = n if periodic else n - 1
        k = np.arange(n, dtype=np.float64)
        # a symmetric window of one sample divides 0 by 0: NaN, as in the spec's function
        # body and onnxruntime
        with np.errstate(divide="ignore", invalid="ignore"):
            ang = 2 * np.pi * k / N
        w = a0 - a1 * np.cos(ang)
        if a2:
            w += a2 * np.cos(2 * ang)
        return w.astype(np_dtype(output_datatype))

    window.__name__ = name
    return window


for _name in _COEFFS:
    CPU.kernel(_name, since=17, host_inputs=(0,))(_window(_name))


@CPU.kernel("MelWeightMatrix", since=17, host_inputs=(0, 1, 2, 3, 4))
def mel_weight_matrix(num_mel_bins: Any, dft_length: Any, sample_rate: Any,
                      lower_edge_hertz: Any, upper_edge_hertz: Any, *,
                      output_datatype: int = 1) -> np.ndarray:
    n_mel = _size(num_mel_bins, "num_mel_bins")
    n_dft = _size(dft_length, "dft_length")
    rate = _size(sample_rate, "sample_rate")
    lo = float(np.asarray(lower_edge_hertz).reshape(-1)[0])
    hi = float(np.asarray(upper_edge_hertz).reshape(-1)[0])
    if n_mel < 1 or n_dft < 1 or rate < 1:
        raise ValueError("num_mel_bins, dft_length and sample_rate must be positive")
    if not 0 <= lo < hi:
        raise ValueError(f"need 0 <= lower_edge_hertz < upper_edge_hertz, got {lo}, {hi}")
    n_spec = n_dft // 2 + 1
    # num_mel_bins + 2 edges evenly spaced on the mel scale (the step divides the range by
    # the number of edges, as the spec's reference and onnxruntime do), mapped to DFT bins
    mel_lo = 2595.0 * np.log10(1.0 + lo / 700.0)
    mel_hi = 2595.0 * np.log10(1.0 + hi / 700.0)
    mel = np.arange(n_mel + 2) * ((mel_hi - mel_lo) / (n_mel + 2)) + mel_lo
    hz = 700.0 * (10.0 ** (mel / 2595.0) - 1.0)
    edges = np.floor((n_dft + 1) * hz / rate).astype(np.int64)
    left, center, right = edges[:-2], edges[1:-1], edges[2:]
    j = np.arange(n_spec)[:, None]
    # rising edge left..center inclusive (a zero-width rise is a single 1 at the center),
    # falling edge center..right exclusive; both are 1 at the center
    rise = (j >= left) & (j <= center)
    rise_v = (j - left) / np.maximum(center - left, 1)
    rise_v = np.where(center == left, 1.0, rise_v)
    fall = (j >= center) & (j < right)
    fall_v = (right - j) / np.maximum(right - center, 1)
    out = np.where(fall, fall_v, np.where(rise, rise_v, 0.0))
    return out.astype(np_dtype(output_datatype))
