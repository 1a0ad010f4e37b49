"""com.microsoft AttnLSTM against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib_oracle import assert_close, both

RNG = np.random.default_rng(101)


def _f(*shape, scale=0.5):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("with_aw", [False, True])
@pytest.mark.parametrize("extras", [(), ("peephole", "init", "mem_lens"), ("seq_lens",)])
def test_attn_lstm(direction, with_aw, extras):
    s, b, i, h, tm, md, am, aws = 4, 3, 5, 6, 7, 4, 5, 3
    nd = 2 if direction == "bidirectional" else 1
    asz = aws if with_aw else md
    ins = [("x", _f(s, b, i)), ("w", _f(nd, 4 * h, i + asz)), ("r", _f(nd, 4 * h, h)),
           ("bias", _f(nd, 8 * h, scale=0.1)),
           ("sl", np.array([4, 2, 3], np.int32) if "seq_lens" in extras else None),
           ("h0", _f(nd, b, h) if "init" in extras else None),
           ("c0", _f(nd, b, h) if "init" in extras else None),
           ("p", _f(nd, 3 * h) if "peephole" in extras else None),
           ("qw", _f(nd, h, am)), ("mw", _f(nd, md, am)), ("v", _f(nd, am)),
           ("m", _f(b, tm, md)),
           ("ml", np.array([7, 3, 5], np.int32) if "mem_lens" in extras else None),
           ("aw", _f(nd, h + md, aws) if with_aw else None)]
    assert_close(*both("AttnLSTM", ins, outputs=3, hidden_size=h, direction=direction),
                 rtol=1e-4, atol=1e-5)


def test_attn_lstm_clip_and_activations():
    s, b, i, h, tm, md, am = 3, 2, 4, 5, 4, 3, 4
    ins = [("x", _f(s, b, i)), ("w", _f(1, 4 * h, i + md)), ("r", _f(1, 4 * h, h)),
           ("bias", None), ("sl", None), ("h0", None), ("c0", None), ("p", None),
           ("qw", _f(1, h, am)), ("mw", _f(1, md, am)), ("v", _f(1, am)), ("m", _f(b, tm, md))]
    assert_close(*both("AttnLSTM", ins, outputs=3, hidden_size=h, clip=0.4,
                       activations=["HardSigmoid", "Tanh", "Softsign"], input_forget=1),
                 rtol=1e-4, atol=1e-5)
