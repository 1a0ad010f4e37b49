"""com.microsoft GroupQueryAttention and RotaryEmbedding against onnxruntime: prompt and
token generation, past/present KV in separate and shared-buffer layouts (the latter also
through onnxruntime's IOBinding with one buffer for past and present), rotary inside
(interleaved or not, partial), local window, softcap, attention bias, head sinks / smooth
softmax, QK output, packed QKV, float16."""

from __future__ import annotations

import numpy as np
import onnxruntime
import pytest

from kernels.contrib_oracle import assert_close, both, ms_model, run_ours

RNG = np.random.default_rng(44)


def _f(*shape, dt=np.float32):
    return RNG.normal(size=shape).astype(dt)


def _caches(max_len, half, dt=np.float32):
    inv = 1.0 / (10000 ** (np.arange(half) / half))
    ang = np.arange(max_len)[:, None] * inv[None, :]
    return np.cos(ang).astype(dt), np.sin(ang).astype(dt)


def _gqa_inputs(b=2, s=5, n=4, nkv=2, h=16, past=None, buf=None, lens=None, packed=False,
                rotary=None, bias=False, sink=False, dt=np.float32):
    """past: per-batch past lengths (token generation) or None (first prompt); buf: the
    past buffer length (default: the longest past)."""
    if past is None:
        lens = np.full(b, s) if lens is None else np.asarray(lens)
        total = s
    else:
        lens = np.asarray(past) + s
        total = int(lens.max())
    ins = []
    if packed:
        ins += [("q", _f(b, s, (n + 2 * nkv) * h, dt=dt)), ("k", None), ("v", None)]
    else:
        ins += [("q", _f(b, s, n * h, dt=dt)), ("k", _f(b, s, nkv * h, dt=dt)),
                ("v", _f(b, s, nkv * h, dt=dt))]
    if past is not None:
        p = buf or int(max(past))
        ins += [("pk", _f(b, nkv, p, h, dt=dt)), ("pv", _f(b, nkv, p, h, dt=dt))]
    else:
        ins += [("pk", None), ("pv", None)]
    ins += [("sl", (lens - 1).astype(np.int32)), ("tot", np.array(total, np.int32))]
    if rotary:
        cos, sin = _caches(32, rotary, dt)
        ins += [("cos", cos), ("sin", sin)]
    else:
        ins += [("cos", None), ("sin", None)]
    ins += [("pos", None)]
    ins += [("ab", _f(b, 1, s, total, dt=dt) if bias else None)]
    ins += [("hs", _f(n, dt=dt) if sink else None)]
    return ins


def _check(ins, dt=np.float32, outputs=3, **attrs):
    tol = 3e-3 if dt == np.float16 else 2e-5
    attrs.setdefault("num_heads", 4)
    attrs.setdefault("kv_num_heads", 2)
    ref, got = both("GroupQueryAttention", ins, outputs=outputs, **attrs)
    assert_close(ref, got, rtol=tol, atol=tol)


@pytest.mark.parametrize("n,nkv", [(4, 2), (4, 4), (6, 1)])
def test_gqa_prompt(n, nkv):
    _check(_gqa_inputs(n=n, nkv=nkv), num_heads=n, kv_num_heads=nkv)


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("h,half", [(16, 8), (32, 8)])
def test_gqa_rotary(interleaved, h, half):
    _check(_gqa_inputs(h=h, rotary=half), do_rotary=1, rotary_interleaved=interleaved)


@pytest.mark.parametrize("rotary", [None, 8])
@pytest.mark.parametrize("buf", [None, 12])
def test_gqa_token_generation(rotary, buf):
    # per-batch past lengths differ; buf=12: a past buffer of the maximum length (the
    # shared-buffer layout), its tail holding stale values the kernel must not read
    ins = _gqa_inputs(b=3, s=1, past=[6, 3, 9], buf=buf, rotary=rotary)
    _check(ins, do_rotary=int(bool(rotary)))


def test_gqa_subsequent_prompt():
    _check(_gqa_inputs(b=1, s=3, past=[5], buf=10, rotary=8), do_rotary=1)


@pytest.mark.parametrize("window", [2, 4])
def test_gqa_local_window(window):
    _check(_gqa_inputs(s=6), local_window_size=window)
    _check(_gqa_inputs(b=2, s=1, past=[7, 2], buf=9), local_window_size=window)


def test_gqa_softcap_bias_sink():
    _check(_gqa_inputs(bias=True, sink=True), softcap=2.5)
    _check(_gqa_inputs(s=1, past=[4, 4], bias=True), softcap=1.0, smooth_softmax=1)


@pytest.mark.parametrize("qk_output", [1, 2])
def test_gqa_qk_output(qk_output):
    _check(_gqa_inputs(s=4), outputs=4, qk_output=qk_output, local_window_size=2,
           softcap=3.0)


def test_gqa_packed_qkv():
    _check(_gqa_inputs(packed=True, rotary=8), do_rotary=1)
    _check(_gqa_inputs(s=1, past=[3, 5], packed=True, rotary=8), do_rotary=1)


def test_gqa_float16():
    dt = np.float16
    _check(_gqa_inputs(dt=dt, rotary=8), dt=dt, do_rotary=1)
    _check(_gqa_inputs(s=1, past=[3, 5], dt=dt), dt=dt)


def test_gqa_shared_buffer_iobinding():
    """onnxruntime with one buffer bound as past and present (its recommended setup): the
    output and the present's valid positions match onnxrt's."""
    b, s, buf = 2, 1, 10
    ins = _gqa_inputs(b=b, s=s, past=[4, 7], buf=buf, rotary=8)
    m = ms_model("GroupQueryAttention", ins, outputs=["y", "pk_out", "pv_out"],
                 num_heads=4, kv_num_heads=2, do_rotary=1)
    feeds = {k: v for k, v in ins if v is not None}
    got = run_ours(m, feeds)
    sess = onnxruntime.InferenceSession(m.SerializeToString(),
                                        providers=["CPUExecutionProvider"])
    io = sess.io_binding()
    # ortvalue_from_numpy wraps the array's memory: the copies must outlive the run
    keep = {n: feeds[n].copy() for n in ("pk", "pv")}
    kv = {n: onnxruntime.OrtValue.ortvalue_from_numpy(keep[n]) for n in ("pk", "pv")}
    for name, val in feeds.items():
        if name in kv:
            io.bind_ortvalue_input(name, kv[name])
        else:
            io.bind_cpu_input(name, val)
    io.bind_output("y")
    io.bind_ortvalue_output("pk_out", kv["pk"])
    io.bind_ortvalue_output("pv_out", kv["pv"])
    sess.run_with_iobinding(io)
    y = io.copy_outputs_to_cpu()[0]
    np.testing.assert_allclose(got[0], y, rtol=2e-5, atol=2e-5)
    lens = [5, 8]
    for i in range(b):
        for mine, theirs in ((got[1], keep["pk"]), (got[2], keep["pv"])):
            np.testing.assert_allclose(mine[i, :, :lens[i]], theirs[i, :, :lens[i]],
                                       rtol=2e-5, atol=2e-5)


@pytest.mark.parametrize("layout", ["bsd", "bnsh"])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("pos", ["start", "full"])
def test_rotary_embedding(layout, interleaved, pos):
    b, s, n, h = 2, 5, 3, 16
    x = _f(b, s, n * h) if layout == "bsd" else _f(b, n, s, h)
    cos, sin = _caches(20, h // 2)
    p = np.array([3], np.int64) if pos == "start" else \
        RNG.integers(0, 20, size=(b, s)).astype(np.int64)
    ins = [("x", x), ("p", p), ("c", cos), ("s", sin)]
    assert_close(*both("RotaryEmbedding", ins, interleaved=interleaved), rtol=1e-5,
                 atol=1e-5)


def test_rotary_embedding_partial_dim():
    b, s, n, h = 2, 4, 2, 32
    cos, sin = _caches(10, 8)
    ins = [("x", _f(b, s, n * h)), ("p", RNG.integers(0, 10, (b, s)).astype(np.int64)),
           ("c", cos), ("s", sin)]
    assert_close(*both("RotaryEmbedding", ins, rotary_embedding_dim=16, num_heads=n),
                 rtol=1e-5, atol=1e-5)


def test_rotary_embedding_float16():
    cos, sin = _caches(10, 8, np.float16)
    ins = [("x", _f(1, 3, 32, dt=np.float16)), ("p", np.array([2], np.int64)), ("c", cos),
           ("s", sin)]
    assert_close(*both("RotaryEmbedding", ins), rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("window", [-1, 3])
@pytest.mark.parametrize("softcap", [0.0, 2.0])
@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("packed", [False, True])
def test_gqa_decode_step(window, softcap, interleaved, packed):
    """One new position per batch (the compiled step, contrib/gqa_decode.py): ragged past
    lengths in a longer shared buffer, local window, softcap, rotary (partial), packed
    QKV, a query group of 3 heads per KV head."""
    ins = _gqa_inputs(b=3, s=1, n=6, nkv=2, h=32, past=[5, 9, 2], buf=11, rotary=8,
                      packed=packed)
    _check(ins, num_heads=6, kv_num_heads=2, do_rotary=1, rotary_interleaved=interleaved,
           local_window_size=window, softcap=softcap)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("b,past,buf", [(1, [7], None), (3, [5, 9, 2], 11)])
def test_gqa_decode_step_fast_path(monkeypatch, packed, b, past, buf):
    """A token-generation step as the genai builder's decoders run it (batch 1, past of
    exactly the earlier positions) and a ragged batch in a longer buffer go through the
    kernel's plain-Python step (_decode_step) and match onnxruntime; a step it declines
    (an attention bias) still runs, through the general path."""
    from onnxrt.framework import warmup
    from onnxrt.providers.cpu.contrib import gqa, gqa_decode

    if gqa_decode.kernel() is None and not warmup.wait(600):
        pytest.skip("the compiled kernels are off here (numba missing or ONNXRT_JIT=0)")
    taken = []
    real = gqa.GroupQueryAttention._decode_step

    def spy(self, *a, **k):
        r = real(self, *a, **k)
        taken.append(r is not None)
        return r

    monkeypatch.setattr(gqa.GroupQueryAttention, "_decode_step", spy)
    ins = _gqa_inputs(b=b, s=1, n=8, nkv=4, h=16, past=past, buf=buf, rotary=8,
                      packed=packed)
    _check(ins, num_heads=8, kv_num_heads=4, do_rotary=1)
    assert taken == [True]
    taken.clear()
    ins = _gqa_inputs(b=b, s=1, n=8, nkv=4, h=16, past=past, buf=buf, rotary=8,
                      packed=packed, bias=True)
    _check(ins, num_heads=8, kv_num_heads=4, do_rotary=1)
    assert taken == []
