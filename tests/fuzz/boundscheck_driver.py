"""Drives every compiled kernel through its Python wrapper over generated arguments; run by
test_boundscheck.py in a process with NUMBA_BOUNDSCHECK=1 and an empty numba cache, so that
an index out of bounds raises IndexError instead of reading or writing past memory.

Arguments the wrappers accept must run without one; arguments that break a precondition
must be refused by the wrapper (ValueError) before any compiled call. Prints one JSON line
of counts; exits non-zero on the first failure."""

from __future__ import annotations

import json
import random
import sys

import numpy as np


def main(cases: int, seed: int) -> None:
    from onnxrt.framework.parallel import SERIAL
    from onnxrt.providers.cpu import blas
    from onnxrt.providers.cpu.contrib import attention, gelu, layer_norm
    from onnxrt.providers.cpu.nn import conv_jit, pool_jit, resolve_pads
    from onnxrt.providers.cpu.nn.pool import _counts, _PoolGeo

    # one thread: the kernels are called without a session's pool (parallel.SERIAL), so an
    # IndexError is never raised inside the hot pool's native loop, where it would not
    # reach this process's Python; each range is one (lo, hi) call
    rng = random.Random(seed)
    counts = {"ran": 0, "refused": 0}

    def expect(fn, valid: bool, what: str) -> None:
        try:
            fn()
        except ValueError:
            if valid:
                raise
            counts["refused"] += 1
            return
        if not valid:
            raise AssertionError(f"{what}: invalid arguments were not refused")
        counts["ran"] += 1

    for it in range(cases):
        dt = np.dtype(rng.choice([np.float32, np.float64]))
        nd = rng.choice([1, 2])
        kernel = [rng.randint(1, 4) for _ in range(nd)]
        strides = [rng.choice([1, 1, 2, 3]) for _ in range(nd)]
        dil = [rng.choice([1, 1, 2]) for _ in range(nd)]
        spatial = [rng.randint(1, 12) for _ in range(nd)]
        pads = [rng.randint(0, 3) for _ in range(2 * nd)]
        auto = rng.choice(["NOTSET", "NOTSET", "SAME_UPPER", "VALID"])
        try:
            begin, end, extra, out = resolve_pads(spatial, kernel, strides, dil, pads, auto)
        except ValueError:
            continue
        bad = rng.random() < 0.2
        if bad:     # one hostile value the wrappers must refuse
            which = rng.choice(["strides", "dil", "begin", "out"])
            {"strides": strides, "dil": dil, "begin": begin, "out": out}[which][0] = -1
        n, group = rng.randint(0, 2), rng.choice([1, 2, 3])
        cg = rng.choice([1, 1, 2])
        m = group * rng.randint(1, 2)
        x = np.random.RandomState(it).standard_normal([n, cg * group] + spatial).astype(dt)
        w = np.random.RandomState(it + 1).standard_normal([m, cg] + kernel).astype(dt)
        b = np.random.RandomState(it + 2).standard_normal(m).astype(dt)
        if group > 1 and cg == 1:
            k = conv_jit.conv_kernel(w, group)
            if k is not None:
                expect(lambda: k(x, b, list(strides), list(dil), list(begin), list(out)),
                       not bad, "JitConv")
        g = conv_jit.gemm_conv_kernel(w, group)
        if g is not None and not (group > 1 and cg == 1):
            expect(lambda: g(x, b, None, 0, 0.0, 0.0, list(strides), list(dil), list(begin),
                             list(out)), not bad, "GemmConv")
        # pools: the geometry object as the kernels build it, then the hostile value
        is_max = rng.random() < 0.5
        pads_p = [min(p, k - 1) for p, k in zip(pads, kernel + kernel)]
        try:
            geo = _PoolGeo(spatial, kernel, strides if strides[0] > 0 else None,
                           dil if dil[0] > 0 else None, pads_p, "NOTSET",
                           rng.choice([0, 1]))
        except ValueError:
            continue
        if bad:
            geo.strides[0] = -1
        pk = pool_jit.pool_kernel(is_max, dt, kernel, geo.strides)
        if pk is not None:
            xp = np.random.RandomState(it + 3).standard_normal([n, 3] + spatial).astype(dt)
            div = None if is_max or bad else _counts(spatial, geo, False, dt)
            expect(lambda: pk(xp, geo, div), not bad, "JitPool")
    # the row kernels: their wrappers check the shapes
    for it in range(cases):
        rows, cols = rng.randint(1, 9), rng.randint(1, 40)
        x = np.random.RandomState(it).standard_normal((rows, cols)).astype(np.float32)
        gam = np.random.RandomState(it + 1).standard_normal(cols).astype(np.float32)
        sk = x + 1
        r = layer_norm.compiled_norm(x, gam, gam, 1e-5, -1, sk, gam,
                                     simplified=rng.random() < .5, keep_sum=True)
        counts["ran"] += r is not None
        assert layer_norm.compiled_norm(x, gam[:-1] if cols > 1 else gam[:0], None, 1e-5) \
            is None
        loop = gelu._gelu_kernel()
        if loop is not None:
            gelu._run_rows(loop, x, gam, SERIAL)
            counts["ran"] += 1
            assert not gelu._rows_ok(loop, x, gam[:-1] if cols > 1 else gam[:0])
        heads = attention._heads_kernel()
        if heads is not None:
            fn, gemm = heads
            nh = rng.choice([1, 2])
            hd = rng.choice([1, 4])
            bsz, s = rng.randint(1, 2), rng.randint(1, 6)
            d = nh * hd
            qkv = np.random.RandomState(it).standard_normal((bsz, s, 3 * d)).astype(np.float32)
            out = np.empty((bsz, s, d), np.float32)
            ab = np.zeros((bsz, nh, s, s), np.float32)
            fn(gemm, qkv, out, ab, True, np.float32(0.5), rng.random() < .5,
               np.float32(-1e4), nh, d, d, d, 0, bsz * nh)
            counts["ran"] += 1
    assert blas is not None
    print(json.dumps(counts))


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
