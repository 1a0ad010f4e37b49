"""DFT (opsets 17 and 20) and STFT, over NumPy's pocketfft.

Complex values travel as a trailing dimension of size 2 (real, imaginary); real signals
have a trailing dimension of size 1. Transforms run at the input's width (pocketfft has
native single precision; float16 and bfloat16 go through float32), which is what the
spec's reference outputs were computed with.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU


def _to_complex(x: np.ndarray) -> tuple[np.ndarray, bool]:
    """(values, is_real): real or complex at the compute width, trailing dim dropped."""
    if x.ndim < 2 or x.shape[-1] not in (1, 2):
        raise ValueError(f"the last dimension must be 1 (real) or 2 (complex), got shape "
                         f"{x.shape}")
    wide = x.dtype == np.float64
    if x.shape[-1] == 1:
        return x[..., 0].astype(np.float64 if wide else np.float32), True
    v = np.empty(x.shape[:-1], np.complex128 if wide else np.complex64)
    v.real = x[..., 0]
    v.imag = x[..., 1]
    return v, False


def _from_complex(v: np.ndarray, dtype: np.dtype) -> np.ndarray:
    out = np.empty(v.shape + (2,), dtype)
    out[..., 0] = v.real
    out[..., 1] = v.imag
    return out


def _scalar(v: Any, what: str) -> int:
    a = np.asarray(v)
    if a.size != 1:
        raise ValueError(f"{what} must be a scalar, got shape {a.shape}")
    return int(a.reshape(-1)[0])


def _dft(x: np.ndarray, dft_length: Any, axis: int, inverse: int, onesided: int) -> np.ndarray:
    r = x.ndim
    if not (-r <= axis <= -2 or 0 <= axis <= r - 2):
        raise ValueError(f"axis {axis} is out of range for input of rank {r} (the last "
                         f"dimension holds the complex parts)")
    ax = axis + r if axis < 0 else axis
    v, is_real = _to_complex(x)
    n = None if dft_length is None else _scalar(dft_length, "dft_length")
    if n is not None and n < 1:
        raise ValueError(f"dft_length must be positive, got {n}")
    if inverse and onesided:
        # IRFFT: one-sided complex spectrum in, full real signal out
        m = v.shape[ax]
        n = 2 * (m - 1) if n is None else n
        if n < 1:
            raise ValueError(f"the one-sided input has {m} bins: too few for an inverse")
        y = np.fft.irfft(v, n=n, axis=ax)
        return y[..., None].astype(x.dtype)
    if inverse:
        y = np.fft.ifft(v, n=n, axis=ax)
    elif onesided:
        if is_real:
            y = np.fft.rfft(v, n=n, axis=ax)
        else:
            y = np.fft.fft(v, n=n, axis=ax)
            y = y.take(np.arange(y.shape[ax] // 2 + 1), axis=ax)
    else:
        y = np.fft.fft(v, n=n, axis=ax)
    return _from_complex(y, x.dtype)


@CPU.kernel("DFT", since=17, until=19, host_inputs=(1,))
def dft_17(input: np.ndarray, dft_length: Any = None, *, axis: int = 1, inverse: int = 0,
           onesided: int = 0) -> np.ndarray:
    return _dft(input, dft_length, axis, inverse, onesided)


@CPU.kernel("DFT", since=20, host_inputs=(1, 2))
def dft_20(input: np.ndarray, dft_length: Any = None, axis: Any = None, *, inverse: int = 0,
           onesided: int = 0) -> np.ndarray:
    ax = -2 if axis is None else _scalar(axis, "axis")
    return _dft(input, dft_length, ax, inverse, onesided)


@CPU.kernel("STFT", since=17, host_inputs=(1, 3))
def stft(signal: np.ndarray, frame_step: Any, window: np.ndarray | None = None,
         frame_length: Any = None, *, onesided: int = 1) -> np.ndarray:
    if signal.ndim != 3:
        raise ValueError(f"signal must be [batch, length, 1 or 2], got shape {signal.shape}")
    v, is_real = _to_complex(signal)
    L = v.shape[1]
    step = _scalar(frame_step, "frame_step")
    if step < 1:
        raise ValueError(f"frame_step must be positive, got {step}")
    if frame_length is not None:
        fl = _scalar(frame_length, "frame_length")
        if window is not None and window.shape != (fl,):
            raise ValueError(f"window has shape {window.shape} but frame_length is {fl}")
    elif window is not None:
        fl = int(window.shape[0])
    else:
        fl = L
    if window is not None and window.ndim != 1:
        raise ValueError(f"window must be 1-D, got shape {window.shape}")
    if not 1 <= fl <= L:
        raise ValueError(f"frame_length {fl} must lie in [1, signal length {L}]")
    n_frames = (L - fl) // step + 1
    # (batch, frames, frame_length) view, then a copy only through the window product
    frames = np.lib.stride_tricks.sliding_window_view(v, fl, axis=1)[:, ::step][:, :n_frames]
    if window is not None:
        frames = frames * window.astype(frames.real.dtype)
    if onesided and is_real:
        y = np.fft.rfft(frames, axis=-1)
    else:
        y = np.fft.fft(frames, axis=-1)
        if onesided:
            y = y[..., :fl // 2 + 1]
    return _from_complex(y, signal.dtype)
