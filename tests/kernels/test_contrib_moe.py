"""com.microsoft MoE and QMoE against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest

from kernels.contrib_oracle import assert_close, both

RNG = np.random.default_rng(99)


def _f(*shape, scale=1.0):
    return (RNG.normal(size=shape) * scale).astype(np.float32)


@pytest.mark.parametrize("act", ["relu", "gelu", "silu", "identity", "swiglu"])
@pytest.mark.parametrize("k,norm", [(1, 0), (2, 1), (2, 0)])
def test_moe(act, k, norm):
    t, hd, inter, e = 6, 8, 12, 4
    f1 = 2 * inter if act == "swiglu" else inter
    ins = [("x", _f(2, 3, hd)), ("r", _f(t, e)), ("w1", _f(e, f1, hd, scale=0.3)),
           ("b1", _f(e, f1, scale=0.1)), ("w2", _f(e, hd, inter, scale=0.3)),
           ("b2", _f(e, hd, scale=0.1))]
    attrs = {"k": k, "activation_type": act, "normalize_routing_weights": norm}
    if act == "swiglu":
        attrs.update(swiglu_fusion=1, swiglu_limit=0.8, activation_alpha=1.7,
                     activation_beta=1.0)
    assert_close(*both("MoE", ins, **attrs), rtol=1e-4, atol=1e-5)


def _pack4(q):
    return (q[..., 0::2] | (q[..., 1::2] << 4)).astype(np.uint8)


@pytest.mark.parametrize("bits", [4, 8])
@pytest.mark.parametrize("block", [0, 16])
@pytest.mark.parametrize("with_zp", [False, True])
@pytest.mark.parametrize("act", ["relu", "swiglu"])
def test_qmoe(bits, block, with_zp, act):
    t, hd, inter, e = 5, 32, 32, 3
    f1 = 2 * inter if act == "swiglu" else inter
    top = (1 << bits) - 1

    def weights(rows, cols):
        q = RNG.integers(0, top + 1, (e, rows, cols)).astype(np.uint8)
        nb = cols // block if block else 0
        s = (RNG.random((e, rows, nb) if block else (e, rows)) * 0.02 + 0.01).astype(
            np.float32)
        z = RNG.integers(0, top + 1, s.shape).astype(np.uint8) if with_zp else None
        if bits == 4:
            q = _pack4(q)
            z = None if z is None else _pack4(z)
        return q, s, z
    w1, s1, z1 = weights(f1, hd)
    w2, s2, z2 = weights(hd, inter)
    ins = [("x", _f(t, hd)), ("r", _f(t, e)), ("w1", w1), ("s1", s1), ("b1", _f(e, f1)),
           ("w2", w2), ("s2", s2), ("b2", _f(e, hd)), ("w3", None), ("s3", None),
           ("b3", None), ("z1", z1), ("z2", z2)]
    attrs = {"k": 2, "activation_type": act, "expert_weight_bits": bits,
             "normalize_routing_weights": 1}
    if block:
        attrs["block_size"] = block
    if act == "swiglu":
        attrs["swiglu_fusion"] = 1
    ref, got = both("QMoE", ins, consts=("w1", "s1", "w2", "s2", "z1", "z2"), **attrs)
    if not (bits == 8 and block):
        assert_close(ref, got, rtol=1e-4, atol=1e-4)
    # onnxruntime 1.32's 8-bit block-wise experts differ from the float product of the
    # dequantized weights (by ~1%; the kernel of its source snapshot dequantizes to float,
    # as onnxrt does): every case is also checked against that NumPy formula
    x, r = ins[0][1], ins[1][1]
    deq = []
    for q, sc, z, cols in ((w1, s1, z1, hd), (w2, s2, z2, inter)):
        v = q.astype(np.float32)
        if bits == 4:
            v = np.stack([q & 15, q >> 4], axis=-1).reshape(q.shape[0], q.shape[1], -1)
            z = None if z is None else np.stack([z & 15, z >> 4], -1).reshape(
                z.shape[:-1] + (-1,))[..., :sc.shape[-1]]
        zz = np.full(sc.shape, 2 ** (bits - 1), np.float32) if z is None else z
        rep = (lambda a: np.repeat(a, block, axis=2)) if block else (lambda a: a[:, :, None])
        deq.append(rep(sc) * (v.astype(np.float32) - rep(zz.astype(np.float32))))
    p = np.exp(r - r.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    want = np.zeros_like(x)
    for i in range(t):
        top = np.argsort(-p[i])[:2]
        wts = p[i, top] / p[i, top].sum()
        for ex, wt in zip(top, wts):
            h = deq[0][ex] @ x[i] + ins[4][1][ex]
            if act == "relu":
                h = np.maximum(h, 0)
            else:
                g, lin = h[0::2], h[1::2]
                h = g / (1 + np.exp(-g)) * lin
            want[i] += wt * (deq[1][ex] @ h + ins[7][1][ex])
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-4)
