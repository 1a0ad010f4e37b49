"""MatMulNBits decoding rows at accuracy_level 4 in integers, as onnxruntime computes them:
each block of a row of A quantized to int8 (scale max|a| / 127, round half to even, clipped
to +-127), multiplied with the 4-bit codes as u8 x s8 pairs (AVX2's vpmaddubsw then vpmaddwd:
32 codes per two instructions, against the float path's unpack, convert and four FMAs), the
exact int32 block sums scaled by the two block scales and accumulated in float32:

    y[m, n] = sum over blocks of sa * sb * (sum(qa * q) - zp * sum(qa))

(the zero-point term formed per column in float from sb * zp and sa * sum(qa)). Codes are
0..15 and |qa| <= 127, so the int16 pair sums of vpmaddubsw never saturate: the block sums
are exact, whatever the CPU. Written in LLVM IR (llvmlite) called from numba, for 4-bit
blocks of 32 or more on x86-64 CPUs with AVX2; elsewhere ``kernels()`` is None and
quant/nbits.py's float path runs (A quantized and scaled back, the same result up to the
float rounding of the sums).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from onnxrt.providers.cpu.nn import jit

__all__ = ["kernels", "supported"]


def _prep_q8(a, block, qa, sa, asum):
    """qa (M, blocks, block) int8 <- A's blocks quantized, each 32 values of a block
    stored as its 16 even-indexed values then its 16 odd-indexed ones (the order of a
    16-byte run of codes split into low and high nibbles); sa (M, blocks) the blocks'
    scales; asum (M, blocks) scale * sum of the block's int8 values. Zero past K."""
    m_n, k = a.shape
    kb = sa.shape[1]
    vals = np.empty(block, np.float32)
    for m in range(m_n):
        for blk in range(kb):
            k0 = blk * block
            cnt = min(block, k - k0)
            amax = np.float32(0)
            for j in range(cnt):
                v = a[m, k0 + j]
                vals[j] = v
                amax = max(amax, abs(v))
            for j in range(cnt, block):
                vals[j] = 0
            sc = amax / np.float32(127)
            inv = np.float32(1) / sc if sc != 0 else np.float32(0)
            tot = 0
            row = qa[m, blk]
            for j in range(block):
                q = np.int32(min(max(np.rint(vals[j] * inv), np.float32(-127)),
                                 np.float32(127)))
                tot += q
                w = j & 31
                row[(j - w) + (w & 1) * 16 + (w >> 1)] = q
            sa[m, blk] = sc
            asum[m, blk] = sc * np.float32(tot)


def _gemv_q8(qa, sa, asum, b, scales, szp, zc, bias, has_bias, y, lo, hi):
    """y[m, n] for columns lo..hi-1 (see the module doc): qa/sa/asum from _prep_q8, b (N,
    blocks, block / 2) the codes, scales and szp = scale * zero point (N, blocks); zc >= 0:
    every zero point is zc, and szp is not read (its reads were a third of a cold weight's
    memory traffic: the scales just read are in cache). Four
    columns a call of _dot_q8_4 while they last (A's int8 loaded once for the four, four
    independent chains), then one a call."""
    m_n, kb = sa.shape
    chunks = b.shape[2] // 16
    bstride = b.shape[1] * b.shape[2]
    lanes = np.empty(32, np.float32)
    lp = lanes.ctypes.data
    n = lo
    while n < hi:
        nc = 4 if hi - n >= 4 else 1
        bp = b[n].ctypes.data
        sp = scales[n].ctypes.data
        for m in range(m_n):
            if nc == 4:
                _dot_q8_4(qa[m].ctypes.data, bp, kb, chunks, sp, sa[m].ctypes.data, lp,
                          bstride, kb * 4)
            else:
                _dot_q8_1(qa[m].ctypes.data, bp, kb, chunks, sp, sa[m].ctypes.data, lp,
                          bstride, kb * 4)
            am = asum[m]
            for c in range(nc):
                corr = np.float32(0)
                if zc >= 0:
                    sn = scales[n + c]
                    for blk in range(kb):
                        corr += sn[blk] * am[blk]
                    corr *= zc
                else:
                    zn = szp[n + c]
                    for blk in range(kb):
                        corr += zn[blk] * am[blk]
                tot = np.float32(0)
                for j in range(8):
                    tot += lanes[8 * c + j]
                tot -= corr
                if has_bias:
                    tot += bias[n + c]
                y[m, n + c] = tot
        n += nc


def _dot_q8_intrinsic(cols: int) -> Any:
    """_dot_q8(qa, b, kb, chunks, sb, sa, out, bstride, sstride): for each column c <
    ``cols`` (codes at b + c * bstride, scales at sb + c * sstride), out[8c:8c+8] = sum over
    blocks k < kb of sb[k] * sa[k] * (the block's int32 lanes: over its chunks,
    vpmaddwd(vpmaddubsw(codes of 16 bytes as 16 low then 16 high nibbles, 32 int8 of qa),
    1)); all arguments addresses but kb, chunks and the strides (bytes)."""
    from llvmlite import ir
    from numba.core import cgutils, types
    from numba.extending import intrinsic

    i8, i16, i32, i64, f32 = (ir.IntType(8), ir.IntType(16), ir.IntType(32), ir.IntType(64),
                              ir.FloatType())
    v16i8, v32i8 = ir.VectorType(i8, 16), ir.VectorType(i8, 32)
    v16i16, v8i32, v8f = ir.VectorType(i16, 16), ir.VectorType(i32, 8), ir.VectorType(f32, 8)

    def declare(module: Any, name: str, ret: Any, args: list[Any]) -> Any:
        fn = module.globals.get(name)
        if fn is None:
            fn = ir.Function(module, ir.FunctionType(ret, args), name=name)
        return fn

    def codegen(context, builder, signature, args):
        qa, b, kb, chunks, sbp, sap, out, bstride, sstride = args
        mod = builder.module
        maddubs = declare(mod, "llvm.x86.avx2.pmadd.ub.sw", v16i16, [v32i8, v32i8])
        maddwd = declare(mod, "llvm.x86.avx2.pmadd.wd", v8i32, [v16i16, v16i16])
        fma = declare(mod, "llvm.fma.v8f32", v8f, [v8f, v8f, v8f])
        prefetch = declare(mod, "llvm.prefetch.p0i8", ir.VoidType(),
                           [i8.as_pointer(), i32, i32, i32])
        lanes = [cgutils.alloca_once_value(builder, ir.Constant(v8f, None))
                 for _ in range(cols)]
        accs = [cgutils.alloca_once_value(builder, ir.Constant(v8i32, None))
                for _ in range(cols)]
        bcol = [builder.add(b, builder.mul(bstride, ir.Constant(i64, c))) for c in range(cols)]
        scol = [builder.add(sbp, builder.mul(sstride, ir.Constant(i64, c)))
                for c in range(cols)]
        mask = ir.Constant(v16i8, [ir.Constant(i8, 15)] * 16)
        four = ir.Constant(v16i8, [ir.Constant(i8, 4)] * 16)
        ones = ir.Constant(v16i16, [ir.Constant(i16, 1)] * 16)
        cat = ir.Constant(ir.VectorType(i32, 32), [ir.Constant(i32, i) for i in range(32)])
        zero8 = ir.Constant(v8i32, [ir.Constant(i32, 0)] * 8)
        with cgutils.for_range(builder, kb) as blk_loop:
            blk = blk_loop.index
            for acc in accs:
                builder.store(ir.Constant(v8i32, None), acc)
            with cgutils.for_range(builder, chunks) as c_loop:
                idx = builder.add(builder.mul(blk, chunks), c_loop.index)
                av = builder.load(builder.inttoptr(
                    builder.add(qa, builder.mul(idx, ir.Constant(i64, 32))),
                    v32i8.as_pointer()), align=1)
                boff = builder.mul(idx, ir.Constant(i64, 16))
                for c in range(cols):
                    # two calls ahead (2 * cols rows of codes on): a cold weight is
                    # streamed from memory, and the hardware's prefetch alone left the
                    # kernel waiting on it most of the time
                    ahead = builder.add(builder.add(bcol[c], boff),
                                        builder.mul(bstride, ir.Constant(i64, 2 * cols)))
                    builder.call(prefetch, [builder.inttoptr(ahead, i8.as_pointer()),
                                            ir.Constant(i32, 0), ir.Constant(i32, 3),
                                            ir.Constant(i32, 1)])
                    bv = builder.load(builder.inttoptr(builder.add(bcol[c], boff),
                                                       v16i8.as_pointer()), align=1)
                    codes = builder.shuffle_vector(builder.and_(bv, mask),
                                                   builder.lshr(bv, four), cat)
                    pairs = builder.call(maddubs, [codes, av])
                    builder.store(builder.add(builder.load(accs[c]),
                                              builder.call(maddwd, [pairs, ones])), accs[c])
            off = builder.mul(blk, ir.Constant(i64, 4))
            sa = builder.load(builder.inttoptr(builder.add(sap, off), f32.as_pointer()), align=4)
            for c in range(cols):
                sb = builder.load(builder.inttoptr(builder.add(scol[c], off), f32.as_pointer()),
                                  align=4)
                s = builder.fmul(sb, sa)
                sv = builder.insert_element(ir.Constant(v8f, ir.Undefined), s,
                                            ir.Constant(i32, 0))
                sv = builder.shuffle_vector(sv, sv, zero8)
                fv = builder.sitofp(builder.load(accs[c]), v8f)
                builder.store(builder.call(fma, [sv, fv, builder.load(lanes[c])]), lanes[c])
        for c in range(cols):
            dst = builder.add(out, ir.Constant(i64, 32 * c))
            builder.store(builder.load(lanes[c]), builder.inttoptr(dst, v8f.as_pointer()),
                          align=4)
        return context.get_dummy_value()

    @intrinsic
    def dot_q8(typingctx, qa, b, kb, chunks, sb, sa, out, bstride, sstride):
        return types.void(*([types.int64] * 9)), codegen
    return dot_q8


def supported() -> bool:
    """AVX2 on this CPU (the instructions the kernel is written with)."""
    try:
        from llvmlite import binding
        return "+avx2" in binding.get_host_cpu_features().flatten().split(",")
    except Exception:
        return False


_SLOT: list[Any] = []


def _build(numba: Any) -> dict[str, Any] | None:
    if not supported():
        return None
    globals()["_dot_q8_1"] = _dot_q8_intrinsic(1)
    globals()["_dot_q8_4"] = _dot_q8_intrinsic(4)
    return {"prep": jit._njit(numba, _prep_q8),
            "gemv": jit._njit(numba, _gemv_q8, fastmath={"reassoc", "contract"})}


def kernels() -> dict[str, Any] | None:
    """The compiled kernels, or None (no numba, ONNXRT_JIT=0, no AVX2)."""
    return jit.compile_once(_SLOT, _build)
