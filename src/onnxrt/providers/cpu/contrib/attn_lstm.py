"""com.microsoft AttnLSTM: an LSTM whose cell is wrapped by Bahdanau attention over a memory
M, as onnxruntime's CPU kernel computes it.

Per direction: keys = M @ MW once; at each step the LSTM reads concat(X_t, ATTN_{t-1})
(W is [4H, input + attention]), then the attention compares H_t @ QW with the keys:
score_j = sum(V * tanh(keys_j + H_t QW)) over the first memory_seq_lens[b] memory steps,
align = softmax(score) (onnxruntime exponentiates without subtracting the max, and so does
this), context = align @ M, and ATTN_t = concat(H_t, context) @ AW (or the context without
AW). Gates i, o, f, c; peepholes, input_forget, clip, activations, sequence_lens (a reversed
direction reverses each sequence within its length), as ONNX LSTM.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu import CPU
from onnxrt.providers.cpu.rnn._common import _parse_activations, lstm_gates

MS = "com.microsoft"


@CPU.kernel("AttnLSTM", since=1, domain=MS, needs_node=True)
class AttnLSTM:
    def __init__(self, node: Any) -> None:
        a = node.attrs
        self.direction = a.get("direction") or "forward"
        if self.direction not in ("forward", "reverse", "bidirectional"):
            raise ValueError(f"AttnLSTM: direction {self.direction!r}")
        self.nd = 2 if self.direction == "bidirectional" else 1
        self.hidden = a.get("hidden_size")
        self.clip = a.get("clip")
        self.input_forget = bool(int(a.get("input_forget", 0)))
        names = a.get("activations") or ["Sigmoid", "Tanh", "Tanh"] * self.nd
        if len(names) != 3 * self.nd:
            raise ValueError(f"AttnLSTM: {len(names)} activations for {self.nd} direction(s)")
        self.acts = [f for _, f in _parse_activations(list(names), a.get("activation_alpha"),
                                                      a.get("activation_beta"))]
        self.n_out = node.num_outputs
        self.want_y = node.output_present(0)

    def __call__(self, x, w, r, b=None, sequence_lens=None, initial_h=None, initial_c=None,
                 p=None, qw=None, mw=None, v=None, m=None, memory_seq_lens=None, aw=None):
        op = "AttnLSTM"
        if qw is None or mw is None or v is None or m is None:
            raise ValueError(f"{op}: QW, MW, V and M are required")
        dt = x.dtype
        cdt = np.float64 if dt == np.float64 else np.float32
        s, bsz, isz = x.shape
        nd, h = self.nd, r.shape[-1]
        if self.hidden is not None and int(self.hidden) != h:
            raise ValueError(f"{op}: hidden_size {self.hidden} but R is {r.shape}")
        mem = m.astype(cdt)
        tm = mem.shape[1]
        mlens = np.full(bsz, tm, np.int64) if memory_seq_lens is None else \
            np.asarray(memory_seq_lens).astype(np.int64).reshape(bsz)
        if (mlens <= 0).any() or (mlens > tm).any():
            raise ValueError(f"{op}: memory_seq_lens must be in (0, {tm}]")
        lens = np.full(bsz, s, np.int64) if sequence_lens is None else \
            np.asarray(sequence_lens).astype(np.int64).reshape(bsz)
        if (lens <= 0).any() or (lens > s).any():
            raise ValueError(f"{op}: sequence_lens must be in (0, {s}]")
        y = np.zeros((s, nd, bsz, h), cdt)
        yh = np.zeros((nd, bsz, h), cdt)
        yc = np.zeros((nd, bsz, h), cdt)
        mask = np.arange(tm)[None, :] < mlens[:, None]
        for d in range(nd):
            reverse = self.direction == "reverse" or d == 1
            attn_w = None if aw is None else aw[d].astype(cdt)
            asz = mem.shape[2] if attn_w is None else attn_w.shape[1]
            wd = w[d].astype(cdt)
            if wd.shape != (4 * h, isz + asz):
                raise ValueError(f"{op}: W must be (4H, input + attention) = "
                                 f"{(4 * h, isz + asz)}, got {wd.shape}")
            wx, wa = wd[:, :isz], wd[:, isz:]
            rd = r[d].astype(cdt)
            bias = np.zeros(8 * h, cdt) if b is None else b[d].astype(cdt)
            bias = bias[:4 * h] + bias[4 * h:]
            peep = None if p is None else p[d].astype(cdt)
            keys = mem @ mw[d].astype(cdt)                       # (B, Tm, A)
            qwd, vd = qw[d].astype(cdt), v[d].astype(cdt)
            ht = np.zeros((bsz, h), cdt) if initial_h is None else initial_h[d].astype(cdt)
            ct = np.zeros((bsz, h), cdt) if initial_c is None else initial_c[d].astype(cdt)
            attn = np.zeros((bsz, asz), cdt)
            acts = self.acts[3 * d:3 * d + 3]
            steps = int(lens.max())
            for t in range(steps):
                active = t < lens
                src = np.where(reverse, lens - 1 - t, t)
                xt = x[np.clip(src, 0, s - 1), np.arange(bsz)].astype(cdt)
                g = xt @ wx.T + attn @ wa.T + ht @ rd.T + bias
                if self.clip is not None:
                    g = np.clip(g, -self.clip, self.clip)
                h_new, c_new = lstm_gates(g, ct, peep, acts, self.input_forget)
                act = active[:, None]
                ct = np.where(act, c_new, ct)
                ht = np.where(act, h_new, ht)
                out_t = np.where(act, h_new, 0)
                for bi in np.nonzero(active)[0]:
                    y[src[bi], d, bi] = h_new[bi]
                # the attention reads this step's output (0 for finished rows)
                pq = out_t @ qwd
                score = np.tanh(keys + pq[:, None, :]) @ vd           # (B, Tm)
                e = np.where(mask, np.exp(score), 0)
                tot = e.sum(axis=1, keepdims=True, dtype=np.float64)
                align = np.where(tot == 0, np.where(mask, 1.0 / mlens[:, None], 0),
                                 e / np.where(tot == 0, 1, tot)).astype(cdt)
                context = np.einsum("bt,btd->bd", align, mem)
                if attn_w is None:
                    attn = context
                else:
                    attn = out_t @ attn_w[:h] + context @ attn_w[h:]
            yh[d], yc[d] = ht, ct
        res = [y.astype(dt) if self.want_y else None, yh.astype(dt), yc.astype(dt)]
        return tuple(res[:self.n_out]) if self.n_out > 1 else res[0]
