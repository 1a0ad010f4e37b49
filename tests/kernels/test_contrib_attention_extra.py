"""com.microsoft SparseAttention and DecoderMaskedMultiHeadAttention against onnxruntime
(both need past and present in one buffer there: run through its IOBinding)."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from kernels.contrib_oracle import assert_close, both, ms_model, run_ours

RNG = np.random.default_rng(55)


def _f(*shape):
    return RNG.normal(size=shape).astype(np.float32)


def _ort_shared(model, feeds, pairs, outputs):
    """Run onnxruntime with each (input, output) of ``pairs`` bound to one buffer; returns
    the outputs in ``outputs`` order (shared ones read from the buffer)."""
    sess = onnxruntime.InferenceSession(model.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
    io = sess.io_binding()
    # ortvalue_from_numpy wraps the array's memory: the copies must outlive the run
    keep = {i: feeds[i].copy() for i, _ in pairs}
    bufs = {i: onnxruntime.OrtValue.ortvalue_from_numpy(keep[i]) for i, _ in pairs}
    for name, val in feeds.items():
        if name in bufs:
            io.bind_ortvalue_input(name, bufs[name])
        else:
            io.bind_cpu_input(name, val)
    shared = {o: i for i, o in pairs}
    for o in outputs:
        if o in shared:
            io.bind_ortvalue_output(o, bufs[shared[o]])
        else:
            io.bind_output(o)
    sess.run_with_iobinding(io)
    res = io.copy_outputs_to_cpu()               # every bound output, in binding order
    for j, o in enumerate(outputs):
        if o in shared:   # and the shared buffer itself holds the same values
            np.testing.assert_array_equal(res[j], keep[shared[o]])
    return res


def _layouts():
    # two layouts over 4 blocks (the ContribOperators example), then a dense causal one
    rows = np.array([[0, 1, 3, 5, 8], [0, 1, 3, 6, 9]], np.int32)
    cols = np.array([[0, 0, 1, 1, 2, 1, 2, 3, -1], [0, 0, 1, 0, 1, 2, 0, 2, 3]], np.int32)
    dense_rows = np.array([[0, 1, 3, 6, 10]], np.int32)
    dense_cols = np.array([[0, 0, 1, 0, 1, 2, 0, 1, 2, 3]], np.int32)
    return [(rows, cols), (dense_rows, dense_cols)]


@pytest.mark.parametrize("layout", [0, 1])
@pytest.mark.parametrize("case", ["prompt", "decode", "rotary_prompt", "rotary_decode",
                                  "packed"])
def test_sparse_attention(layout, case):
    n, nkv, h, blk, cache = 4, 2, 16, 16, 64
    rows, cols = _layouts()[layout]
    if case in ("prompt", "rotary_prompt", "packed"):
        b, s, lens = 2, 40, np.array([40, 40])
    else:
        # onnxruntime reads the probabilities of a batch whose key length differs from the
        # longest at the wrong offset: batched decoding compares equal lengths here, and
        # test_sparse_attention_ragged_decode compares ragged ones batch by batch
        b, s, lens = 2, 1, np.array([37, 37])
    total = int(lens.max())
    if case == "packed":
        qkv = [("q", _f(b, s, (n + 2 * nkv) * h)), ("k", None), ("v", None)]
    else:
        qkv = [("q", _f(b, s, n * h)), ("k", _f(b, s, nkv * h)), ("v", _f(b, s, nkv * h))]
    ins = qkv + [("pk", _f(b, nkv, cache, h)), ("pv", _f(b, nkv, cache, h)),
                 ("br", rows), ("bc", cols), ("tot", np.array(total, np.int32)),
                 ("kl", lens.astype(np.int32))]
    attrs = {"num_heads": n, "kv_num_heads": nkv, "sparse_block_size": blk}
    if case.startswith("rotary") or case == "packed":
        ang = np.arange(64)[:, None] / (10000 ** (np.arange(8) / 8))[None, :]
        ins += [("cos", np.cos(ang).astype(np.float32)), ("sin", np.sin(ang).astype(np.float32))]
        attrs["do_rotary"] = 1
    m = ms_model("SparseAttention", ins, outputs=["y", "pko", "pvo"], **attrs)
    feeds = {k: v for k, v in ins if v is not None}
    ref = _ort_shared(m, feeds, [("pk", "pko"), ("pv", "pvo")], ["y", "pko", "pvo"])
    got = run_ours(m, feeds)
    np.testing.assert_allclose(got[0], ref[0], rtol=2e-5, atol=2e-5)
    for i in range(b):
        for o in (1, 2):
            np.testing.assert_allclose(got[o][i, :, :lens[i]], ref[o][i, :, :lens[i]],
                                       rtol=2e-5, atol=2e-5)


def test_sparse_attention_ragged_decode():
    n, nkv, h, blk, cache = 4, 2, 16, 16, 64
    rows, cols = _layouts()[0]
    b, lens = 2, np.array([37, 21])
    q, k, v = _f(b, 1, n * h), _f(b, 1, nkv * h), _f(b, 1, nkv * h)
    pk, pv = _f(b, nkv, cache, h), _f(b, nkv, cache, h)
    attrs = {"num_heads": n, "kv_num_heads": nkv, "sparse_block_size": blk}

    def inputs(sl, tot):
        return [("q", q[sl]), ("k", k[sl]), ("v", v[sl]), ("pk", pk[sl]), ("pv", pv[sl]),
                ("br", rows), ("bc", cols), ("tot", np.array(tot, np.int32)),
                ("kl", lens[sl].astype(np.int32))]
    ins = inputs(slice(None), 37)
    m = ms_model("SparseAttention", ins, outputs=["y", "pko", "pvo"], **attrs)
    got = run_ours(m, dict(ins))
    for i in range(b):
        one = inputs(slice(i, i + 1), int(lens[i]))
        m1 = ms_model("SparseAttention", one, outputs=["y", "pko", "pvo"], **attrs)
        ref = _ort_shared(m1, dict(one), [("pk", "pko"), ("pv", "pvo")], ["y", "pko", "pvo"])
        np.testing.assert_allclose(got[0][i:i + 1], ref[0], rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("beam", [1, 2])
@pytest.mark.parametrize("extras", [(), ("mask",), ("bias", "ab"), ("mask", "ab", "bias")])
def test_decoder_masked_mha_self(beam, extras):
    batch, n, h, mx, p = 2, 3, 8, 12, 7
    b = batch * beam
    d = n * h
    ins = [("q", _f(b, 1, d)), ("k", _f(b, 1, d)), ("v", _f(b, 1, d))]
    mask = np.ones((b, p + 1), np.int32)
    mask[0, 2] = mask[-1, 5] = 0
    ins += [("m", mask if "mask" in extras else None),
            # (batch * beam) rows, of which onnxruntime's beam kernel reads row b // beam
            ("ab", _f(b, n, 1, p + 1) if "ab" in extras else None),
            ("pk", _f(b, n, mx, h)), ("pv", _f(b, n, mx, h)),
            ("psl", np.array(p, np.int32)),
            ("bw", np.array(beam, np.int32) if beam > 1 else None),
            ("ci", RNG.integers(0, beam, size=(batch, beam, mx)).astype(np.int32)
             if beam > 1 else None),
            ("bias", _f(3 * d) if "bias" in extras else None)]
    m = ms_model("DecoderMaskedMultiHeadAttention", ins, outputs=["y", "pko", "pvo", "qk"],
                 num_heads=n, past_present_share_buffer=1, output_qk=1, out_types=[1] * 4)
    feeds = {k: v for k, v in ins if v is not None}
    ref = _ort_shared(m, feeds, [("pk", "pko"), ("pv", "pvo")], ["y", "pko", "pvo", "qk"])
    got = run_ours(m, feeds)
    np.testing.assert_allclose(got[0], ref[0], rtol=2e-5, atol=2e-5)
    np.testing.assert_allclose(got[3], ref[3], rtol=2e-5, atol=2e-5)
    for o in (1, 2):
        np.testing.assert_allclose(got[o][:, :, :p + 1], ref[o][:, :, :p + 1], rtol=2e-5,
                                   atol=2e-5)


@pytest.mark.parametrize("with_mask", [False, True])
def test_decoder_masked_mha_cross(with_mask):
    b, n, h, L = 2, 2, 8, 6
    mask = np.ones((b, L), np.int32)
    mask[1, 4:] = 0
    ins = [("q", _f(b, 1, n * h)), ("k", _f(b, n, L, h)), ("v", _f(b, n, L, h)),
           ("m", mask if with_mask else None)]
    assert_close(*both("DecoderMaskedMultiHeadAttention", ins, num_heads=n), rtol=2e-5,
                 atol=2e-5)
