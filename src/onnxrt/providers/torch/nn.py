"""Convolution, matrix products, pooling, normalization, softmax and resize on torch tensors
(cuDNN and cuBLAS stand behind them on CUDA).

One file of ~620 lines on purpose: about 60 kernels of a few lines each, most a call of
torch.nn.functional, sharing the padding and layout helpers at the top."""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

from onnxrt.providers.torch.registry import FLOAT, IDX, INT, TORCH

K = TORCH.kernel

_HALF = (torch.float16, torch.bfloat16)
_CONV = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}
_CONVT = {1: F.conv_transpose1d, 2: F.conv_transpose2d, 3: F.conv_transpose3d}
_MAXPOOL = {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}
_AVGPOOL = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}


def _same_pads(sizes, kernel, strides, dilations, lower: bool) -> list[int]:
    """Begin/end pads (ONNX order: all begins, then all ends) of auto_pad SAME_*."""
    begins, ends = [], []
    for n, k, s, d in zip(sizes, kernel, strides, dilations):
        out = -(-n // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - n)
        small = total // 2
        b, e = (total - small, small) if lower else (small, total - small)
        begins.append(b)
        ends.append(e)
    return begins + ends


def _torch_pad(pads: list[int]) -> list[int]:
    """ONNX pads (begins..., ends...) -> F.pad's order (last axis first, begin/end pairs)."""
    n = len(pads) // 2
    out = []
    for i in reversed(range(n)):
        out += [pads[i], pads[i + n]]
    return out


class _Spatial:
    """What Conv and the pools share: kernel, strides, dilations, pads and auto_pad."""

    def __init__(self, attrs, kernel_shape) -> None:
        self.k = [int(v) for v in kernel_shape]
        nd = len(self.k)
        self.nd = nd
        self.strides = [int(v) for v in (attrs.get("strides") or [1] * nd)]
        self.dil = [int(v) for v in (attrs.get("dilations") or [1] * nd)]
        self.auto_pad = attrs.get("auto_pad", "NOTSET") or "NOTSET"
        pads = attrs.get("pads")
        self.pads = [int(v) for v in pads] if pads else [0] * (2 * nd)

    def pads_for(self, sizes) -> list[int]:
        if self.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            return _same_pads(sizes, self.k, self.strides, self.dil,
                              self.auto_pad == "SAME_LOWER")
        if self.auto_pad == "VALID":
            return [0] * (2 * self.nd)
        return self.pads

    def split_pads(self, pads):
        """(symmetric padding torch can take, explicit pre-padding or None)."""
        nd = self.nd
        if pads[:nd] == pads[nd:]:
            return pads[:nd], None
        return [0] * nd, pads


@K("Conv", since=1, dtypes=FLOAT)
class Conv:
    def __init__(self, node) -> None:
        a = node.attrs
        w = node.constant_inputs.get(1)
        ks = a.get("kernel_shape") or (list(w.shape[2:]) if w is not None else None)
        self.ks = ks
        self.attrs = a
        self.group = int(a.get("group", 1))
        self.sp = _Spatial(a, ks) if ks is not None else None

    def __call__(self, x, w, b=None):
        sp = self.sp or _Spatial(self.attrs, w.shape[2:])
        pads = sp.pads_for(x.shape[2:])
        pad, pre = sp.split_pads(pads)
        if pre is not None:
            x = F.pad(x, _torch_pad(pre))
        return _CONV[sp.nd](x, w, b, sp.strides, pad, sp.dil, self.group)


@K("ConvTranspose", since=1, dtypes=FLOAT)
class ConvTranspose:
    def __init__(self, node) -> None:
        self.attrs = node.attrs
        self.group = int(node.attrs.get("group", 1))

    def __call__(self, x, w, b=None):
        a = self.attrs
        ks = [int(v) for v in (a.get("kernel_shape") or w.shape[2:])]
        sp = _Spatial(a, ks)
        nd = sp.nd
        sizes = list(x.shape[2:])
        outpad = [int(v) for v in (a.get("output_padding") or [0] * nd)]
        full = [(n - 1) * s + (k - 1) * d + 1 + op
                for n, s, k, d, op in zip(sizes, sp.strides, ks, sp.dil, outpad)]
        out_shape = a.get("output_shape")
        if out_shape:
            out_shape = [int(v) for v in out_shape][-nd:]
            begins, ends = [], []
            for f, o in zip(full, out_shape):
                total = f - o
                if sp.auto_pad == "SAME_UPPER":
                    begins.append(total // 2)
                    ends.append(total - total // 2)
                else:
                    begins.append(total - total // 2)
                    ends.append(total // 2)
            pads = begins + ends
        elif sp.auto_pad in ("SAME_UPPER", "SAME_LOWER"):
            begins, ends = [], []
            for f, n, s in zip(full, sizes, sp.strides):
                total = f - n * s
                small = total // 2
                b_, e_ = ((small, total - small) if sp.auto_pad == "SAME_UPPER"
                          else (total - small, small))
                begins.append(b_)
                ends.append(e_)
            pads = begins + ends
        elif sp.auto_pad == "VALID":
            pads = [0] * (2 * nd)
        else:
            pads = sp.pads
        if pads[:nd] == pads[nd:] and all(op < max(s, d) for op, s, d in
                                          zip(outpad, sp.strides, sp.dil)):
            return _CONVT[nd](x, w, b, sp.strides, pads[:nd], outpad, self.group, sp.dil)
        # asymmetric pads: the full result, then output_padding and pads as one crop/extend
        y = _CONVT[nd](x, w, None, sp.strides, 0, 0, self.group, sp.dil)
        crop = [-p for p in pads[:nd]] + [op - p for op, p in zip(outpad, pads[nd:])]
        y = F.pad(y, _torch_pad(crop))
        if b is not None:
            y = y + b.reshape([1, -1] + [1] * nd)
        return y


@K("MatMul", since=1, dtypes=FLOAT)
def matmul(a, b):
    if a.dtype in _HALF and a.device.type == "cpu":
        # torch's CPU half matmul rounds partial sums; GPUs accumulate in float32 anyway
        return torch.matmul(a.float(), b.float()).to(a.dtype)
    return torch.matmul(a, b)


@K("Gemm", since=7, dtypes=FLOAT)
class Gemm:
    def __init__(self, node) -> None:
        a = node.attrs
        self.alpha = float(a.get("alpha", 1.0))
        self.beta = float(a.get("beta", 1.0))
        self.ta = int(a.get("transA", 0))
        self.tb = int(a.get("transB", 0))
        # a constant B is transposed once, here
        self.b = node.constant_inputs.get(1)
        if self.b is not None and self.tb:
            self.b = self.b.t().contiguous()

    def __call__(self, a, b, c=None):
        if self.ta:
            a = a.t()
        if self.b is not None:
            b = self.b
        elif self.tb:
            b = b.t()
        if c is not None and self.beta != 0:
            return torch.addmm(c.expand(a.shape[0], b.shape[1]), a, b, beta=self.beta,
                               alpha=self.alpha)
        y = torch.mm(a, b)
        if self.alpha != 1.0:
            y = y * self.alpha
        return y


# -- pooling ----------------------------------------------------------------------------------

@K("MaxPool", since=1, dtypes=FLOAT | frozenset({np.dtype(np.int8), np.dtype(np.uint8)}),
   needs_node=True)
class MaxPool:
    def __init__(self, node) -> None:
        a = node.attrs
        self.sp = _Spatial(a, a["kernel_shape"])
        self.ceil = bool(a.get("ceil_mode", 0))
        self.storage_order = int(a.get("storage_order", 0))
        self.want_idx = node.output_present(1)
        self.multi = node.since_version >= 8   # MaxPool-1 has a single output

    def __call__(self, x):
        sp = self.sp
        nd = sp.nd
        sizes = list(x.shape[2:])
        pads = sp.pads_for(sizes)
        dtype = x.dtype
        if not x.is_floating_point():  # torch pools floats; 8-bit integers are exact in them
            x = x.to(torch.float32)
        pad, pre = sp.split_pads(pads)
        if pre is None and any(2 * p > k for p, k in zip(pad, sp.k)):
            pre, pad = pads, [0] * nd   # torch limits padding to half the kernel
        if pre is not None:
            x = F.pad(x, _torch_pad(pre), value=-math.inf)
        if not self.want_idx:
            y = _MAXPOOL[nd](x, sp.k, sp.strides, pad, sp.dil, ceil_mode=self.ceil)
            return (y.to(dtype),) if self.multi else y.to(dtype)
        y, idx = _MAXPOOL[nd](x, sp.k, sp.strides, pad, sp.dil, ceil_mode=self.ceil,
                              return_indices=True)
        # torch's indices run over one (padded) plane; ONNX's over the whole unpadded tensor
        psizes = list(x.shape[2:])
        coords = []
        rest = idx
        for n in reversed(psizes):
            coords.append(rest % n)
            rest = rest // n
        coords = coords[::-1]
        if pre is not None:
            coords = [c - p for c, p in zip(coords, pre[:nd])]
        order = range(nd) if self.storage_order == 0 else reversed(range(nd))
        flat = torch.zeros_like(idx)
        for i in order:
            flat = flat * sizes[i] + coords[i]
        plane = int(np.prod(sizes))
        nc = torch.arange(idx.shape[0] * idx.shape[1], device=idx.device).reshape(
            idx.shape[:2] + (1,) * nd)
        return y.to(dtype), flat + nc * plane


@K("AveragePool", since=1, dtypes=FLOAT)
class AveragePool:
    def __init__(self, node) -> None:
        a = node.attrs
        self.sp = _Spatial(a, a["kernel_shape"])
        self.ceil = bool(a.get("ceil_mode", 0))
        self.include = bool(a.get("count_include_pad", 0))

    def __call__(self, x):
        sp = self.sp
        nd = sp.nd
        pads = sp.pads_for(list(x.shape[2:]))
        pad, pre = sp.split_pads(pads)
        if pre is None and any(2 * p > k for p, k in zip(pad, sp.k)):
            pre, pad = pads, [0] * nd
        pool = _AVGPOOL[nd]
        if any(d != 1 for d in sp.dil):
            return _avg_dilated(x, sp, pads, self.ceil, self.include)
        if pre is None:
            return pool(x, sp.k, sp.strides, pad, ceil_mode=self.ceil,
                        count_include_pad=self.include)
        xp = F.pad(x, _torch_pad(pre))
        y = pool(xp, sp.k, sp.strides, 0, ceil_mode=self.ceil, count_include_pad=True)
        if self.include:
            return y
        # divide by the number of real (unpadded) elements under each window
        ones = F.pad(torch.ones((1, 1) + tuple(x.shape[2:]), dtype=x.dtype, device=x.device),
                     _torch_pad(pre))
        cnt = pool(ones, sp.k, sp.strides, 0, ceil_mode=self.ceil, count_include_pad=True)
        return y / cnt


def _avg_dilated(x, sp, pads, ceil, include):
    """Average pooling with dilations (torch's avg_pool has none): one strided slice per
    kernel offset, summed, divided by the count of counted positions under each window."""
    import itertools

    nd = sp.nd
    sizes = list(x.shape[2:])
    outs, extra = [], []
    for n, k, s, d, b, e in zip(sizes, sp.k, sp.strides, sp.dil, pads[:nd], pads[nd:]):
        eff = (k - 1) * d + 1
        span = n + b + e - eff
        o = (-(-span // s) if ceil else span // s) + 1
        if ceil and (o - 1) * s >= n + b:   # a last window starting in the end padding
            o -= 1
        outs.append(o)
        extra.append(max(0, (o - 1) * s + eff - (n + b + e)))
    xp = F.pad(x, _torch_pad(pads[:nd] + [e + x_ for e, x_ in zip(pads[nd:], extra)]))
    m = torch.ones([1, 1] + sizes, dtype=x.dtype, device=x.device)
    m = F.pad(m, _torch_pad(pads), value=1.0 if include else 0.0)
    m = F.pad(m, _torch_pad([0] * nd + extra))
    acc = cnt = None
    for off in itertools.product(*[range(k) for k in sp.k]):
        idx = (slice(None), slice(None)) + tuple(
            slice(o * d, o * d + (n_out - 1) * s + 1, s)
            for o, d, s, n_out in zip(off, sp.dil, sp.strides, outs))
        acc = xp[idx] if acc is None else acc + xp[idx]
        cnt = m[idx] if cnt is None else cnt + m[idx]
    return acc / cnt


@K("GlobalAveragePool", since=1, dtypes=FLOAT)
def global_average_pool(x):
    return x.mean(dim=tuple(range(2, x.dim())), keepdim=True)


@K("GlobalMaxPool", since=1, dtypes=FLOAT)
def global_max_pool(x):
    return x.amax(dim=tuple(range(2, x.dim())), keepdim=True)


@K("GlobalLpPool", since=2, dtypes=FLOAT)
def global_lp_pool(x, *, p=2):
    return torch.linalg.vector_norm(x, ord=p, dim=tuple(range(2, x.dim())), keepdim=True)


# -- normalization ----------------------------------------------------------------------------

@K("BatchNormalization", since=7, dtypes=FLOAT)
class BatchNorm:
    def __init__(self, node) -> None:
        a = node.attrs
        self.eps = float(a.get("epsilon", 1e-5))
        c = node.constant_inputs
        self.ab = None
        if all(i in c for i in (1, 2, 3, 4)):
            # y = x * a + b with a, b folded once from the constant statistics
            s, bias, m, v = (c[i].to(torch.float32) for i in (1, 2, 3, 4))
            a_ = s / torch.sqrt(v + self.eps)
            self.ab = (a_, bias - m * a_)

    def __call__(self, x, scale, bias, mean, var):
        shape = [1, -1] + [1] * (x.dim() - 2)
        if self.ab is not None:
            a_, b_ = self.ab
            return (torch.addcmul(b_.to(x.dtype).reshape(shape), x,
                                  a_.to(x.dtype).reshape(shape)),)
        return (F.batch_norm(x, mean, var, scale, bias, False, 0.0, self.eps),)


@K("InstanceNormalization", since=6, dtypes=FLOAT)
def instance_norm(x, scale, bias, *, epsilon=1e-5):
    return F.instance_norm(x, weight=scale, bias=bias, eps=epsilon)


_STASH = {1: torch.float32}


@K("LayerNormalization", since=17, dtypes=FLOAT, needs_node=True)
def layer_norm(x, scale, bias=None, *, axis=-1, epsilon=1e-5, stash_type=1, node=None):
    r = x.dim()
    axis = axis + r if axis < 0 else axis
    dims = tuple(range(axis, r))
    norm_shape = x.shape[axis:]
    if not (node.output_present(1) or node.output_present(2)):
        w = scale.expand(norm_shape) if tuple(scale.shape) != tuple(norm_shape) else scale
        b = None
        if bias is not None:
            b = bias.expand(norm_shape) if tuple(bias.shape) != tuple(norm_shape) else bias
        if x.dtype in (torch.float16, torch.bfloat16):
            y = F.layer_norm(x.float(), norm_shape, w.float(),
                             None if b is None else b.float(), epsilon)
            return (y.to(x.dtype),)
        return (F.layer_norm(x, norm_shape, w, b, epsilon),)
    xf = x.to(torch.float32) if stash_type == 1 and x.dtype != torch.float64 else x
    mean = xf.mean(dim=dims, keepdim=True)
    d = xf - mean
    var = (d * d).mean(dim=dims, keepdim=True)
    inv = torch.rsqrt(var + epsilon)
    y = (d * inv).to(x.dtype) * scale
    if bias is not None:
        y = y + bias
    return y, mean, inv


@K("GroupNormalization", since=18, dtypes=FLOAT, needs_node=True)
def group_norm(x, scale, bias, *, num_groups, epsilon=1e-5, stash_type=1, node=None):
    c = x.shape[1]
    if node.since_version < 21 and scale.shape[0] != c:
        # opset 18: one scale and bias per group
        scale = scale.repeat_interleave(c // num_groups)
        bias = bias.repeat_interleave(c // num_groups)
    xf = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    y = F.group_norm(xf, num_groups, scale.to(xf.dtype), bias.to(xf.dtype), epsilon)
    return y.to(x.dtype)


@K("LRN", since=1, dtypes=FLOAT)
def lrn(x, *, size, alpha=1e-4, beta=0.75, bias=1.0):
    # ONNX window over channels: floor((size-1)/2) before, ceil((size-1)/2) after (torch's
    # local_response_norm centres even windows the other way)
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    sq = F.pad(x * x, [0, 0] * (x.dim() - 2) + [before, after])
    pool = {3: F.avg_pool2d, 4: F.avg_pool3d}.get(x.dim())
    if pool is not None:  # windowed sums as a pool over the channel axis: no cancellation
        s = pool(sq.unsqueeze(1), (size,) + (1,) * (x.dim() - 2), stride=1).squeeze(1) * size
    else:  # other ranks: differences of prefix sums
        cs = torch.cumsum(F.pad(sq, [0, 0] * (x.dim() - 2) + [1, 0]), dim=1)
        s = cs[:, size:] - cs[:, :-size]
    return x / (bias + (alpha / size) * s) ** beta


# -- softmax ----------------------------------------------------------------------------------

def _softmax(x, axis):
    if x.dtype in _HALF and x.device.type == "cpu":
        # step by step in half precision, rounding where the host kernels round (so the
        # results agree to the last bit); GPUs use the fused kernel
        e = torch.exp(x - x.amax(axis, keepdim=True))
        return e / e.sum(axis, keepdim=True)
    return torch.softmax(x, axis)


def _log_softmax(x, axis):
    if x.dtype in _HALF and x.device.type == "cpu":
        d = x - x.amax(axis, keepdim=True)
        return d - torch.log(torch.exp(d).sum(axis, keepdim=True))
    return torch.log_softmax(x, axis)


@K("Softmax", since=13, dtypes=FLOAT)
def softmax(x, *, axis=-1):
    return _softmax(x, axis)


@K("LogSoftmax", since=13, dtypes=FLOAT)
def log_softmax(x, *, axis=-1):
    return _log_softmax(x, axis)


def _coerced(fn):
    def kernel(x, *, axis=1):
        shape = x.shape
        ax = axis + x.dim() if axis < 0 else axis
        return fn(x.reshape(int(np.prod(shape[:ax])), -1), 1).reshape(shape)
    return kernel


TORCH.register("Softmax", _coerced(_softmax), since=1, until=12, dtypes=FLOAT)
TORCH.register("LogSoftmax", _coerced(_log_softmax), since=1, until=12, dtypes=FLOAT)


@K("Hardmax", since=13, dtypes=FLOAT)
def hardmax(x, *, axis=-1):
    idx = torch.argmax(x, dim=axis, keepdim=True)
    return torch.zeros_like(x).scatter_(axis, idx, 1)


@K("Einsum", since=12, dtypes=FLOAT)
def einsum(*xs, equation):
    return torch.einsum(equation.replace(" ", ""), *xs)


# -- resize -----------------------------------------------------------------------------------

_INTERP = {1: "linear", 2: "bilinear", 3: "trilinear"}


@K("Resize", since=11, dtypes=FLOAT | INT | IDX, host_inputs=(1, 2, 3))
class Resize:
    """Separable resampling: the source coordinates and weights of each resized axis are
    computed on the host (exact ONNX arithmetic for every coordinate transformation,
    rounding mode, cubic coefficient and exclude_outside), then applied with gathers on the
    device. F.interpolate takes the plain half_pixel spatial cases (one fused kernel)."""

    def __init__(self, node) -> None:
        a = node.attrs
        self.mode = a.get("mode", "nearest")
        self.ctm = a.get("coordinate_transformation_mode", "half_pixel")
        self.nearest = a.get("nearest_mode", "round_prefer_floor")
        self.axes = a.get("axes")
        self.policy = a.get("keep_aspect_ratio_policy", "stretch")
        self.cubic_a = float(a.get("cubic_coeff_a", -0.75))
        self.exclude = bool(a.get("exclude_outside", 0))

    def __call__(self, x, roi=None, scales=None, sizes=None):
        r = x.dim()
        axes = list(range(r)) if not self.axes else [int(v) % r for v in self.axes]
        ins = [x.shape[a] for a in axes]
        if sizes is not None and np.size(sizes):
            out = [int(v) for v in np.asarray(sizes).reshape(-1)]
            sc = [o / n for o, n in zip(out, ins)]
            if self.policy != "stretch":
                k = (min if self.policy == "not_larger" else max)(sc)
                sc = [k] * len(ins)
                out = [int(math.floor(k * n + 0.5)) for n in ins]
        else:
            sc = [float(v) for v in np.asarray(scales).reshape(-1)]
            out = [int(math.floor(n * s)) for n, s in zip(ins, sc)]
        full_sc = [1.0] * r
        full_out = list(x.shape)
        for a, s_, o in zip(axes, sc, out):
            full_sc[a], full_out[a] = s_, o
        if self._fast(x, full_sc, full_out):
            tm = _INTERP[r - 2] if self.mode == "linear" else "bicubic"
            return F.interpolate(x, size=full_out[2:], mode=tm, align_corners=False)
        y = x
        for a, (n, s_, o) in enumerate(zip(x.shape, full_sc, full_out)):
            if n == o and s_ == 1.0:
                continue
            src = _source(np.arange(o, dtype=np.float64), n, s_, o, self.ctm)
            if self.mode == "nearest":
                y = y.index_select(a, _index(_round(src, self.nearest), n, y.device))
            elif self.mode == "linear":
                y = _taps(y, a, src, n, [0, 1], _linear_w, False)
            else:
                y = _taps(y, a, src, n, [-1, 0, 1, 2],
                          lambda t: _cubic_w(t, self.cubic_a), self.exclude)
        return y

    def _fast(self, x, sc, out) -> bool:
        # F.interpolate with a size maps with in/out, which equals ONNX's 1/scale only when
        # the scaled length is a whole number
        if self.mode == "nearest" or self.exclude or self.cubic_a != -0.75:
            return False
        if self.ctm not in ("half_pixel", "pytorch_half_pixel") or x.dim() not in (3, 4, 5):
            return False
        if self.mode == "cubic" and x.dim() != 4:
            return False
        if out[:2] != list(x.shape[:2]) or any(o <= 1 for o in out[2:]):
            return False
        return all(abs(n * s - o) < 1e-9 for n, s, o in zip(x.shape[2:], sc[2:], out[2:]))


def _source(i, n, s, o, ctm):
    """ONNX's coordinate transformation: output index -> source coordinate."""
    length = n * s   # the unrounded resized length
    if ctm == "asymmetric":
        return i / s
    if ctm == "align_corners":
        return i * (n - 1) / (length - 1) if length > 1 else np.zeros_like(i)
    if ctm == "tf_half_pixel_for_nn":
        return (i + 0.5) / s
    if ctm == "pytorch_half_pixel":
        return (i + 0.5) / s - 0.5 if o > 1 else np.zeros_like(i)
    if ctm == "half_pixel_symmetric":
        adj = o / length
        return n / 2 * (1 - adj) + (i + 0.5) / s - 0.5
    return (i + 0.5) / s - 0.5  # half_pixel


def _round(src, mode):
    if mode == "floor":
        return np.floor(src)
    if mode == "ceil":
        return np.ceil(src)
    if mode == "round_prefer_ceil":
        return np.floor(src + 0.5)
    return np.ceil(src - 0.5)  # round_prefer_floor


def _index(idx, n, device):
    return torch.from_numpy(np.clip(idx, 0, n - 1).astype(np.int64)).to(device)


def _linear_w(t):
    return [1 - t, t]


def _cubic_w(t, a):
    def k(d):
        d = np.abs(d)
        return np.where(d <= 1, (a + 2) * d**3 - (a + 3) * d**2 + 1,
                        np.where(d < 2, a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a, 0.0))
    return [k(t + 1), k(t), k(1 - t), k(2 - t)]


def _taps(y, axis, src, n, offsets, weights, exclude):
    """Sum over taps of gathered rows times weights along one axis."""
    if len(offsets) == 2:  # linear: the source is clamped into the input
        src = np.clip(src, 0, n - 1)
    base = np.floor(src)
    ws = weights(src - base)
    idxs = [base + off for off in offsets]
    if exclude:
        ws = [np.where((ix >= 0) & (ix <= n - 1), w, 0.0) for ix, w in zip(idxs, ws)]
        tot = sum(ws)
        ws = [w / np.where(tot == 0, 1, tot) for w in ws]
    shape = [1] * y.dim()
    shape[axis] = len(src)
    dt = y.dtype if y.is_floating_point() else torch.float32
    acc = None
    for ix, w in zip(idxs, ws):
        wt = torch.from_numpy(np.asarray(w, np.float64)).to(y.device, dt).reshape(shape)
        term = y.index_select(axis, _index(ix, n, y.device)).to(dt) * wt
        acc = term if acc is None else acc + term
    return acc if y.is_floating_point() else acc.round().to(y.dtype)


class _Legacy:
    """The attributes a Resize-10 / Upsample node means: asymmetric, floor rounding."""

    def __init__(self, mode: str) -> None:
        self.attrs = {"mode": mode, "coordinate_transformation_mode": "asymmetric",
                      "nearest_mode": "floor"}


@K("Resize", since=10, until=10, dtypes=FLOAT | INT, host_inputs=(1,))
def resize_v10(x, scales, *, mode="nearest"):
    return Resize(_Legacy(mode))(x, None, scales)


@K("Upsample", since=9, until=9, dtypes=FLOAT, host_inputs=(1,))
def upsample_v9(x, scales, *, mode="nearest"):
    return resize_v10(x, scales, mode=mode)


@K("Upsample", since=7, until=8, dtypes=FLOAT)
def upsample_v7(x, *, scales, mode="nearest"):
    return resize_v10(x, np.asarray(scales), mode=mode)


@K("DepthToSpace", since=13, dtypes=FLOAT)
def depth_to_space(x, *, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).permute(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).permute(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@K("SpaceToDepth", since=13, dtypes=FLOAT)
def space_to_depth(x, *, blocksize, mode="DCR"):
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b)
    y = y.permute(0, 3, 5, 1, 2, 4) if mode == "DCR" else y.permute(0, 1, 3, 5, 2, 4)
    return y.reshape(n, c * b * b, h // b, w // b)
