"""com.microsoft DynamicQuantizeLSTM: an LSTM whose W (D, I, 4H) and R (D, H, 4H) are 8-bit
with per-direction or per-column scales (what onnxruntime.quantization.quantize_dynamic
makes of an LSTM).

As in onnxruntime, every product has a float operand quantized on the fly to uint8 over that
product's whole operand (DynamicQuantizeLinear's scale and zero point): once the inputs of all
steps (the first max(sequence_lens) steps, all batch rows), then the hidden state of every
step; the int32 sums are exact and scaled by a_scale * w_scale in float32. Gates are i, o, f, c
(onnxruntime's order); peepholes, input_forget, clip, activations and sequence_lens as in
ONNX LSTM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.quant.linear import dynamic_quantize_linear
from onnxrt.providers.cpu.quant.qmatmul import matmul_integer
from onnxrt.providers.cpu.rnn._common import _parse_activations, lstm_gates

MS = "com.microsoft"
_F32 = np.float32


def quantized_product(a: np.ndarray, w: np.ndarray, w_zp: int, w_scale: np.ndarray) -> np.ndarray:
    """a (M, K) float32 quantized to uint8 as a whole, times w (K, N) 8-bit: float32(exact
    int32 sum) * (a_scale * w_scale)."""
    qa, sa, za = dynamic_quantize_linear(a)
    acc = matmul_integer(qa, w, za, np.array(w_zp, w.dtype))
    return acc.astype(_F32) * (sa * w_scale).astype(_F32)


def _weight_params(zp: np.ndarray | None, scale: np.ndarray, w: np.ndarray, d: int,
                   what: str) -> tuple[int, np.ndarray]:
    """The one zero point and the scales (1 or 4H values) of direction ``d``."""
    s = np.asarray(scale, _F32)
    s = s.reshape(s.shape[0], -1)[d] if s.ndim >= 1 and s.shape[0] == w.shape[0] else \
        s.reshape(-1)
    if zp is None:
        return 0, s
    z = np.asarray(zp).reshape(w.shape[0], -1)[d] if np.ndim(zp) >= 1 and \
        np.shape(zp)[0] == w.shape[0] else np.asarray(zp).reshape(-1)
    if (z != z[0]).any():
        raise ValueError(f"DynamicQuantizeLSTM: {what} zero points must be one value per "
                         f"direction")
    if w.dtype == np.int8 and z[0] != 0:
        raise ValueError(f"DynamicQuantizeLSTM: int8 {what} needs zero points of 0")
    return int(z[0]), s


@CPU.kernel("DynamicQuantizeLSTM", since=1, domain=MS, needs_node=True)
class DynamicQuantizeLSTM:
    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.direction = a.get("direction") or "forward"
        if self.direction not in ("forward", "reverse", "bidirectional"):
            raise ValueError(f"DynamicQuantizeLSTM: direction {self.direction!r}")
        self.nd = 2 if self.direction == "bidirectional" else 1
        self.hidden = a.get("hidden_size")
        self.clip = a.get("clip")
        self.input_forget = bool(int(a.get("input_forget", 0)))
        names = a.get("activations") or ["Sigmoid", "Tanh", "Tanh"] * self.nd
        if len(names) != 3 * self.nd:
            raise ValueError(f"DynamicQuantizeLSTM: {len(names)} activations for {self.nd} "
                             f"direction(s) (3 each)")
        acts = _parse_activations(list(names), a.get("activation_alpha"),
                                  a.get("activation_beta"))
        self.acts = [f for _, f in acts]
        self.n_out = node.num_outputs
        self.want_y = node.output_present(0)

    def __call__(self, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None,
                 p=None, w_scale=None, w_zero_point=None, r_scale=None, r_zero_point=None):
        op = "DynamicQuantizeLSTM"
        if w_scale is None or r_scale is None:
            raise ValueError(f"{op}: W_scale and R_scale are required")
        for what, v in (("W", w), ("R", r)):
            if v.dtype not in (np.int8, np.uint8):
                raise TypeError(f"{op}: {what} has type {v.dtype}; int8 or uint8 expected")
        s, bsz, isz = x.shape
        nd = self.nd
        h = r.shape[1]
        if self.hidden is not None and int(self.hidden) != h:
            raise ValueError(f"{op}: hidden_size {self.hidden} but R is {r.shape}")
        if w.shape != (nd, isz, 4 * h) or r.shape != (nd, h, 4 * h):
            raise ValueError(f"{op}: W must be {(nd, isz, 4 * h)} and R {(nd, h, 4 * h)}, got "
                             f"{w.shape} and {r.shape}")
        lens = np.full(bsz, s, np.int64) if sequence_lens is None else \
            np.asarray(sequence_lens).astype(np.int64).reshape(bsz)
        if (lens < 0).any() or (lens > s).any():
            raise ValueError(f"{op}: sequence_lens must be in [0, {s}]")
        xf = x.astype(_F32)
        y = np.zeros((s, nd, bsz, h), _F32)
        yh = np.zeros((nd, bsz, h), _F32)
        yc = np.zeros((nd, bsz, h), _F32)
        for d in range(nd):
            reverse = self.direction == "reverse" or d == 1
            bias = np.zeros(8 * h, _F32) if b is None else b[d].astype(_F32)
            bias = bias[:4 * h] + bias[4 * h:]
            peep = None if p is None else p[d].astype(_F32)
            wz, ws = _weight_params(w_zero_point, w_scale, w, d, "W")
            rz, rs = _weight_params(r_zero_point, r_scale, r, d, "R")
            ht = np.zeros((bsz, h), _F32) if initial_h is None else initial_h[d].astype(_F32)
            ct = np.zeros((bsz, h), _F32) if initial_c is None else initial_c[d].astype(_F32)
            steps = int(lens.max(initial=0))
            # each row's steps in processing order (reversed within its own length)
            order = np.zeros((steps, bsz), np.int64)
            for bi in range(bsz):
                t = np.arange(steps)
                order[:, bi] = (lens[bi] - 1 - t) if reverse else t
            xs = np.where((order >= 0)[..., None],
                          xf[np.clip(order, 0, s - 1), np.arange(bsz)[None, :]], 0)
            gx = quantized_product(xs.reshape(-1, isz), w[d], wz, ws).reshape(steps, bsz, 4 * h)
            acts = self.acts[3 * d:3 * d + 3]
            for t in range(steps):
                active = (t < lens)[:, None]
                # a row's state joins the quantization range for one step after its sequence
                # ends (onnxruntime zeroes the state it carries after that step)
                hin = np.where((t <= lens)[:, None], ht, 0).astype(_F32)
                g = gx[t] + quantized_product(hin, r[d], rz, rs) + bias
                if self.clip is not None:
                    g = np.clip(g, -self.clip, self.clip)
                h_new, c_new = lstm_gates(g, ct, peep, acts, self.input_forget)
                ct = np.where(active, c_new, ct)
                ht = np.where(active, h_new, ht)
                for bi in range(bsz):
                    if t < lens[bi]:
                        y[order[t, bi], d, bi] = h_new[bi]
            yh[d], yc[d] = ht, ct
        dt = x.dtype
        res = [y.astype(dt) if self.want_y else None, yh.astype(dt), yc.astype(dt)]
        return tuple(res[:self.n_out]) if self.n_out > 1 else res[0]
