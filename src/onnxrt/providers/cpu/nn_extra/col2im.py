"""Col2Im (18): scatter-add column blocks back into an N-D image.

One strided slice-add per kernel offset (prod(block_shape) of them), each covering every
block at once, into a padded canvas that is cropped at the end.
"""

from __future__ import annotations

import itertools

import numpy as np

from onnxrt.providers.cpu import CPU


@CPU.kernel("Col2Im", since=18, host_inputs=(1, 2))
def col2im(x, image_shape, block_shape, *, dilations=None, pads=None, strides=None):
    img = [int(v) for v in np.asarray(image_shape).reshape(-1)]
    blk = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    r = len(img)
    if len(blk) != r:
        raise ValueError(f"Col2Im: image_shape {img} and block_shape {blk} differ in rank")
    dil = list(dilations) if dilations else [1] * r
    st = list(strides) if strides else [1] * r
    pd = list(pads) if pads else [0] * (2 * r)
    if x.ndim != 3:
        raise ValueError(f"Col2Im: input must be 3-D [N, C*prod(block), L], got {x.shape}")
    n, ck, n_blocks = x.shape
    kprod = int(np.prod(blk))
    if ck % kprod:
        raise ValueError(f"Col2Im: dim 1 ({ck}) is not a multiple of prod(block_shape)={kprod}")
    c = ck // kprod
    counts = [(img[d] + pd[d] + pd[r + d] - dil[d] * (blk[d] - 1) - 1) // st[d] + 1
              for d in range(r)]
    if int(np.prod(counts)) != n_blocks:
        raise ValueError(f"Col2Im: {n_blocks} blocks given, the shapes imply {counts}")
    cols = x.reshape([n, c] + blk + counts)
    padded = [img[d] + pd[d] + pd[r + d] for d in range(r)]
    # narrow floats (float16, bfloat16, float8) accumulate in float32
    acc_dt = x.dtype if x.dtype.kind in "iuc" or x.dtype in (np.float32, np.float64) \
        else np.dtype(np.float32)
    out = np.zeros([n, c] + padded, dtype=acc_dt)
    for k in itertools.product(*(range(b) for b in blk)):
        sl = tuple(slice(k[d] * dil[d], k[d] * dil[d] + st[d] * (counts[d] - 1) + 1, st[d])
                   for d in range(r))
        out[(slice(None), slice(None)) + sl] += cols[(slice(None), slice(None)) + k]
    crop = tuple(slice(pd[d], pd[d] + img[d]) for d in range(r))
    return out[(slice(None), slice(None)) + crop].astype(x.dtype, copy=False)
